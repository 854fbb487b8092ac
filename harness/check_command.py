"""`highwater check RUN_DIR`: run the checker on a run directory, write results.json, refresh the report.

The checker itself is checkers/check.py `check_run`; this module is the command around it: the progress
(harness/progress.py `Display`: a live line on a terminal; on a pipe, a line when each checker step
starts, every 5 s while it lasts and when it ends), and then, since results.json changed, the run's
report.html and its results directory's index, so that no report shows an older verdict than
results.json. `--output FILE` leaves the run directory as it was (results go to FILE, the report stays
as it is, and says nothing it did not say before); `--no-report` skips the report and says it is now stale.

Exit codes: 0 valid, 1 anomalies found, 2 unknown, 254 bad input or arguments (one line naming file,
line and field), 255 internal error.
"""
from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from pathlib import Path

import click

from checkers.check import CheckOptions, check_run
from checkers.policy import ConfigError
from checkers.spark_session import SparkSetupError
from harness.progress import Display, PhaseClock
from rundir import formats as rf
from rundir.exits import EXIT_INTERNAL, EXIT_USAGE
from rundir.verdict import verdict_exit_code, verdict_line


@dataclass(frozen=True)
class CheckSettings:
    """The command's arguments and options, one field per click parameter (the names click passes)."""
    run_dir: Path
    spark_master: str | None
    engine: str
    lenient: bool
    examples: int
    fail_on: tuple[str, ...]
    allow: tuple[str, ...]
    output: Path | None
    write_report: bool
    quiet: bool
    plain: bool

    def check_options(self, step) -> CheckOptions:
        """The checker's options (checkers/check.py), its progress going to `step`."""
        return CheckOptions(engine=self.engine, spark_master=self.spark_master, lenient=self.lenient,
                            examples=self.examples, fail_on=self.fail_on, allow=self.allow, step=step,
                            output=self.output)


@click.command("check")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--spark-master", default=None, metavar="URL",
              help="local[N], spark://host:port, yarn, k8s://..., or a Spark Connect URL sc://host:port "
                   "(default: local[2], tuned for a small machine).")
@click.option("--engine", type=click.Choice(["spark", "reference"]), default="spark", show_default=True,
              help="reference: the single-process checker (for tests and benchmarks; small runs only).")
@click.option("--lenient", is_flag=True, help="Skip and count malformed lines instead of stopping at the first.")
@click.option("--examples", "-n", type=click.IntRange(0, 10_000), default=10, show_default=True,
              help="Examples kept per anomaly kind.")
@click.option("--fail-on", "fail_on", multiple=True, metavar="KIND", help="Make KIND fail the run (repeatable).")
@click.option("--allow", multiple=True, metavar="KIND", help="Do not fail the run on KIND (repeatable).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the results here instead of RUN_DIR/results.json (the report is left as it is).")
@click.option("--report/--no-report", "write_report", default=True, show_default=True,
              help="Rewrite RUN_DIR/report.html and the results index from the new results.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.option("--plain", is_flag=True, default=False, help="plain progress lines even on a terminal")
def check(**options) -> int:
    """Check RUN_DIR (history + replica dumps), write RUN_DIR/results.json and refresh its report."""
    settings = CheckSettings(**options)
    run_dir = settings.run_dir
    phases = PhaseClock()
    display = None
    if not settings.quiet:
        display = Display(lambda: {"name": run_dir.name, "phase": phases.name, "phases": phases.snapshot()},
                          force_plain=settings.plain).start()
    phases.start("check")
    try:
        doc = check_run(run_dir, settings.check_options(phases.step))
    except (rf.FormatError, ConfigError, SparkSetupError) as exc:
        _close(display, phases, quiet=True)
        click.echo(f"highwater check: {exc}", err=True)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - anything else is our bug: one line, details with HIGHWATER_DEBUG
        _close(display, phases, quiet=True)
        first = str(exc).splitlines()[0] if str(exc) else ""
        click.echo(f"highwater check: internal error: {type(exc).__name__}: {first}", err=True)
        if os.environ.get("HIGHWATER_DEBUG"):
            traceback.print_exc()
        return EXIT_INTERNAL
    output = settings.output
    report_line = _refresh_report(run_dir, phases) if output is None and settings.write_report else None
    _close(display, phases)
    if output is None and not settings.write_report and (run_dir / rf.REPORT_HTML).exists():
        click.echo(f"highwater check: {run_dir / rf.REPORT_HTML} is now stale (it shows the results before "
                   f"this check); refresh it with: highwater report {run_dir}", err=True)
    if report_line:
        click.echo(report_line, err=True)
    click.echo(verdict_line(doc))
    return verdict_exit_code(doc)


def _refresh_report(run_dir: Path, phases: PhaseClock) -> str:
    """Rewrite the report and (when the run sits in a results directory) the index, as a run's end does
    (harness/verdict.py `write_reports`); the line to print."""
    from harness.verdict import write_reports
    from reports.render import results_root_of
    phases.start("report")
    problems = write_reports(run_dir, results_root_of(run_dir))
    if problems:            # the check stands; the report is what failed
        return f"highwater check: could not rewrite the report ({'; '.join(problems)}); try: highwater report {run_dir}"
    return f"highwater check: report {run_dir / rf.REPORT_HTML}"


def _close(display: Display | None, phases: PhaseClock, *, quiet: bool = False) -> None:
    """End the progress; `quiet` (the command failed): the display stops before the failed step is
    ended, so it prints the steps that ended before the failure and no closing lines; the error is
    the one line after them."""
    if quiet and display is not None:
        display.close(quiet=True)
        phases.finish()
        return
    phases.finish()
    if display is not None:
        display.close()
