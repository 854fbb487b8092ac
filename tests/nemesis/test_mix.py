"""The rotating mix and the aimed faults in schedules (nemesis/schedule.py): seeded and deterministic, every
family met within a round, named fault lists drawn exactly as before, packages in schedule files."""
from __future__ import annotations

import itertools

import pytest

from nemesis.schedule import (AIMED, FAULTS, MIX_FAMILIES, ConfigError, FaultPlan, check_fault_names, load_schedule,
                              random_steps)

NODES = ["c0", "n1", "n2", "n3"]
BROKERS = ["n1", "n2", "n3"]
FAMILY = {f: family for family, faults in MIX_FAMILIES.items() for f in faults}


def _mix(seed, n=60, quiet=0.3):
    plan = FaultPlan(["mix"], 5.0, seed, quiet_probability=quiet)
    return list(itertools.islice(random_steps(plan, BROKERS, partitions=3), n))


def test_the_mix_is_seeded():
    assert [s.key() for s in _mix(42)] == [s.key() for s in _mix(42)]
    assert [s.key() for s in _mix(42)] != [s.key() for s in _mix(43)]


def test_every_round_of_the_rotation_meets_every_family_in_a_seeded_order():
    for seed in range(20):
        steps = _mix(seed, 40)
        families = [FAMILY[s.fault] for s in steps]
        n = len(MIX_FAMILIES)
        rounds = [families[i:i + n] for i in range(0, len(families) - n + 1, n)]
        assert all(sorted(r) == sorted(MIX_FAMILIES) for r in rounds), (seed, rounds)
    orders = {tuple(FAMILY[s.fault] for s in _mix(seed, len(MIX_FAMILIES))) for seed in range(20)}
    assert len(orders) > 5                     # the order itself is shuffled with the seed


def test_quiet_intervals_do_not_move_the_rotation_on():
    steps = _mix(5, 12, quiet=0.5)
    ticks = [round(s.at / 5.0) for s in steps]
    assert ticks[-1] > len(ticks)              # some intervals were quiet
    assert sorted(FAMILY[s.fault] for s in steps[:len(MIX_FAMILIES)]) == sorted(MIX_FAMILIES)


def test_the_mix_draws_every_fault_of_every_family():
    steps = _mix(1, 400, quiet=0)
    assert {s.fault for s in steps} == set(FAMILY)
    assert all(s.duration == 5.0 and s.partition in (0, 1, 2) for s in steps)
    assert all(s.targets and s.targets[0] in BROKERS for s in steps if FAULTS[s.fault][1] == "broker")
    assert all(s.targets is None for s in steps if FAULTS[s.fault][1] != "broker")


def test_aimed_draws_one_package_per_step_with_its_seed():
    steps = list(itertools.islice(random_steps(FaultPlan(["aimed", "kill"], 1.0, 3), BROKERS, partitions=3), 200))
    assert {s.fault for s in steps} == {"kill", *AIMED}
    again = list(itertools.islice(random_steps(FaultPlan(["aimed", "kill"], 1.0, 3), BROKERS, partitions=3), 200))
    assert [s.key() for s in steps] == [s.key() for s in again]
    assert all(FAULTS[s.fault][0] == "package" for s in steps if s.fault != "kill")


def test_named_faults_are_drawn_exactly_as_before():
    # pinned from the schedule before the mix existed: naming faults keeps the old sequence
    first = [s.key()[:6] for s in itertools.islice(random_steps(FaultPlan(["kill", "partition"], 5.0, 42), BROKERS,
                                                                partitions=3), 5)]
    assert first == [(5.0, "kill", ("n3",), None, 1, 1051802512), (15.0, "partition", (), "controller", 0, 402418010),
                     (25.0, "partition", (), "controller", 1, 2530876844), (35.0, "kill", ("n1",), None, 1, 438989805),
                     (55.0, "partition", (), "isolate", 0, 3026113008)]


def test_mix_stands_alone():
    with pytest.raises(ConfigError, match="^nemesis: 'mix' is the whole rotating mix: name it alone"):
        check_fault_names(["mix", "kill"])
    check_fault_names(["aimed", "kill", "power-loss-all"])


def _write(tmp_path, text):
    p = tmp_path / "schedule.toml"
    p.write_text(text)
    return p


def test_packages_and_aimed_faults_in_a_schedule_file(tmp_path):
    p = _write(tmp_path, '[[step]]\nat = 1\nfault = "isolate-then-kill-leader"\npartition = 2\nduration = 3\n'
                         '[[step]]\nat = 2\nfault = "aimed"\nduration = 2\n'
                         '[[step]]\nat = 3\nfault = "kill-follower"\npartition = 1\nduration = 1\n'
                         '[[step]]\nat = 9\nfault = "power-loss-all"\nduration = 1\n')
    a, b, c, d = load_schedule(p, NODES, partitions=3, seed=8)
    assert (a.fault, a.partition, a.targets, a.kind) == ("isolate-then-kill-leader", 2, None, "package")
    assert b.fault in AIMED and b.partition in (0, 1, 2)
    assert b.fault == load_schedule(p, NODES, partitions=3, seed=8)[1].fault
    assert (c.fault, c.partition, c.targets) == ("kill-follower", 1, None)
    assert (d.fault, d.targets) == ("power-loss-all", None)


@pytest.mark.parametrize("step, message", [
    ('fault = "mix"', "field 'fault': 'mix' rotates faults in the random schedule; a step names a fault (or 'aimed')"),
    ('fault = "kill-majority"\ntargets = ["n1", "n2"]', "field 'targets': 'kill-majority' chooses its own targets"),
    ('fault = "pause-leader-until-fenced"\ntargets = ["n1"]',
     "field 'targets': 'pause-leader-until-fenced' chooses its own targets"),
    ('fault = "kill-minority"\npartition = 1', "field 'partition': only faults aimed at a partition"),
    ('fault = "kill-sole-isr"\npartition = 5', "field 'partition': must be a partition number in 0..2, got 5"),
])
def test_bad_aimed_steps(tmp_path, step, message):
    with pytest.raises(ConfigError) as err:
        load_schedule(_write(tmp_path, f"[[step]]\nat = 1\nduration = 1\n{step}\n"), NODES, partitions=3)
    assert f"step 1: {message}" in str(err.value)


def test_the_mix_leaves_out_the_families_the_backend_cannot_inject(tmp_path, monkeypatch):
    """A backend that cannot corrupt a data directory (the ssh one: require() refuses Corruptible, as
    tests/clusters/test_capabilities.py shows for the real class) runs the mix without the storage
    family, and brokers without power_loss without the power-loss one; both are named."""
    from clusters import base
    from clusters.base import ClusterSpec, Corruptible
    from clusters.local import LocalCluster
    from clusters.run_registry import Registry
    from nemesis import FaultPlan, Nemesis, driver

    def require(cluster, capability, fault):
        if capability is Corruptible:
            raise base.ClusterError(f"the ssh backend cannot inject fault {fault!r}: it is not Corruptible")
        return base.require(cluster, capability, fault)
    monkeypatch.setattr(driver, "require", require)

    spec = ClusterSpec("mixcap", tmp_path / "run", brokers=3, broker_settings={"power_loss": True})
    nem = Nemesis(LocalCluster(spec, registry=Registry(tmp_path / "reg")), None, FaultPlan(["mix"]),
                  admin_factory=lambda: None)
    assert "storage" not in nem.families and set(nem.families) == set(MIX_FAMILIES) - {"storage"}
    assert [d.split(" (")[0] for d in nem.mix_dropped] == ["mix: family storage left out"]
    assert "not Corruptible" in nem.mix_dropped[0]
    steps = [s.fault for s in itertools.islice(nem.steps(), 60)]
    assert steps and not {f for f in steps if f.startswith("corrupt")}

    plain = ClusterSpec("mixcap2", tmp_path / "run2", brokers=3)
    nem = Nemesis(LocalCluster(plain, registry=Registry(tmp_path / "reg2")), None, FaultPlan(["mix"]),
                  admin_factory=lambda: None)
    assert set(nem.families) == set(MIX_FAMILIES) - {"power-loss", "storage"}
    assert [d for d in nem.mix_dropped if "family power-loss" in d and "power_loss = true" in d]
