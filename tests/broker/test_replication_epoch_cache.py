"""Leader-epoch cache and the pure truncation rules (broker/replication/epoch_cache.py, truncation.py)."""
import pytest
from hypothesis import given, settings, strategies as st

from broker.records import MemoryLog, Record
from broker.replication import PartitionReplica, ReplicationConfig
from broker.replication.epoch_cache import UNDEFINED, EpochCache, EpochEndOffset
from broker.replication.truncation import TruncationStep, after_epoch_answer, first_query_epoch


def test_seed_example_epoch_ranges():
    # seed 000 八: <0, 0> and <1, 120>: epoch 0 wrote [0, 119], epoch 1 starts at 120
    c = EpochCache([(0, 0), (1, 120)])
    assert c.end_offset_for(0, leo=200) == EpochEndOffset(0, 120)
    assert c.end_offset_for(1, leo=200) == EpochEndOffset(1, 200)      # latest epoch ends at the LEO
    assert c.latest_epoch() == 1 and c.start_offset_of(1) == 120 and c.start_offset_of(5) is None


def test_end_offset_for_floor_below_and_above():
    c = EpochCache([(2, 5), (4, 9), (7, 12)])
    assert c.end_offset_for(3, leo=20) == EpochEndOffset(2, 9)          # largest epoch <= 3 is 2
    assert c.end_offset_for(6, leo=20) == EpochEndOffset(4, 12)
    assert c.end_offset_for(1, leo=20) == EpochEndOffset(1, 5)          # below all: first start
    assert c.end_offset_for(8, leo=20) == UNDEFINED                     # above the latest
    assert c.end_offset_for(-1, leo=20) == UNDEFINED
    assert EpochCache().end_offset_for(0, leo=3) == UNDEFINED
    assert UNDEFINED.undefined and not EpochEndOffset(0, 0).undefined


def test_assign_is_monotonic_and_versioned():
    c = EpochCache()
    assert c.assign(0, 0) and c.version == 1
    assert not c.assign(0, 3) and c.version == 1                        # same epoch, later start: no-op
    assert c.assign(2, 4)
    assert c.entries() == [(0, 0), (2, 4)]
    assert c.assign(1, 2)                                               # conflicts with (2, 4): replaced
    assert c.entries() == [(0, 0), (1, 2)]
    assert c.assign(3, 1)                                               # start 1 < 2: (1, 2) goes
    assert c.entries() == [(0, 0), (3, 1)]
    with pytest.raises(ValueError):
        c.assign(-1, 0)


def test_truncate_from_end_drops_entries_starting_at_or_after():
    c = EpochCache([(0, 0), (1, 3), (2, 6)])
    v = c.version
    assert not c.truncate_from_end(7) and c.version == v
    assert c.truncate_from_end(6)
    assert c.entries() == [(0, 0), (1, 3)]
    assert c.truncate_from_end(2)
    assert c.entries() == [(0, 0)]
    assert c.version == v + 2


def test_first_query_epoch_is_the_latest():
    assert first_query_epoch(EpochCache([(0, 0), (3, 4)])) == 3
    assert first_query_epoch(EpochCache()) is None


def test_undefined_answer_falls_back_to_hw():
    c = EpochCache([(0, 0)])
    assert after_epoch_answer("leader-epoch", c, leo=5, hw=2, answer=UNDEFINED) == TruncationStep(2, "hw", None)
    assert after_epoch_answer("kip-101", c, leo=5, hw=2, answer=UNDEFINED) == TruncationStep(2, "hw", None)


def test_kip101_single_round_uses_the_leaders_end_only():
    c = EpochCache([(0, 0), (1, 1)])         # follower: m1 in epoch 0, m3 in epoch 1
    step = after_epoch_answer("kip-101", c, leo=2, hw=2, answer=EpochEndOffset(0, 2))
    assert step == TruncationStep(2, "leader-epoch", None)


def test_kip279_follower_has_the_epoch_takes_the_smaller_end():
    c = EpochCache([(0, 0), (1, 1)])
    assert after_epoch_answer("leader-epoch", c, leo=2, hw=2, answer=EpochEndOffset(0, 2)) == \
        TruncationStep(1, "leader-epoch", None)
    assert after_epoch_answer("leader-epoch", c, leo=2, hw=2, answer=EpochEndOffset(1, 5)) == \
        TruncationStep(2, "leader-epoch", None)


def test_kip279_follower_lacks_the_epoch_cuts_and_asks_again():
    c = EpochCache([(0, 0), (2, 2)])         # leader answered with epoch 1, which we never saw
    assert after_epoch_answer("leader-epoch", c, leo=3, hw=1, answer=EpochEndOffset(1, 2)) == \
        TruncationStep(2, "leader-epoch", 0)


def test_kip279_answer_below_our_first_epoch_cuts_to_its_start():
    c = EpochCache([(3, 0)])                 # every record we have is from epoch 3
    assert after_epoch_answer("leader-epoch", c, leo=4, hw=4, answer=EpochEndOffset(1, 7)) == \
        TruncationStep(0, "leader-epoch", None)


# --- against a brute-force model of a log's epochs ---------------------------------------------



def epochs_of_a_log():
    """Non-decreasing record epochs, as any replica's log has."""
    return st.lists(st.integers(0, 3), max_size=12).map(lambda steps: [sum(steps[:i + 1]) for i in range(len(steps))])


def brute_end_offset(epochs: list[int], requested: int) -> EpochEndOffset:
    if not epochs:
        return UNDEFINED
    if requested > epochs[-1]:
        return UNDEFINED
    if requested == epochs[-1]:
        return EpochEndOffset(requested, len(epochs))
    floor = max((e for e in epochs if e <= requested), default=requested)
    end = next(i for i, e in enumerate(epochs) if e > requested)
    return EpochEndOffset(floor, end)


def cache_from_log(epochs: list[int]) -> EpochCache:
    log = MemoryLog([Record(i, e, b"x") for i, e in enumerate(epochs)])
    return PartitionReplica("t", 0, 1, log, ReplicationConfig()).epoch_cache


@settings(max_examples=200, deadline=None)
@given(epochs_of_a_log(), st.integers(0, 40))
def test_end_offset_for_matches_the_log(epochs, requested):
    assert cache_from_log(epochs).end_offset_for(requested, len(epochs)) == brute_end_offset(epochs, requested)


@settings(max_examples=200, deadline=None)
@given(epochs_of_a_log(), st.integers(0, 12))
def test_truncation_keeps_the_cache_of_the_prefix(epochs, cut):
    cache = cache_from_log(epochs)
    cache.truncate_from_end(cut)
    assert cache.entries() == cache_from_log(epochs[:cut]).entries()
