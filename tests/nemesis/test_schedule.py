"""Fault schedules: seeded random sequences and TOML schedule files with their errors (nemesis/schedule.py)."""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from nemesis.schedule import (FAULTS, MIX_FAMILIES, ConfigError, FaultPlan, expand_faults, load_schedule,
                              needs_power_loss, random_steps, recorded_kinds)

NODES = ["c0", "n1", "n2", "n3"]
BROKERS = ["n1", "n2", "n3"]


def _take(seed, faults, n=40, **kw):
    return [s.key() for s in itertools.islice(random_steps(FaultPlan(faults, 5.0, seed), BROKERS, **kw), n)]


def test_same_seed_same_sequence_and_other_seeds_differ():
    faults = ["kill", "pause", "partition", "kill-leader", "power-loss"]
    assert _take(42, faults) == _take(42, faults)
    assert _take(42, faults) != _take(43, faults)


def test_random_steps_are_one_interval_long_on_the_interval_grid_with_quiet_gaps():
    steps = list(itertools.islice(random_steps(FaultPlan(["kill", "partition"], 2.5, 7), BROKERS), 200))
    ticks = [round(s.at / 2.5) for s in steps]
    assert all(abs(s.at - t * 2.5) < 1e-9 for s, t in zip(steps, ticks))
    assert all(s.duration == 2.5 for s in steps)
    assert ticks == sorted(set(ticks)) and ticks[0] >= 1
    quiet = ticks[-1] - len(ticks)
    assert 0.15 < quiet / ticks[-1] < 0.45  # quiet_probability 0.3
    assert {s.fault for s in steps} == {"kill", "partition"}
    assert all(s.targets and s.targets[0] in BROKERS for s in steps if s.fault == "kill")
    assert {s.shape for s in steps if s.fault == "partition"} == {"isolate", "halves", "ring", "leader",
                                                                 "bridge", "one-way", "controller"}


def test_no_quiet_intervals_when_quiet_probability_is_zero():
    steps = list(itertools.islice(random_steps(FaultPlan(["pause"], 1.0, 1, quiet_probability=0.0), BROKERS), 10))
    assert [s.at for s in steps] == [float(k) for k in range(1, 11)]


def test_partition_named_shape_is_kept_and_leader_faults_get_a_partition_in_range():
    plan = FaultPlan(["partition-ring", "kill-leader"], 1.0, 3)
    steps = list(itertools.islice(random_steps(plan, BROKERS, partitions=3), 50))
    assert {s.shape for s in steps if s.fault == "partition-ring"} == {"ring"}
    assert {s.partition for s in steps if s.fault == "kill-leader"} == {0, 1, 2}
    assert all(s.targets is None for s in steps if s.fault == "kill-leader")


def test_unknown_fault_name_is_rejected():
    with pytest.raises(ConfigError, match=r"^nemesis: unknown fault 'kil' \(known: kill, kill-leader"):
        list(itertools.islice(random_steps(FaultPlan(["kil"], 1.0, 1), BROKERS), 1))


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "schedule.toml"
    p.write_text(text)
    return p


def test_schedule_file_is_parsed_sorted_and_seeded(tmp_path):
    p = _write(tmp_path, """
[[step]]
at = 10
fault = "partition"
shape = "one-way"
targets = ["n1"]
duration = 4.5

[[step]]
at = 2.0
fault = "kill"
targets = ["n2", "n3"]
duration = 3

[[step]]
at = 3.0
fault = "pause-leader"
partition = 1
duration = 1
""")
    steps = load_schedule(p, NODES, partitions=2, seed=9)
    assert [(s.number, s.at, s.fault, s.targets, s.shape, s.duration) for s in steps] == [
        (2, 2.0, "kill", ["n2", "n3"], None, 3.0),
        (3, 3.0, "pause-leader", None, None, 1.0),
        (1, 10.0, "partition", ["n1"], "one-way", 4.5),
    ]
    assert steps[1].partition == 1
    assert [s.key() for s in steps] == [s.key() for s in load_schedule(p, NODES, partitions=2, seed=9)]


def test_a_partition_without_shape_gets_a_seeded_one(tmp_path):
    p = _write(tmp_path, '[[step]]\nat = 1\nfault = "partition"\nduration = 1\n')
    shapes = {load_schedule(p, NODES, seed=s)[0].shape for s in range(40)}
    assert len(shapes) > 3
    assert load_schedule(p, NODES, seed=5)[0].shape == load_schedule(p, NODES, seed=5)[0].shape


@pytest.mark.parametrize("body, message", [
    ('[[step]]\nat = 1\nfault = "kil"\nduration = 1\n',
     "step 1: field 'fault': unknown fault 'kil' (known: kill, "),
    ('[[step]]\nat = 1\nfault = "kill"\nduration = 1\n[[step]]\nfault = "kill"\nduration = 1\n',
     "step 2: field 'at': missing (required)"),
    ('[[step]]\nat = -1\nfault = "kill"\nduration = 1\n', "step 1: field 'at': must be a number of seconds >= 0, got -1"),
    ('[[step]]\nat = 1\nfault = "kill"\nduration = 0\n', "step 1: field 'duration': must be a number of seconds > 0, got 0"),
    ('[[step]]\nat = 1\nfault = "kill"\nduration = "3s"\n', "step 1: field 'duration': must be a number of seconds > 0, got '3s'"),
    ('[[step]]\nat = 1\nfault = "kill"\nduration = 1\ntargets = ["n7"]\n',
     "step 1: field 'targets': unknown node 'n7' (nodes: c0, n1, n2, n3)"),
    ('[[step]]\nat = 1\nfault = "kill"\nduration = 1\ntarget = ["n1"]\n',
     "step 1: field 'target': unknown field (known: at, delay_ms, duration, fault, jitter_ms, loss_pct, partition, "
     "shape, targets)"
     " (did you mean 'targets'?)"),  # the message gained "did you mean" (rundir/settings.py)
    ('[[step]]\nat = 1\nfault = "kill"\nduration = 1\nshape = "ring"\n',
     "step 1: field 'shape': only partition faults have a shape (fault is 'kill')"),
    ('[[step]]\nat = 1\nfault = "partition"\nduration = 1\nshape = "square"\n',
     "step 1: field 'shape': unknown shape 'square' (known: isolate, halves, ring, leader, bridge, one-way, controller)"),
    ('[[step]]\nat = 1\nfault = "partition-ring"\nduration = 1\nshape = "halves"\n',
     "step 1: field 'shape': 'halves' contradicts fault 'partition-ring'"),
    ('[[step]]\nat = 1\nfault = "kill-leader"\nduration = 1\ntargets = ["n1"]\n',
     "step 1: field 'targets': 'kill-leader' chooses its own targets"),
    ('[[step]]\nat = 1\nfault = "power-loss"\nduration = 1\ntargets = ["c0"]\n',
     "step 1: field 'targets': power-loss applies to brokers only, not the controller c0"),
    ('[[step]]\nat = 1\nfault = "kill-leader"\nduration = 1\npartition = 5\n',
     "step 1: field 'partition': must be a partition number in 0..2, got 5"),
    ('[[step]]\nat = 1\nfault = "kill"\nduration = 1\npartition = 0\n',
     "step 1: field 'partition': only faults aimed at a partition (its leader, a follower, a sole ISR member) take "
     "a partition (fault is 'kill')"),
    ('[[step]]\nat = 1\nfault = "partition"\nduration = 5\n[[step]]\nat = 3\nfault = "partition-ring"\nduration = 1\n',
     "step 2: field 'at': partition at 3s overlaps the partition of step 1 (1s-6s); partitions must not overlap"),
    ('[[step]]\nat = 1\nfault = "kill"\ntargets = ["n2"]\nduration = 5\n'
     '[[step]]\nat = 2\nfault = "pause"\ntargets = ["n2", "n3"]\nduration = 1\n',
     "step 2: field 'targets': overlaps step 1 on n2 (1s-6s); one process fault per node at a time"),
    ('[[step]]\nat = 1\nfault = "partition"\nshape = "bridge"\ntargets = ["n1", "n2"]\nduration = 1\n',
     "step 1: field 'targets': a bridge has exactly one middle node, got ['n1', 'n2']"),
    ('title = "x"\n', "unknown top-level key 'title' (expected [[step]] tables)"),
    ('[[stpe]]\nat = 1\n', "unknown top-level key 'stpe' (expected [[step]] tables) (did you mean 'step'?)"),
    ('', "no [[step]] entries"),
    ('step = 3\n', "'step' must be an array of tables ([[step]])"),
])
def test_bad_schedule_files_name_file_entry_and_field(tmp_path, body, message):
    p = _write(tmp_path, body)
    with pytest.raises(ConfigError) as exc:
        load_schedule(p, NODES, partitions=3)
    # entry errors name the line of that entry's [[step]] header; file-level ones only the file
    step = re.match(r"step (\d+):", message)
    if step:
        header = [no for no, line in enumerate(body.splitlines(), 1) if line == "[[step]]"][int(step.group(1)) - 1]
        assert str(exc.value).startswith(f"{p}:{header}: {message}")
    else:
        assert str(exc.value).startswith(f"{p}: {message}")
    assert "\n" not in str(exc.value)


def test_schedule_error_names_the_line_of_the_step(tmp_path):
    p = _write(tmp_path, '# faults\n\n[[step]]\nat = 1\nfault = "kill"\nduration = 1\n\n'
                         '[[step]]\nat = 4\nfault = "kil"\nduration = 1\n')
    with pytest.raises(ConfigError) as exc:
        load_schedule(p, NODES, partitions=3)
    assert str(exc.value).startswith(f"{p}:8: step 2: field 'fault': unknown fault 'kil'")


def test_unreadable_and_invalid_toml_files(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.toml: cannot read schedule file: No such file"):
        load_schedule(tmp_path / "missing.toml", NODES)
    p = _write(tmp_path, "[[step]\nat = 1\n")
    with pytest.raises(ConfigError, match=r"schedule\.toml: not valid TOML: .*line 1"):
        load_schedule(p, NODES)


def test_every_fault_name_maps_to_history_kinds():
    history_kinds = {"kill", "pause", "power-loss", "partition", "degrade", "corrupt", "elect", "disk-full",
                     "client-pause"}
    assert {kind for kind, _ in FAULTS.values()} == history_kinds - {"elect"} | {"package", "mix"}
    # a package or a draw records the kinds of the single-window faults it is made of
    for name in FAULTS:
        assert recorded_kinds([name]) <= history_kinds and recorded_kinds([name])
        assert all(FAULTS[f][0] in history_kinds for f in expand_faults([name]))
    assert recorded_kinds(["isolate-then-kill-leader"]) == {"partition", "kill"}
    assert recorded_kinds(["mix"]) == {"kill", "pause", "partition", "power-loss", "elect", "corrupt"}
    assert recorded_kinds(["move-leader"]) == {"elect"} and expand_faults(["move-leader"]) == []
    assert expand_faults(["kill", "partition"]) == ["kill", "partition"]       # single faults: as named
    assert needs_power_loss(["mix"]) and needs_power_loss(["aimed"]) and needs_power_loss(["power-loss-all"])
    assert not needs_power_loss(["kill", "partition", "isolate-then-kill-leader", "pause-leader-until-fenced"])


def test_degrade_steps_take_their_setting_from_the_file_or_the_seed(tmp_path):
    p = _write(tmp_path, "[[step]]\nat = 1\nfault = \"degrade\"\nduration = 2\ntargets = [\"n1\"]\n"
                         "delay_ms = 40\nloss_pct = 10\n"
                         "[[step]]\nat = 4\nfault = \"degrade-leader\"\nduration = 1\n")
    a, b = load_schedule(p, NODES, seed=3)
    assert a.degradation["delay_ms"] == 40.0 and a.degradation["loss_pct"] == 10.0
    assert a.degradation["jitter_ms"] in (10.0, 20.0, 40.0)           # seeded: 40 % of a seeded delay
    assert b.degradation == load_schedule(p, NODES, seed=3)[1].degradation
    assert b.degradation["delay_ms"] in (25.0, 50.0, 100.0) and b.degradation["loss_pct"] in (0.0, 2.0, 5.0)
    assert b.degradation["jitter_ms"] == b.degradation["delay_ms"] * 0.4
    steps = random_steps(FaultPlan(["degrade"], 1.0, 7, quiet_probability=0), ["n1", "n2", "n3"])
    first = [next(steps) for _ in range(20)]
    assert all(s.degradation and s.targets is None for s in first)
    assert len({s.degradation["delay_ms"] for s in first}) > 1       # the seed varies the setting


@pytest.mark.parametrize("text, message", [
    ("[[step]]\nat = 1\nfault = \"kill\"\nduration = 1\ndelay_ms = 5\n",
     "step 1: field 'delay_ms': only degrade faults take delay_ms, jitter_ms, loss_pct (fault is 'kill')"),
    ("[[step]]\nat = 1\nfault = \"degrade\"\nduration = 1\nloss_pct = 101\n",
     "step 1: field 'loss_pct': "),
    ("[[step]]\nat = 1\nfault = \"degrade\"\nduration = 3\n[[step]]\nat = 2\nfault = \"degrade\"\nduration = 1\n",
     "step 2: field 'at': degrade at 2s overlaps the degrade of step 1 (1s-4s); degrades must not overlap"),
    ("[[step]]\nat = 1\nfault = \"degrade-leader\"\nduration = 1\ntargets = [\"n1\"]\n",
     "step 1: field 'targets': 'degrade-leader' chooses its own targets"),
])
def test_bad_degrade_steps(tmp_path, text, message):
    with pytest.raises(ConfigError) as err:
        load_schedule(_write(tmp_path, text), NODES)
    assert message in str(err.value)
