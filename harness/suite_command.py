"""`highwater suite FILE`: run a suite of configurations and judge each against its expectation.

    highwater suite suites/nightly.toml [--repeat N] [--only PATTERN] [--budget SECONDS] [--results-dir D]

Progress goes to stderr, one line per run; the last line on stdout is the suite page's path. Artifacts
(suite.json, junit.xml, suite.html, every run's directory and report) are in
D/suites/<suite>/<timestamp>/ (docs/suites.md). SIGINT/SIGTERM stop the run in progress cleanly and
report the remaining configurations as skipped.
Exit codes: 0 every expectation held, 1 an expectation is broken, 2 nothing broken but a configuration
was inconclusive or not run (budget, interrupt), 254 bad arguments or suite file, 255 internal error.
"""
from __future__ import annotations

import signal
import sys

import click

from broker.errors import HighwaterError
from harness import backends
from harness import config as config_mod
from harness import scenario as scenario_mod
from harness.cli import report_error
from harness.explore_command import ExploreProgress
from harness.progress import Display
from harness.scenario_runner import scenario_faults
from harness.suite import SuiteDisplay, SuiteOptions, SuiteRun
from harness.suite_file import ConfigError, load_suite
from rundir.exits import EXIT_USAGE


def validate_configs(configs, suite_file) -> str | None:
    """The validate step of a suite: every selected configuration's backend, schedule file and faults
    (and its scenario's) checked before the suite's directory is created (explore configurations run in
    simulation and were validated when the file was read). The first problem, or None."""
    for c in configs:
        where = lambda _key, c=c: f"{suite_file}: configuration {c.name!r}"  # noqa: E731
        if c.explore is not None:    # a simulation: no cluster, backend or faults to check
            continue
        try:
            if c.scenario is not None:
                sc = scenario_mod.load(c.scenario, truncation=c.cfg.broker.truncation)
                config_mod.preflight(sc.config, where=where, faults=scenario_faults(sc))
            else:
                config_mod.preflight(c.cfg, where=where)
        except (config_mod.ConfigError, ValueError) as exc:
            return str(exc)
    reached: set[tuple] = set()      # and every cluster the selection runs against answers (once each)
    for c in configs:
        cfg = None if c.explore is not None else c.cfg
        key = (cfg.cluster.backend, repr(cfg.cluster)) if cfg is not None else None
        if key is None or key in reached:
            continue
        try:
            backends.reach(cfg.cluster.backend, cfg.cluster, brokers=cfg.cluster.nodes)
        except HighwaterError as exc:
            return f"{suite_file}: configuration {c.name!r}: {exc}"
        reached.add(key)
    return None


@click.command("suite", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("suite_file", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--repeat", type=click.IntRange(min=1), default=None,
              help="runs per configuration, overriding the suite file's repeats")
@click.option("--only", default=None, metavar="PATTERN",
              help="run only configurations whose name matches (comma-separated shell globs; "
                   "a plain word matches names containing it)")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="total time budget; configurations that would not fit are reported as skipped")
@click.option("--results-dir", default="results", show_default=True,
              help="results directory; the suite writes into RESULTS_DIR/suites/<suite>/<timestamp>/")
def suite(suite_file, repeat, only, budget, results_dir) -> int:
    """Run a suite of chaos-test configurations with expectations (safe / finds anomalies; explorations:
    found / none)."""
    try:
        s = load_suite(suite_file)
    except ConfigError as exc:
        click.echo(f"highwater: {exc}", err=True)
        return EXIT_USAGE

    say = lambda msg: click.echo(f"highwater suite: {msg}", err=True)  # noqa: E731
    runner = SuiteRun(s, results_dir, SuiteOptions(repeat=repeat, only=only, budget_s=budget),
                      display=SuiteDisplay(say=say, follow=lambda session: Display(session.progress).start(),
                                           follow_explore=lambda opts: ExploreProgress(opts)))
    if not runner.selected:
        names = ", ".join(c.name for c in s.configs)
        click.echo(f"highwater: --only {only!r} matches no configuration of {suite_file} (it has: {names})",
                   err=True)
        return EXIT_USAGE

    problem = validate_configs(runner.selected, suite_file)
    if problem:
        click.echo(f"highwater: {problem}", err=True)
        return EXIT_USAGE

    def handler(signum, _frame):
        name = signal.Signals(signum).name
        say(f"{name}: stopping the run in progress; remaining configurations will be skipped")
        runner.request_interrupt(name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        path = runner.start()
        planned = sum(o.planned for o in runner.outcomes)
        n = len(runner.selected)
        say(f"{s.name}: {n} configuration{'s' if n != 1 else ''}, {planned} run{'s' if planned != 1 else ''}, "
            f"into {path}"
            + (f", budget {budget:g}s" if budget else ""))
        code = runner.run()
    except Exception as exc:  # noqa: BLE001 - every run cleans up itself
        return report_error(exc)
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
    counts = runner.summary("done")["counts"]
    say(f"{s.name}: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} inconclusive, "
        f"{counts['skipped']} skipped (exit {code})")
    for o in runner.outcomes:
        if o.status != "passed":
            say(f"  {o.status.upper()} {o.config.name}: {o.message}")
    say(f"JUnit XML {runner.path / 'junit.xml'}")
    click.echo(str(runner.path / "suite.html"))
    return code


if __name__ == "__main__":
    sys.exit(suite.main(standalone_mode=False))
