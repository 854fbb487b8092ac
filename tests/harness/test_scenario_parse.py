"""Unit tests for harness/scenario.py: the shipped scenarios parse; bad files give one-line errors
naming the file, step number, line and field."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import scenario as S

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ["seed-data-loss", "seed-divergence", "kip-279", "kafka-7128"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_parse(name):
    sc = S.load(REPO / "scenarios" / f"{name}.toml", truncation="hw")
    assert sc.name == name
    assert sc.config.broker.truncation == "hw"
    assert sc.expect["leader-epoch"] == []
    assert sc.expect["hw"] in (["lost-write"], ["divergence"])
    assert sc.steps[0].do == "wait"
    assert all(s.number == i + 1 for i, s in enumerate(sc.steps))
    assert sc.config.nemesis.faults == []


def write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


BASE = '[cluster]\nnodes = 2\n[topic]\npartitions = 1\nreplication_factor = 2\n'


def test_steps_parsed_with_defaults(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "produce"\ncount = 3\nacks = 1\n'
                              '[[step]]\ndo = "partition"\nisolate = "n1"\n'
                              '[[step]]\ndo = "wait"\nleader = "n2"\nnode = "n1"\nleo = 4\n'
                              '[[step]]\ndo = "power-loss"\nnode = "n2"\n')
    sc = S.load(p)
    produce, part, wait, pl = sc.steps
    assert produce.args == {"count": 3, "acks": 1, "partition": 0, "expect": "ok"}
    assert part.args == {"isolate": "n1", "drop": [("n1", "n2"), ("n2", "n1")], "from": ["n2"]}
    assert wait.args == {"leader": "n2", "node": "n1", "leo": 4, "timeout": 30.0, "partition": 0}
    assert (pl.do, pl.line) == ("power-loss", 18)
    assert sc.config.broker.power_loss is True        # power-loss steps need the emulation
    assert sc.config.broker.truncation == "leader-epoch"


@pytest.mark.parametrize("steps, message", [
    ('[[step]]\ndo = "explode"\n', "step 1: field 'do' must be one of"),
    ('[[step]]\ndo = "heal"\n[[step]]\ndo = "kill"\n', "step 2 (kill): field 'node' is missing"),
    ('[[step]]\ndo = "kill"\nnode = "n7"\n', "step 1 (kill): field 'node' must be one of c0, n1, n2, got 'n7'"),
    ('[[step]]\ndo = "produce"\nacks = 3\n', "step 1 (produce): field 'acks' must be 0, 1 or \"all\", got 3"),
    ('[[step]]\ndo = "produce"\ncolour = 3\n', "step 1 (produce): unknown field 'colour'"),
    ('[[step]]\ndo = "produce"\ncout = 3\n', "step 1 (produce): unknown field 'cout' (allowed: count, acks, "
                                           "partition, expect, timeout) (did you mean 'count'?)"),
    ('[[step]]\ndo = "produce"\ncount = 0\n', "step 1 (produce): field 'count' must be an integer >= 1, got 0"),
    ('[[step]]\ndo = "sleep"\nseconds = true\n', "step 1 (sleep): field 'seconds' must be a number above 0, got True"),
    ('[[step]]\ndo = "wait"\ntimeout = 3\n', "step 1 (wait): give at least one condition"),
    ('[[step]]\ndo = "wait"\nleo = 3\n', "step 1 (wait): field 'node' is needed with 'leo'"),
    ('[[step]]\ndo = "wait"\nleader = "n1"\ntimeout = -1\n', "step 1 (wait): field 'timeout' must be a number above 0"),
    ('[[step]]\ndo = "partition"\n', "step 1 (partition): give exactly one of 'drop' or 'isolate'"),
    ('[[step]]\ndo = "partition"\ndrop = [["n1", "n1"]]\n', "field 'drop' a node cannot be cut from itself"),
    ('[[step]]\ndo = "power-loss"\nnode = "c0"\n', "step 1 (power-loss): field 'node' must be one of n1, n2"),
    ('[[step]]\ndo = "sleep"\n', "step 1 (sleep): field 'seconds' is missing"),
])
def test_step_errors_name_file_step_line_field(tmp_path, steps, message):
    p = write(tmp_path, BASE + steps)
    with pytest.raises(S.ScenarioError) as e:
        S.load(p)
    text = str(e.value)
    assert message in text
    assert text.startswith(f"{p}:")
    assert "\n" not in text


def test_step_error_line_number(tmp_path):
    p = write(tmp_path, BASE + '[[step]]\ndo = "heal"\n\n[[step]]\ndo = "kill"\nnode = 3\n')
    with pytest.raises(S.ScenarioError) as e:
        S.load(p)
    assert str(e.value) == f"{p}:9: step 2 (kill): field 'node' must be one of c0, n1, n2, got 3"


def test_file_level_errors(tmp_path):
    with pytest.raises(S.ScenarioError) as e:
        S.load(write(tmp_path, BASE))
    assert str(e.value) == f"{tmp_path / 's.toml'}: no steps (add [[step]] tables)"
    with pytest.raises(S.ScenarioError) as e:
        S.load(write(tmp_path, BASE + '[nemesis]\nfaults = ["kill"]\n[[step]]\ndo = "heal"\n'))
    assert "a scenario has no [nemesis]" in str(e.value)
    with pytest.raises(S.ScenarioError) as e:
        S.load(write(tmp_path, BASE + '[expect]\nhw = ["lost-writes"]\n[[step]]\ndo = "heal"\n'))
    assert "key 'expect.hw' has unknown anomaly kind 'lost-writes'" in str(e.value)
    with pytest.raises(S.ScenarioError) as e:
        S.load(write(tmp_path, BASE.replace("nodes = 2", "nodes = 1") + '[[step]]\ndo = "heal"\n'))
    assert "key 'topic.replication_factor' must be between 1 and the number of nodes (1), got 2" in str(e.value)
    with pytest.raises(S.ScenarioError) as e:
        S.load(write(tmp_path, 'colour = 1\n' + BASE + '[[step]]\ndo = "heal"\n'))
    # the message gained "did you mean" (rundir/settings.py)
    assert str(e.value) == f"{tmp_path / 's.toml'}:1: unknown key 'colour' (did you mean 'cluster'?)"
