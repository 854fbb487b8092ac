"""broker/storage/producer_snapshots.py: snapshot files written and read back, the newest two kept, the
ones past a truncation deleted, and every malformed file refused with its file and line; plus the
partition store's start-up choice among them."""
from __future__ import annotations

import pytest

from broker.records import Record
from broker.storage import PartitionStore
from broker.storage.checkpoints import CheckpointError
from broker.storage.producer_snapshots import HEADER, KEEP, ProducerSnapshots, snapshot_name

PID = 3 << 40
ENTRIES = [(PID, 0, False, [(0, 4, 0, 4), (5, 9, 10, 14)]), (PID + 1, 2, True, [(7, 7, 15, 15)])]


def test_written_and_read_back_and_only_the_newest_kept(tmp_path):
    snaps = ProducerSnapshots(tmp_path)
    assert snaps.offsets() == []
    (tmp_path / "00000000000000000000.log").write_bytes(b"")     # other files are not snapshots
    (tmp_path / "17.producers").write_text("x")                  # nor a name of the wrong shape
    snaps.write(16, 2, ENTRIES)
    assert snaps.path(16).name == snapshot_name(16) == "00000000000000000016.producers"
    assert snaps.read(16) == (2, ENTRIES)
    assert snaps.path(16).read_text() == (f"{HEADER}\n16 2\n2\n{PID} 0 0 2\n0 4 0 4\n5 9 10 14\n"
                                          f"{PID + 1} 2 1 1\n7 7 15 15\n")
    snaps.write(20, 3, [])
    snaps.write(30, -1, [])
    assert snaps.offsets() == [20, 30] and KEEP == 2
    assert snaps.read(30) == (-1, [])
    assert snaps.delete_above(20) == [30] and snaps.offsets() == [20]


@pytest.mark.parametrize("text, line, message", [
    ("", 1, "last line has no newline"),
    ("nope\n", 1, "bad header 'nope'"),
    (f"{HEADER}\n16 2\n", 3, "missing the offset line or the producer count"),
    (f"{HEADER}\n15 2\n0\n", 2, "offset 15 does not match the file name's 16"),
    (f"{HEADER}\n16\n0\n", 2, "expected 'offset epoch', got '16'"),
    (f"{HEADER}\n16 -2\n0\n", 2, "'offset epoch': '-2' is not a non-negative integer"),
    (f"{HEADER}\n16 2\nmany\n", 3, "the producer count: 'many' is not a non-negative integer"),
    (f"{HEADER}\n16 2\n2\n{PID} 0 0 0\n", 5, "producer count says 2 but 1 follow"),
    (f"{HEADER}\n16 2\n1\n{PID} 0 2 0\n", 4, "older must be 0 or 1, got 2"),
    (f"{HEADER}\n16 2\n1\n{PID} 0 0 2\n0 4 0 4\n", 6, f"producer {PID} says 2 batches but 1 follow"),
    (f"{HEADER}\n16 2\n1\n{PID} 0 0 1\n0 4 0\n", 5, "expected 'first_seq last_seq first_offset last_offset'"),
    (f"{HEADER}\n16 2\n1\n{PID} 0 0 1\n0 4 12 16\n", 5, "batch offsets 12..16 are not within 0..15"),
    (f"{HEADER}\n16 2\n0\nextra\n", 4, "1 lines after the 0 producers"),
])
def test_a_malformed_snapshot_names_its_file_and_line(tmp_path, text, line, message):
    snaps = ProducerSnapshots(tmp_path)
    snaps.path(16).write_text(text)
    with pytest.raises(CheckpointError) as e:
        snaps.read(16)
    assert str(e.value).startswith(f"{snaps.path(16)}:{line}: {message}"), str(e.value)
    assert (e.value.path, e.value.line) == (str(snaps.path(16)), line)


def test_not_ascii_is_refused(tmp_path):
    snaps = ProducerSnapshots(tmp_path)
    snaps.path(16).write_bytes(b"\xff\xfe")
    with pytest.raises(CheckpointError, match="not an ASCII text file"):
        snaps.read(16)


def test_the_store_starts_from_the_newest_readable_snapshot_within_the_log(tmp_path):
    store = PartitionStore.open(tmp_path, "t", 0)
    try:
        store.log.append([Record(i, 0, b"v") for i in range(10)])
        snaps = store.producer_snapshots
        small = [(PID, 0, False, [(0, 5, 1, 6)])]
        snaps.write(4, 0, [])
        snaps.write(8, 0, small)
        snaps.path(12).write_text(f"{HEADER}\n12 0\n0\n")       # past the log end: a cut tail's
        got, problems = store.read_producer_snapshot()
        assert got == (8, 0, small) and problems == ()
        assert snaps.offsets() == [4, 8]                        # the one past the log end is deleted
        snaps.path(8).write_text("garbage\n")                   # unreadable: the one before it is used
        got, problems = store.read_producer_snapshot()
        assert got == (4, 0, [])
        [p] = problems
        assert (p.file, p.action) == (snapshot_name(8), "an older snapshot or the whole log is read instead")
        assert p.problem.startswith(f"{snaps.path(8)}:1: bad header")
    finally:
        store.close()
