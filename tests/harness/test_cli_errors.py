"""harness/cli.main maps what escapes any command to one line and an exit code, the same way for all:
a HighwaterError its own code, anything else 255 (with the traceback only under HIGHWATER_DEBUG)."""
from __future__ import annotations

import click
import pytest

from harness import cli
from rundir.exits import EXIT_INTERNAL, EXIT_UNKNOWN, EXIT_USAGE, HighwaterError


class Interrupted(HighwaterError):
    exit_code = EXIT_UNKNOWN


@click.command("boom")
@click.argument("what")
def boom(what: str) -> int:
    if what == "config":
        raise HighwaterError("tests.toml:3: key 'nemesis.faults': 'kil' is not a fault (did you mean 'kill'?)")
    if what == "interrupted":
        raise Interrupted("interrupted")
    if what == "bug":
        raise KeyError("partition")
    return 7


@pytest.fixture(autouse=True)
def boom_command(monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "boom", f"{__name__}:boom")


@pytest.mark.parametrize("what, code, line", [
    ("config", EXIT_USAGE, "highwater: tests.toml:3: key 'nemesis.faults': 'kil' is not a fault (did you mean 'kill'?)"),
    ("interrupted", EXIT_UNKNOWN, "highwater: interrupted"),
    ("bug", EXIT_INTERNAL, "highwater: internal error: KeyError: 'partition'"),
])
def test_an_escaping_error_is_one_line_and_its_exit_code(capsys, monkeypatch, what, code, line):
    monkeypatch.delenv("HIGHWATER_DEBUG", raising=False)
    assert cli.main(["boom", what]) == code
    err = capsys.readouterr().err
    assert err.splitlines() == [line]


def test_a_command_s_own_exit_code_is_returned(capsys):
    assert cli.main(["boom", "fine"]) == 7
    assert capsys.readouterr().err == ""


def test_the_traceback_only_with_highwater_debug(capsys, monkeypatch):
    monkeypatch.setenv("HIGHWATER_DEBUG", "1")
    assert cli.main(["boom", "bug"]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("highwater: internal error: KeyError: 'partition'\nTraceback")
