"""The design notes' failure cases and the Kafka bugs behind leader-epoch truncation, step by step.

Each scenario runs in both truncation modes ("hw" = pre-0.11, "leader-epoch" = KIP-101 + KIP-279);
the KIP-279 sequences also run "kip-101" (single-round exchange). "hw" must show the loss or
divergence; "leader-epoch" must show none, apart from losses that no truncation rule can prevent
(acks=1 or unclean elections or power loss on every replica), which each test names.
"""
import pytest

from broker.replication.config import ReplicationConfig
from broker.replication.epoch_cache import EpochEndOffset
from step_sim import Sim, SimError


def make(mode: str, nodes=("A", "B"), **kw) -> Sim:
    sim = Sim(list(nodes), ReplicationConfig(truncation=mode, **kw))
    sim.start(nodes[0])
    for n in nodes[1:]:
        sim.fetch_round(n)            # followers are fetching (empty) before the first produce
    return sim


def truncations(sim: Sim, node: str) -> list[tuple[int, int, str]]:
    return [(e.from_offset, e.to, e.why) for e in sim.events(node, "truncate")]


def seed_7_1_state(sim: Sim) -> None:
    """Seed 000 七.1: A wrote m1, m2; B has both; A's HW is 2 but B's answer to the third fetch was
    lost, so B's HW is 1."""
    sim.produce("A", "m1", acks=1)
    sim.fetch_round("B")
    sim.produce("A", "m2", acks=1)
    sim.fetch_round("B")
    sim.fetch_round("B", deliver=False)
    assert (sim.hw("A"), sim.leo("B"), sim.hw("B")) == (2, 2, 1)
    assert sim.acked == [("m1", 0), ("m2", 1)]


# --- KIP-101 scenario 1 / seed 000 七.1: acknowledged write lost --------------------------------

@pytest.mark.parametrize("mode", ["hw", "leader-epoch"])
def test_data_loss_after_restart_and_failover(mode):
    sim = make(mode, min_insync_replicas=1)
    seed_7_1_state(sim)

    # B crashes before learning HW=2 and restarts (its HW checkpoint says 1).
    sim.crash("B")
    sim.restart("B")
    if mode == "hw":
        # "重启后B会自动把LEO调整到之前的HW值1": truncate offset 1 away.
        assert truncations(sim, "B") == [(2, 1, "hw")]
        assert sim.values("B") == ["m1"]
    else:
        # B asks A where epoch 0 ends (seed 001: "获取Leader的LEO值"): at 2, so nothing to cut.
        r = sim.fetch_round("B")
        assert (r.kind, r.request.requested_epoch, r.response.end) == ("epoch", 0, EpochEndOffset(0, 2))
        assert truncations(sim, "B") == []
        assert sim.values("B") == ["m1", "m2"]

    # A crashes before B fetches again; B (in the ISR) becomes leader of epoch 1.
    sim.crash("A")
    sim.elect("B")
    assert (sim.leader, sim.epoch, sim.isr) == ("B", 1, {"B"})
    b_leo = sim.leo("B")
    assert sim.epochs("B") == [(0, 0), (1, b_leo)]          # KAFKA-7415: epoch 1 starts at B's LEO

    # A returns as a follower of B.
    sim.restart("A")
    if mode == "hw":
        # A's HW checkpoint is 2 = its LEO, so the HW rule cuts nothing; its fetch at offset 2 is
        # past B's LEO 1, and A cuts to the leader's end: "A重启回来后也会执行日志截断".
        r = sim.fetch_round("A")
        assert (r.request.fetch_offset, r.response.error, r.response.leader_leo) == (2, "OFFSET_OUT_OF_RANGE", 1)
        assert truncations(sim, "A") == [(2, 1, "offset-out-of-range")]
    else:
        r = sim.fetch_round("A")
        assert (r.kind, r.request.requested_epoch, r.response.end) == ("epoch", 0, EpochEndOffset(0, 2))
        assert truncations(sim, "A") == []
    sim.catch_up("A")

    if mode == "hw":
        assert sim.values("A") == sim.values("B") == ["m1"]
        assert sim.lost_acked() == ["m2"]                  # acknowledged, gone from both replicas
    else:
        assert sim.values("A") == sim.values("B") == ["m1", "m2"]
        assert sim.lost_acked() == []
    assert sim.divergence() == []
    assert sim.hw("A") == sim.hw("B") == sim.leo("B")


# --- KIP-101 scenario 2 / seed 000 七.2: replicas diverge after a double crash -------------------

@pytest.mark.parametrize("mode", ["hw", "leader-epoch"])
def test_divergence_after_double_crash_with_power_loss(mode):
    sim = make(mode, min_insync_replicas=1)
    sim.set_auto_flush("B", False)             # B's appends reach its disk only when flushed
    sim.produce("A", "m1", acks=1)
    sim.fetch_round("B")
    sim.flush("B")                             # m1 is on B's disk, m2 will not be
    sim.produce("A", "m2", acks=1)
    sim.fetch_round("B")
    sim.fetch_round("B", deliver=False)
    assert (sim.leo("A"), sim.hw("A"), sim.leo("B"), sim.hw("B")) == (2, 2, 2, 1)

    # Both lose power; B's unflushed m2 is gone. "A和B所在Broker同时宕机，B先重启回来".
    sim.crash("A", lose_unflushed=True)
    sim.crash("B", lose_unflushed=True)
    assert sim.values("A") == ["m1", "m2"] and sim.values("B") == ["m1"]
    sim.restart("B")
    sim.elect("B")                             # clean: B is in the ISR {A, B}
    assert (sim.epoch, sim.hw("B")) == (1, 1)
    out = sim.produce("B", "m3", acks=1)       # "第3条消息": lands at offset 1
    assert (out.status, out.base_offset, sim.hw("B")) == ("acked", 1, 2)
    assert sim.epochs("B") == [(0, 0), (1, 1)]

    sim.restart("A")                           # A's HW checkpoint is 2
    if mode == "hw":
        # "分区HW=2 而A之前的HW值也是2，故不做任何调整": nothing cut, nothing to fetch.
        sim.catch_up("A")
        assert truncations(sim, "A") == []
        assert sim.values("A") == ["m1", "m2"] and sim.values("B") == ["m1", "m3"]
        assert sim.divergence() == [(1, {"A": "m2", "B": "m3"})]
        assert sim.hw("A") == sim.hw("B") == 2    # both consider offset 1 committed, with different records
    else:
        r = sim.fetch_round("A")               # epoch 0 ends at 1 in B's log
        assert (r.kind, r.request.requested_epoch, r.response.end) == ("epoch", 0, EpochEndOffset(0, 1))
        assert truncations(sim, "A") == [(2, 1, "leader-epoch")]
        sim.catch_up("A")
        assert sim.values("A") == sim.values("B") == ["m1", "m3"]
        assert sim.divergence() == []
    # m2 was acknowledged but only A's disk and B's page cache held it when B was elected: the power
    # loss on both replicas loses it under any truncation rule (inherent, not a truncation bug).
    assert sim.lost_acked() == ["m2"]


# --- KIP-279: alternating leaders; KIP-101's single round still diverges -------------------------

@pytest.mark.parametrize("mode", ["hw", "kip-101", "leader-epoch"])
def test_kip279_fast_alternating_leaders(mode):
    sim = make(mode, min_insync_replicas=1)
    sim.produce("A", "m1", acks=1)
    sim.catch_up("B")
    sim.produce("A", "m2", acks=1)             # only A has m2
    sim.crash("A")
    sim.elect("B")                             # epoch 1, clean
    sim.produce("B", "m3", acks=1)             # offset 1 in epoch 1
    sim.crash("B")
    sim.restart("A")
    sim.elect("A", unclean=True)               # epoch 2: A was not in the ISR {B}
    assert sim.epochs("A") == [(0, 0), (2, 2)]
    sim.produce("A", "m4", acks=1)             # offset 2 in epoch 2
    sim.restart("B")                           # follows A; B's log: m1 (epoch 0), m3 (epoch 1)
    assert sim.epochs("B") == [(0, 0), (1, 1)]

    if mode == "hw":
        sim.catch_up("B")
        assert truncations(sim, "B") == []
    else:
        r = sim.fetch_round("B")
        # B asks about epoch 1; A never had it: largest epoch <= 1 is 0, which ends where epoch 2 starts.
        assert (r.request.requested_epoch, r.response.end) == (1, EpochEndOffset(0, 2))
        sim.catch_up("B")
    if mode == "leader-epoch":
        # KIP-279: B has epoch 0 and it ends at 1 in B's log: truncate to min(2, 1) = 1.
        assert truncations(sim, "B") == [(2, 1, "leader-epoch")]
        assert sim.values("A") == sim.values("B") == ["m1", "m2", "m4"]
        assert sim.divergence() == []
    else:
        # "hw": nothing cut. "kip-101": truncate to min(2, LEO 2) = 2, nothing cut. Offset 1 differs.
        assert truncations(sim, "B") == []
        assert sim.values("A") == ["m1", "m2", "m4"] and sim.values("B") == ["m1", "m3", "m4"]
        assert sim.divergence() == [(1, {"A": "m2", "B": "m3"})]
    # m3 was acknowledged by B in epoch 1 and A was then elected uncleanly without it: inherent.
    assert sim.lost_acked() == ["m3"]


@pytest.mark.parametrize("mode", ["hw", "kip-101", "leader-epoch"])
def test_kip279_follower_missing_the_leaders_epoch_asks_again(mode):
    """Three replicas and four epochs, so that the follower does not have the epoch the leader
    answers with and must cut to its own earlier epoch and ask a second time."""
    sim = make(mode, nodes=("A", "B", "C"), min_insync_replicas=1)
    sim.produce("A", "x0", acks=1)
    sim.sync_all()
    sim.produce("A", "a1", acks=1)             # epoch 0, offset 1: C gets it, B does not
    sim.fetch_round("C")
    assert (sim.values("C"), sim.hw("C")) == (["x0", "a1"], 1)
    sim.crash("A")
    sim.elect("B")                             # epoch 1 (clean, ISR {B, C}); C is cut off from B
    if mode == "hw":
        assert truncations(sim, "C") == [(2, 1, "hw")]   # the HW rule cuts a1 at once
    else:
        assert sim.replica("C").follower_phase == "truncating" and sim.values("C") == ["x0", "a1"]
    sim.produce("B", "b1", acks=1)             # epoch 1, offset 1
    sim.crash("B")
    sim.elect("C")                             # epoch 2 (clean: C is in the ISR {B, C})
    sim.produce("C", "c2", acks=1)             # epoch 2
    sim.crash("C")
    sim.restart("B")
    sim.elect("B", unclean=True)               # epoch 3
    sim.produce("B", "b3", acks=1)             # epoch 3, offset 2
    assert sim.epochs("B") == [(0, 0), (1, 1), (3, 2)]
    sim.restart("C")

    if mode == "hw":
        assert sim.epochs("C") == [(0, 0), (2, 1)] and sim.values("C") == ["x0", "c2"]
        sim.catch_up("C")                      # HW checkpoint 2 = LEO: nothing cut; fetches b3
        assert truncations(sim, "C") == [(2, 1, "hw")]
        assert sim.values("C") == ["x0", "c2", "b3"]
        assert sim.divergence(["B", "C"]) == [(1, {"B": "b1", "C": "c2"})]
    else:
        assert sim.epochs("C") == [(0, 0), (2, 2)] and sim.values("C") == ["x0", "a1", "c2"]
    if mode == "kip-101":
        r = sim.fetch_round("C")
        assert (r.request.requested_epoch, r.response.end) == (2, EpochEndOffset(1, 2))
        sim.catch_up("C")
        assert truncations(sim, "C") == [(3, 2, "leader-epoch")]
        assert sim.values("C") == ["x0", "a1", "b3"]
        assert sim.divergence(["B", "C"]) == [(1, {"B": "b1", "C": "a1"})]
    if mode == "leader-epoch":
        r1 = sim.fetch_round("C")              # C asks about 2; B answers epoch 1, which C lacks
        assert (r1.request.requested_epoch, r1.response.end) == (2, EpochEndOffset(1, 2))
        r2 = sim.fetch_round("C")              # so C cut its epoch 2 and asks about epoch 0
        assert (r2.kind, r2.request.requested_epoch, r2.response.end) == ("epoch", 0, EpochEndOffset(0, 1))
        sim.catch_up("C")
        assert truncations(sim, "C") == [(3, 2, "leader-epoch"), (2, 1, "leader-epoch")]
        assert sim.values("C") == sim.values("B") == ["x0", "b1", "b3"]
        assert sim.divergence(["B", "C"]) == []
        assert sim.epochs("C") == [(0, 0), (1, 1), (3, 2)]
    # a1 (acks=1, only on A and C when B was elected) and c2 (C's epoch, then B elected uncleanly)
    # were acknowledged and are not in the leader's log: acks=1 and unclean election allow that.
    assert sim.lost_acked() == ["a1", "c2"]


# --- KAFKA-7128: ISR expansion against a lagging HW --------------------------------------------

@pytest.mark.parametrize("mode", ["hw", "leader-epoch"])
@pytest.mark.parametrize("rule", [True, False], ids=["with-7128-rule", "without-7128-rule"])
def test_kafka_7128_isr_join_needs_epoch_start(mode, rule):
    sim = Sim(["A", "B", "C"], ReplicationConfig(truncation=mode, min_insync_replicas=2,
                                                 replica_lag_time_max_ms=2000,
                                                 isr_join_requires_epoch_start=rule))
    sim.start("A")
    sim.fetch_round("B")
    sim.fetch_round("C")
    first = sim.produce("A", [f"m{i}" for i in range(5)], acks=-1)
    sim.sync_all()
    assert first.status == "acked" and sim.hw("A") == 5

    # C stops fetching (partitioned). m5..m9 reach B only.
    second = sim.produce("A", [f"m{i}" for i in range(5, 10)], acks=-1)
    sim.fetch_round("B")                       # B gets m5..m9; HW stays 5 (C's remote LEO is 5)
    assert second.status == "pending" and (sim.hw("A"), sim.leo("B")) == (5, 10)
    sim.advance(3000)
    sim.fetch_round("B")                       # B asks for offset 10: caught up at t=3000
    assert sim.shrink_isr() is not None        # C last caught up at t=0: out
    assert sim.isr == {"A", "B"}
    # The HW moves to 10 and m5..m9 are acknowledged, but B's HW is still 5: it learns the new HW
    # only from its next fetch (the seeds' one-round lag).
    assert (sim.hw("A"), sim.hw("B"), second.status) == (10, 5, "acked")

    # Leadership moves to B with A still in the ISR (a preferred-leader election): B's HW stays 5
    # until A fetches in epoch 1, and B's epoch 1 starts at offset 10.
    sim.elect("B", isr={"A", "B"})
    assert (sim.hw("B"), sim.replica("B").epoch_start_offset) == (5, 10)
    # C comes back. Its fetch at offset 5 reaches B; the answer is lost.
    if mode == "leader-epoch":
        sim.fetch_round("C")                   # epoch 0 ends at 10 in B's log: C keeps its 5 records
    r = sim.fetch_round("C", deliver=False)
    assert r.request.fetch_offset == 5 and sim.leo("C") == 5
    if rule:
        assert sim.isr == {"A", "B"}           # LEO 5 >= HW 5 but < 10, the epoch's start: not in sync
    else:
        assert sim.isr == {"A", "B", "C"}      # the old rule: LEO >= HW is enough

    sim.crash("A")
    sim.crash("B")
    if rule:
        # No ISR member is alive: a clean election is impossible (unavailable, not lossy).
        assert sim.clean_leader_candidates() == []
        with pytest.raises(SimError):
            sim.elect("C")
        sim.restart("B")
        sim.elect("B")
        sim.catch_up("C")
        sim.catch_up("C")
        assert sim.isr == {"B", "C"}           # C joined once it reached offset 10
        assert sim.values("C") == sim.values("B") == [f"m{i}" for i in range(10)]
        assert sim.lost_acked() == []
    else:
        sim.elect("C")                         # clean by the ISR, yet C lacks m5..m9
        sim.restart("B")
        sim.catch_up("B")
        assert sim.values("B") == sim.values("C") == [f"m{i}" for i in range(5)]
        assert sim.lost_acked() == [f"m{i}" for i in range(5, 10)]
    assert sim.divergence(["B", "C"]) == []
