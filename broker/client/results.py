"""The value types the client library returns: SendResult, FetchResult, PartitionInfo."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SendResult:
    offsets: list[int]        # offset of each sent value, in order (empty for acks=0: unknown)
    epoch: int | None         # leader epoch of the leader that appended them (None for acks=0)


@dataclass(frozen=True)
class FetchResult:
    records: list[tuple[int, int, bytes]]   # (offset, epoch, value), offsets contiguous from the fetch offset
    hw: int
    epoch: int                               # leader epoch of the answering leader
    log_start: int = 0


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int | None
    epoch: int
    isr: list[int]
    replicas: list[int]
    isr_version: int
    # broker id -> (leo, hw) as that broker reports its replica, or None if it could not be asked
    replica_state: dict[int, tuple[int, int] | None] = field(default_factory=dict)
