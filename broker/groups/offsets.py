"""Committed offsets, and the records of the `__consumer_offsets` topic that carry them. No I/O.

A group lives in one partition of the offsets topic: `partition_for(group, n)` is Kafka's choice (the
Java hash of the group id, modulo the partition count), so the leader of that partition is the group's
coordinator. Two kinds of record go there, each a JSON key and value:

- an offset commit: key `{"type": "offset", "group", "topic", "partition"}`, value `{"offset",
  "leader_epoch", "metadata", "generation", "member", "ms"}`;
- a generation: key `{"type": "group", "group"}`, value `Group.to_record()` (broker/groups/membership.py),
  written when the leader's assignment makes the group Stable, so a new coordinator goes on from the
  last generation instead of starting again at 1.

A later record of a key replaces an earlier one. `replay(records)` rebuilds what a new coordinator loads.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The offsets partition of a group (Kafka: Utils.abs(groupId.hashCode) % partitions, where
    Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True)
class Committed:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    generation: int = -1
    member: str = ""
    ms: int = 0


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def offset_record(group: str, topic: str, partition: int, c: Committed) -> tuple[bytes, bytes]:
    """(key, value) of one committed offset."""
    key = _dumps({"type": "offset", "group": group, "topic": topic, "partition": partition})
    value = _dumps({"offset": c.offset, "leader_epoch": c.leader_epoch, "metadata": c.metadata,
                    "generation": c.generation, "member": c.member, "ms": c.ms})
    return key, value


def group_record(group: str, state: dict[str, Any]) -> tuple[bytes, bytes]:
    """(key, value) of a group's generation."""
    return _dumps({"type": "group", "group": group}), _dumps(state)


class OffsetStore:
    """Committed offsets per group: {group: {(topic, partition): Committed}}."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[tuple[str, int], Committed]] = {}

    def put(self, group: str, topic: str, partition: int, c: Committed) -> None:
        self.groups.setdefault(group, {})[(topic, partition)] = c

    def get(self, group: str, topic: str, partition: int) -> Committed | None:
        return self.groups.get(group, {}).get((topic, partition))

    def of(self, group: str) -> dict[tuple[str, int], Committed]:
        return dict(self.groups.get(group, {}))


@dataclass
class Loaded:
    """What replaying an offsets partition gives: its committed offsets, the last generation record of
    each group, and how many records were read and could not be decoded (counted, skipped)."""
    offsets: OffsetStore
    generations: dict[str, dict[str, Any]]
    records: int = 0
    undecodable: int = 0


def replay(records: Iterable[tuple[bytes | None, bytes | None]]) -> Loaded:
    """Rebuild an offsets partition's state from its records' (key, value), in log order."""
    out = Loaded(OffsetStore(), {})
    for key, value in records:
        out.records += 1
        try:
            k = json.loads(key) if key is not None else None
            v = json.loads(value) if value is not None else None
            if not isinstance(k, dict) or not isinstance(v, dict):
                raise ValueError("not an object")
            if k["type"] == "offset":
                out.offsets.put(k["group"], k["topic"], int(k["partition"]),
                                Committed(int(v["offset"]), int(v.get("leader_epoch", -1)), v.get("metadata"),
                                          int(v.get("generation", -1)), v.get("member", ""), int(v.get("ms", 0))))
            elif k["type"] == "group":
                out.generations[k["group"]] = v
            else:
                raise ValueError(f"record type {k['type']!r}")
        except (ValueError, KeyError, TypeError):
            out.undecodable += 1
    return out
