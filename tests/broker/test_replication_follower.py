"""The follower side of PartitionReplica: truncation on becoming follower, the OffsetsForLeaderEpoch
exchange, fetch answers (stale, fenced, out of range), the follower HW, and recovery at start-up."""
import pytest

from broker.records import MemoryLog, Record
from broker.replication import (
    Checkpoints, EpochRequest, ErrorCode, FetchRequest, PartitionReplica, ReplicationConfig, StateError,
)
from broker.replication.epoch_cache import UNDEFINED, EpochEndOffset
from broker.replication.events import HwChange, Truncate
from broker.replication.messages import EpochResponse, FetchResponse


def recs(*epochs: int, start: int = 0) -> list[Record]:
    return [Record(start + i, e, f"v{start + i}".encode()) for i, e in enumerate(epochs)]


def follower(mode: str, epochs=(0, 0, 1, 1), hw=1, entries=((0, 0), (1, 2))) -> PartitionReplica:
    return PartitionReplica("t", 0, 2, MemoryLog(recs(*epochs)), ReplicationConfig(truncation=mode),
                            checkpoints=Checkpoints(hw=hw, epoch_entries=entries))


def test_hw_mode_truncates_to_hw_on_becoming_follower():
    f = follower("hw")
    assert f.become_follower(5, 1, now_ms=0) is None
    assert (f.leo, f.hw, f.epoch_cache.entries()) == (1, 1, [(0, 0)])
    assert Truncate(0, 4, 1, "hw") in f.drain_events()
    req = f.next_follower_request()
    assert req == FetchRequest(leader_id=1, replica_id=2, fetch_offset=1, current_leader_epoch=5, max_records=1000)


@pytest.mark.parametrize("mode", ["leader-epoch", "kip-101"])
def test_epoch_modes_keep_the_log_and_ask_first(mode):
    f = follower(mode)
    f.become_follower(5, 1, now_ms=0)
    assert (f.leo, f.follower_phase) == (4, "truncating")
    req = f.next_follower_request()
    assert req == EpochRequest(leader_id=1, replica_id=2, requested_epoch=1, current_leader_epoch=5)
    assert f.on_epoch_response(req, EpochResponse(None, EpochEndOffset(1, 3), 5))
    assert (f.leo, f.follower_phase, f.epoch_cache.entries()) == (3, "fetching", [(0, 0), (1, 2)])
    assert f.next_follower_request().fetch_offset == 3


def test_empty_log_fetches_at_once():
    f = PartitionReplica("t", 0, 2, MemoryLog(), ReplicationConfig())
    f.become_follower(0, 1, now_ms=0)
    assert (f.follower_phase, f.next_follower_request().fetch_offset) == ("fetching", 0)


def test_undefined_answer_truncates_to_hw():
    f = follower("leader-epoch")
    f.become_follower(5, 1, now_ms=0)
    req = f.next_follower_request()
    f.on_epoch_response(req, EpochResponse(None, UNDEFINED, 5))
    assert (f.leo, f.hw, f.follower_phase) == (1, 1, "fetching")


def test_missing_epoch_asks_again_through_the_replica():
    f = follower("leader-epoch", epochs=(0, 0, 2, 2), hw=0, entries=((0, 0), (2, 2)))
    f.become_follower(5, 1, now_ms=0)
    r1 = f.next_follower_request()
    f.on_epoch_response(r1, EpochResponse(None, EpochEndOffset(1, 3), 5))
    assert (f.leo, f.follower_phase) == (2, "truncating")            # epoch 2 records cut
    r2 = f.next_follower_request()
    assert r2.requested_epoch == 0
    assert not f.on_epoch_response(r1, EpochResponse(None, EpochEndOffset(0, 0), 5))   # stale answer
    f.on_epoch_response(r2, EpochResponse(None, EpochEndOffset(0, 1), 5))
    assert (f.leo, f.follower_phase, f.epoch_cache.entries()) == (1, "fetching", [(0, 0)])
    assert [e for e in f.drain_events() if e.name == "truncate"] == [
        Truncate(0, 4, 2, "leader-epoch"), Truncate(0, 2, 1, "leader-epoch")]


def test_retriable_and_fencing_errors():
    f = follower("leader-epoch")
    f.become_follower(5, 1, now_ms=0)
    req = f.next_follower_request()
    f.on_epoch_response(req, EpochResponse(ErrorCode.UNKNOWN_LEADER_EPOCH, None, 4))
    assert f.next_follower_request() == req                          # ask again later
    f.on_epoch_response(req, EpochResponse(ErrorCode.FENCED_LEADER_EPOCH, None, 6))
    assert (f.follower_phase, f.next_follower_request()) == ("fenced", None)
    assert f.become_follower(4, 1, now_ms=0) == ErrorCode.FENCED_LEADER_EPOCH
    f.become_follower(6, 3, now_ms=0)                                # the controller's news
    assert f.next_follower_request() == EpochRequest(3, 2, 1, 6)


def test_fetch_answer_appends_adds_epochs_and_sets_hw():
    f = follower("hw", epochs=(0, 0), hw=2, entries=((0, 0),))
    f.become_follower(3, 1, now_ms=0)
    req = f.next_follower_request()
    f.drain_events()
    resp = FetchResponse(None, tuple(recs(0, 2, 2, 3, start=2)), high_watermark=4, leader_epoch=3, leader_leo=6)
    assert f.on_fetch_response(req, resp)
    assert (f.leo, f.hw) == (6, 4)                                   # HW = min(leader HW 4, LEO 6)
    assert f.epoch_cache.entries() == [(0, 0), (2, 3), (3, 5)]
    assert not f.on_fetch_response(req, resp)                        # stale: our LEO moved on
    f.append_as_follower([], leader_hw=9)
    assert f.hw == 6                                                 # never above our own LEO
    f.append_as_follower([], leader_hw=3)
    assert f.hw == 3                                                 # follows the leader's, even down
    assert f.drain_events() == [HwChange(0, 2, 4, 6), HwChange(0, 4, 6, 6), HwChange(0, 6, 3, 6)]


def test_empty_epoch_entry_at_the_log_end_is_replaced_by_older_records():
    # we led epoch 3 without writing (entry (3, 5) at our LEO); the new leader has epoch-2 records there
    f = follower("leader-epoch", epochs=(0,) * 5, hw=5, entries=((0, 0),))
    f.become_leader(3, [2], [1, 2], 1, now_ms=0)
    assert f.epoch_cache.entries() == [(0, 0), (3, 5)]
    f.become_follower(4, 1, now_ms=0)
    req = f.next_follower_request()
    assert req.requested_epoch == 3
    f.on_epoch_response(req, EpochResponse(None, EpochEndOffset(2, 8), 4))      # we lack epoch 2
    req = f.next_follower_request()
    f.on_epoch_response(req, EpochResponse(None, EpochEndOffset(0, 5), 4))
    assert (f.leo, f.follower_phase) == (5, "fetching")
    f.on_fetch_response(f.next_follower_request(),
                        FetchResponse(None, tuple(recs(2, 2, 2, 4, start=5)), 5, 4, 9))
    assert f.epoch_cache.entries() == [(0, 0), (2, 5), (4, 8)]


def test_an_empty_epoch_at_the_log_end_is_dropped_even_when_nothing_is_cut():
    """We led epoch 2 without writing (entry (2, 1) at our LEO 1). The new leader says epoch 1 ends at
    2, so we cut nothing, but the entry must go: kept, the epoch-1 record fetched at offset 1 would
    replace it *and* epoch 1's true start (0), and a later "where does epoch 0 end" would be answered
    1 instead of 0, keeping a record a newer leader never had (the explorer's seed 1745661662,
    schedule 9249). Kafka's truncateTo trims the cache at the LEO for the same reason."""
    f = follower("leader-epoch", epochs=(1,), hw=0, entries=((1, 0),))
    f.become_leader(2, [2], [1, 2], 1, now_ms=0)
    assert f.epoch_cache.entries() == [(1, 0), (2, 1)]
    f.become_follower(3, 1, now_ms=0)
    req = f.next_follower_request()
    assert req.requested_epoch == 2
    f.on_epoch_response(req, EpochResponse(None, EpochEndOffset(1, 2), 3))
    assert (f.leo, f.follower_phase, f.epoch_cache.entries()) == (1, "fetching", [(1, 0)])
    assert not [e for e in f.drain_events() if e.name == "truncate"]       # nothing was cut
    f.on_fetch_response(f.next_follower_request(), FetchResponse(None, tuple(recs(1, start=1)), 0, 3, 2))
    assert f.epoch_cache.entries() == [(1, 0)]
    assert f.epoch_cache.end_offset_for(0, f.leo) == EpochEndOffset(0, 0)


def test_fetch_out_of_range_cuts_to_the_leaders_end():
    f = follower("hw", hw=4)
    f.become_follower(1, 1, now_ms=0)
    req = f.next_follower_request()
    assert req.fetch_offset == 4
    f.on_fetch_response(req, FetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark=1, leader_epoch=1, leader_leo=2))
    assert (f.leo, f.hw) == (2, 2)
    assert f.drain_events()[-2:] == [Truncate(0, 4, 2, "offset-out-of-range"), HwChange(0, 4, 2, 2)]


def test_fetch_answer_for_an_old_epoch_is_ignored():
    f = follower("hw", hw=4)
    f.become_follower(1, 1, now_ms=0)
    old = f.next_follower_request()
    f.become_follower(2, 3, now_ms=0)
    assert not f.on_fetch_response(old, FetchResponse(None, tuple(recs(1, start=4)), 5, 1, 5))
    assert f.leo == 4


def test_append_as_follower_needs_the_follower_role():
    with pytest.raises(StateError):
        PartitionReplica("t", 0, 2, MemoryLog(), ReplicationConfig()).append_as_follower([], 0)


def test_recovery_clamps_hw_and_drops_epochs_past_the_log():
    # power loss: the log lost its tail, the checkpoints did not
    r = PartitionReplica("t", 0, 2, MemoryLog(recs(0, 0, 1)), ReplicationConfig(),
                         checkpoints=Checkpoints(hw=5, epoch_entries=[(0, 0), (1, 2), (2, 3), (3, 6)]))
    assert (r.role, r.leo, r.hw, r.epoch_cache.entries()) == ("none", 3, 3, [(0, 0), (1, 2)])
    assert r.epoch_checkpoint_due() == [(0, 0), (1, 2)]
    assert r.epoch_checkpoint_due() is None


def test_recovery_rebuilds_missing_epoch_entries_from_the_log():
    r = PartitionReplica("t", 0, 2, MemoryLog(recs(0, 0, 2, 2, 4)), ReplicationConfig(),
                         checkpoints=Checkpoints(hw=1, epoch_entries=[(0, 0)]))
    assert r.epoch_cache.entries() == [(0, 0), (2, 2), (4, 4)]
    assert r.epoch_checkpoint_due() == [(0, 0), (2, 2), (4, 4)]


def test_event_fields_match_the_node_event_log_format():
    f = follower("hw")
    f.become_follower(5, 1, now_ms=0, isr=[1, 2])
    logged = [(e.name, e.fields()) for e in f.drain_events()]
    assert logged == [
        ("role", {"partition": 0, "role": "follower", "epoch": 5}),
        ("leader-change", {"partition": 0, "leader": 1, "epoch": 5, "isr": [1, 2]}),
        ("truncate", {"partition": 0, "from": 4, "to": 1, "why": "hw"}),
    ]
