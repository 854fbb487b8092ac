"""Records and the log interface shared by the replication state machine and the storage layer.

The state machine (broker/replication) only sees `Log`; the disk-backed segmented log
(broker/storage) and the in-memory log used by deterministic scenarios both implement it.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence


class Record(NamedTuple):
    """One record of a log. A named tuple: immutable, compared by value, and cheap to make (a frozen
    dataclass of these nine fields took ~45% longer to decode and append, measured)."""
    offset: int
    epoch: int              # leader epoch of the leader that first appended it
    value: bytes | None     # None: a null value (a Kafka tombstone)
    key: bytes | None = None
    timestamp: int = 0      # ms since the epoch: the producer's (CreateTime) or the leader's append time
    headers: tuple = ()     # ((key: str, value: bytes | None), ...), as a Kafka record carries them
    producer_id: int = -1   # an idempotent producer's id, epoch and this record's sequence number (KIP-98);
    producer_epoch: int = -1  # -1 for any other record
    sequence: int = -1


def replica_record(r: Record) -> list:
    """A record as a follower fetch carries it in the native protocol (msgpack): [offset, epoch, value,
    timestamp], then [key, headers] only when the record has either or a producer, then [producer id,
    producer epoch, sequence] only for an idempotent producer's record: plain records cost no more."""
    if r.key is None and not r.headers and r.producer_id < 0:
        return [r.offset, r.epoch, r.value, r.timestamp]
    out = [r.offset, r.epoch, r.value, r.timestamp, r.key, [list(h) for h in r.headers]]
    if r.producer_id >= 0:
        out += [r.producer_id, r.producer_epoch, r.sequence]
    return out


def from_replica_record(item) -> Record:
    """The Record of a follower fetch's list (replica_record's inverse); ValueError when malformed."""
    if len(item) == 4:
        o, e, v, ts = item
        return Record(o, e, v, None, ts)
    o, e, v, ts, key, headers, *producer = item
    if producer:
        pid, pepoch, seq = producer
        return Record(o, e, v, key, ts, tuple((str(k), hv) for k, hv in headers), pid, pepoch, seq)
    return Record(o, e, v, key, ts, tuple((str(k), hv) for k, hv in headers))


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
