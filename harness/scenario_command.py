"""`highwater scenario FILE [--truncation hw|leader-epoch]`: replay a scenario on a real local cluster.

Provisions a cluster with the scenario's settings, plays its steps (harness/scenario_runner.py),
runs the same final phase, collection and checker as `highwater run`, and says whether the anomalies
found are the ones the scenario expects in that truncation mode. The last line on stdout is the path
of the run's report. Exit codes as `highwater run` (the checker's verdict); 2 when a step did not play
out as written; 254 for a bad scenario file.
"""
from __future__ import annotations

import sys

import click

from harness.cli import EXIT_INTERNAL, EXIT_UNKNOWN, EXIT_USAGE
from harness.run_command import found_kinds


def run_scenario(scenario, *, session_hook=None):
    """Play a loaded Scenario end to end. Returns (RunOutcome, ScenarioRunner or None)."""
    from harness.runner import RunOutcome, RunSession
    from harness.scenario_runner import ScenarioRunner

    cfg = scenario.config
    session = RunSession(cfg, kind="scenario", extra_record={"scenario": {
        "path": str(scenario.path), "name": scenario.name, "description": scenario.description,
        "expect": scenario.expect, "steps": [{"step": s.number, "do": s.do, "note": s.note} for s in scenario.steps]}})
    if session_hook is not None:
        session_hook(session)
    runner = None
    internal = False
    try:
        faults = ["partition"] if any(s.do == "partition" for s in scenario.steps) else []
        try:
            session.provision(faults)
        except Exception as exc:  # noqa: BLE001 - missing root/iptables, unavailable backend
            session.problem(f"cannot set up the scenario: {exc}")
            session.shutdown()
            return RunOutcome(session.run.path, EXIT_USAGE, None, session.run.report_path,
                              list(session.problems)), None
        try:
            session.start_cluster()
            session.phase = "running"
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
        interrupted = session.interrupt.is_set()
        results, code = session.verdict(check=not internal and not interrupted)
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


@click.command("scenario", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--truncation", type=click.Choice(["hw", "leader-epoch"]), default=None,
              help="truncation mode (default: the scenario file's, else leader-epoch)")
@click.option("--results-dir", default=None, help="results directory [results]")
@click.option("--checker", type=click.Choice(["spark", "reference"]), default=None,
              help="checker engine [the scenario's, else spark]")
def scenario(file, truncation, results_dir, checker) -> int:
    """Replay a declarative scenario FILE against a real local cluster and check it."""
    from harness import scenario as scenario_mod
    from harness.run_command import finish_output, install_signal_handlers

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
    previous = {}

    def hook(session):
        previous.update(install_signal_handlers(session))
        click.echo(f"highwater: scenario {sc.name} ({mode}), {len(sc.steps)} steps, in {session.run.path}", err=True)

    import signal
    try:
        outcome, _runner = run_scenario(sc, session_hook=hook)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    expected = sc.expect.get(mode)
    if expected is not None and outcome.results is not None:
        found = found_kinds(outcome.results)
        ok = set(expected) <= set(found) and (bool(expected) or not found)
        click.echo(f"highwater: scenario expects {', '.join(expected) or 'no anomalies'} in {mode} mode; "
                   f"found {', '.join(found) or 'none'}: {'as expected' if ok else 'NOT as expected'}", err=True)
    return finish_output(outcome)


if __name__ == "__main__":
    sys.exit(scenario.main(standalone_mode=False))
