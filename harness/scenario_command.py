"""`highwater scenario FILE [--truncation hw|leader-epoch]`: replay a scenario on a real local cluster.

Provisions a cluster with the scenario's settings, plays its steps (harness/scenario_runner.py),
runs the same final phase, collection and checker as `highwater run`, and says whether the anomalies
found are the ones the scenario expects in that truncation mode (never "as expected" when a step did
not play out). Progress and the verdict line on stderr as with `highwater run`; the last line on stdout
is the path of the run's report. Exit codes as `highwater run` (the checker's verdict); 2 when a step
did not play out as written (an assert step that did not hold, a wait that timed out, a refused
election, ...), whatever the checker found; 254 for a bad scenario file.
"""
from __future__ import annotations

import signal
import sys

import click

from broker.config_keys import TRUNCATION_MODES
from harness import config as config_mod
from harness import scenario as scenario_mod
from harness.progress import Display
from harness.cli import report_error
from harness.run_output import finish_output, install_signal_handlers
from rundir.expectation import AS_EXPECTED, NOT_JUDGED, judge, record
from harness.scenario_runner import run_scenario, validate_scenario
from rundir.exits import EXIT_USAGE


def expectation_line(expected: list[str] | None, mode: str, results: dict | None, failed: str | None) -> str | None:
    """What the scenario expects in `mode` and whether the run showed it (rundir/expectation.py, as the
    report and the index judge it). "as expected" only when every step played out and the run was
    checked with a definite verdict; otherwise it says the expectation was not judged."""
    if expected is None:
        return None
    j = judge(record(expected, by="scenario", mode=mode), results,
              not_played="a step did not play out" if failed else None)
    want = f"highwater: scenario expects {j.wanted} in {mode} mode"
    if j.state == NOT_JUDGED:
        return f"{want}; not judged: {j.reason}"
    return f"{want}; found {', '.join(j.found) or 'none'}: {'as expected' if j.state == AS_EXPECTED else 'NOT as expected'}"


@click.command("scenario", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--truncation", type=click.Choice(TRUNCATION_MODES), default=None,
              help="truncation mode (default: the scenario file's, else leader-epoch)")
@click.option("--results-dir", default=None, help="results directory [results]")
@click.option("--checker", type=click.Choice(["spark", "reference"]), default=None,
              help="checker engine [the scenario's, else spark]")
@click.option("--plain", is_flag=True, default=False, help="plain progress lines even on a terminal")
def scenario(file, truncation, results_dir, checker, plain) -> int:
    """Replay a declarative scenario FILE against a real local cluster and check it."""
    try:
        sc = scenario_mod.load(file, truncation=truncation)
    except scenario_mod.ConfigError as exc:
        click.echo(f"highwater: {exc}", err=True)
        return EXIT_USAGE
    if results_dir is not None:
        sc.config.results_dir = results_dir
    if checker is not None:
        sc.config.checker.engine = checker
    mode = sc.config.broker.truncation
    if sc.config.name == "chaos":        # no name given in the file: the file's stem
        sc.config.name = sc.name
    sc.config.name = f"{sc.config.name}-{mode}"
    try:
        validate_scenario(sc, str(file))
    except config_mod.ConfigError as exc:
        click.echo(f"highwater: {exc}", err=True)
        return EXIT_USAGE
    return play(sc, plain=plain)


def play(sc, *, plain: bool, extra_record: dict | None = None, banner: str = "scenario") -> int:
    """Play a loaded, validated scenario on a real local cluster with the progress display and signal
    handling of `highwater run`; print the expectation line and the verdict line; the exit code.
    `highwater scenario` and `highwater rerun` (harness/reproduce.py) both end here."""
    mode = sc.config.broker.truncation
    previous: dict = {}
    displays: list = []

    def hook(session):
        previous.update(install_signal_handlers(session))
        displays.append(Display(session.progress, force_plain=plain).start())
        click.echo(f"highwater: {banner} {sc.name} ({mode}), {len(sc.steps)} steps, in {session.run.path}", err=True)

    try:
        outcome, runner = run_scenario(sc, session_hook=hook, extra_record=extra_record)
    except Exception as exc:  # noqa: BLE001 - run_scenario cleans up itself; this is a bug in the harness
        return report_error(exc)
    finally:
        for display in displays:
            display.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failed = runner.failed if runner is not None else None
    line = expectation_line(sc.expect.get(mode), mode, outcome.results, failed)
    if line:
        click.echo(line, err=True)
    return finish_output(outcome, reasons=[failed] if failed else None)


if __name__ == "__main__":
    sys.exit(scenario.main(standalone_mode=False))
