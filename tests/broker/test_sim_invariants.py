"""simulator/invariants.py: each invariant holds on a healthy state and fails, with an exact message, on a
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
from broker.rules import RULES
from simulator import invariants as inv
from simulator.observe import RuleObserver
from simulator.world import SimSettings


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
    observer: RuleObserver = field(default_factory=lambda: RuleObserver(SimSettings()))


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


def test_the_registry_names_the_state_invariants_and_the_protocol_rules():
    assert list(inv.INVARIANTS) == ["committed-prefix-agreement", "no-acked-loss"]
    assert inv.EVENT_INVARIANTS == RULES + ("committed-prefix-agreement",)


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
    assert inv.promises(s) == set(RULES) | {"committed-prefix-agreement"}
    # pre-0.11 truncation: every rule but truncate-below-hw, no agreement, no loss promise
    assert inv.promises(SimpleNamespace(**{**SAFE, "truncation": "hw"})) == set(RULES) - {"truncate-below-hw"}


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
