"""What `highwater run` and `highwater scenario` print at the end of a run, and how they route signals: the
problems, the run directory and the verdict line on stderr, the report's path last on stdout."""
from __future__ import annotations

import signal
from pathlib import Path

import click

from rundir.exits import EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID
from rundir.verdict import verdict_line

# a run's exit code in one word (the summaries of --test-count and rerun)
WORDS = {EXIT_VALID: "valid", EXIT_UNKNOWN: "unknown", EXIT_INVALID: "invalid", EXIT_USAGE: "setup error",
         EXIT_INTERNAL: "internal error"}


def install_signal_handlers(session) -> dict:
    """Route SIGINT/SIGTERM to session.request_interrupt. Returns the previous handlers."""
    previous = {}

    def handler(signum, _frame):
        name = signal.Signals(signum).name
        if session.interrupt.is_set():
            click.echo(f"highwater: {name} again: already stopping (healing and stopping processes)", err=True)
        else:
            click.echo(f"highwater: {name}: stopping the run (healing, stopping every process)", err=True)
        session.request_interrupt(name)

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    return previous


def finish_output(outcome, reasons: list[str] | None = None) -> int:
    """The problems, the run directory, then the verdict line (rundir/verdict.py verdict_line, the
    format `highwater check` prints too) on stderr; the report's path on stdout. `reasons`: what else
    made the outcome unknown (default: when the run was not checked, the interrupt or its problems)."""
    for problem in outcome.problems:
        click.echo(f"highwater: {problem}", err=True)
    click.echo(f"highwater: run directory {outcome.run_dir}", err=True)
    if reasons is None:  # interrupted during the check: the results stand, the outcome is still unknown
        reasons = (["interrupted"] if getattr(outcome, "interrupted", False)
                   else [] if outcome.results is not None else list(outcome.problems))
    click.echo(verdict_line(outcome.results, exit_code=outcome.exit_code, reasons=reasons), err=True)
    # the last stdout line is the report when one was written (an interrupted run skips the checker and
    # may have none), else the run directory, which still holds a checkable history
    report = outcome.report if outcome.report and Path(outcome.report).exists() else outcome.run_dir
    click.echo(str(report))
    return outcome.exit_code
