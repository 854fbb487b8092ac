"""The corrupt-* faults' minority rule (nemesis/driver.py `_minority`): a corrupted broker counts as damaged
after its restart until the controller reports it back in the ISR of every partition it replicates.
The admin client is a stand-in answering describe(); the broker-side ISR is tested with real brokers in
tests/broker."""
from __future__ import annotations

from types import SimpleNamespace

from clusters.base import ClusterSpec
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from clusters.storage_faults import StorageFault
from nemesis import Aim, FaultPlan, Nemesis
from nemesis.step import Step


class History:
    def __init__(self):
        self.ops, self.values = [], []

    def invoke(self, process, f, value):
        pass

    def complete(self, process, typ, f, value, error=None):
        self.ops.append((f, value["targets"], value.get("detail"), error))
        self.values.append(value)


class Admin:
    """describe(topic) answers the ISR it is given; counts the questions."""
    def __init__(self, isr):
        self.isr, self.asked = isr, 0

    def describe(self, topic):
        self.asked += 1
        return [SimpleNamespace(partition=p, leader=1, epoch=1, isr=list(isr), replicas=[1, 2, 3, 4, 5])
                for p, isr in enumerate(self.isr)]

    def close(self):
        pass


class Storage(LocalCluster):
    """A local cluster (not started) whose kill/corrupt/restart only say what they would do."""
    def kill(self, node):
        return f"kill {node}"

    def corrupt(self, node, how, *, partition=None, seed=0):
        return StorageFault(how, f"corrupt {node}", partition=0, offset=7)

    def restart(self, node):
        return f"restart {node}"


def _nemesis(tmp_path, admin):
    c = Storage(ClusterSpec("minority", tmp_path / "run", brokers=5), registry=Registry(tmp_path / "reg"))
    h = History()
    return Nemesis(c, h, FaultPlan(["corrupt-bitflip"]), aim=Aim(partitions=2), admin_factory=lambda: admin), h


def _corrupt(nem, node, at=0.0):
    nem._start_fault(Step.timed(at, "corrupt-bitflip", 1.0, targets=[node], seed=1), at)


def test_a_restarted_corrupted_broker_counts_until_it_is_back_in_every_isr(tmp_path):
    admin = Admin([[1, 3, 4, 5], [1, 3, 4, 5]])    # n2 restarted, not caught up anywhere
    nem, h = _nemesis(tmp_path, admin)
    _corrupt(nem, "n2")
    _corrupt(nem, "n3")                              # 5 brokers: two may be damaged at once
    assert [a.targets for a in nem.windows.active] == [["n2"], ["n3"]]
    # each start's completion says what the storage fault damaged (the rule damaged-record-kept reads it)
    assert [v["damage"] for v in h.values] == [[{"node": n, "how": "bitflip", "partition": 0, "offset": 7}]
                                               for n in ("n2", "n3")]
    for fault in list(nem.windows.active):                  # both restarted
        nem._stop_fault(fault)
    _corrupt(nem, "n4")        # n2 out of both ISRs, n3 in them: n3 has rejoined, n2 still damaged
    assert nem._damaged == {"n2", "n4"}
    assert [a.targets for a in nem.windows.active] == [["n4"]]
    _corrupt(nem, "n5")        # n2 (rejoining) + n4 (down): no room
    assert nem.stats.skipped == ["corrupt-bitflip at 0s: no eligible target (skipped n5 (a majority of brokers "
                                 "must stay up and intact; n2 corrupted, not yet back in the ISR))"]
    admin.isr = [[1, 2, 3, 5], [2, 3, 5]]            # n2 back in the ISR of both partitions
    _corrupt(nem, "n5")
    assert [a.targets for a in nem.windows.active] == [["n4"], ["n5"]] and nem._damaged == {"n4", "n5"}


def test_a_partly_rejoined_broker_or_an_unanswered_lookup_still_counts(tmp_path):
    admin = Admin([[1, 2], [1]])                     # n2 back in partition 0 only, n3 in neither
    nem, h = _nemesis(tmp_path, admin)
    nem._damaged = {"n2", "n3"}
    _corrupt(nem, "n4")
    assert nem.windows.active == [] and nem._damaged == {"n2", "n3"}
    admin.describe = lambda topic: (_ for _ in ()).throw(OSError("controller unreachable"))
    admin.isr = [[1, 2, 3, 4, 5]] * 2
    _corrupt(nem, "n4")
    assert nem.windows.active == [] and nem._damaged == {"n2", "n3"}


def test_a_majority_or_all_is_not_taken_down_while_a_corrupted_broker_has_not_rejoined(tmp_path):
    c = Storage(ClusterSpec("maj", tmp_path / "run", brokers=3), registry=Registry(tmp_path / "registry"))
    admin = Admin([[1, 3], [1, 3]])
    nem = Nemesis(c, History(), FaultPlan([]), aim=Aim(topic="hw", partitions=2), admin_factory=lambda: admin)
    nem._damaged = {"n2"}               # corrupted earlier, restarted, not yet back in the ISR
    for fault in ("kill-majority", "power-loss-all"):
        assert nem._resolve(Step.timed(0, fault, 1, seed=1)) == (
            [], {}, "n2 corrupted and not yet back in the ISR: no majority of brokers goes down")
    assert nem._resolve(Step.timed(0, "kill-minority", 1, seed=1))[0] in (["n1"], ["n2"], ["n3"])
    admin.isr = [[1, 2, 3], [1, 2, 3]]  # rejoined: a majority may go down again
    targets, _extra, _note = nem._resolve(Step.timed(0, "kill-majority", 1, seed=1))
    assert len(targets) == 2 and nem._damaged == set()


def test_a_random_corrupt_fault_spares_the_last_in_sync_copy(tmp_path):
    """n2 alone holds partition 1's in-sync copy: a corrupt fault whose random choice falls on it is
    skipped (and says why), one on another broker goes ahead; a schedule file's step that names n2
    stages it."""
    admin = Admin([[1, 2, 3, 4, 5], [2]])
    nem, h = _nemesis(tmp_path, admin)
    nem.controller_name, nem.broker_names = "c0", ["n1", "n2", "n3", "n4", "n5"]
    picks = {}
    for seed in range(40):
        step = Step.timed(0.0, "corrupt-bitflip", 1.0, targets=None, seed=seed)
        targets, _extra, note = nem._resolve(step)
        picks.setdefault(tuple(targets), note)
    assert () in picks and "skipped n2 (the only in-sync copy of hw/1: leader n1, epoch 1, ISR [n2])" in picks[()]
    assert {t for ts in picks for t in ts} == {"n1", "n3", "n4", "n5"}
    drawn = Step.timed(0.0, "corrupt-bitflip", 1.0, targets=["n2"], seed=1)   # as random_steps draws
    assert nem._resolve(drawn)[0] == []
    named = Step.timed(0.0, "corrupt-bitflip", 1.0, targets=["n2"], seed=1, number=3)
    assert nem._resolve(named)[0] == ["n2"]
