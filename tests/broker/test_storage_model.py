"""Property test: random appends, truncations, flushes, reads, clean reopens and emulated crashes on
the segmented log agree with the in-memory model (broker.records.MemoryLog)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.records import MemoryLog, Record
from broker.storage import SegmentedLog

OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 7), st.integers(0, 5)),
    st.tuples(st.just("truncate"), st.integers(-1, 9)),      # cut this many records off the end
    st.tuples(st.just("read"), st.integers(-2, 40), st.integers(0, 12)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("crash")),
), max_size=50)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(ops=OPS, power_loss=st.booleans(), segment_records=st.integers(1, 5))
def test_segmented_log_matches_model(ops, power_loss, segment_records):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"

        def open_log():
            return SegmentedLog.open(d, segment_records=segment_records, power_loss=power_loss,
                                     flush_policy="interval")

        log, model, flushed = open_log(), MemoryLog(), 0
        try:
            for op in ops:
                if op[0] == "append":
                    leo = model.leo()
                    batch = [Record(o, op[2], f"{o}-{op[2]}".encode(), None if o % 2 else b"k", o) for o in
                             range(leo, leo + op[1])]
                    log.append(batch)
                    model.append(batch)
                elif op[0] == "truncate":
                    to = model.leo() - op[1]
                    log.truncate_to(to)
                    model.truncate_to(to)
                    flushed = min(flushed, max(to, 0))
                elif op[0] == "read":
                    assert log.read(op[1], op[2]) == model.read(op[1], op[2])
                elif op[0] == "flush":
                    assert log.flush() == model.leo()
                    flushed = model.leo()
                elif op[0] == "reopen":
                    log.close()
                    log = open_log()
                    flushed = model.leo()
                else:  # crash: under power_loss the unflushed records are gone
                    log.close(flush=False)
                    if power_loss:
                        model.truncate_to(flushed)
                    log = open_log()
                    assert log.recovery.cut is False
                    flushed = model.leo()
                assert (log.log_start(), log.leo(), log.last_epoch(), log.flushed_offset()) == (
                    0, model.leo(), model.last_epoch(), flushed)
            assert log.read(0, 1000) == model.read(0, 1000)
            assert log.segment_bases() == list(range(0, max(model.leo() - 1, 0) + 1, segment_records))
        finally:
            log.close()
