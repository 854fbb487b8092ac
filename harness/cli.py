"""The `highwater` command line: one click group whose subcommands live with the code they drive.

Subcommands are imported lazily from their owning modules, so `highwater check` does not import the
Docker SDK and `highwater serve` does not start Java. Exit codes are defined once, in rundir/exits.py
(Jepsen's: 0 valid, 1 anomalies found, 2 unknown, 254 bad arguments or configuration, 255 internal error).
Every command returns its exit code; `main` turns what escapes a command into one line and a code the
same way for all: a usage error 254, a `HighwaterError` its own code, anything else 255.
"""
from __future__ import annotations

import importlib
import os
import sys
import traceback

import click

from rundir.exits import EXIT_INTERNAL, EXIT_USAGE, HighwaterError

# name -> "module:attribute" of a click.Command
COMMANDS: dict[str, str] = {
    "run": "harness.run_command:run",
    "scenario": "harness.scenario_command:scenario",
    "rerun": "harness.reproduce:rerun",
    "cleanup": "harness.cleanup_command:cleanup",
    "suite": "harness.suite_command:suite",
    "explore": "harness.explore_command:explore_cmd",
    "check": "harness.check_command:check",
    "jvm-archive": "checkers.cli:jvm_archive",
    "spark": "checkers.service_cli:spark",
    "report": "reports.cli:report",
    "serve": "reports.cli:serve",
    "images": "clusters.docker_cli:images",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._load(name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # the command's module does not exist (yet)
                return None
            raise
        return getattr(module, attr, None)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="highwater")
def cli() -> None:
    """highwater: chaos tests for Kafka-style replicated logs."""


def main(argv: list[str] | None = None) -> int:
    from rundir import store   # test.json records the command line (rundir/store.py)
    store.set_command_line(["highwater", *(sys.argv[1:] if argv is None else argv)])
    try:
        rc = cli.main(args=argv, prog_name="highwater", standalone_mode=False)
    except click.exceptions.UsageError as exc:
        click.echo(f"highwater: {exc.format_message()}", err=True)
        return EXIT_USAGE
    except click.exceptions.Abort:
        click.echo("highwater: aborted", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        click.echo(f"highwater: {exc.format_message()}", err=True)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - one line and an exit code, the same for every command
        return report_error(exc)
    return rc if isinstance(rc, int) else 0


def report_error(exc: BaseException) -> int:
    """One line on stderr for an error that ended a command, and the exit code it means (rundir/exits.py
    `exit_code_of`): a HighwaterError says what was wrong in its own words; anything else is a bug,
    exit 255, with the traceback when HIGHWATER_DEBUG is set. Commands that clean up first (run,
    scenario, suite) call it themselves; `main` calls it for whatever escapes a command."""
    if isinstance(exc, HighwaterError):
        click.echo(f"highwater: {exc}", err=True)
        return exc.exit_code
    click.echo(f"highwater: internal error: {type(exc).__name__}: {exc}", err=True)
    if os.environ.get("HIGHWATER_DEBUG"):
        traceback.print_exception(exc)
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
