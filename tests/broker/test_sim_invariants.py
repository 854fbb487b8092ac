"""broker/sim/invariants.py: each invariant holds on a healthy state and fails, with an exact message, on a
hand-broken one.

The hand-made states are real PartitionReplica objects on MemoryLogs driven into shape with their own
methods (become_leader, produce, handle_fetch, on_fetch_response) and a real ControllerState, held in a
minimal stand-in with the attributes of World the invariants read (nodes, controller, acked); then one
thing is broken by hand. Tests on real Worlds are in test_sim_explore.py (the search finds violations
in unsafe settings and none in safe ones).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from broker.controller import messages as m
from broker.controller.state import ControllerState
from broker.records import MemoryLog, Record
from broker.replication.config import ReplicationConfig
from broker.replication.replica import PartitionReplica
from broker.sim import invariants as inv


@dataclass
class Node:
    replica: PartitionReplica | None
    log: MemoryLog
    up: bool = True


@dataclass
class FakeWorld:
    nodes: dict
    controller: ControllerState
    acked: list = field(default_factory=list)


def controller(n: int = 3) -> ControllerState:
    c = ControllerState(session_timeout_ms=3000)
    for b in range(1, n + 1):
        c.register_broker(b, "h", 9000 + b, 0)
    results, _ = c.create_topics([m.TopicSpec("t", 1, n)])
    assert results == [("t", m.NONE, "")]
    return c


def healthy(values=("a", "b", "c"), acks: int = 1) -> FakeWorld:
    """n1 leads epoch 0 with `values` fully replicated to n2 and n3 (every HW = LEO = len(values))."""
    cfg = ReplicationConfig(truncation="leader-epoch")
    nodes = {}
    for i in (1, 2, 3):
        log = MemoryLog()
        nodes[f"n{i}"] = Node(PartitionReplica("t", 0, i, log, cfg), log)
    lead = nodes["n1"].replica
    lead.become_leader(0, [1, 2, 3], [1, 2, 3], 0, now_ms=0)
    for i in (2, 3):
        nodes[f"n{i}"].replica.become_follower(0, 1, now_ms=0, isr=[1, 2, 3])
    acked = []
    for v in values:
        res = lead.produce([v.encode()], acks=1, now_ms=0)
        acked.append(SimpleNamespace(value=v, offset=res.base_offset, epoch=0, leader="n1"))
    for _ in range(2):                     # fetch rounds until everyone has everything and the HW
        for i in (2, 3):
            f = nodes[f"n{i}"].replica
            req = f.next_follower_request()
            f.on_fetch_response(req, lead.handle_fetch(req.replica_id, req.fetch_offset,
                                                       req.current_leader_epoch, now_ms=0))
    for i in (2, 3):
        f = nodes[f"n{i}"].replica
        req = f.next_follower_request()
        f.on_fetch_response(req, lead.handle_fetch(req.replica_id, req.fetch_offset, req.current_leader_epoch, 0))
    w = FakeWorld(nodes, controller(), acked)
    assert [(n.replica.role, n.replica.leo, n.replica.hw) for n in nodes.values()] == [
        ("leader", len(values), len(values)), ("follower", len(values), len(values)),
        ("follower", len(values), len(values))]
    return w


def test_a_healthy_state_passes_every_invariant():
    w = healthy()
    assert {name: check(w) for name, check in inv.INVARIANTS.items()} == dict.fromkeys(inv.INVARIANTS)
    assert inv.check_event(w) is None and inv.check_settled(w) is None


def test_the_registry_names_the_five_invariants():
    assert list(inv.INVARIANTS) == ["one-leader-per-epoch", "hw-within-leo", "leader-hw-monotonic",
                                    "committed-prefix-agreement", "no-acked-loss"]


def test_one_leader_per_epoch_fails_with_two_leaders_of_one_epoch():
    w = healthy()
    n2 = w.nodes["n2"].replica
    n2.become_leader(0, [2], [1, 2, 3], 1, now_ms=0)     # stale follower of epoch 0 told it leads epoch 0
    assert inv.one_leader_per_epoch(w) == "n1 and n2 both lead epoch 0"


def test_one_leader_per_epoch_remembers_an_epoch_led_by_a_node_now_down():
    w = healthy()
    assert inv.one_leader_per_epoch(w) is None           # sees n1 lead epoch 0
    w.nodes["n1"].up, w.nodes["n1"].replica = False, None
    assert inv.one_leader_per_epoch(w) is None           # no leader at all: fine
    w.nodes["n3"].replica.become_leader(0, [3], [1, 2, 3], 1, now_ms=0)
    assert inv.one_leader_per_epoch(w) == "n3 leads epoch 0, which n1 led before"
    fresh = healthy()
    fresh.nodes["n1"].up, fresh.nodes["n1"].replica = False, None
    fresh.nodes["n3"].replica.become_leader(1, [3], [1, 2, 3], 1, now_ms=0)
    assert inv.one_leader_per_epoch(fresh) is None       # a new epoch: fine


def test_hw_within_leo_fails_when_a_hw_passes_the_log_end():
    w = healthy()
    w.nodes["n3"].log.truncate_to(1)                      # the log lost its tail behind the replica's back
    assert inv.hw_within_leo(w) == "n3: HW 3 is past its LEO 1"
    w2 = healthy()
    w2.nodes["n2"].replica._hw = -1
    assert inv.hw_within_leo(w2) == "n2: HW -1 is below its log start 0"


def test_hw_within_leo_ignores_a_down_node():
    w = healthy()
    w.nodes["n3"].log.truncate_to(1)
    w.nodes["n3"].up = False
    assert inv.hw_within_leo(w) is None


def test_leader_hw_monotonic_fails_when_the_leader_hw_goes_back_within_its_epoch():
    w = healthy()
    assert inv.leader_hw_monotonic(w) is None            # sees HW 3 for (n1, epoch 0)
    w.nodes["n1"].replica._hw = 1
    assert inv.leader_hw_monotonic(w) == "n1: leader HW went back from 3 to 1 in epoch 0"


def test_leader_hw_monotonic_allows_a_lower_hw_in_a_new_epoch():
    w = healthy()
    assert inv.leader_hw_monotonic(w) is None
    n1 = w.nodes["n1"].replica
    n1.become_leader(1, [1], [1, 2, 3], 1, now_ms=0)
    n1._hw = 1                                            # a new epoch starts its own history
    assert inv.leader_hw_monotonic(w) is None


def test_committed_prefix_agreement_fails_on_a_divergent_record_below_both_hws():
    w = healthy()
    log = w.nodes["n3"].log
    log.truncate_to(1)
    log.append([Record(1, 0, b"X"), Record(2, 0, b"c")])
    assert inv.committed_prefix_agreement(w) == (
        "n1 and n3 differ at offset 1 below both HWs (3, 3): b@epoch 0 vs X@epoch 0")


def test_committed_prefix_agreement_ignores_differences_above_a_hw():
    w = healthy()
    n3 = w.nodes["n3"]
    n3.replica._hw = 1
    n3.log.truncate_to(1)
    n3.log.append([Record(1, 5, b"X")])                   # different, but above n3's HW: not committed there
    assert inv.committed_prefix_agreement(w) is None
    n3.replica._hw = 2
    assert inv.committed_prefix_agreement(w) == (
        "n1 and n3 differ at offset 1 below both HWs (3, 2): b@epoch 0 vs X@epoch 5")


def test_no_acked_loss_fails_when_an_acknowledged_write_is_not_committed():
    w = healthy()
    w.acked.append(SimpleNamespace(value="d", offset=3, epoch=0, leader="n1"))   # acked, never written
    assert inv.no_acked_loss(w) == "1 of 4 acknowledged writes missing from the committed log of n1 (HW 3): d@3"


def test_no_acked_loss_fails_when_the_leader_log_holds_another_value_there():
    w = healthy()
    log = w.nodes["n1"].log
    log.truncate_to(2)
    log.append([Record(2, 0, b"z")])
    assert inv.no_acked_loss(w) == "1 of 3 acknowledged writes missing from the committed log of n1 (HW 3): c@2"


def test_no_acked_loss_counts_a_write_above_the_hw_as_lost():
    w = healthy()
    w.nodes["n1"].replica._hw = 1
    assert inv.no_acked_loss(w) == (
        "2 of 3 acknowledged writes missing from the committed log of n1 (HW 1): b@1, c@2")


def test_no_acked_loss_without_a_leader_looks_at_every_disk():
    w = healthy()
    p = w.controller.partition("t", 0)
    p.leader = None
    assert inv.no_acked_loss(w) is None
    for name in ("n1", "n2", "n3"):
        w.nodes[name].log.truncate_to(2)
    assert inv.no_acked_loss(w) == "1 of 3 acknowledged writes missing from any node (no leader): c@2"


def test_no_acked_loss_accepts_tuples_and_bytes():
    w = healthy()
    w.acked = [(b"a", 0), ("b", 1), (b"q", 2)]
    assert inv.no_acked_loss(w) == "1 of 3 acknowledged writes missing from the committed log of n1 (HW 3): q@2"


SAFE = dict(replicas=3, truncation="leader-epoch", acks=-1, min_insync_replicas=2, unclean_leader_election=False,
            fetch_fencing=True, eligible_leader_replicas=False, flush="always", isr_join_requires_epoch_start=True)


@pytest.mark.parametrize("change, promised", [
    ({}, True),
    ({"truncation": "hw"}, False),
    ({"truncation": "kip-101"}, False),
    ({"acks": 1}, False),
    ({"min_insync_replicas": 1}, False),
    ({"unclean_leader_election": True}, False),
    ({"fetch_fencing": False}, False),
    ({"isr_join_requires_epoch_start": False}, False),
    ({"flush": "never"}, False),
    ({"flush": "never", "eligible_leader_replicas": True}, True),
])
def test_promises_no_loss(change, promised):
    settings = SimpleNamespace(**{**SAFE, **change})
    assert inv.promises_no_loss(settings) is promised
    assert ("no-acked-loss" in inv.promises(settings)) is promised


def test_promises_agreement_does_not_depend_on_acks_or_min_isr():
    s = SimpleNamespace(**{**SAFE, "acks": 1, "min_insync_replicas": 1})
    assert inv.promises(s) == {"one-leader-per-epoch", "hw-within-leo", "leader-hw-monotonic",
                               "committed-prefix-agreement"}
    assert inv.promises(SimpleNamespace(**{**SAFE, "truncation": "hw"})) == {
        "one-leader-per-epoch", "hw-within-leo", "leader-hw-monotonic"}


def test_eligible_leader_replicas_promise_covers_fewer_power_losses_than_min_isr():
    elr = SimpleNamespace(**{**SAFE, "flush": "never", "eligible_leader_replicas": True})
    one = [SimpleNamespace(kind="power-loss"), SimpleNamespace(kind="produce")]
    two = one + [SimpleNamespace(kind="power-loss")]
    assert "no-acked-loss" in inv.promises(elr) and "no-acked-loss" in inv.promises(elr, one)
    assert "no-acked-loss" not in inv.promises(elr, two)
    assert "committed-prefix-agreement" not in inv.promises(elr, two)
    always = SimpleNamespace(**SAFE)
    assert "no-acked-loss" in inv.promises(always, two + two)          # flush always: nothing to lose


def test_flush_never_without_elr_promises_what_always_does_for_a_schedule_without_power_loss():
    never = SimpleNamespace(**{**SAFE, "flush": "never"})
    crash_only = [SimpleNamespace(kind="crash"), SimpleNamespace(kind="produce")]
    with_power_loss = crash_only + [SimpleNamespace(kind="power-loss")]
    assert "no-acked-loss" not in inv.promises(never)                        # in general: no promise
    assert {"no-acked-loss", "committed-prefix-agreement"} <= inv.promises(never, crash_only)
    assert not {"no-acked-loss", "committed-prefix-agreement"} & inv.promises(never, with_power_loss)
