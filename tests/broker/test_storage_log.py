"""The segmented log on real files: segments, reads and truncation across them, reopen, recovery."""
from __future__ import annotations

import os
import re

import pytest

from broker.records import Record
from broker.storage import SegmentedLog
from broker.storage.codec import encode_record


def recs(start, stop, epoch=1):
    return [Record(o, epoch, str(o).encode(), None, 1000 + o) for o in range(start, stop)]


def seg(directory, base):
    return directory / f"{base:020d}.log"


def segment_files(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".log"))


def size_of(records):
    return sum(len(encode_record(r)) for r in records)


def test_empty_log(tmp_path):
    log = SegmentedLog.open(tmp_path / "t-0")
    assert (log.log_start(), log.leo(), log.last_epoch(), log.read(0, 10)) == (0, 0, None, [])
    assert sorted(os.listdir(tmp_path / "t-0")) == [".lock", "00000000000000000000.log"]
    log.close()


def test_append_and_read_across_segments(tmp_path):
    d = tmp_path / "t-0"
    log = SegmentedLog.open(d, segment_records=3)
    log.append(recs(0, 2))
    log.append(recs(2, 10))
    assert log.segment_bases() == [0, 3, 6, 9]
    assert segment_files(d) == [seg(d, b).name for b in (0, 3, 6, 9)]
    assert [os.path.getsize(seg(d, b)) for b in (0, 3, 6, 9)] == [
        size_of(recs(0, 3)), size_of(recs(3, 6)), size_of(recs(6, 9)), size_of(recs(9, 10))]
    assert log.leo() == 10
    assert log.read(2, 5) == recs(2, 7)
    assert log.read(8, 100) == recs(8, 10)
    assert log.read(0, 100) == recs(0, 10)
    assert log.read(10, 5) == []
    assert log.read(-4, 2) == recs(0, 2)
    assert log.read(3, 0) == []
    log.close()


def test_append_rejects_wrong_offsets_and_leaves_log_untouched(tmp_path):
    log = SegmentedLog.open(tmp_path / "t-0", segment_records=3)
    log.append(recs(0, 2))
    with pytest.raises(ValueError, match="append at offset 3, expected 2"):
        log.append(recs(3, 5))
    with pytest.raises(ValueError, match="append at offset 4, expected 3"):
        log.append([Record(2, 1, b"2"), Record(4, 1, b"4")])
    with pytest.raises(ValueError, match="value must be bytes"):
        log.append([Record(2, 1, b"2"), Record(3, 1, 3)])
    assert log.leo() == 2
    assert os.path.getsize(seg(tmp_path / "t-0", 0)) == size_of(recs(0, 2))
    log.close()


def test_truncate_across_segments(tmp_path):
    d = tmp_path / "t-0"
    log = SegmentedLog.open(d, segment_records=3)
    log.append(recs(0, 3, epoch=1) + recs(3, 10, epoch=2))
    log.truncate_to(4)
    assert (log.leo(), log.segment_bases(), log.last_epoch()) == (4, [0, 3], 2)
    assert segment_files(d) == [seg(d, 0).name, seg(d, 3).name]
    assert os.path.getsize(seg(d, 3)) == size_of(recs(3, 4, epoch=2))
    assert log.read(0, 100) == recs(0, 3, epoch=1) + recs(3, 4, epoch=2)
    log.truncate_to(3)                      # exactly a segment base: that segment goes
    assert (log.leo(), log.segment_bases(), log.last_epoch()) == (3, [0], 1)
    assert segment_files(d) == [seg(d, 0).name]
    log.truncate_to(7)                      # beyond leo: no-op
    assert log.leo() == 3
    log.append(recs(3, 8, epoch=5))          # continues, rolling again at 3 and 6
    assert (log.segment_bases(), log.last_epoch()) == ([0, 3, 6], 5)
    assert log.read(2, 3) == recs(2, 3, epoch=1) + recs(3, 5, epoch=5)
    log.truncate_to(0)
    assert (log.leo(), log.segment_bases(), log.last_epoch(), log.read(0, 9)) == (0, [0], None, [])
    assert os.path.getsize(seg(d, 0)) == 0
    log.close()


def test_reopen_restores_everything(tmp_path):
    d = tmp_path / "t-0"
    log = SegmentedLog.open(d, segment_records=4)
    records = recs(0, 5, epoch=1) + [Record(5, 3, b"five", b"k", 7), Record(6, 3, b"", None, 8)]
    log.append(records)
    log.truncate_to(6)
    log.close()
    log = SegmentedLog.open(d, segment_records=4)
    assert (log.log_start(), log.leo(), log.last_epoch(), log.segment_bases()) == (0, 6, 3, [0, 4])
    assert log.read(0, 100) == records[:6]
    assert log.recovery.cut is False
    assert log.flushed_offset() == 6
    log.append([Record(6, 4, b"6")])
    assert log.read(5, 10) == [records[5], Record(6, 4, b"6")]
    log.close()


def test_batched_append_is_one_write_and_one_fsync(tmp_path, monkeypatch):
    log = SegmentedLog.open(tmp_path / "t-0", segment_records=150, flush_policy="always")
    calls = {"write": 0, "fsync": 0}
    real_write, real_fsync = os.write, os.fsync

    def write(fd, data):
        calls["write"] += 1
        return real_write(fd, data)

    def fsync(fd):
        calls["fsync"] += 1
        return real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    log.append(recs(0, 100))
    assert calls == {"write": 1, "fsync": 1}
    log.append(recs(100, 200))               # spans a roll: a write per segment, fsync both + the directory
    assert calls == {"write": 3, "fsync": 4}
    monkeypatch.undo()
    assert log.read(0, 1000) == recs(0, 200)
    log.close()


def test_flush_policies_and_flushed_offset(tmp_path):
    log = SegmentedLog.open(tmp_path / "a-0", flush_policy="never")
    log.append(recs(0, 3))
    assert (log.flushed_offset(), log.unflushed_records()) == (0, 3)
    assert log.flush() == 3
    log.truncate_to(1)
    assert log.flushed_offset() == 1
    log.close()
    log = SegmentedLog.open(tmp_path / "b-0", flush_policy="always")
    log.append(recs(0, 3))
    assert log.flushed_offset() == 3
    log.close()
    with pytest.raises(ValueError, match="flush policy must be one of always, interval, never, not 'sometimes'"):
        SegmentedLog.open(tmp_path / "c-0", flush_policy="sometimes")


def test_power_loss_mode_keeps_unflushed_records_in_memory(tmp_path):
    d = tmp_path / "t-0"
    log = SegmentedLog.open(d, segment_records=3, power_loss=True, flush_policy="interval")
    log.append(recs(0, 2))
    log.flush()
    log.append(recs(2, 5))
    assert log.leo() == 5
    assert log.read(1, 3) == recs(1, 4)      # straddles file and memory
    assert os.path.getsize(seg(d, 0)) == size_of(recs(0, 2))
    assert not seg(d, 3).exists()           # a rolled segment is created only when flushed
    log.truncate_to(4)
    assert log.flush() == 4
    assert [os.path.getsize(seg(d, b)) for b in (0, 3)] == [size_of(recs(0, 3)), size_of(recs(3, 4))]
    log.append(recs(4, 6))
    log.truncate_to(1)                       # cuts into the flushed part: the file is cut at once
    assert os.path.getsize(seg(d, 0)) == size_of(recs(0, 1))
    assert not seg(d, 3).exists()
    log.close(flush=False)
    log = SegmentedLog.open(d, segment_records=3)
    assert log.read(0, 10) == recs(0, 1)
    log.close()


def _write_log(d, n, segment_records=100):
    log = SegmentedLog.open(d, segment_records=segment_records)
    log.append(recs(0, n))
    log.close()


def test_recovery_cuts_garbage_tail(tmp_path):
    d = tmp_path / "t-0"
    _write_log(d, 5)
    good = os.path.getsize(seg(d, 0))
    with open(seg(d, 0), "ab") as fh:
        fh.write(b"\x00\x00\x00\x30garbage")
    log = SegmentedLog.open(d)
    assert log.recovery.cut_offset == 5
    assert log.recovery.bytes_cut == 11
    assert log.recovery.reason == f"00000000000000000000.log byte {good}: torn record: length 48 but only 7 bytes follow"
    assert os.path.getsize(seg(d, 0)) == good
    assert (log.leo(), log.read(0, 10)) == (5, recs(0, 5))
    log.append(recs(5, 6))
    log.close()
    log = SegmentedLog.open(d)
    assert (log.recovery.cut, log.read(0, 10)) == (False, recs(0, 6))
    log.close()


def test_recovery_cuts_half_a_record(tmp_path):
    d = tmp_path / "t-0"
    _write_log(d, 4, segment_records=2)
    good = os.path.getsize(seg(d, 2))
    half = encode_record(recs(4, 5)[0])[:20]
    with open(seg(d, 2), "ab") as fh:
        fh.write(half)
    log = SegmentedLog.open(d, segment_records=2)
    assert (log.recovery.cut_offset, log.recovery.bytes_cut) == (4, 20)
    assert os.path.getsize(seg(d, 2)) == good
    assert (log.leo(), log.segment_bases(), log.read(0, 10)) == (4, [0, 2], recs(0, 4))
    log.close()


def test_recovery_cuts_corrupt_record_and_later_segments(tmp_path):
    d = tmp_path / "t-0"
    _write_log(d, 7, segment_records=3)
    rec1 = len(encode_record(recs(0, 1)[0]))
    sizes = {b: os.path.getsize(seg(d, b)) for b in (0, 3, 6)}
    with open(seg(d, 0), "r+b") as fh:       # flip the last value byte of record 1
        fh.seek(rec1 + len(encode_record(recs(1, 2)[0])) - 1)
        fh.write(b"X")
    log = SegmentedLog.open(d, segment_records=3)
    r = log.recovery
    assert r.cut_offset == 1
    assert r.bytes_cut == sizes[0] - rec1 + sizes[3] + sizes[6]
    assert r.segments_deleted == (seg(d, 3).name, seg(d, 6).name)
    assert r.reason == f"00000000000000000000.log byte {rec1}: CRC mismatch (record of offset 1)"
    assert segment_files(d) == [seg(d, 0).name]
    assert (log.leo(), log.last_epoch(), log.read(0, 10)) == (1, 1, recs(0, 1))
    log.close()


def test_recovery_cuts_segment_that_does_not_continue(tmp_path):
    d = tmp_path / "t-0"
    _write_log(d, 3, segment_records=3)
    with open(seg(d, 5), "wb") as fh:        # a stray segment leaving a gap 3..4
        fh.write(encode_record(Record(5, 1, b"5")))
    log = SegmentedLog.open(d, segment_records=3)
    assert log.recovery.cut_offset == 3
    assert log.recovery.reason == "00000000000000000005.log: segment base offset 5 does not continue the log at 3"
    assert log.recovery.segments_deleted == (seg(d, 5).name,)
    assert (log.leo(), segment_files(d)) == (3, [seg(d, 0).name])
    log.close()


def test_log_start_from_first_segment(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    with open(seg(d, 40), "wb") as fh:
        fh.write(b"".join(encode_record(r) for r in recs(40, 43)))
    log = SegmentedLog.open(d)
    assert (log.log_start(), log.leo(), log.read(0, 2)) == (40, 43, recs(40, 42))
    log.truncate_to(10)
    assert (log.log_start(), log.leo()) == (40, 40)
    log.close()


def test_second_open_of_the_same_log_is_refused(tmp_path):
    d = tmp_path / "t-0"
    log = SegmentedLog.open(d)
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(d))}: log is already open"):
        SegmentedLog.open(d)
    log.append(recs(0, 1))
    log.close()
    again = SegmentedLog.open(d)
    assert again.read(0, 5) == recs(0, 1)
    again.close()
