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

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class RoleChange:
    name: ClassVar[str] = "role"
    partition: int
    role: str
    epoch: int

    def fields(self) -> dict[str, Any]:
        return {"partition": self.partition, "role": self.role, "epoch": self.epoch}


Event = LeaderChange | IsrChange | Truncate | HwChange | RoleChange
