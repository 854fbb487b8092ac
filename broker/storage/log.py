"""The disk-backed segmented log of one partition: implements broker.records.Log.

Files: `<partition dir>/<base offset, 20 digits>.log`, records in the format of broker/storage/codec.py.
A new segment starts when the active one holds `segment_records` records. Each segment's
offset->byte-position index (and per-record epochs) is kept in memory and rebuilt by scanning at open,
which is also start-up recovery: a torn or corrupt tail is cut (the file truncated, later segments
deleted) and described in `recovery`. `read` verifies every record it returns (CRC, framing, offset), so
bytes that rot on disk while the log is open are never served: it raises broker.records.LogCorruption.

Durability:
  * `flush()` makes every appended record durable (write if needed, fsync, fsync the directory after
    creating or deleting segment files) and advances `flushed_offset()`.
  * flush_policy "always": every `append` call ends with a flush. "interval" / "never": the owner calls
    `flush()` (on its timer, at shutdown); `close()` flushes.
  * power_loss=True emulates losing the page cache: appended bytes stay in process memory (readable,
    counted in leo) and reach the file only at `flush()`, so a SIGKILL loses exactly what was not
    flushed. Without it, `append` writes to the file at once (one os.write per segment touched), so a
    process kill loses nothing; only fsync timing follows the policy.
  * An `append` that fails (ENOSPC, EIO, a failed "always" flush) takes back whatever it wrote before
    raising the OSError: the log then holds exactly what it held before the call.
  * `truncate_to` cuts the file itself at once (also under power_loss: a truncation is never undone by
    a kill) and is fsynced at the next flush.

All public methods hold one lock, so a flush timer thread may call `flush()` concurrently. While open,
the log holds an exclusive flock on `<partition dir>/.lock`, so a second writer is refused.
"""
from __future__ import annotations

import bisect
import fcntl
import os
import threading
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from broker.config_keys import BY_NAME, FLUSH_POLICIES   # broker.json's policies, checked again where a log opens
from broker.records import LogCorruption, Record
from broker.storage.codec import CorruptRecord, decode_records, encode_records
from broker.storage.scan import scan_partition, segment_name
from broker.storage.segment import Segment

DEFAULT_SEGMENT_RECORDS: int = BY_NAME["segment_records"].default   # broker.json's segment_records


@dataclass(frozen=True)
class RecoveryReport:
    """What start-up recovery cut. `cut_offset` is the first offset no longer in the log (the new leo),
    None when the log was clean; `bytes_cut` counts the bytes removed from all segments together."""

    cut_offset: int | None = None
    bytes_cut: int = 0
    segments_deleted: tuple[str, ...] = ()
    reason: str | None = None

    @property
    def cut(self) -> bool:
        return self.cut_offset is not None


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


LOCK_FILE = ".lock"


def _lock_directory(directory: Path) -> int:
    """Hold an exclusive flock on <directory>/.lock while the log is open: two writers on one log (a
    second broker on the same data dir, or a store opened twice) would corrupt it. A killed process's
    lock goes away with it; the read-only dump does not lock."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(f"{directory}: log is already open (locked by another process or another "
                           f"open store in this one)") from None
    return fd


class SegmentedLog:
    """A `Log` stored in segment files in one directory. Use `SegmentedLog.open(...)`."""

    def __init__(self, directory: Path, segments: list[Segment], *, segment_records: int, power_loss: bool,
                 flush_policy: str, recovery: RecoveryReport):
        self.directory = directory
        self._segments = segments
        self._bases = [s.base for s in segments]
        self.segment_records = segment_records
        self.power_loss = power_loss
        self.flush_policy = flush_policy
        self.recovery = recovery
        self._flushed = segments[-1].end_offset
        self._dir_dirty = False
        self._lock = threading.RLock()
        self._closed = False
        self._lock_fd: int | None = None

    # --- opening and recovery -----------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path | str, *, segment_records: int = DEFAULT_SEGMENT_RECORDS,
             power_loss: bool = False, flush_policy: str = "always") -> "SegmentedLog":
        """Open (creating if needed) the log in `directory`, recovering it: cut any torn/corrupt tail."""
        directory = Path(directory)
        if segment_records < 1:
            raise ValueError(f"segment_records must be at least 1, not {segment_records}")
        if flush_policy not in FLUSH_POLICIES:
            raise ValueError(f"flush policy must be one of {', '.join(FLUSH_POLICIES)}, not {flush_policy!r}")
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        if created:
            fsync_dir(directory.parent)
        lock_fd = _lock_directory(directory)
        try:
            return cls._recover(directory, lock_fd, segment_records=segment_records, power_loss=power_loss,
                                flush_policy=flush_policy)
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def _recover(cls, directory: Path, lock_fd: int, *, segment_records: int, power_loss: bool,
                 flush_policy: str) -> "SegmentedLog":
        scan = scan_partition(directory)
        changed = False
        deleted = []
        for _base, path, _size in scan.doomed:
            path.unlink()
            deleted.append(path.name)
            changed = True
        segments = []
        for s in scan.segments:
            if s.valid_bytes < s.file_size:
                os.truncate(s.path, s.valid_bytes)
                changed = True
            fd = Segment.open_fd(s.path)
            if s.valid_bytes < s.file_size:
                os.fsync(fd)
            segments.append(Segment(directory, s.base, fd=fd, positions=s.positions, epochs=s.epochs,
                                    file_size=s.valid_bytes))
        if not segments:
            base = scan.log_start
            fd = Segment.open_fd(directory / segment_name(base))
            segments.append(Segment(directory, base, fd=fd))
            changed = True
        if changed:
            fsync_dir(directory)
        report = RecoveryReport(cut_offset=scan.cut_offset, bytes_cut=scan.bytes_cut,
                                segments_deleted=tuple(deleted), reason=scan.reason)
        log = cls(directory, segments, segment_records=segment_records, power_loss=power_loss,
                  flush_policy=flush_policy, recovery=report)
        log._lock_fd = lock_fd
        return log

    # --- the Log protocol ---------------------------------------------------------------------------

    def log_start(self) -> int:
        return self._segments[0].base

    def leo(self) -> int:
        return self._segments[-1].end_offset

    def last_epoch(self) -> int | None:
        with self._lock:
            for seg in reversed(self._segments):
                if seg.epochs:
                    return seg.epochs[-1]
            return None

    def append(self, records: Sequence[Record]) -> None:
        """Append records with offsets leo(), leo()+1, ...: one write per segment touched (none under
        power_loss), then a flush when the policy is "always"."""
        if not records:
            return
        with self._lock:
            self._check_open()
            leo = self.leo()
            for i, r in enumerate(records):
                if r.offset != leo + i:
                    raise ValueError(f"append at offset {r.offset}, expected {leo + i} (log end offset is {leo})")
            # Encode everything before writing anything, so a bad record leaves the log untouched.
            chunks = []
            active = self._segments[-1]
            count, size = active.count, active.size
            i = 0
            while i < len(records):
                new_segment = count >= self.segment_records
                if new_segment:
                    count, size = 0, 0
                take = min(self.segment_records - count, len(records) - i)
                chunk = records[i:i + take]
                data, positions = encode_records(chunk, size)
                chunks.append((new_segment, chunk, data, positions))
                i += take
                count += take
                size += len(data)
            try:
                for new_segment, chunk, data, positions in chunks:
                    if new_segment:
                        self._roll()
                    seg = self._segments[-1]
                    seg.append(data, positions, array("i", [r.epoch for r in chunk]), buffered=self.power_loss)
                if self.flush_policy == "always":
                    self._flush_locked()
            except OSError:
                # a full or failing disk: the append takes back what it wrote, so it happened wholly or
                # not at all (a leader may then tell the producer "not written"; a follower asks again)
                self._take_back(leo)
                raise

    def read(self, start: int, max_records: int) -> list[Record]:
        with self._lock:
            self._check_open()
            start = max(start, self.log_start())
            end = min(self.leo(), start + max(max_records, 0))
            out: list[Record] = []
            i = bisect.bisect_right(self._bases, start) - 1
            while start < end:
                seg = self._segments[i]
                stop = min(end, seg.end_offset)
                if stop > start:
                    out.extend(self._decode(seg, start, stop))
                start = stop
                i += 1
            return out

    def count_within(self, start: int, max_records: int, max_bytes: int) -> int:
        """How many records from `start` (at most `max_records`) fit whole in `max_bytes` of stored bytes,
        but at least one if there is any: a reader bounded by bytes asks for no more than that, so a fetch
        of large records never decodes thousands of them to send a few. From the index alone: no I/O."""
        with self._lock:
            self._check_open()
            start = max(start, self.log_start())
            end = min(self.leo(), start + max(max_records, 0))
            if end <= start:
                return 0
            n, left = 0, max_bytes
            i = bisect.bisect_right(self._bases, start) - 1
            while start < end:
                seg = self._segments[i]
                first, stop = start - seg.base, min(end, seg.end_offset) - seg.base
                pos, count = seg.positions, seg.count
                limit = pos[first] + left
                hi = min(stop + 1, count)
                fit = bisect.bisect_right(pos, limit, first + 1, hi) - 1 - first   # each ends at the next's start
                if first + fit == count - 1 and stop == count and seg.size <= limit:
                    fit += 1                                                      # the segment's last record
                n += fit
                if first + fit < stop:
                    break
                left -= (pos[stop] if stop < count else seg.size) - pos[first]
                start = seg.base + stop
                i += 1
            return max(n, 1)

    def _take_back(self, leo: int) -> None:
        """Undo a failed append back to `leo`, as far as the disk lets it (a failure here leaves the torn
        tail to the next open's recovery scan)."""
        try:
            self.truncate_to(leo)
        except OSError:
            pass

    def truncate_to(self, offset: int) -> None:
        with self._lock:
            self._check_open()
            if offset >= self.leo():
                return
            offset = max(offset, self.log_start())
            while len(self._segments) > 1 and self._segments[-1].base >= offset:
                seg = self._segments.pop()
                self._bases.pop()
                seg.delete()
                self._dir_dirty = True
            seg = self._segments[-1]
            seg.truncate_records(offset - seg.base)
            self._flushed = min(self._flushed, offset)

    # --- durability ---------------------------------------------------------------------------------

    def flush(self) -> int:
        """Write (under power_loss) and fsync everything appended; return the flushed offset."""
        with self._lock:
            self._check_open()
            return self._flush_locked()

    def flushed_offset(self) -> int:
        """Records below this offset are durable (fsynced)."""
        return self._flushed

    def unflushed_records(self) -> int:
        return self.leo() - self._flushed

    def close(self, *, flush: bool = True) -> None:
        """Flush (unless flush=False, which emulates a crash for the unflushed part) and close files."""
        with self._lock:
            if self._closed:
                return
            try:
                if flush:
                    self._flush_locked()
            finally:                            # a failed flush (EIO, ENOSPC) still closes every file
                for seg in self._segments:
                    seg.close()
                if self._lock_fd is not None:
                    os.close(self._lock_fd)      # releases the directory lock
                    self._lock_fd = None
                self._closed = True

    def __enter__(self) -> "SegmentedLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- introspection ------------------------------------------------------------------------------

    def segment_bases(self) -> list[int]:
        """Base offsets of the segments, oldest first."""
        return list(self._bases)

    # --- internals ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")

    def _decode(self, seg: Segment, start: int, stop: int) -> list[Record]:
        """Records [start, stop) of `seg`, verified (CRC, framing, offsets): LogCorruption otherwise."""
        first = start - seg.base
        try:
            return decode_records(seg.read_bytes(first, stop - seg.base), start)
        except CorruptRecord as exc:
            bad = start + len(exc.good)
            position = seg.positions[bad - seg.base] if bad < seg.end_offset else seg.size
            raise LogCorruption(bad, exc.reason, f"{seg.path.name} byte {position}") from None

    def _roll(self) -> None:
        base = self.leo()
        seg = Segment(self.directory, base, fd=None)
        if not self.power_loss:
            seg.fd = Segment.open_fd(seg.path)
            self._dir_dirty = True
        self._segments.append(seg)
        self._bases.append(base)

    def _flush_locked(self) -> int:
        if self.power_loss:
            for seg in self._segments:
                if seg.pending or seg.fd is None:
                    if seg.write_pending():
                        self._dir_dirty = True
        for seg in self._segments:
            seg.sync()
        if self._dir_dirty:
            fsync_dir(self.directory)
            self._dir_dirty = False
        self._flushed = self.leo()
        return self._flushed
