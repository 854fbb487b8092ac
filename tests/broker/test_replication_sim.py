"""The simulator's own mechanics: disks and power loss, controller decisions, outcome bookkeeping."""
import pytest

from broker.replication.config import ReplicationConfig
from step_sim import Sim, SimError


def test_power_loss_keeps_the_flushed_prefix_and_recovery_trims_epochs():
    sim = Sim(["A", "B"], ReplicationConfig(min_insync_replicas=1))
    sim.start("A")
    sim.set_auto_flush("A", False)
    sim.produce("A", ["a", "b"])
    sim.flush("A")
    sim.crash("B")
    sim.elect("A", isr={"A"})                  # epoch 1 starts at offset 2 (checkpointed at once)
    sim.produce("A", ["c", "d"])               # never flushed
    assert sim.nodes["A"].epoch_checkpoint == [(0, 0), (1, 2)]
    sim.crash("A", lose_unflushed=True)
    assert sim.values("A") == ["a", "b"]
    sim.restart("A")
    r = sim.replica("A")
    assert (r.leo, r.hw, r.epoch_cache.entries()) == (2, 2, [(0, 0)])   # HW 4 clamped, (1, 2) dropped
    assert sim.nodes["A"].epoch_checkpoint == [(0, 0)]                   # and the checkpoint rewritten
    assert sim.lost_acked("A") == ["c", "d"]


def test_process_crash_keeps_unflushed_records():
    sim = Sim(["A", "B"])
    sim.start("A")
    sim.set_auto_flush("A", False)
    sim.produce("A", "a")
    sim.crash("A")
    assert sim.values("A") == ["a"]


def test_acks_all_outcomes_follow_the_leader():
    sim = Sim(["A", "B"], ReplicationConfig(min_insync_replicas=2))
    sim.start("A")
    sim.fetch_round("B")
    first = sim.produce("A", "a", acks=-1)
    assert first.status == "pending"
    sim.catch_up("B")
    assert (first.status, sim.acked) == ("acked", [("a", 0)])
    second = sim.produce("A", "b", acks=-1)
    sim.crash("A")
    assert (second.status, second.error) == ("unknown", "leader crashed")
    sim.elect("B")
    refused = sim.produce("B", "c", acks=-1)   # ISR {B} < 2
    assert (refused.status, refused.error) == ("failed", "NOT_ENOUGH_REPLICAS")
    assert sim.leo("B") == 1


def test_queued_isr_proposal_is_rejected_after_an_election():
    sim = Sim(["A", "B", "C"], ReplicationConfig(replica_lag_time_max_ms=1000), isr_decisions="queued")
    sim.start("A")
    sim.produce("A", "a")
    sim.fetch_round("B")
    sim.advance(1500)
    sim.fetch_round("B")
    proposal = sim.shrink_isr()
    assert proposal.isr == (1, 2) and sim.queued_proposals == [proposal]
    assert sim.replica("A").pending_isr_proposal == proposal
    sim.elect("B")                             # controller moves on: ISR version changes
    assert sim.decide_isr() == proposal
    assert sim.isr == {"A", "B", "C"}          # rejected: based on an old version
    assert sim.decide_isr() is None


def test_impossible_steps_raise():
    sim = Sim(["A", "B", "C"])
    with pytest.raises(SimError):
        Sim(["A", "A"])
    sim.start("A", isr={"A", "B"})
    with pytest.raises(SimError):
        sim.start("B")
    with pytest.raises(SimError):
        sim.elect("C")                         # not in the ISR: only unclean
    sim.crash("A")
    with pytest.raises(SimError):
        sim.fetch_round("B")                   # its leader is down
    with pytest.raises(SimError):
        sim.produce("A", "x")
    sim.elect("C", unclean=True)
    assert (sim.leader, sim.epoch, sim.isr) == ("C", 1, {"C"})


def test_divergence_and_loss_helpers():
    sim = Sim(["A", "B"], ReplicationConfig(truncation="hw"))
    sim.start("A")
    sim.produce("A", "a")
    sim.crash("A")
    sim.elect("B")
    sim.produce("B", "b")
    assert sim.divergence() == [(0, {"A": "a", "B": "b"})]
    assert sim.lost_acked() == ["a"] and sim.lost_acked("A") == ["b"]
