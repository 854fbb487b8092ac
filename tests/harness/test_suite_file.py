"""harness/suite_file.py: parsing, matrix expansion, settings applied in order, and one-line errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.suite_file import ConfigError, load_suite

REPO = Path(__file__).resolve().parents[2]

SUITE = """\
name = "demo"
description = "a demo"
repeats = 2

[defaults]
time_limit = 20
checker = "reference"
[defaults.workload]
rate = 50.0

[[test]]
name = "hw"
truncation = "hw"
acks = 1
min_insync_replicas = 1
nemesis = ["kill", "power-loss"]
finds = ["lost-write", "divergence"]

[[test]]
name = "safe"
repeats = 3
time_limit = 30
safe = true
[test.matrix]
nemesis = ["kill", "pause"]
unclean_election = [false, true]
"""


def write(tmp_path: Path, text: str, name: str = "suite.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as exc:
        load_suite(write(tmp_path, text))
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_expansion_names_rows_columns_and_settings(tmp_path):
    suite = load_suite(write(tmp_path, SUITE))
    assert suite.name == "demo" and suite.description == "a demo"
    assert [c.name for c in suite.configs] == [
        "hw", "safe-kill-no-unclean-election", "safe-kill-unclean-election",
        "safe-pause-no-unclean-election", "safe-pause-unclean-election"]
    hw = suite.configs[0]
    assert (hw.row, hw.column, hw.repeats) == ("hw", "kill+power-loss", 2)
    assert hw.expect.finds == ("lost-write", "divergence") and not hw.expect.safe
    assert hw.cfg.broker.truncation == "hw" and hw.cfg.client.acks == 1
    assert hw.cfg.broker.min_insync_replicas == 1
    assert hw.cfg.time_limit == 20.0 and hw.cfg.workload.rate == 50.0 and hw.cfg.checker.engine == "reference"
    assert hw.where == f"{tmp_path / 'suite.toml'}:11"
    s = suite.configs[2]
    assert (s.row, s.column, s.repeats) == ("safe-unclean-election", "kill", 3)
    assert s.expect.safe and s.expect.describe() == "safe"
    assert s.cfg.broker.unclean_leader_election is True and s.cfg.nemesis.faults == ["kill"]
    assert s.cfg.time_limit == 30.0            # the test's own setting wins over [defaults]
    assert s.cfg.broker.truncation == "leader-epoch"  # harness default
    assert s.settings == {"time_limit": 30, "checker": "reference", "workload.rate": 50.0,
                          "nemesis": "kill", "unclean_election": True}


def test_name_defaults_to_file_stem_and_schedule_paths_are_relative_to_the_suite(tmp_path):
    (tmp_path / "sched").mkdir()
    suite = load_suite(write(tmp_path, """
[[test]]
name = "one"
nemesis = "none"
nemesis_schedule = "sched/x.toml"
safe = true
""", name="my-suite.toml"))
    assert suite.name == "my-suite"
    c = suite.configs[0]
    assert c.cfg.nemesis.schedule_file == str(tmp_path / "sched" / "x.toml")
    assert c.column == "schedule:x" and c.repeats == 1


def test_shipped_suites_parse():
    nightly = load_suite(REPO / "suites" / "nightly.toml")
    names = [c.name for c in nightly.configs]
    assert "hw-truncation" in names and "leader-epoch-safe-kill" in names
    assert {c.column for c in nightly.configs if c.row == "leader-epoch-safe"} == {
        "kill", "pause", "partition", "power-loss", "kill+partition-leader"}
    smoke = load_suite(REPO / "suites" / "smoke.toml")
    assert smoke.name == "smoke"
    assert any(c.expect.safe for c in smoke.configs) and any(c.expect.finds for c in smoke.configs)


@pytest.mark.parametrize("edit, expected", [
    (("acks = 1", "acks = 2"), ':14: [[test]] #1 \'hw\': key \'acks\' must be 0, 1 or "all", got 2'),
    (("rate = 50.0", "rate = -5"), ":9: [defaults]: key 'workload.rate' must be a non-negative number, got -5"),
    (('finds = ["lost-write", "divergence"]', 'finds = ["lost"]'),
     ":17: [[test]] #1 'hw': key 'finds' names unknown anomaly kind 'lost'"),
    (("safe = true\n", ""), ":19: [[test]] #2 'safe' has no expectation: give safe = true or finds"),
    (('finds = ["lost-write", "divergence"]', 'finds = ["key-reorder"]'),
     ":17: [[test]] #1 'hw' (configuration 'hw'): key 'finds' names key-reorder, which workload "
     "'producer-consumer' cannot show (the workload sends no keys; workloads that can: keyed)"),
    (("safe = true", "safe = false"), ":23: [[test]] #2 'safe': key 'safe' must be true"),
    (('finds = ["lost-write", "divergence"]', 'finds = ["lost-write"]\nsafe = true'),
     "[[test]] #1 'hw': key 'finds' cannot be combined with safe"),
    (("unclean_election = [false, true]", "unclean_election = [false, 7]"),
     ":26: [[test]] #2 'safe' [test.matrix]: key 'unclean_election' value 7: must be true or false, got 7"),
    (("unclean_election = [false, true]", "unclean_election = []"),
     ":26: [[test]] #2 'safe' [test.matrix]: key 'unclean_election' must be a non-empty list"),
    (("min_insync_replicas = 1", "min_insync_replicas = 4"),
     ":15: [[test]] #1 'hw' (configuration 'hw'): key 'min_insync_replicas' must be between 1 and the "
     "replication factor (3), got 4"),
    (('truncation = "hw"', 'trunc = "hw"'), ":13: [[test]] #1 'hw': key 'trunc' is not a setting"),
    (('name = "safe"', 'name = "hw"'), ":20: [[test]] #2 'hw': key 'name' is used by an earlier [[test]]"),
    (("repeats = 3", "repeats = 0"), ":21: [[test]] #2 'safe': key 'repeats' must be an integer of at least 1"),
    (('name = "demo"', 'name = "de mo"'), ":1: top level: key 'name' must be letters, digits"),
    (('description = "a demo"', 'descr = "a demo"'), ":2: top level: key 'descr' is unknown"),
    (("nemesis = [\"kill\", \"pause\"]", "nemesis = [\"kill\", \"explode\"]"),
     ":25: [[test]] #2 'safe' [test.matrix]: key 'nemesis' value 'explode': unknown fault 'explode'"),
])
def test_errors_name_file_line_entry_and_key(tmp_path, edit, expected):
    old, new = edit
    assert old in SUITE
    msg = error_of(tmp_path, SUITE.replace(old, new, 1))
    assert msg.startswith(str(tmp_path / "suite.toml")), msg
    assert expected in msg, msg


def test_whole_file_errors(tmp_path):
    assert error_of(tmp_path, 'name = "x"\n').endswith("top level: key 'test' must be one or more [[test]] tables")
    assert "not valid TOML" in error_of(tmp_path, "[[test]\n")
    with pytest.raises(ConfigError, match="cannot read suite file"):
        load_suite(tmp_path / "missing.toml")


def test_a_matrix_that_repeats_a_name_is_refused(tmp_path):
    msg = error_of(tmp_path, """
[[test]]
name = "a-kill"
safe = true
[[test]]
name = "a"
safe = true
[test.matrix]
nemesis = ["kill"]
""")
    assert "[[test]] #2: key 'name' expands to configuration 'a-kill', already made by [[test]] 'a-kill'" in msg


def test_unknown_keys_say_did_you_mean(tmp_path):
    # messages that gained "did you mean" (rundir/settings.py)
    assert error_of(tmp_path, SUITE.replace('truncation = "hw"', 'trunc = "hw"', 1)).endswith(
        "(did you mean 'truncation'?)")
    assert error_of(tmp_path, SUITE.replace('description = "a demo"', 'descr = "a demo"', 1)).endswith(
        "top level: key 'descr' is unknown (known: name, description, repeats, defaults, test) "
        "(did you mean 'description'?)")
