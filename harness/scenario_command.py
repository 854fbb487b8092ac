"""`highwater scenario FILE [--truncation hw|leader-epoch]`: replay a scenario on a real local cluster.

Provisions a cluster with the scenario's settings, plays its steps (harness/scenario_runner.py),
runs the same final phase, collection and checker as `highwater run`, and says whether the anomalies
found are the ones the scenario expects in that truncation mode (never "as expected" when a step did
not play out). Progress and the verdict line on stderr as with `highwater run`; the last line on stdout
is the path of the run's report. Exit codes as `highwater run` (the checker's verdict); 2 when a step
did not play out as written; 254 for a bad scenario file.
"""
from __future__ import annotations

import sys

import click

from rundir.exits import EXIT_INTERNAL, EXIT_UNKNOWN, EXIT_USAGE
from harness.run_command import found_kinds


def scenario_faults(scenario) -> list[str]:
    """The faults a scenario injects (its partition steps need the firewall), for the backend preflight."""
    return ["partition"] if any(s.do == "partition" for s in scenario.steps) else []


def validate_scenario(scenario, where: str) -> None:
    """The validate step of a scenario run: the settings it ends up with (after the command's overrides),
    the backend and the faults its steps inject; raises ConfigError naming `where`."""
    from harness import config as config_mod
    config_mod.check(scenario.config, source=where)
    config_mod.preflight(scenario.config, where=lambda _key: where, faults=scenario_faults(scenario))


def run_scenario(scenario, *, session_hook=None, extra_record=None):
    """Play a loaded Scenario end to end. Returns (RunOutcome, ScenarioRunner or None). `extra_record`
    goes into test.json beside the scenario (`highwater rerun` records "rerun_of")."""
    from harness.runner import RunOutcome, RunSession
    from harness.scenario_runner import ScenarioRunner

    cfg = scenario.config
    session = RunSession(cfg, kind="scenario", extra_record={"scenario": {
        "path": str(scenario.path), "name": scenario.name, "description": scenario.description,
        "expect": scenario.expect, "steps": [{"step": s.number, "do": s.do, "note": s.note} for s in scenario.steps]},
        **(extra_record or {})})
    if session_hook is not None:
        session_hook(session)
    runner = None
    internal = False
    try:
        faults = scenario_faults(scenario)
        try:
            session.provision(faults)
        except Exception as exc:  # noqa: BLE001 - missing root/iptables, unavailable backend
            session.problem(f"cannot set up the scenario: {exc}")
            session.shutdown()
            return RunOutcome(session.run.path, EXIT_USAGE, None, session.run.report_path,
                              list(session.problems)), None
        try:
            session.start_cluster()
            session.phase = "steps"
            runner = ScenarioRunner(session, scenario)
            runner.run()
        except Exception as exc:  # noqa: BLE001
            internal = True
            session.problem("scenario run failed", exc)
        finally:
            if runner is not None:
                runner.close_faults()
                runner.write_timeline()
            try:
                session.final_phase(reads=not internal)
            except Exception as exc:  # noqa: BLE001
                internal = True
                session.problem("final phase failed", exc)
            session.shutdown()
        results, code = session.verdict(check=not internal and not session.interrupt.is_set())
        interrupted = session.interrupt.is_set()  # a signal during the check or the report counts too
        if internal:
            code = EXIT_INTERNAL
        elif interrupted or (runner is not None and runner.failed):
            code = EXIT_UNKNOWN
            if runner is not None and runner.failed:
                session.problems.insert(0, runner.failed)
        return RunOutcome(session.run.path, code, results, session.run.report_path, list(session.problems),
                          interrupted, session.final), runner
    finally:
        session.close_log()


def expectation_line(expected: list[str] | None, mode: str, results: dict | None, failed: str | None) -> str | None:
    """What the scenario expects in `mode` and whether the run showed it. "as expected" only when every
    step played out and the run was checked; otherwise it says the expectation was not judged."""
    if expected is None:
        return None
    want = f"highwater: scenario expects {', '.join(expected) or 'no anomalies'} in {mode} mode"
    if failed:
        return f"{want}; not judged: a step did not play out"
    if results is None:
        return f"{want}; not judged: the run was not checked"
    found = found_kinds(results)
    ok = set(expected) <= set(found) and (bool(expected) or not found)
    return f"{want}; found {', '.join(found) or 'none'}: {'as expected' if ok else 'NOT as expected'}"


@click.command("scenario", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--truncation", type=click.Choice(["hw", "leader-epoch"]), default=None,
              help="truncation mode (default: the scenario file's, else leader-epoch)")
@click.option("--results-dir", default=None, help="results directory [results]")
@click.option("--checker", type=click.Choice(["spark", "reference"]), default=None,
              help="checker engine [the scenario's, else spark]")
@click.option("--plain", is_flag=True, default=False, help="plain progress lines even on a terminal")
def scenario(file, truncation, results_dir, checker, plain) -> int:
    """Replay a declarative scenario FILE against a real local cluster and check it."""
    from harness import scenario as scenario_mod

    try:
        sc = scenario_mod.load(file, truncation=truncation)
    except scenario_mod.ScenarioError as exc:
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
    from harness import config as config_mod
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
    import signal

    from harness.progress import Display
    from harness.run_command import finish_output, install_signal_handlers
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
        click.echo(f"highwater: internal error: {type(exc).__name__}: {exc}", err=True)
        return EXIT_INTERNAL
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
