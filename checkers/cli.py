"""`highwater jvm-archive`: the checker's own maintenance command (registered lazily in harness/cli.py).

`highwater check` is harness/check_command.py: it runs `checkers.check.check_run` and then refreshes the
report, which lives a layer above the checkers.
"""
from __future__ import annotations

from pathlib import Path

import click

from rundir.exits import EXIT_INTERNAL, EXIT_VALID


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
