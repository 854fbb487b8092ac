"""The leader side of PartitionReplica: fencing, produce and acks, HW, ISR shrink/expand, reads."""
import pytest

from broker.records import MemoryLog, Record
from broker.replication import Checkpoints, ErrorCode, PartitionReplica, ReplicationConfig
from broker.replication.epoch_cache import EpochEndOffset
from broker.replication.events import HwChange, IsrChange, LeaderChange, RoleChange

LAG = 2000


def leader(isr=(1, 2, 3), replicas=(1, 2, 3), epoch=0, min_isr=1, log=None, **kw) -> PartitionReplica:
    cfg = ReplicationConfig(min_insync_replicas=min_isr, replica_lag_time_max_ms=LAG, **kw)
    r = PartitionReplica("t", 0, 1, log or MemoryLog(), cfg)
    assert r.become_leader(epoch, isr, replicas, isr_version=1, now_ms=0) is None
    return r


def test_become_leader_records_epoch_start_and_events():
    log = MemoryLog([Record(0, 0, b"a"), Record(1, 0, b"b")])
    r = PartitionReplica("t", 0, 1, log, ReplicationConfig(), checkpoints=Checkpoints(epoch_entries=[(0, 0)]))
    r.become_leader(3, [1, 2], [1, 2], 7, now_ms=0)
    assert r.epoch_cache.entries() == [(0, 0), (3, 2)]               # KAFKA-7415
    assert (r.role, r.leader_epoch, r.leader_id, r.epoch_start_offset, r.isr_version) == ("leader", 3, 1, 2, 7)
    assert r.drain_events() == [RoleChange(0, "leader", 3), LeaderChange(0, 1, 3, (1, 2))]
    assert r.drain_events() == []
    assert r.become_leader(2, [1], [1, 2], 8, now_ms=0) == ErrorCode.FENCED_LEADER_EPOCH
    assert (r.leader_epoch, r.isr) == (3, {1, 2})
    with pytest.raises(ValueError):
        PartitionReplica("t", 0, 1, MemoryLog(), ReplicationConfig()).become_leader(0, [2], [1, 2], 1, 0)


def test_rf1_hw_advances_on_append():
    r = leader(isr=(1,), replicas=(1,))
    res = r.produce([b"a", b"b"], acks=1, now_ms=5, timestamp_ms=99)
    assert (res.error, res.base_offset, res.last_offset, res.epoch, res.complete) == (None, 0, 1, 0, True)
    assert (r.leo, r.hw) == (2, 2)
    assert [(x.offset, x.epoch, x.value, x.timestamp) for x in r.log.read(0, 10)] == [(0, 0, b"a", 99), (1, 0, b"b", 99)]
    assert r.drain_events()[-1] == HwChange(0, 0, 2, 2)


def test_fetch_fencing_kip320_and_errors():
    r = leader(epoch=5)
    r.produce([b"a"], acks=1, now_ms=0)
    assert r.handle_fetch(2, 0, 4, now_ms=1).error == ErrorCode.FENCED_LEADER_EPOCH
    assert r.handle_fetch(2, 0, 6, now_ms=1).error == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert r.remote_leo(2) is None                                   # a rejected fetch teaches nothing
    oor = r.handle_fetch(2, 2, 5, now_ms=1)
    assert (oor.error, oor.leader_leo) == (ErrorCode.OFFSET_OUT_OF_RANGE, 1) and r.remote_leo(2) is None
    assert r.handle_fetch(9, 0, 5, now_ms=1).error == ErrorCode.NOT_ASSIGNED_REPLICA
    ok = r.handle_fetch(2, 0, 5, now_ms=1)
    assert (ok.error, [x.value for x in ok.records], ok.leader_epoch) == (None, [b"a"], 5)
    assert r.handle_offsets_for_leader_epoch(0, 4).error == ErrorCode.FENCED_LEADER_EPOCH
    assert r.handle_offsets_for_leader_epoch(0, 6).error == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert r.handle_offsets_for_leader_epoch(5, 5).end == EpochEndOffset(5, 1)
    f = PartitionReplica("t", 0, 2, MemoryLog(), ReplicationConfig())
    f.become_follower(5, 1, now_ms=0)
    assert f.handle_fetch(3, 0, 5, now_ms=0).error == ErrorCode.NOT_LEADER
    assert f.handle_offsets_for_leader_epoch(5, 5).error == ErrorCode.NOT_LEADER
    assert f.produce([b"x"], acks=1, now_ms=0).error == ErrorCode.NOT_LEADER


def test_remote_leo_is_the_fetch_offset_and_hw_is_min_over_isr():
    r = leader(isr=(1, 2, 3))
    r.produce([b"a", b"b", b"c"], acks=1, now_ms=0)
    assert r.hw == 0
    resp = r.handle_fetch(2, 3, 0, now_ms=1)                         # 2 has everything
    assert (r.remote_leo(2), resp.high_watermark) == (3, 0)          # 3 is still unknown
    resp = r.handle_fetch(3, 1, 0, now_ms=1)
    assert (r.remote_leo(3), resp.high_watermark, r.hw) == (1, 1, 1)
    r.handle_fetch(3, 0, 0, now_ms=2)                                # 3 went back (it truncated)
    assert (r.remote_leo(3), r.hw) == (0, 1)                         # the leader's HW never decreases


def test_acks_all_not_enough_replicas_appends_nothing():
    r = leader(isr=(1,), replicas=(1, 2), min_isr=2)
    res = r.produce([b"a"], acks=-1, now_ms=0)
    assert (res.error, r.leo) == (ErrorCode.NOT_ENOUGH_REPLICAS, 0)
    assert r.produce([b"a"], acks=1, now_ms=0).error is None          # acks=1 ignores min.insync
    with pytest.raises(ValueError):
        r.produce([b"a"], acks=2, now_ms=0)


def test_acks_all_completes_when_hw_passes_last_offset():
    r = leader(isr=(1, 2), replicas=(1, 2), min_isr=2)
    res = r.produce([b"a", b"b"], acks=-1, now_ms=0)
    assert (res.error, res.complete, res.last_offset) == (None, False, 1)
    assert r.produce_status(1, 0).state == "waiting"
    r.handle_fetch(2, 0, 0, now_ms=1)
    assert r.produce_status(1, 0).state == "waiting"
    r.handle_fetch(2, 1, 0, now_ms=1)
    assert (r.hw, r.produce_status(0, 0).state, r.produce_status(1, 0).state) == (1, "complete", "waiting")
    r.handle_fetch(2, 2, 0, now_ms=1)
    assert r.produce_status(1, 0).state == "complete"
    assert r.produce_status(1, 7).error == ErrorCode.NOT_LEADER      # another epoch's append


def test_acks_all_fails_after_append_when_isr_shrinks_below_min():
    r = leader(isr=(1, 2), replicas=(1, 2), min_isr=2)
    r.handle_fetch(2, 0, 0, now_ms=0)
    res = r.produce([b"a"], acks=-1, now_ms=0)
    assert not res.complete
    proposal = r.maybe_shrink_isr(now_ms=LAG + 1)                    # 2 never fetched offset 1
    assert (proposal.isr, proposal.based_on_version, proposal.kind) == ((1,), 1, "shrink")
    assert r.hw == 0                                                 # the shrink is not committed yet
    r.on_isr_changed([1], 2, now_ms=LAG + 1)
    assert (r.isr, r.isr_version, r.hw) == ({1}, 2, 1)               # HW recomputed on the shrink
    st = r.produce_status(res.last_offset, res.epoch)
    assert (st.state, st.error) == ("failed", ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_acks_all_outcome_unknown_after_losing_leadership():
    r = leader(isr=(1, 2), replicas=(1, 2), min_isr=2)
    res = r.produce([b"a"], acks=-1, now_ms=0)
    r.become_follower(1, 2, now_ms=1)
    st = r.produce_status(res.last_offset, res.epoch)
    assert (st.state, st.error) == ("failed", ErrorCode.NOT_LEADER)


def test_isr_shrink_timing_and_one_proposal_in_flight():
    r = leader(isr=(1, 2, 3))
    r.produce([b"a"], acks=1, now_ms=0)
    r.handle_fetch(2, 1, 0, now_ms=1000)                             # 2 caught up at 1000
    r.handle_fetch(3, 0, 0, now_ms=1000)                             # 3 behind (ISR members start at 0)
    assert r.maybe_shrink_isr(now_ms=LAG) is None                    # 3's grace: caught up at election
    p = r.maybe_shrink_isr(now_ms=LAG + 1)
    assert (p.isr, p.kind) == ((1, 2), "shrink")
    assert r.pending_isr_proposal == p
    assert r.maybe_shrink_isr(now_ms=10 * LAG) is None               # one proposal at a time
    assert r.take_isr_proposal() is None                             # already handed out
    r.on_isr_proposal_failed(p)
    p2 = r.maybe_shrink_isr(now_ms=10 * LAG)
    assert p2.isr == (1, 2)                  # 2 sits at the leader's LEO: caught up however long ago
    r.on_isr_changed([1, 2], 2, now_ms=10 * LAG)
    assert r.drain_events()[-2:] == [IsrChange(0, (1, 2), 2), HwChange(0, 0, 1, 1)]
    r.on_isr_changed([1, 2, 3], 2, now_ms=10 * LAG)                  # stale version: ignored
    assert r.isr == {1, 2}
    with pytest.raises(ValueError):
        r.on_isr_changed([2], 3, now_ms=0)


def test_last_caught_up_uses_the_previous_fetch():
    r = leader(isr=(1, 2), replicas=(1, 2))
    r.handle_fetch(2, 0, 0, now_ms=100)                              # leader LEO 0: caught up at 100
    r.produce([b"a"], acks=1, now_ms=200)
    r.handle_fetch(2, 0, 0, now_ms=1500)                             # behind now; had all of LEO 0
    r.produce([b"b"], acks=1, now_ms=1600)
    r.handle_fetch(2, 1, 0, now_ms=3000)                             # had all the leader had at 1500
    assert r.maybe_shrink_isr(now_ms=3500) is None                   # caught up as of 1500
    assert r.maybe_shrink_isr(now_ms=3501).isr == (1,)               # 2001 ms ago: out


def test_isr_expand_needs_hw_and_epoch_start_kafka_7128():
    log = MemoryLog([Record(i, 0, b"x") for i in range(10)])
    r = PartitionReplica("t", 0, 1, log, ReplicationConfig(), checkpoints=Checkpoints(hw=5, epoch_entries=[(0, 0)]))
    r.become_leader(1, [1, 2], [1, 2, 3], 4, now_ms=0)
    assert (r.hw, r.epoch_start_offset) == (5, 10)                  # 2 has not fetched: HW stays 5
    r.handle_fetch(3, 5, 1, now_ms=1)                                # LEO 5 >= HW 5 but < 10
    assert r.take_isr_proposal() is None and r.isr == {1, 2}
    r.handle_fetch(3, 10, 1, now_ms=2)
    p = r.take_isr_proposal()
    assert (p.isr, p.kind, p.based_on_version, p.leader_epoch) == ((1, 2, 3), "expand", 4, 1)
    assert r.take_isr_proposal() is None


def test_isr_expand_without_7128_rule_accepts_lagging_follower():
    log = MemoryLog([Record(i, 0, b"x") for i in range(10)])
    r = PartitionReplica("t", 0, 1, log, ReplicationConfig(isr_join_requires_epoch_start=False),
                         checkpoints=Checkpoints(hw=5, epoch_entries=[(0, 0)]))
    r.become_leader(1, [1, 2], [1, 2, 3], 4, now_ms=0)
    r.handle_fetch(3, 5, 1, now_ms=1)
    assert r.take_isr_proposal().isr == (1, 2, 3)


def test_hw_waits_for_caught_up_replica_outside_isr():
    r = leader(isr=(1,), replicas=(1, 2))
    r.handle_fetch(2, 0, 0, now_ms=0)                                # caught up at 0; asks to join
    r.on_isr_proposal_failed(r.take_isr_proposal())                  # the controller said no
    r.produce([b"a"], acks=1, now_ms=10)
    assert r.hw == 0                                                 # 2 is caught up within the lag
    r.produce([b"b"], acks=1, now_ms=LAG + 1)
    assert r.hw == 2                                                 # no longer: only the ISR counts


def test_end_offset_for_epoch_and_consumer_reads_below_hw():
    r = leader(isr=(1, 2), replicas=(1, 2), epoch=2)
    r.produce([b"a", b"b", b"c"], acks=1, now_ms=0)
    r.handle_fetch(2, 2, 2, now_ms=0)
    assert r.hw == 2
    assert r.end_offset_for_epoch(2) == EpochEndOffset(2, 3)
    assert r.end_offset_for_epoch(1) == EpochEndOffset(1, 0)
    read = r.read_for_consumer(0, 10)
    assert ([x.value for x in read.records], read.high_watermark) == ([b"a", b"b"], 2)
    assert r.read_for_consumer(2, 10).records == ()
    assert r.read_for_consumer(4, 10).error == ErrorCode.OFFSET_OUT_OF_RANGE
    assert r.read_for_consumer(0, 10, current_leader_epoch=1).error == ErrorCode.FENCED_LEADER_EPOCH


def test_same_epoch_become_leader_updates_isr_only():
    r = leader(isr=(1, 2), replicas=(1, 2))
    r.handle_fetch(2, 0, 0, now_ms=0)
    r.become_leader(0, [1], [1, 2], 2, now_ms=5)
    assert (r.isr, r.isr_version, r.remote_leo(2)) == ({1}, 2, 0)   # follower state kept


def test_fenced_follower_is_not_proposed_for_the_isr_kip841():
    """A follower the controller fences (a zombie still fetching) is not proposed for the ISR; once the
    metadata says it is live again, its next caught-up fetch proposes it."""
    r = leader(isr=(1, 2), replicas=(1, 2, 3))
    r.produce([b"a"], acks=1, now_ms=1)
    r.handle_fetch(2, 1, 0, now_ms=2)                     # the HW reaches 1
    r.set_fenced_brokers([3])
    r.handle_fetch(3, 1, 0, now_ms=3)                     # caught up, but fenced
    assert r.take_isr_proposal() is None and r.pending_isr_proposal is None
    r.set_fenced_brokers([])
    r.handle_fetch(3, 1, 0, now_ms=4)
    proposal = r.take_isr_proposal()
    assert proposal is not None and (proposal.isr, proposal.kind) == ((1, 2, 3), "expand")
