"""Explaining findings with the replica dumps: which replica holds what, shared by both engines.

Each engine fetches the few replica records an example needs (by partition and offset or value) and
these functions turn them into the example's `replicas` field, so the Spark checker and the reference
describe a finding identically.
"""
from __future__ import annotations

from typing import Any, Iterable

# a replica record as fetched: (node, partition, offset, epoch, value, crc_ok)
ReplicaRow = tuple[str, int, int, int, Any, bool]


class ReplicaIndex:
    """The fetched replica records, indexed by (partition, offset) and (partition, value)."""

    def __init__(self, rows: Iterable[ReplicaRow], nodes_by_partition: dict[int, list[str]],
                 meta: dict[tuple[str, int], dict[str, int]]):
        self.nodes = nodes_by_partition
        self.meta = meta
        self.at: dict[tuple[int, int], dict[str, tuple[Any, int, bool]]] = {}
        self.where: dict[tuple[int, Any], dict[str, int]] = {}
        for node, part, offset, epoch, value, crc in rows:
            self.at.setdefault((part, offset), {})[node] = (value, epoch, bool(crc))
            if value is not None:
                w = self.where.setdefault((part, value), {})
                if node not in w or offset < w[node]:
                    w[node] = offset

    def value_holders(self, part: int, value: Any) -> dict[str, int | None]:
        """node -> lowest offset at which the replica holds `value` (None: not held)."""
        w = self.where.get((part, value), {})
        return {n: w.get(n) for n in self.nodes.get(part, [])}

    def at_offset(self, part: int, offset: int, with_meta: bool = False) -> dict[str, Any]:
        """node -> {value, epoch, crc_ok} of the record at `offset` (None: the replica has none)."""
        recs = self.at.get((part, offset), {})
        out: dict[str, Any] = {}
        for n in self.nodes.get(part, []):
            r = recs.get(n)
            d = None if r is None else {"value": r[0], "epoch": r[1], "crc_ok": r[2]}
            if with_meta:
                m = self.meta.get((n, part), {})
                d = {"record": d, "hw": m.get("hw"), "leo": m.get("leo")}
            out[n] = d
        return out


def wanted_keys(examples: dict[str, list[dict]]) -> tuple[set[tuple[int, int]], set[tuple[int, Any]]]:
    """The (partition, offset) and (partition, value) keys the examples of every kind need explained."""
    offsets: set[tuple[int, int]] = set()
    values: set[tuple[int, Any]] = set()
    for kind, exs in examples.items():
        for e in exs:
            p = e["partition"]
            if kind in ("lost-write",):
                values.add((p, e["value"]))
                offsets.add((p, e["offset"]))
            elif kind in ("failed-write-present", "dirty-read", "aborted-read", "duplicate"):
                values.add((p, e["value"]))
            elif kind in ("divergence", "inconsistent-offset"):
                offsets.add((p, e["offset"]))
    return offsets, values


def attach(examples: dict[str, list[dict]], idx: ReplicaIndex) -> None:
    """Add the `replicas` field to every example, in place."""
    for kind, exs in examples.items():
        for e in exs:
            p = e["partition"]
            if kind == "lost-write":
                holders = idx.value_holders(p, e["value"])
                at = idx.at_offset(p, e["offset"])
                e["replicas"] = {n: {"value_at": holders[n], "at_offset": at[n]} for n in holders}
            elif kind in ("failed-write-present", "dirty-read", "aborted-read", "duplicate"):
                e["replicas"] = {n: {"value_at": o} for n, o in idx.value_holders(p, e["value"]).items()}
            elif kind == "divergence":
                e["replicas"] = idx.at_offset(p, e["offset"], with_meta=True)
            elif kind == "inconsistent-offset":
                e["replicas"] = idx.at_offset(p, e["offset"])
