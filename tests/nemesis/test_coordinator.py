"""The coordinator as a target (nemesis/targets.py, nemesis/driver.py, nemesis/packages.py): the leader of
the group's partition of `__consumer_offsets`, chosen from hand-made views with known answers; the skips
when the offsets topic is missing or leaderless; the coordinator faults refused without a group, in the
nemesis and in a test file (harness/config.py); the mix unchanged for a workload without a group; and the
coordinator's packages over a scripted context. The real counterpart is
tests/nemesis/test_coordinator_local.py."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from clusters.base import ClusterSpec
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from harness import config
from nemesis import Aim, ConfigError, FaultPlan, Nemesis, packages
from nemesis import targets as T
from nemesis.schedule import COORDINATOR_FAMILY, MIX_FAMILIES, aims_at_coordinator, load_schedule, random_steps
from nemesis.step import Step

OFFSETS = "__consumer_offsets"


def info(partition, leader, isr, replicas=(1, 2, 3), epoch=2):
    return SimpleNamespace(partition=partition, leader=leader, epoch=epoch, isr=list(isr), replicas=list(replicas))


def offsets_view(n, leaders):
    """A view of an offsets topic of `n` partitions, partition p led by broker leaders[p] (None: no leader)."""
    return T.view_of([info(p, leaders[p], [] if leaders[p] is None else [leaders[p]]) for p in range(n)])


# --- the target, known answers ----------------------------------------------------------------------------

def test_the_coordinator_is_the_leader_of_the_groups_offsets_partition():
    # Java's "g".hashCode() is 103 and "ab".hashCode() is 97 * 31 + 98 = 3105: partitions 103 % n, 3105 % n
    three = offsets_view(3, [1, 2, 3])
    assert T.coordinator_partition(three, "g").partition == 1 and T.coordinator(three, "g") == "n2"
    assert T.coordinator_partition(three, "ab").partition == 0 and T.coordinator(three, "ab") == "n1"
    fifty = offsets_view(50, [p % 3 + 1 for p in range(50)])      # Kafka's default partition count
    assert T.coordinator_partition(fifty, "g").partition == 3 and T.coordinator(fifty, "g") == "n1"
    assert T.coordinator_partition(fifty, "ab").partition == 5 and T.coordinator(fifty, "ab") == "n3"
    # the order of describe()'s answer does not matter
    shuffled = T.view_of([info(2, 3, [3]), info(0, 1, [1]), info(1, 2, [2])])
    assert T.coordinator(shuffled, "g") == "n2"


def test_no_coordinator_without_the_offsets_topic_or_without_a_leader():
    empty = T.view_of([])
    assert T.coordinator_partition(empty, "g") is None and T.coordinator(empty, "g") is None
    assert T.no_coordinator(empty, "g") == (f"{OFFSETS} does not exist yet (no client has looked up the "
                                            f"coordinator of 'g')")
    leaderless = offsets_view(3, [1, None, 3])
    assert T.coordinator_partition(leaderless, "g").partition == 1 and T.coordinator(leaderless, "g") is None
    assert T.no_coordinator(leaderless, "g") == (f"group 'g' has no coordinator: {OFFSETS}/1: leader none, "
                                                 f"epoch 2, ISR []")


# --- the nemesis's choice ---------------------------------------------------------------------------------

class Admin:
    """The test topic `hw` led by n1; `__consumer_offsets` as `offsets` says (a list of infos, [] absent)."""

    def __init__(self, offsets):
        self.offsets, self.asked = offsets, []

    def describe(self, topic):
        self.asked.append(topic)
        return list(self.offsets) if topic == OFFSETS else [info(0, 1, [1, 2, 3])]

    def close(self):
        pass


def _nemesis(tmp_path, faults, offsets, group="g", **plan):
    spec = ClusterSpec("coord", tmp_path / "run", brokers=3, broker_settings={"power_loss": True})
    admin = Admin(offsets)
    return Nemesis(LocalCluster(spec, registry=Registry(tmp_path / "reg")), None, FaultPlan(faults, **plan),
                   aim=Aim(topic="hw", group=group), admin_factory=lambda: admin), admin


@pytest.mark.parametrize("fault", ["kill-coordinator", "pause-coordinator"])
def test_a_process_fault_aims_at_the_coordinator_from_the_offsets_topics_metadata(tmp_path, fault):
    nem, admin = _nemesis(tmp_path, [fault], [info(0, 1, [1, 2]), info(1, 3, [3, 2], epoch=7), info(2, 2, [2])])
    targets, extra, note = nem._resolve(Step.timed(1.0, fault, 1.0, seed=5, partition=0))
    assert targets == ["n3"]
    assert extra == {"group": "g", "offsets_partition": 1,
                     "state": {"partition": 1, "leader": "n3", "epoch": 7, "isr": ["n3", "n2"]}}
    assert note == f"coordinator of group 'g': {OFFSETS}/1: leader n3, epoch 7, ISR [n3, n2]"
    assert admin.asked == [OFFSETS]             # described as the test topic is, through the admin client


def test_partition_coordinator_cuts_the_coordinator_off_from_every_other_node(tmp_path):
    nem, _ = _nemesis(tmp_path, ["partition-coordinator"], [info(0, 1, [1]), info(1, 2, [2]), info(2, 3, [3])])
    step = Step.timed(1.0, "partition-coordinator", 1.0, seed=5, shape="coordinator")
    targets, extra, _note = nem._resolve(step)
    assert targets == ["n2"] and extra["shape"] == "coordinator" and extra["offsets_partition"] == 1
    assert extra["groups"] == [["n2"], ["c0", "n1", "n3"]]
    assert sorted(map(tuple, extra["drops"])) == sorted([("n2", x) for x in ("c0", "n1", "n3")]
                                                        + [(x, "n2") for x in ("c0", "n1", "n3")])


@pytest.mark.parametrize("offsets, why", [
    ([], f"{OFFSETS} does not exist yet"),
    ([info(0, 1, [1]), info(1, None, []), info(2, 3, [3])], "group 'g' has no coordinator"),
])
def test_a_coordinator_fault_is_skipped_with_its_reason(tmp_path, offsets, why):
    for fault in ("kill-coordinator", "partition-coordinator"):
        nem, _ = _nemesis(tmp_path / fault, [fault], offsets)
        nem._start_fault(Step.timed(2.0, fault, 1.0, seed=1, shape="coordinator" if "partition" in fault else None), 2.0)
        assert nem.stats.started == 0 and len(nem.stats.skipped) == 1
        assert nem.stats.skipped[0].startswith(f"{fault} at 2s: no eligible target ({why}")


def test_a_faulted_coordinator_is_not_faulted_again(tmp_path):
    nem, _ = _nemesis(tmp_path, ["kill-coordinator"], [info(0, 1, [1]), info(1, 2, [2]), info(2, 3, [3])])
    assert nem._resolve_coordinator({"n2"}) == ([], {}, "the coordinator of group 'g', n2, is already faulted")


# --- refused without a group; the mix ---------------------------------------------------------------------

def test_the_nemesis_refuses_coordinator_faults_without_a_group(tmp_path):
    for fault in ("kill-coordinator", "isolate-then-kill-coordinator"):
        with pytest.raises(ConfigError, match=f"fault '{fault}' aims at a consumer group's coordinator, and the "
                                              r"workload has no consumer group \(Aim\(group=\)\)"):
            _nemesis(tmp_path, [fault], [], group=None)
    assert aims_at_coordinator(["mix", "kill", "aimed"]) == []


def test_the_mix_has_a_coordinator_family_only_with_a_group(tmp_path):
    plain, _ = _nemesis(tmp_path / "a", ["mix"], [], group=None, interval_s=5.0, seed=9)
    assert plain.families == MIX_FAMILIES
    grouped, _ = _nemesis(tmp_path / "b", ["mix"], [], group="g", interval_s=5.0, seed=9)
    assert grouped.families == {**MIX_FAMILIES, **COORDINATOR_FAMILY}
    # without a group the draws are exactly the default nemesis's
    default = random_steps(FaultPlan(["mix"], 5.0, 9), ["n1", "n2", "n3"])
    assert [s.key() for s in itertools.islice(plain.steps(), 50)] == [s.key() for s in itertools.islice(default, 50)]
    drawn = {s.fault for s in itertools.islice(grouped.steps(), 400)}
    assert set(COORDINATOR_FAMILY["coordinator"]) <= drawn


def test_a_test_file_with_a_coordinator_fault_and_no_group_is_one_line_naming_file_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[workload]\nname = "producer-consumer"\n\n[nemesis]\nfaults = ["kill", "pause-coordinator"]\n')
    with pytest.raises(ConfigError) as err:
        config.load_toml(bad)
    assert str(err.value) == (f"{bad}:5: key 'nemesis.faults' has 'pause-coordinator', which aims at a consumer "
                              f"group's coordinator, and workload 'producer-consumer' has no group "
                              f"(workload.name = \"group\")")
    good = tmp_path / "good.toml"
    good.write_text('[workload]\nname = "group"\ngroup_id = "orders"\n\n[nemesis]\nfaults = ["kill-coordinator"]\n')
    assert config.workload_group(config.load_toml(good)) == "orders"
    assert config.workload_group(config.TestConfig()) is None


def test_a_schedule_file_with_a_coordinator_step_and_no_group_is_refused_by_preflight(tmp_path):
    sched = tmp_path / "s.toml"
    sched.write_text('[[step]]\nat = 1\nfault = "kill-coordinator"\nduration = 2\n')
    cfg = config.TestConfig()
    cfg.nemesis.schedule_file = str(sched)
    with pytest.raises(ConfigError, match="key 'nemesis.schedule_file' has 'kill-coordinator', which aims at a "
                                          "consumer group's coordinator"):
        config.preflight(cfg)


@pytest.mark.parametrize("field, value, message", [
    ("targets", '["n1"]', "'kill-coordinator' chooses its own targets"),
    ("partition", "0", "only faults aimed at a partition"),
])
def test_a_coordinator_step_chooses_its_own_target(tmp_path, field, value, message):
    sched = tmp_path / "s.toml"
    sched.write_text(f'[[step]]\nat = 1\nfault = "kill-coordinator"\nduration = 2\n{field} = {value}\n')
    with pytest.raises(ConfigError, match=f"step 1: field '{field}': {message}"):
        load_schedule(sched, ["c0", "n1", "n2", "n3"])
    sched.write_text('[[step]]\nat = 1\nfault = "partition-coordinator"\nduration = 2\n')
    assert load_schedule(sched, ["c0", "n1", "n2", "n3"])[0].shape == "coordinator"


# --- the coordinator's packages over a scripted context -----------------------------------------------------

BEFORE = T.PartitionView(1, "n2", 4, ("n2", "n3", "n1"), ("n2", "n3", "n1"))
SHRUNK = T.PartitionView(1, "n2", 4, ("n2",), ("n2", "n3", "n1"))
MOVED = T.PartitionView(1, "n3", 5, ("n3", "n1"), ("n2", "n3", "n1"))


class Scripted:
    """A package context: the offsets topic's partition 1 (group g's, of 3) led by n2; its waits on the
    offsets topic answer `after`."""

    topic, group, nodes, isr_wait_s, fence_wait_s = "hw", "g", ["c0", "n1", "n2", "n3"], 6.0, 9.0

    def __init__(self, after):
        self.after, self.calls = after, []

    def view(self, topic=None):
        assert topic == OFFSETS
        return T.ClusterView({0: T.PartitionView(0, "n1", 1, ("n1",), ("n1",)), 1: BEFORE,
                              2: T.PartitionView(2, "n3", 1, ("n3",), ("n3",))}), ""

    def busy(self):
        return set()

    def start(self, name, kind, targets, extra, note):
        self.calls.append(("start", name, kind, list(targets), {k: extra[k] for k in ("group", "offsets_partition")}))
        return name

    def wait(self, test, bound_s, topic=None):
        assert topic == OFFSETS
        ok = test(T.ClusterView({1: self.after}))
        return ok, T.ClusterView({1: self.after}), 1.5

    def hold(self, seconds):
        self.calls.append(("hold", seconds))

    def stop(self, window, note):
        self.calls.append(("stop", window, note))

    def skip(self, reason):
        self.calls.append(("skip", reason))

    def recover(self, nodes):
        self.calls.append(("recover", sorted(nodes)))


AIM = {"group": "g", "offsets_partition": 1}


def test_isolate_then_kill_coordinator_kills_it_once_its_offsets_isr_has_shrunk():
    ctx = Scripted(SHRUNK)
    packages.PLAYS["isolate-then-kill-coordinator"](ctx, SimpleNamespace(partition=0, duration=2.0))
    assert ctx.calls == [
        ("start", "isolate-followers", "partition", ["n2"], AIM),
        ("start", "kill-coordinator", "kill", ["n2"], AIM),
        ("hold", 2.0), ("stop", "isolate-followers", ""), ("stop", "kill-coordinator", ""),
        ("recover", ["n1", "n2", "n3"])]
    ctx = Scripted(BEFORE)          # the ISR never shrinks: no kill, the reason recorded
    packages.PLAYS["isolate-then-kill-coordinator"](ctx, SimpleNamespace(partition=0, duration=2.0))
    assert ("skip", f"ISR of {OFFSETS}/1 did not shrink to [n2] within 6 s") in ctx.calls
    assert not [c for c in ctx.calls if c[:2] == ("start", "kill-coordinator")]


def test_isolate_coordinator_until_replaced_heals_once_another_broker_coordinates():
    ctx = Scripted(MOVED)
    packages.PLAYS["isolate-coordinator-until-replaced"](ctx, SimpleNamespace(partition=0, duration=2.0))
    assert ctx.calls == [
        ("start", "isolate-coordinator", "partition", ["n2"], AIM),
        ("stop", "isolate-coordinator", f"replaced after 1.5 s: {OFFSETS}/1: leader n3, epoch 5, ISR [n3, n1]"),
        ("recover", ["n2"])]
