"""Requests and answers exchanged between replicas and with the shell (plain data, no I/O).

The shell (broker server) turns these into wire messages; the simulator passes them directly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from broker.records import Record
from broker.replication.epoch_cache import EpochEndOffset
from broker.replication.errors import ErrorCode


@dataclass(frozen=True)
class FetchRequest:
    """A follower's fetch, to be sent to `leader_id` and answered by its `handle_fetch`."""
    leader_id: int
    replica_id: int
    fetch_offset: int
    current_leader_epoch: int          # KIP-320: the epoch the follower believes is current
    max_records: int


@dataclass(frozen=True)
class EpochRequest:
    """A follower's OffsetsForLeaderEpoch, answered by the leader's `handle_offsets_for_leader_epoch`."""
    leader_id: int
    replica_id: int
    requested_epoch: int               # "where does this epoch end in your log?"
    current_leader_epoch: int


@dataclass(frozen=True)
class FetchResponse:
    error: ErrorCode | None
    records: tuple[Record, ...] = ()
    high_watermark: int = 0            # the leader's HW after it processed the fetch
    leader_epoch: int = -1
    leader_leo: int = 0                # for OFFSET_OUT_OF_RANGE handling
    log_start: int = 0


@dataclass(frozen=True)
class EpochResponse:
    error: ErrorCode | None
    end: EpochEndOffset | None = None   # (largest epoch <= requested the leader knows, its end offset)
    leader_epoch: int = -1


@dataclass(frozen=True)
class IsrProposal:
    """An ISR change the leader asks the controller for (AlterPartition). `based_on_version` is the ISR
    version the leader had; the controller rejects the proposal if its version differs."""
    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    isr: tuple[int, ...]
    based_on_version: int
    kind: Literal["shrink", "expand"]


@dataclass(frozen=True)
class BatchFields:
    """What a produce's records carry besides their values, as a Kafka client's RecordBatch sends them:
    per-record `keys`, `headers` and producer `timestamps` (CreateTime), each one entry per value or None
    (not sent), and `producer` = (producer id, producer epoch, first sequence) for an idempotent producer's
    batch (producers.py). The native client sends none of them: `PLAIN`."""
    keys: Sequence[bytes | None] | None = None
    headers: Sequence[tuple] | None = None
    timestamps: Sequence[int] | None = None
    producer: tuple[int, int, int] | None = None


PLAIN = BatchFields()


@dataclass(frozen=True)
class ProduceResult:
    """Outcome of `produce`. With acks=all and `complete` False the shell parks the request and asks
    `produce_status(last_offset, epoch)` whenever the HW or the ISR changes (timeouts are its job)."""
    error: ErrorCode | None
    base_offset: int = -1
    last_offset: int = -1
    epoch: int = -1
    complete: bool = False
    hw: int = -1                      # the HW and ISR when the outcome was decided (the broker's `ack` event)
    isr: tuple[int, ...] = ()
    duplicate: bool = False           # an idempotent producer's retry: the offsets are those of its first append
    message: str = ""                 # why it was refused, for the client


@dataclass(frozen=True)
class ProduceStatus:
    """state: "complete" (HW > last offset and |ISR| >= min.insync), "waiting", or "failed" with error:
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (the record is below the HW but the ISR shrank below
    min.insync_replicas) or NOT_LEADER (leadership or epoch changed: outcome unknown, the record may
    or may not survive)."""
    state: Literal["complete", "waiting", "failed"]
    error: ErrorCode | None = None
    hw: int = -1                      # with "complete": the HW and ISR it was decided on
    isr: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConsumerRead:
    """A client read: only records below the HW are visible."""
    error: ErrorCode | None
    records: tuple[Record, ...] = ()
    high_watermark: int = 0
    leader_epoch: int = -1


FollowerRequest = FetchRequest | EpochRequest

