"""The declared-settings schema and its one validator (rundir/settings.py): types, ranges, choices,
unknown keys with "did you mean", and the TOML line finder."""
from __future__ import annotations

import pytest

from rundir.settings import (REQUIRED, Setting, SettingError, declare, defaults, did_you_mean, header_lines,
                             line_of, parse_table, read_toml)

SCHEMA = declare(
    Setting("nodes", int, 3, "brokers", min=1, floor=0),
    Setting("rate", float, 100.0, "sends per second", above=0, floor=0),
    Setting("flush", str, "always", "fsync policy", choices=("always", "interval", "never")),
    Setting("power_loss", bool, False, "emulate power loss"),
    Setting("at", float, REQUIRED, "seconds", min=0, what="a number of seconds >= 0"),
)


def _error(table, **kw) -> SettingError:
    with pytest.raises(SettingError) as e:
        parse_table(table, SCHEMA, **kw)
    return e.value


def test_defaults_are_filled_in_and_values_typed():
    assert parse_table({"at": 2}, SCHEMA) == {"nodes": 3, "rate": 100.0, "flush": "always",
                                             "power_loss": False, "at": 2.0}
    assert defaults(SCHEMA) == {"nodes": 3, "rate": 100.0, "flush": "always", "power_loss": False}
    assert parse_table({"at": "1.5", "nodes": "5", "power_loss": "yes"}, SCHEMA, text=True) == {
        "nodes": 5, "rate": 100.0, "flush": "always", "power_loss": True, "at": 1.5}


@pytest.mark.parametrize("table, key, problem", [
    ({"at": 1, "nodes": "three"}, "nodes", "must be an integer, got 'three'"),
    ({"at": 1, "nodes": True}, "nodes", "must be an integer, got True"),
    ({"at": 1, "nodes": -1}, "nodes", "must be at least 0, got -1"),
    ({"at": 1, "nodes": 0}, "nodes", "must be at least 1, got 0"),
    ({"at": 1, "rate": "fast"}, "rate", "must be a number, got 'fast'"),
    ({"at": 1, "rate": -5}, "rate", "must be a non-negative number, got -5"),
    ({"at": 1, "rate": 0}, "rate", "must be above 0, got 0.0"),
    ({"at": 1, "flush": "sometimes"}, "flush", "must be one of always, interval, never, got 'sometimes'"),
    ({"at": 1, "flush": 3}, "flush", "must be a string, got 3"),
    ({"at": 1, "power_loss": "yes"}, "power_loss", "must be true or false, got 'yes'"),
    ({"at": -1}, "at", "must be a number of seconds >= 0, got -1"),
    ({"at": "3s"}, "at", "must be a number of seconds >= 0, got '3s'"),
    ({}, "at", "missing (required)"),
])
def test_each_bad_value_names_its_key_and_problem(table, key, problem):
    e = _error(table)
    assert (e.key, e.problem) == (key, problem)


def test_unknown_key_says_did_you_mean_when_one_is_close():
    e = _error({"at": 1, "flsh": "never"})
    assert (e.kind, e.key) == ("unknown", "flsh")
    assert e.problem == ("unknown key (known: at, flush, nodes, power_loss, rate) (did you mean 'flush'?)")
    assert _error({"colour": 1}).problem == "unknown key (known: at, flush, nodes, power_loss, rate)"
    assert _error({"nodse": 1}, unknown="is unknown").problem == "is unknown (did you mean 'nodes'?)"
    assert did_you_mean("truncaton", ["truncation", "flush"]) == " (did you mean 'truncation'?)"
    assert did_you_mean("zzz", ["truncation"]) == ""
    dotted = ["broker.truncation", "broker.unclean_leader_election", "broker.flush", "topic.name", "time_limit"]
    assert did_you_mean("broker.unclean", dotted) == " (did you mean 'broker.unclean_leader_election'?)"
    assert did_you_mean("broker.flsh", dotted) == " (did you mean 'broker.flush'?)"
    assert did_you_mean("broker.name", dotted) == ""      # only keys of the same section
    assert did_you_mean("time", dotted) == " (did you mean 'time_limit'?)"


def test_finite_refuses_infinity():
    s = Setting("at", float, 0.0, finite=True, what="a number of seconds >= 0")
    with pytest.raises(SettingError, match=r"^must be a number of seconds >= 0, got inf$"):
        s.value(float("inf"))
    assert Setting("timeout", float, 1.0, above=0).value(float("inf")) == float("inf")


def test_custom_conversion_messages_are_kept():
    def fault(raw):
        if raw not in ("kill", "pause"):
            raise ValueError(f"unknown fault {raw!r}")
        return raw
    s = Setting("fault", str, REQUIRED, parse=fault)
    assert s.value("kill") == "kill"
    with pytest.raises(SettingError, match=r"^unknown fault 'kil'$"):
        s.value("kil")


TEXT = """\
name = "x"
[cluster]
nodes = 3
[[test]]
name = "a"
rate = 1
[test.matrix]
nemesis = ["kill"]
[[test]]
name = "b"
  "rate" = 2
[test.matrix]
nemesis = ["pause"]
"""


def test_line_finder_finds_keys_tables_and_array_entries():
    assert line_of(TEXT, "name") == 1
    assert line_of(TEXT, "nodes", table="cluster") == 3
    assert line_of(TEXT, table="cluster") == 2
    assert line_of(TEXT, "rate", table="test", entry=1) == 6
    assert line_of(TEXT, "rate", table="test", entry=2) == 11
    assert line_of(TEXT, table="test", entry=2) == 9
    assert line_of(TEXT, "nemesis", table="test.matrix", entry=2) == 13
    assert line_of(TEXT, "missing", table="cluster") is None
    assert line_of(None, "name") is None
    assert header_lines(TEXT, "test") == [4, 9]


def test_read_toml_messages(tmp_path):
    good = tmp_path / "a.toml"
    good.write_text("x = 1\n")
    assert read_toml(good, ValueError) == ("x = 1\n", {"x": 1})
    with pytest.raises(ValueError, match=r"nope\.toml: cannot read test file \(No such file"):
        read_toml(tmp_path / "nope.toml", ValueError, cannot_read="{path}: cannot read test file ({reason})")
    (tmp_path / "b.toml").write_text("[x\n")
    with pytest.raises(ValueError, match=r"b\.toml: not valid TOML \("):
        read_toml(tmp_path / "b.toml", ValueError)
