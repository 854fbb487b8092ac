"""The leader-epoch cache: (epoch, start offset) pairs, the first offset each leader epoch wrote.

Seeds 000 section 八 and 002: entry (1, 120) means the leader of epoch 1 wrote its first record at
offset 120, so epoch 0 owns [0, 120). Kafka's LeaderEpochFileCache, without the file: the shell
persists `entries()` whenever `version` changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """Answer to "where does epoch E end": the largest known epoch <= E and the offset it ends at."""
    epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        return self.end_offset == UNDEFINED_OFFSET


UNDEFINED = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)


class EpochCache:
    """Entries kept strictly increasing in both epoch and start offset."""

    def __init__(self, entries: Iterable[tuple[int, int] | EpochEntry] = ()):
        self._entries: list[EpochEntry] = []
        self.version = 0          # bumped on every change, so the shell knows when to checkpoint
        for e in entries:
            epoch, start = (e.epoch, e.start_offset) if isinstance(e, EpochEntry) else e
            self.assign(epoch, start)

    def entries(self) -> list[tuple[int, int]]:
        return [(e.epoch, e.start_offset) for e in self._entries]

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def start_offset_of(self, epoch: int) -> int | None:
        for e in self._entries:
            if e.epoch == epoch:
                return e.start_offset
        return None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether anything changed.

        Like Kafka, an entry that conflicts (an epoch >= the new one, or a start offset >= the new
        one) is removed first, so the cache stays monotonic in both columns.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"epoch cache: bad entry ({epoch}, {start_offset})")
        latest = self.latest_entry()
        if latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset:
            return False          # already known (a later start for the same epoch changes nothing)
        self._entries = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        self._entries.append(EpochEntry(epoch, start_offset))
        self.version += 1
        return True

    def end_offset_for(self, requested_epoch: int, leo: int) -> EpochEndOffset:
        """(largest epoch <= requested, the offset where it ends), as Kafka's endOffsetFor.

        - requested is the latest epoch: (latest, leo).
        - otherwise the floor epoch ends where the next epoch starts.
        - requested is below every known epoch: (requested, start of the first epoch): nothing the
          asker holds in epochs this old is in our log past that offset (Kafka does the same).
        - empty cache, an undefined request, or a request above our latest epoch (cannot happen
          for a leader, whose latest epoch is the current one): UNDEFINED.
        """
        if requested_epoch < 0 or not self._entries:
            return UNDEFINED
        latest = self._entries[-1]
        if requested_epoch == latest.epoch:
            return EpochEndOffset(latest.epoch, leo)
        if requested_epoch > latest.epoch:
            return UNDEFINED
        floor: EpochEntry | None = None
        for i, e in enumerate(self._entries):
            if e.epoch > requested_epoch:
                if floor is None:
                    return EpochEndOffset(requested_epoch, e.start_offset)
                return EpochEndOffset(floor.epoch, e.start_offset)
            floor = e
        raise AssertionError("unreachable: requested epoch below latest has a higher entry")

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after `end_offset` (the log was truncated to it)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) == len(self._entries):
            return False
        self._entries = kept
        self.version += 1
        return True

    def __repr__(self) -> str:
        return f"EpochCache({self.entries()})"
