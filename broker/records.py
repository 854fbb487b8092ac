"""Records and the log interface shared by the replication state machine and the storage layer.

The state machine (broker/replication) only sees `Log`; the disk-backed segmented log
(broker/storage) and the in-memory log used by deterministic scenarios both implement it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    epoch: int              # leader epoch of the leader that first appended it
    value: bytes
    key: bytes | None = None
    timestamp: int = 0      # ms since the epoch, set by the leader


class LogCorruption(Exception):
    """Stored bytes of a log failed verification on read: the record at `offset` (and everything after
    it) cannot be trusted. `where` names the file and byte position, `reason` what was wrong. A log
    raises it instead of returning records it cannot vouch for; the owner takes the replica out of
    service and recovers it (broker/server/partitions.py)."""

    def __init__(self, offset: int, reason: str, where: str = ""):
        self.offset = offset
        self.reason = reason
        self.where = where
        super().__init__(f"offset {offset}: {reason}" + (f" ({where})" if where else ""))


class Log(Protocol):
    """An append-only, truncatable sequence of records with dense offsets starting at log_start."""

    def log_start(self) -> int: ...

    def leo(self) -> int:
        """Log end offset: the offset the next appended record will get."""

    def append(self, records: Sequence[Record]) -> None:
        """Append records whose offsets are leo(), leo()+1, ...; raises ValueError otherwise."""

    def read(self, start: int, max_records: int) -> list[Record]:
        """Records with offset >= start, at most max_records, in offset order. Raises LogCorruption
        when stored bytes in that range fail verification."""

    def truncate_to(self, offset: int) -> None:
        """Remove every record with offset >= offset (no-op when offset >= leo())."""

    def last_epoch(self) -> int | None:
        """Epoch of the last record, or None when the log is empty."""


class MemoryLog:
    """A `Log` held in a list: used by the deterministic scenarios and unit tests."""

    def __init__(self, records: Sequence[Record] = ()):
        self._records: list[Record] = []
        self.append(records)

    def log_start(self) -> int:
        return 0

    def leo(self) -> int:
        return len(self._records)

    def append(self, records: Sequence[Record]) -> None:
        for r in records:
            if r.offset != len(self._records):
                raise ValueError(f"append at offset {r.offset}, log end offset is {len(self._records)}")
            self._records.append(r)

    def read(self, start: int, max_records: int) -> list[Record]:
        return self._records[max(start, 0): max(start, 0) + max_records]

    def truncate_to(self, offset: int) -> None:
        del self._records[max(offset, 0):]

    def last_epoch(self) -> int | None:
        return self._records[-1].epoch if self._records else None

    def values(self) -> list[bytes]:
        return [r.value for r in self._records]
