"""The idempotent producers' table (broker/replication/producers.py) and the replica around it, without I/O:
Kafka's rules as known answers, the table rebuilt from the log, and a truncation that leaves it right."""
from __future__ import annotations

from broker.records import MemoryLog, Record
from broker.replication import BatchFields, Checkpoints, PartitionReplica, ReplicationConfig
from broker.replication.errors import ErrorCode
from broker.replication.producers import (APPEND, CACHED_BATCHES, DUPLICATE, HISTORY, MAX_SEQUENCE, REFUSE,
                                          BatchMeta, ProducerStates, Snapshot, last_sequence)

PID = 7 << 40


def _records(pid: int, epoch: int, first_seq: int, first_offset: int, n: int) -> list[Record]:
    return [Record(first_offset + i, 0, b"v", None, 0, (), pid, epoch, (first_seq + i) % (MAX_SEQUENCE + 1))
            for i in range(n)]


def test_kafkas_rules_as_known_answers():
    t = ProducerStates()
    assert t.check(PID, 0, 42, 3).action == APPEND            # unknown producer: any sequence (KIP-360)
    t.append(_records(PID, 0, 0, 10, 3))                       # seq 0-2 at offsets 10-12
    t.append(_records(PID, 0, 3, 20, 2))                       # seq 3-4 at 20-21 (other records between)
    assert t.check(PID, 0, 0, 3) == t.check(PID, 0, 0, 3)
    dup = t.check(PID, 0, 0, 3)
    assert (dup.action, dup.batch) == (DUPLICATE, BatchMeta(0, 2, 10, 12))
    assert t.check(PID, 0, 3, 2).batch == BatchMeta(3, 4, 20, 21)
    assert t.check(PID, 0, 5, 1).action == APPEND              # the next one
    gap = t.check(PID, 0, 6, 1)
    assert (gap.action, gap.error) == (REFUSE, "OUT_OF_ORDER_SEQUENCE_NUMBER") and "expected 5" in gap.message
    assert t.check(PID, 0, 2, 2).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"   # overlaps, but is no batch sent
    assert t.check(PID, 1, 3, 1).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"   # a new epoch starts at 0
    assert t.check(PID, 1, 0, 1).action == APPEND
    t.append(_records(PID, 1, 0, 30, 1))
    fenced = t.check(PID, 0, 5, 1)
    assert (fenced.action, fenced.error) == (REFUSE, "INVALID_PRODUCER_EPOCH")
    assert t.check(PID + 1, 0, 9, 1).action == APPEND          # producers are independent


def test_only_the_last_batches_are_matched_and_sequences_wrap():
    t = ProducerStates()
    for k in range(CACHED_BATCHES + 1):                        # batches at offsets 0, 10, 20, ... (not adjacent)
        t.append(_records(PID, 0, 2 * k, 10 * k, 2))
    assert t.check(PID, 0, 0, 2).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"   # the oldest, past the cache
    assert t.check(PID, 0, 2, 2).action == DUPLICATE
    w = ProducerStates()
    w.append(_records(PID, 0, MAX_SEQUENCE - 1, 0, 2))
    assert w.check(PID, 0, 0, 1).action == APPEND               # after 2**31 - 1 comes 0
    assert last_sequence(MAX_SEQUENCE, 2) == 0


def test_truncation_forgets_what_it_cut_and_keeps_the_rest():
    t = ProducerStates()
    t.append(_records(PID, 0, 0, 0, 3))        # offsets 0-2
    t.append(_records(PID, 0, 3, 5, 3))        # offsets 5-7, seq 3-5
    t.truncate(6)                              # keeps offset 5 only of the second batch
    assert t.entry(PID).batches == [BatchMeta(0, 2, 0, 2), BatchMeta(3, 3, 5, 5)]
    assert t.check(PID, 0, 4, 2).action == APPEND               # seq 4-5 were cut: a retry appends them
    t.loaded = True
    t.truncate(0)                              # all of it: the producer is gone, and nothing older exists
    assert t.entry(PID) is None and t.loaded


def test_a_truncation_past_what_the_table_remembers_asks_for_a_rebuild():
    t = ProducerStates()
    t.loaded = True
    for k in range(HISTORY + 3):
        t.append(_records(PID, 0, k, 2 * k, 1))                # one-record batches at even offsets
    assert len(t.entry(PID).batches) == HISTORY and t.entry(PID).older
    t.truncate(2 * 3 + 1)                                       # keeps the oldest remembered batch
    assert t.loaded and t.entry(PID).batches == [BatchMeta(3, 3, 6, 6)]
    t.truncate(5)                                               # below every remembered batch
    assert t.loaded is False


def _leader(log: MemoryLog, **config) -> PartitionReplica:
    r = PartitionReplica("t", 0, 1, log, ReplicationConfig(min_insync_replicas=1, **config))
    r.become_leader(3, [1], [1], 0, 0)
    return r


def test_a_restarted_leader_rebuilds_the_table_from_its_log():
    log = MemoryLog(_records(PID, 0, 0, 0, 3) + [Record(3, 0, b"plain")] + _records(PID, 0, 3, 4, 2))
    r = _leader(log)
    assert not r.producers.loaded
    res = r.produce([b"a", b"b"], acks=1, now_ms=0, fields=BatchFields(producer=(PID, 0, 3)))       # the retry of offsets 4-5
    assert (res.error, res.base_offset, res.last_offset, res.duplicate) == (None, 4, 5, True)
    assert r.producers.loaded and log.leo() == 6
    ok = r.produce([b"c"], acks=1, now_ms=0, fields=BatchFields(producer=(PID, 0, 5)))
    assert (ok.error, ok.base_offset, log.read(6, 1)[0].sequence) == (None, 6, 5)
    bad = r.produce([b"d"], acks=1, now_ms=0, fields=BatchFields(producer=(PID, 0, 9)))
    assert bad.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and "expected 6" in bad.message and log.leo() == 7


def test_the_planted_bug_empties_the_table_at_a_truncation():
    """producer_state_rebuilt_after_truncation = false: after any truncation the table is empty yet
    trusted, so the retry of a batch that survived the cut is appended again."""
    for rebuilt, expect_duplicate in ((True, True), (False, False)):
        log = MemoryLog()
        r = _leader(log, producer_state_rebuilt_after_truncation=rebuilt)
        r.produce([b"x0", b"x1"], acks=1, now_ms=0, fields=BatchFields(producer=(PID, 0, 0)))
        r.produce([b"extra"], acks=1, now_ms=0)
        r._truncate(2, "test")                                  # cut the record after the batch
        res = r.produce([b"x0", b"x1"], acks=1, now_ms=0, fields=BatchFields(producer=(PID, 0, 0)))
        assert res.duplicate is expect_duplicate
        assert log.leo() == (2 if expect_duplicate else 4)


# --- snapshots -------------------------------------------------------------------------------------------

def _mixed_log(n_batches: int, seed: int) -> MemoryLog:
    """Batches of 1-4 records from 3 producers (one of them changing epoch) between plain records, with
    leader epochs rising every 10 batches."""
    import random
    rng = random.Random(seed)
    out: list[Record] = []
    seqs = {PID: 0, PID + 1: 0, PID + 2: 0}
    pepoch = {PID: 0, PID + 1: 0, PID + 2: 0}
    for k in range(n_batches):
        leader_epoch = k // 10
        if rng.random() < 0.2:
            out.append(Record(len(out), leader_epoch, b"plain"))
            continue
        pid = rng.choice(list(seqs))
        if pid == PID + 2 and rng.random() < 0.05:
            pepoch[pid] += 1
            seqs[pid] = 0
        n = rng.randint(1, 4)
        out += [r._replace(epoch=leader_epoch) for r in _records(pid, pepoch[pid], seqs[pid], len(out), n)]
        seqs[pid] += n
    return MemoryLog(out)


def test_a_snapshot_plus_the_records_after_it_is_the_table_the_whole_log_gives():
    for seed in range(20):
        log = _mixed_log(300, seed)
        whole = _leader(log)
        whole.load_producers()
        for cut in (0, 1, log.leo() // 3, log.leo() - 1, log.leo()):
            prefix = MemoryLog(log.read(0, cut))
            built = _leader(prefix)
            built.load_producers()
            snap = Snapshot(cut, log.read(cut - 1, 1)[0].epoch if cut else -1, built.producers.export())
            r = PartitionReplica("t", 0, 1, MemoryLog(log.read(0, log.leo())), ReplicationConfig(min_insync_replicas=1),
                                 checkpoints=Checkpoints(producer_snapshot=snap))
            r.become_leader(40, [1], [1], 0, 0)
            r.load_producers()
            assert r.producers.export() == whole.producers.export(), (seed, cut)
            [ev] = [e for e in r.drain_events() if e.name == "producers-loaded"]
            assert (ev.snapshot, ev.replayed, ev.why, ev.rejected) == (cut, log.leo() - cut, "opened", None)


def test_a_snapshot_that_does_not_fit_the_log_is_refused_for_the_whole_log():
    log = _mixed_log(100, 1)
    leo = log.leo()
    last = log.read(leo - 1, 1)[0].epoch
    cases = [(Snapshot(leo + 5, last, []), f"snapshot offset {leo + 5} is outside the log 0..{leo}"),
             (Snapshot(leo, last - 1, []), f"the record at offset {leo - 1} is of epoch {last}, the snapshot was "
                                           f"taken after one of epoch {last - 1}")]
    whole = _leader(log)
    whole.load_producers()
    for snap, why in cases:
        r = PartitionReplica("t", 0, 1, log, ReplicationConfig(min_insync_replicas=1),
                             checkpoints=Checkpoints(producer_snapshot=snap))
        r.become_leader(40, [1], [1], 0, 0)
        r.load_producers()
        assert r.producers.export() == whole.producers.export()
        [ev] = [e for e in r.drain_events() if e.name == "producers-loaded"]
        assert (ev.snapshot, ev.replayed, ev.rejected) == (None, leo, why)


def test_snapshots_fall_due_every_so_many_records_and_at_shutdown_and_a_truncation_drops_them():
    import broker.replication.replica as replica_mod
    log = MemoryLog()
    r = _leader(log)
    assert r.producer_snapshot_due(final=True) is None          # not loaded: nothing to say
    r.produce([b"a"], acks=1, now_ms=0, fields=BatchFields(producer=(PID, 0, 0)))   # loads the (empty) table, appends offset 0
    assert r.producer_snapshot_due() is None                    # 1 record < SNAPSHOT_EVERY
    final = r.producer_snapshot_due(final=True)
    assert (final.offset, final.last_epoch, final.entries) == (1, 3, [(PID, 0, False, [(0, 0, 0, 0)])])
    r.producer_snapshot_written(final)
    assert r.producer_snapshot_due(final=True) is None          # nothing appended since
    every = replica_mod.SNAPSHOT_EVERY
    r.produce([b"v"] * every, acks=1, now_ms=0, fields=BatchFields(producer=(PID, 0, 1)))
    due = r.producer_snapshot_due()
    assert due.offset == every + 1 and due.entries == [(PID, 0, False, [(0, every, 0, every)])]
    r.producer_snapshot_written(due)
    r.produce([b"x"], acks=1, now_ms=0)
    r._truncate(every, "test")                                  # below the snapshot at every + 1
    assert r._snapshot is None
    [trunc] = [e for e in r.drain_events() if e.name == "truncate"]
    assert trunc.to == every        # the shell deletes the snapshot files past it (broker/server/partitions.py)


def test_a_batch_across_the_sequence_wrap_and_with_keys_and_headers_is_stored_as_sent():
    log = MemoryLog()
    r = _leader(log)
    r.produce([b"a", b"b", b"c", b"d"], acks=1, now_ms=0,
              fields=BatchFields(timestamps=[1, 2, 3, 4], producer=(PID, 0, MAX_SEQUENCE - 1)))
    assert [(x.value, x.timestamp, x.sequence) for x in log.read(0, 4)] == [
        (b"a", 1, MAX_SEQUENCE - 1), (b"b", 2, MAX_SEQUENCE), (b"c", 3, 0), (b"d", 4, 1)]
    assert r.produce([b"e"], acks=1, now_ms=0, fields=BatchFields(producer=(PID, 0, 2))).base_offset == 4    # continues after 1
    r.produce([b"f", None], acks=1, now_ms=7,
              fields=BatchFields(keys=[b"k", None], headers=[[("h", b"1")], []], producer=(PID, 0, 3)))
    assert [tuple(x) for x in log.read(5, 2)] == [(5, 3, b"f", b"k", 7, (("h", b"1"),), PID, 0, 3),
                                                (6, 3, None, None, 7, (), PID, 0, 4)]
    r.produce([b"g"], acks=1, now_ms=8, fields=BatchFields(keys=[b"k2"]))                # no producer
    assert tuple(log.read(7, 1)[0]) == (7, 3, b"g", b"k2", 8, (), -1, -1, -1)
