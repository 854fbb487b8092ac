"""KIP-320 fencing of follower requests (on and off), its events, KIP-966's strict HW rule, and
KAFKA-6880 (the zombie fetcher) in the simulator, in both truncation modes."""
import pytest

from broker.records import MemoryLog, Record
from broker.replication import Checkpoints, ErrorCode, PartitionReplica, ReplicationConfig
from broker.replication.epoch_cache import EpochEndOffset
from broker.replication.events import (EpochAnswer, EpochQuery, FetchFenced, FollowerServed, HwChange,
                                       StaleFetchServed, Truncate)
from broker.replication.messages import EpochRequest, EpochResponse
from step_sim import Sim

FENCED, UNKNOWN = ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH


def leader(epoch=3, isr=(1, 2, 3), min_isr=1, **kw) -> PartitionReplica:
    """Broker 1 leads `epoch` with two records of epoch 0 and one of `epoch`; events drained."""
    cfg = ReplicationConfig(min_insync_replicas=min_isr, **kw)
    r = PartitionReplica("t", 0, 1, MemoryLog([Record(0, 0, b"a"), Record(1, 0, b"b")]), cfg,
                         checkpoints=Checkpoints(epoch_entries=[(0, 0)]))
    assert r.become_leader(epoch, isr, (1, 2, 3), isr_version=1, now_ms=0) is None
    r.produce([b"c"], acks=1, now_ms=0)
    r.drain_events()
    return r


def only(events, cls):
    return [e for e in events if isinstance(e, cls)]


def test_fencing_on_refuses_other_epochs_and_logs_each_request_once():
    r = leader()
    for _ in range(3):                                          # a zombie retrying: one event
        resp = r.handle_fetch(2, 1, 2, now_ms=10)
        assert (resp.error, resp.records, resp.leader_epoch) == (FENCED, (), 3)
    assert r.handle_fetch(3, 1, 4, now_ms=10).error == UNKNOWN
    assert r.handle_fetch(3, 1, 4, now_ms=20).error == UNKNOWN
    er = r.handle_offsets_for_leader_epoch(0, 2, replica_id=2)
    assert (er.error, er.end) == (FENCED, None)
    assert r.drain_events() == [
        FetchFenced(0, 2, "fetch", 2, 3, "FENCED_LEADER_EPOCH"),
        FetchFenced(0, 3, "fetch", 4, 3, "UNKNOWN_LEADER_EPOCH"),
        FetchFenced(0, 2, "epoch", 2, 3, "FENCED_LEADER_EPOCH"),
    ]
    assert r.remote_leo(2) is None and r.remote_leo(3) is None  # nothing was served
    # the fenced request's fields on the log line
    assert FetchFenced(0, 2, "fetch", 2, 3, "FENCED_LEADER_EPOCH").fields() == {
        "partition": 0, "replica": 2, "request": "fetch", "request_epoch": 2, "leader_epoch": 3,
        "error": "FENCED_LEADER_EPOCH"}
    # a new leadership logs again
    r.become_leader(5, (1, 2, 3), (1, 2, 3), isr_version=2, now_ms=30)
    r.drain_events()
    r.handle_fetch(2, 1, 2, now_ms=40)
    assert r.drain_events() == [FetchFenced(0, 2, "fetch", 2, 5, "FENCED_LEADER_EPOCH")]


def test_fencing_off_serves_a_stale_fetch_and_logs_it_once():
    r = leader(fetch_fencing=False)
    resp = r.handle_fetch(2, 1, 2, now_ms=10)
    assert resp.error is None
    assert [(x.offset, x.epoch, x.value) for x in resp.records] == [(1, 0, b"b"), (2, 3, b"c")]
    assert r.remote_leo(2) == 1                                 # the zombie's fetch counts as its LEO
    assert r.handle_fetch(2, 3, 2, now_ms=20).error is None
    assert r.handle_fetch(3, 3, 9, now_ms=20).error is None     # newer epoch: served too (pre-2.1 sent none)
    assert r.handle_fetch(3, 3, 3, now_ms=20).error is None     # the right epoch: no event
    events = r.drain_events()
    assert only(events, StaleFetchServed) == [StaleFetchServed(0, 2, "fetch", 2, 3), StaleFetchServed(0, 3, "fetch", 9, 3)]
    assert only(events, FetchFenced) == []
    assert StaleFetchServed(0, 2, "fetch", 2, 3).fields() == {
        "partition": 0, "replica": 2, "request": "fetch", "request_epoch": 2, "leader_epoch": 3}


def test_fencing_off_answers_a_stale_offsets_for_leader_epoch():
    r = leader(fetch_fencing=False)
    er = r.handle_offsets_for_leader_epoch(0, 1, replica_id=2)
    assert (er.error, er.end) == (None, EpochEndOffset(0, 2))
    assert r.drain_events() == [StaleFetchServed(0, 2, "epoch", 1, 3), FollowerServed(0, 2, "epoch", 1),
                                EpochAnswer(0, 2, 0, 0, 2)]


def test_consumer_reads_stay_fenced_without_fetch_fencing():
    r = leader(fetch_fencing=False)
    assert r.read_for_consumer(0, 10, current_leader_epoch=2).error == FENCED
    assert r.read_for_consumer(0, 10, current_leader_epoch=None).error is None
    assert r.drain_events() == []


def test_not_leader_is_not_a_fencing_event():
    r = PartitionReplica("t", 0, 1, MemoryLog(), ReplicationConfig(fetch_fencing=False))
    assert r.handle_fetch(2, 0, 0, now_ms=0).error == ErrorCode.NOT_LEADER
    assert r.handle_offsets_for_leader_epoch(0, 0, replica_id=2).error == ErrorCode.NOT_LEADER
    assert r.drain_events() == []


def test_epoch_answer_event_on_the_leader():
    r = leader()
    assert r.handle_offsets_for_leader_epoch(0, 3, replica_id=2).end == EpochEndOffset(0, 2)
    assert r.handle_offsets_for_leader_epoch(3, 3, replica_id=3).end == EpochEndOffset(3, 3)
    assert r.handle_offsets_for_leader_epoch(0, None).end == EpochEndOffset(0, 2)
    assert r.drain_events() == [FollowerServed(0, 2, "epoch", 3), EpochAnswer(0, 2, 0, 0, 2),
                                FollowerServed(0, 3, "epoch", 3), EpochAnswer(0, 3, 3, 3, 3),
                                FollowerServed(0, None, "epoch", None), EpochAnswer(0, None, 0, 0, 2)]
    assert EpochAnswer(0, 2, 0, 0, 2).fields() == {"partition": 0, "replica": 2, "epoch": 0, "answer_epoch": 0,
                                                   "answer_end": 2}
    assert FollowerServed(0, 2, "fetch", 3).fields() == {"partition": 0, "replica": 2, "request": "fetch",
                                                         "request_epoch": 3}


def follower() -> PartitionReplica:
    """Broker 2 with epochs 0 (offsets 0-1) and 2 (offsets 2-3), told to follow broker 1 in epoch 4."""
    log = MemoryLog([Record(0, 0, b"a"), Record(1, 0, b"b"), Record(2, 2, b"x"), Record(3, 2, b"y")])
    r = PartitionReplica("t", 0, 2, log, ReplicationConfig(),
                         checkpoints=Checkpoints(hw=1, epoch_entries=[(0, 0), (2, 2)]))
    r.become_follower(4, 1, now_ms=0)
    r.drain_events()
    return r


def test_epoch_query_events_with_truncation_and_ask_again():
    r = follower()
    req = r.next_follower_request()
    assert isinstance(req, EpochRequest) and req.requested_epoch == 2
    # the leader never had epoch 2: its largest epoch <= 2 is 1, ending at 3; we lack 1 -> cut to 2, ask about 0
    assert r.on_epoch_response(req, EpochResponse(None, EpochEndOffset(1, 3), 4))
    req2 = r.next_follower_request()
    assert req2.requested_epoch == 0
    assert r.on_epoch_response(req2, EpochResponse(None, EpochEndOffset(0, 2), 4))
    assert r.drain_events() == [
        Truncate(0, 4, 2, "leader-epoch"),
        EpochQuery(0, 1, 2, 4, None, 1, 3, 2),
        EpochQuery(0, 1, 0, 4, None, 0, 2, None),               # nothing more to cut
    ]
    assert r.follower_phase == "fetching"
    assert EpochQuery(0, 1, 2, 4, None, 1, 3, 2).fields() == {
        "partition": 0, "leader": 1, "epoch": 2, "current_epoch": 4, "error": None, "answer_epoch": 1,
        "answer_end": 3, "truncate_to": 2}


def test_epoch_query_refusals_are_logged_once_until_something_changes():
    r = follower()
    req = r.next_follower_request()
    for _ in range(3):                                          # the leader does not know epoch 4 yet
        assert r.on_epoch_response(req, EpochResponse(UNKNOWN, None, 3))
    assert r.on_epoch_response(req, EpochResponse(FENCED, None, 5))
    assert r.follower_phase == "fenced"
    assert r.drain_events() == [EpochQuery(0, 1, 2, 4, "UNKNOWN_LEADER_EPOCH", None, None, None),
                                EpochQuery(0, 1, 2, 4, "FENCED_LEADER_EPOCH", None, None, None)]


# --- KIP-966: the HW does not advance while the committed ISR is below min.insync.replicas ---------------

@pytest.mark.parametrize("strict, hw_after", [(True, 3), (False, 5)])
def test_strict_min_isr_hw(strict, hw_after):
    r = leader(epoch=1, isr=(1, 2), min_isr=2, strict_min_isr_hw=strict)
    r.handle_fetch(2, 3, 1, now_ms=10)                          # follower 2 has everything: HW 3
    assert r.hw == 3
    r.on_isr_changed((1,), version=2, now_ms=20)                # 2 leaves the ISR: |ISR| 1 < 2
    r.produce([b"d", b"e"], acks=1, now_ms=5000)                # 2 no longer caught up: only 1 counts
    assert (r.leo, r.hw) == (5, hw_after)
    r.drain_events()
    # back to two members: the HW may move again (strict: once the follower has fetched the records)
    r.handle_fetch(2, 5, 1, now_ms=5010)
    r.on_isr_changed((1, 2), version=3, now_ms=5020)
    assert r.hw == 5
    assert only(r.drain_events(), HwChange) == ([HwChange(0, 3, 5, 5)] if strict else [])


def test_strict_min_isr_hw_counts_the_committed_isr_not_a_pending_expansion():
    r = leader(epoch=1, isr=(1,), min_isr=2, strict_min_isr_hw=True)
    r.handle_fetch(2, 3, 1, now_ms=10)          # 2 caught up: an expansion is proposed, not yet committed
    assert r.take_isr_proposal().isr == (1, 2)
    assert r.hw == 0
    r.on_isr_changed((1, 2), version=2, now_ms=20)
    assert r.hw == 3


# --- KAFKA-6880 in the simulator -----------------------------------------------------------------------

def kafka_6880(mode: str, fencing: bool) -> Sim:
    """A, B, C; A leads epoch 0. B has a1, a2 (acks=1) that C lacks, then loses the controller: it never
    hears of epoch 1 (C leads, writes c1 c2 where a1 a2 were; A truncates and copies them) nor epoch 2 (A
    leads again and writes a3). B, still following A in epoch 0, fetches from A at its LEO 3."""
    sim = Sim(("A", "B", "C"), ReplicationConfig(truncation=mode, fetch_fencing=fencing))
    sim.start("A")
    sim.produce("A", "x0")
    sim.sync_all()
    sim.produce("A", ["a1", "a2"])
    sim.fetch_round("B")
    assert (sim.values("B"), sim.hw("B")) == (["x0", "a1", "a2"], 1)
    sim.cut_from_controller("B")
    sim.elect("C")
    sim.produce("C", ["c1", "c2"])
    sim.catch_up("A")
    assert sim.values("A") == ["x0", "c1", "c2"]
    sim.elect("A")
    sim.produce("A", "a3")
    sim.fetch_round("B")                      # the zombie's fetch: offset 3, current leader epoch 0
    sim.catch_up("C")
    assert sim.replica("B").follower_phase == ("fenced" if fencing else "fetching")
    if not fencing:
        sim.fetch_round("B")                  # served again: B learns the HW past its divergent records
    sim.reconnect_to_controller("B")
    sim.sync_all()
    return sim


@pytest.mark.parametrize("mode", ["hw", "leader-epoch"])
def test_kafka_6880_zombie_fetcher_diverges_without_fencing(mode):
    sim = kafka_6880(mode, fencing=False)
    assert sim.values("A") == sim.values("C") == ["x0", "c1", "c2", "a3"]
    assert sim.values("B") == ["x0", "a1", "a2", "a3"]
    assert sim.divergence() == [(1, {"A": "c1", "B": "a1", "C": "c1"}), (2, {"A": "c2", "B": "a2", "C": "c2"})]
    assert [e.fields() for e in sim.events("A", "stale-fetch-served")] == [
        {"partition": 0, "replica": 2, "request": "fetch", "request_epoch": 0, "leader_epoch": 2}]
    assert sim.events("A", "fetch-fenced") == []
    assert [e for e in sim.events("B", "truncate")] == []     # B never cut its a1, a2


@pytest.mark.parametrize("mode", ["hw", "leader-epoch"])
def test_kafka_6880_zombie_fetcher_is_fenced(mode):
    sim = kafka_6880(mode, fencing=True)
    assert sim.values("A") == sim.values("B") == sim.values("C") == ["x0", "c1", "c2", "a3"]
    assert sim.divergence() == []
    assert [e.fields() for e in sim.events("A", "fetch-fenced")] == [
        {"partition": 0, "replica": 2, "request": "fetch", "request_epoch": 0, "leader_epoch": 2,
         "error": "FENCED_LEADER_EPOCH"}]
    assert sim.events("A", "stale-fetch-served") == []
    assert [(e.from_offset, e.to, e.why) for e in sim.events("B", "truncate")] == [
        (3, 1, "hw" if mode == "hw" else "leader-epoch")]
    if mode == "leader-epoch":
        assert [e.fields() for e in sim.events("B", "epoch-query")] == [
            {"partition": 0, "leader": 1, "epoch": 0, "current_epoch": 2, "error": None, "answer_epoch": 0,
             "answer_end": 1, "truncate_to": 1}]
        assert [e.fields() for e in sim.events("A", "epoch-answer")][-1] == {
            "partition": 0, "replica": 2, "epoch": 0, "answer_epoch": 0, "answer_end": 1}
