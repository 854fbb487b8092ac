"""`highwater suite` argument and suite-file errors: one line naming what is wrong, exit 254, nothing run."""
from __future__ import annotations

import pytest

from harness.cli import main
from rundir.exits import EXIT_USAGE

GOOD = """\
[[test]]
name = "safe"
safe = true
[test.matrix]
nemesis = ["kill", "pause"]
"""


def run_cli(args, capsys):
    code = main(["suite", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_bad_suite_file_is_one_line_and_254(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace('name = "safe"', 'name = "safe"\nacks = "most"'))
    code, out, err = run_cli([str(bad), "--results-dir", str(tmp_path / "r")], capsys)
    assert code == EXIT_USAGE and out == ""
    assert err.strip() == f"highwater: {bad}:3: [[test]] #1 'safe': key 'acks' must be 0, 1 or \"all\", got 'most'"
    assert not (tmp_path / "r").exists()


def test_only_matching_nothing_is_254(tmp_path, capsys):
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    code, _out, err = run_cli([str(good), "--only", "hw*", "--results-dir", str(tmp_path / "r")], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == (f"highwater: --only 'hw*' matches no configuration of {good} "
                           f"(it has: safe-kill, safe-pause)")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args, word", [(["--repeat", "0"], "--repeat"), (["--budget", "0"], "--budget")])
def test_bad_options_are_254(tmp_path, capsys, args, word):
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    code, _out, err = run_cli([str(good), *args], capsys)
    assert code == EXIT_USAGE and word in err and len(err.strip().splitlines()) == 1


def test_missing_file_is_254(tmp_path, capsys):
    code, _out, err = run_cli([str(tmp_path / "nope.toml")], capsys)
    assert code == EXIT_USAGE and "cannot read suite file" in err
