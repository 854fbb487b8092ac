"""Explaining findings, shared by both engines: which replica holds what; what a poll skipped.

Each engine fetches the few replica records an example needs (by partition and offset or value) and
these functions turn them into the example's `replicas` field, so the Spark checker and the reference
describe a finding identically; what a kind's `replicas` field shows is declared with the kind
(rundir/kinds.py). Likewise each engine looks up the final committed log at the offsets a
poll-skip skipped, and `skipped` turns those into the example's `skipped` field. And both decide alike
which leader epochs an inconsistent-offset compares (`epoch_sources`) and describe its observations
(`offset_observations`).
"""
from __future__ import annotations

from typing import Any, Iterable

from rundir import kinds

SKIPPED_SHOWN = 10        # skipped offsets named per poll-skip example
UNSEEN_VALUES_SHOWN = 10  # acknowledged values named per unseen partition, and in all

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
    """The (partition, offset) and (partition, value) keys the examples of every kind need explained
    (what each kind's `replicas` field shows: rundir/kinds.py)."""
    offsets: set[tuple[int, int]] = set()
    values: set[tuple[int, Any]] = set()
    for kind, exs in examples.items():
        shows = _replicas_showing(kind)
        for e in exs:
            p = e["partition"]
            if shows in ("value-and-offset", "value"):
                values.add((p, e["value"]))
            if shows in ("value-and-offset", "offset", "offset-and-meta"):
                offsets.add((p, e["offset"]))
    return offsets, values


def attach(examples: dict[str, list[dict]], idx: ReplicaIndex) -> None:
    """Add the `replicas` field to every example of a kind that has one, in place."""
    for kind, exs in examples.items():
        shows = _replicas_showing(kind)
        for e in exs:
            p = e["partition"]
            if shows == "value-and-offset":
                holders = idx.value_holders(p, e["value"])
                at = idx.at_offset(p, e["offset"])
                e["replicas"] = {n: {"value_at": holders[n], "at_offset": at[n]} for n in holders}
            elif shows == "value":
                e["replicas"] = {n: {"value_at": o} for n, o in idx.value_holders(p, e["value"]).items()}
            elif shows == "offset-and-meta":
                e["replicas"] = idx.at_offset(p, e["offset"], with_meta=True)
            elif shows == "offset":
                e["replicas"] = idx.at_offset(p, e["offset"])


def _replicas_showing(kind: str) -> str | None:
    k = kinds.BY_NAME.get(kind)
    return k.replicas if k is not None else None


def skipped_offsets(offset: int, gap: int) -> range:
    """The first SKIPPED_SHOWN offsets a poll-skip with this `offset` and `gap` skipped, in order."""
    start = offset - gap
    return range(start, min(offset, start + SKIPPED_SHOWN))


def skipped(offset: int, gap: int, final_at: dict[int, set]) -> list[dict[str, Any]]:
    """A poll-skip's `skipped` field: each skipped offset with its value in the final committed log
    (`final_at`: offset -> values read there; the smallest if final reads disagree, null if none)."""
    return [{"offset": o, "value": min(final_at[o]) if final_at.get(o) else None}
            for o in skipped_offsets(offset, gap)]


def unseen_values(shown: dict[int, list]) -> list[dict[str, Any]]:
    """`unseen.values`: the first UNSEEN_VALUES_SHOWN acknowledged (partition, value) pairs in that order,
    from each unseen partition's first sorted values (`shown`: partition -> sorted values)."""
    pairs = [{"partition": p, "value": v} for p in sorted(shown) for v in shown[p]]
    return pairs[:UNSEEN_VALUES_SHOWN]


def epoch_sources(unknown: dict[int, tuple[int, int, int]]) -> dict[str, set[int]]:
    """Where the engines compare leader epochs (inconsistent-offset): `unknown` maps a partition to its
    counts of observations without an epoch (-1) among (ok sends, poll records, final-read records inside
    [0, hw)). The final reads are the reference: a partition's acknowledgements (polls) have their epochs
    compared with the final log's when none of them, and none of its final reads, lacks one. So a run
    with Kafka producers (whose acknowledgements carry no epoch) still compares its polls."""
    final_known = {p for p, (_a, _r, f) in unknown.items() if f == 0}
    return {"acks": {p for p in final_known if unknown[p][0] == 0},
            "polls": {p for p in final_known if unknown[p][1] == 0}}


def known_epoch(epoch: Any) -> bool:
    """An observation's leader epoch is known: not None and not -1 (Kafka's "no epoch")."""
    return epoch is not None and epoch >= 0


def offset_observations(obs: list[tuple]) -> tuple[list[int], list[dict[str, Any]]]:
    """An inconsistent-offset example's `epochs` (the known ones, the 10 lowest) and `observations` (the
    first 10) from an offset's observations (index, pos, source, value, time, process, epoch) in history
    order."""
    epochs = sorted({x[6] for x in obs if known_epoch(x[6])})[:10]
    return epochs, [{"source": x[2], "value": x[3], "epoch": x[6] if known_epoch(x[6]) else None,
                     "index": x[0], "time": x[4], "process": x[5]} for x in obs[:10]]
