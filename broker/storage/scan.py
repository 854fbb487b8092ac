"""Reading a partition directory's segment files from disk and finding where the valid log ends.

Shared by start-up recovery (which then cuts what is invalid) and the offline dump (which only reports
it). Nothing here modifies a file.

A log is valid up to the first of: a torn or corrupt record (bad length, magic, lengths or CRC), a
record whose offset is not the next dense offset, or a segment file whose base offset does not continue
the previous segment. Everything from there on (the rest of that segment and every later segment) is
what recovery cuts.
"""
from __future__ import annotations

import os
import re
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from broker.records import Record
from broker.storage.codec import (FORMAT_VERSION, HEADER, MIN_LENGTH, PREFIX_SIZE, CorruptRecord, Frame,
                                  framing_ok, parse_frame)

SEGMENT_SUFFIX = ".log"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


def segment_name(base_offset: int) -> str:
    """File name of the segment whose first record has `base_offset`: 20 digits, zero padded."""
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def list_segment_files(directory: Path) -> list[tuple[int, Path]]:
    """(base offset, path) of every segment file in `directory`, in base-offset order."""
    found = []
    for entry in os.scandir(directory):
        m = _SEGMENT_NAME.match(entry.name)
        if m and entry.is_file():
            found.append((int(m.group(1)), Path(entry.path)))
    found.sort()
    return found


class OffsetSpan:
    """The offsets a segment holds, for anything with a `base` offset and one entry per record in
    `positions` (a scanned segment here, an open one in broker/storage/segment.py)."""

    __slots__ = ()
    base: int
    positions: array

    @property
    def count(self) -> int:
        return len(self.positions)

    @property
    def end_offset(self) -> int:
        return self.base + len(self.positions)


@dataclass
class SegmentScan(OffsetSpan):
    """The valid prefix of one segment file."""

    base: int
    path: Path
    file_size: int
    valid_bytes: int = 0
    positions: array = field(default_factory=lambda: array("Q"))
    epochs: array = field(default_factory=lambda: array("i"))
    records: list[Record] | None = None     # only when scanned with keep_records
    problem: str | None = None              # why the valid prefix ends before file_size
    bad_frame: Frame | None = None          # a well-framed record with a wrong CRC at the cut point


@dataclass
class PartitionScan:
    """All segments of a partition directory: the valid ones and what lies beyond the valid log."""

    directory: Path
    segments: list[SegmentScan]              # segments that keep at least their valid prefix
    doomed: list[tuple[int, Path, int]]      # (base, path, size) of whole segment files beyond the cut
    cut_offset: int | None = None            # first offset that is not valid (== leo), None if clean
    bytes_cut: int = 0                       # bytes beyond the valid log, all segments together
    reason: str | None = None                # why, naming the file and byte

    @property
    def log_start(self) -> int:
        return self.segments[0].base if self.segments else (self.doomed[0][0] if self.doomed else 0)

    @property
    def leo(self) -> int:
        return self.segments[-1].end_offset if self.segments else self.log_start


def scan_segment(path: Path, base: int, *, keep_records: bool = False) -> SegmentScan:
    """Parse `path` record by record and stop at the first invalid byte."""
    with open(path, "rb") as fh:
        data = fh.read()
    scan = SegmentScan(base=base, path=path, file_size=len(data), records=[] if keep_records else None)
    n = len(data)
    pos = 0
    expected = base
    if not keep_records:
        pos, expected = _fast_valid_prefix(data, base, scan.positions, scan.epochs)
    while pos < n:
        try:
            frame = parse_frame(data, pos, require_crc=False)
        except CorruptRecord as exc:
            scan.problem = exc.reason
            break
        if not frame.crc_ok:
            scan.problem = f"CRC mismatch (record of offset {expected})"
            scan.bad_frame = frame
            break
        if frame.record.offset != expected:
            scan.problem = f"offset {frame.record.offset} where {expected} was expected"
            break
        scan.positions.append(pos)
        scan.epochs.append(frame.record.epoch)
        if keep_records:
            scan.records.append(frame.record)
        pos = frame.end
        expected += 1
    scan.valid_bytes = pos
    return scan


def _fast_valid_prefix(data: bytes, base: int, positions: array, epochs: array) -> tuple[int, int]:
    """Index the records that pass every check without building Record objects (start-up speed);
    return (position, offset) of the first record that needs the careful path, or the end."""
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    view = memoryview(data)
    n = len(data)
    pos = 0
    expected = base
    fixed = MIN_LENGTH                  # a local name: this loop runs once per record
    while n - pos >= HEADER.size:
        length, crc, magic, offset, epoch, _ts, klen, vlen = unpack(data, pos)
        end = pos + 4 + length
        # version 1 (plain records, nearly all) checked inline, as framing_ok does: start-up speed
        if (end > n or offset != expected
                or not (klen >= -1 and vlen >= 0 and fixed + (klen if klen > 0 else 0) + vlen == length
                        if magic == FORMAT_VERSION else framing_ok(magic, klen, vlen, length))
                or crc32(view[pos + PREFIX_SIZE:end]) != crc):
            break
        positions.append(pos)
        epochs.append(epoch)
        pos = end
        expected += 1
    return pos, expected


def scan_partition(directory: Path, *, keep_records: bool = False) -> PartitionScan:
    """Scan every segment of a partition directory (read-only)."""
    directory = Path(directory)
    files = list_segment_files(directory)
    result = PartitionScan(directory=directory, segments=[], doomed=[])
    expected: int | None = None
    for i, (base, path) in enumerate(files):
        if expected is not None and base != expected:
            result.reason = f"{path.name}: segment base offset {base} does not continue the log at {expected}"
            result.cut_offset = expected
            _doom(result, files[i:])
            break
        scan = scan_segment(path, base, keep_records=keep_records)
        result.segments.append(scan)
        expected = scan.end_offset
        if scan.problem is not None:
            result.reason = f"{path.name} byte {scan.valid_bytes}: {scan.problem}"
            result.cut_offset = expected
            result.bytes_cut += scan.file_size - scan.valid_bytes
            _doom(result, files[i + 1:])
            break
    return result


def _doom(result: PartitionScan, files: list[tuple[int, Path]]) -> None:
    for base, path in files:
        size = path.stat().st_size
        result.doomed.append((base, path, size))
        result.bytes_cut += size
