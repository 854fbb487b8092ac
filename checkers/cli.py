"""`highwater check RUN_DIR`: run the checker on a run directory, write results.json, print the verdict.

Exit codes: 0 valid, 1 anomalies found, 2 unknown, 254 bad input or arguments (one line naming file,
line and field), 255 internal error. Progress goes to stderr when it is a terminal.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from rundir import formats as rf
from rundir.exits import EXIT_INTERNAL, EXIT_USAGE, EXIT_VALID
from rundir.verdict import verdict_exit_code, verdict_line
from checkers.check import check_run
from checkers.policy import ConfigError
from checkers.spark_session import SparkSetupError


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
              help="Write the results here instead of RUN_DIR/results.json.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
def check(run_dir: Path, spark_master: str | None, engine: str, lenient: bool, examples: int,
          fail_on: tuple[str, ...], allow: tuple[str, ...], output: Path | None, quiet: bool) -> int:
    """Check RUN_DIR (history + replica dumps) and write RUN_DIR/results.json."""
    progress = None
    if not quiet and sys.stderr.isatty():
        from rich.console import Console
        from rich.status import Status
        progress = Status("checking", console=Console(stderr=True))
        progress.start()
    step = (lambda msg: progress.update(f"checking {run_dir.name}: {msg}")) if progress else None
    try:
        doc = check_run(run_dir, engine=engine, spark_master=spark_master, lenient=lenient, examples=examples,
                        fail_on=fail_on, allow=allow, step=step, output=output)
    except (rf.FormatError, ConfigError, SparkSetupError) as exc:
        click.echo(f"highwater check: {exc}", err=True)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - anything else is our bug: one line, details with HIGHWATER_DEBUG
        click.echo(f"highwater check: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                   err=True)
        if __import__("os").environ.get("HIGHWATER_DEBUG"):
            traceback.print_exc()
        return EXIT_INTERNAL
    finally:
        if progress is not None:
            progress.stop()
    click.echo(verdict_line(doc))
    return verdict_exit_code(doc)


@click.command("jvm-archive")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the archive (default: inside this install's virtualenv).")
def jvm_archive(output: Path | None) -> int:
    """Make the checker's JVM class archive (about a minute; scripts/bootstrap does it once per install).

    Every local `highwater check` then starts its Spark driver about 4 s sooner."""
    from checkers import jvm_archive as archive

    try:
        made = archive.build(output)
    except archive.SparkSetupError as exc:
        click.echo(f"highwater jvm-archive: {exc}", err=True)
        return EXIT_INTERNAL
    click.echo(str(made))
    return EXIT_VALID
