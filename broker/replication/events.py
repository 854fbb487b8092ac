"""Events the state machine records for the broker's event log (docs/formats.md "Node event logs").

Each event has `name` (the log's `event` value) and `fields()` (the log's event fields), so the shell
writes it with `EventLog.emit(ev.name, **ev.fields())`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class LeaderChange:
    name: ClassVar[str] = "leader-change"
    partition: int
    leader: int
    epoch: int
    isr: tuple[int, ...]

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "leader": self.leader, "epoch": self.epoch, "isr": list(self.isr)}


@dataclass(frozen=True)
class IsrChange:
    name: ClassVar[str] = "isr-change"
    partition: int
    isr: tuple[int, ...]
    version: int

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "isr": list(self.isr), "version": self.version}


@dataclass(frozen=True)
class Truncate:
    """Records at offsets [to, from_offset) were removed. `why`: hw, leader-epoch, offset-out-of-range, ..."""
    name: ClassVar[str] = "truncate"
    partition: int
    from_offset: int
    to: int
    why: str

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "from": self.from_offset, "to": self.to, "why": self.why}


@dataclass(frozen=True)
class HwChange:
    name: ClassVar[str] = "hw-change"
    partition: int
    old: int
    new: int
    leo: int | None = None            # the replica's LEO as it set the new HW

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "old": self.old, "new": self.new, "leo": self.leo}


@dataclass(frozen=True)
class RoleChange:
    name: ClassVar[str] = "role"
    partition: int
    role: str
    epoch: int

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "role": self.role, "epoch": self.epoch}


@dataclass(frozen=True)
class FetchFenced:
    """Leader side: a follower request (`request` "fetch" or "epoch") was refused because the leader epoch it
    carried is not ours (KIP-320). `error`: FENCED_LEADER_EPOCH (theirs is older) or UNKNOWN_LEADER_EPOCH
    (newer). Logged once per (replica, request, request_epoch, error) while this replica leads an epoch:
    a follower that is ahead of us retries every back-off, and repeats add nothing."""
    name: ClassVar[str] = "fetch-fenced"
    partition: int
    replica: int | None
    request: str
    request_epoch: int
    leader_epoch: int
    error: str

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "replica": self.replica, "request": self.request,
                "request_epoch": self.request_epoch, "leader_epoch": self.leader_epoch, "error": self.error}


@dataclass(frozen=True)
class IsrExpandProposed:
    """Leader side: it proposed adding `replica` to the ISR, whose LEO (its fetch offset) was `replica_leo`
    while the leader's HW was `hw` and its epoch started at `epoch_start` (a follower joins only once caught
    up to both: the HW, and the epoch start with the KAFKA-7128 rule). One line per proposal."""
    name: ClassVar[str] = "isr-expand-proposed"
    partition: int
    replica: int
    replica_leo: int
    hw: int
    epoch_start: int

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "replica": self.replica, "replica_leo": self.replica_leo,
                "hw": self.hw, "epoch_start": self.epoch_start}


@dataclass(frozen=True)
class FollowerServed:
    """Leader side: a follower request (`request` "fetch" or "epoch") carrying leader epoch
    `request_epoch` (None: none) was served. Logged once per (replica, request, request_epoch) while this
    replica leads an epoch, so a few lines per leadership: what the protocol rule stale-epoch-served reads
    (KIP-320: with fencing, only the leader's own epoch is served)."""
    name: ClassVar[str] = "follower-served"
    partition: int
    replica: int | None
    request: str
    request_epoch: int | None

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "replica": self.replica, "request": self.request,
                "request_epoch": self.request_epoch}


@dataclass(frozen=True)
class StaleFetchServed:
    """Leader side, fetch_fencing off only: a follower request carrying another leader epoch was served
    anyway (a pre-2.1 broker; KAFKA-6880's zombie fetcher). Logged once per (replica, request,
    request_epoch) while this replica leads an epoch (a zombie is served on every fetch round)."""
    name: ClassVar[str] = "stale-fetch-served"
    partition: int
    replica: int | None
    request: str
    request_epoch: int
    leader_epoch: int

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "replica": self.replica, "request": self.request,
                "request_epoch": self.request_epoch, "leader_epoch": self.leader_epoch}


@dataclass(frozen=True)
class EpochQuery:
    """Follower side: the leader's OffsetsForLeaderEpoch answer was applied. `epoch` is the epoch asked
    about, `current_epoch` the follower's leader epoch; `error` None or the refusal's name (then the answer
    fields are None); `truncate_to` the offset the log was cut to, None if nothing was cut."""
    name: ClassVar[str] = "epoch-query"
    partition: int
    leader: int
    epoch: int
    current_epoch: int
    error: str | None
    answer_epoch: int | None
    answer_end: int | None
    truncate_to: int | None

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "leader": self.leader, "epoch": self.epoch,
                "current_epoch": self.current_epoch, "error": self.error, "answer_epoch": self.answer_epoch,
                "answer_end": self.answer_end, "truncate_to": self.truncate_to}


@dataclass(frozen=True)
class EpochAnswer:
    """Leader side: an OffsetsForLeaderEpoch request was answered: `epoch` asked by `replica` (None when
    the request does not say who sent it), answered with (`answer_epoch`, `answer_end`); -1, -1 is
    UNDEFINED (no epoch <= the one asked)."""
    name: ClassVar[str] = "epoch-answer"
    partition: int
    replica: int | None
    epoch: int
    answer_epoch: int
    answer_end: int

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "replica": self.replica, "epoch": self.epoch,
                "answer_epoch": self.answer_epoch, "answer_end": self.answer_end}


@dataclass(frozen=True)
class ProducersLoaded:
    """The idempotent producers' table was built before judging a batch: from the snapshot at `snapshot`
    plus the `replayed` records after it, or from the whole log (`snapshot` None; `rejected` says why a
    snapshot there was not used). `why`: "opened" (the first time since the replica was opened) or
    "truncation" (a truncation cut more of a producer than the table remembered)."""
    name: ClassVar[str] = "producers-loaded"
    partition: int
    snapshot: int | None
    replayed: int
    producers: int
    why: str
    rejected: str | None

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "snapshot": self.snapshot, "replayed": self.replayed,
                "producers": self.producers, "why": self.why, "rejected": self.rejected}


Event = (LeaderChange | IsrChange | Truncate | HwChange | RoleChange | FetchFenced | StaleFetchServed
         | EpochQuery | EpochAnswer | ProducersLoaded)
