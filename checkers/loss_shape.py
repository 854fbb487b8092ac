"""Where in each partition's acknowledged sequence its lost writes fall: a lost prefix, middle or suffix.

Owns the rule and the results.json field `anomalies["lost-write"].loss_shape` (docs/formats.md); both
engines use it. A partition's *acknowledged sequence* is its sends that ended `ok`, ordered by the
acknowledged offset, ties (two acks at one offset: a truncated write and its replacement) broken by
history index; every ok send carries an offset (ingest rejects one without). Its lost writes (the
lost-write findings) form maximal runs of consecutive positions. A run that holds the first
acknowledged write is a lost *prefix*, one that holds the last a lost *suffix*, any other a lost
*middle*; a run that holds both (every acknowledged write of the partition lost) is *all*, counted
there only. Per partition and in total: {"prefix"|"middle"|"suffix"|"all": {"writes": n, "runs": r}}.

The reference engine classifies the whole sequence (`classify`); the Spark engine counts the same per
partition with a window (checkers/anomalies/loss_shape.py) and both hand their counts to `as_json`.
"""
from __future__ import annotations

from typing import Any, Iterable

CLASSES = ("prefix", "middle", "suffix", "all")


def zero() -> dict[str, dict[str, int]]:
    return {c: {"writes": 0, "runs": 0} for c in CLASSES}


def classify(lost: Iterable[bool]) -> dict[str, dict[str, int]]:
    """The shape of one partition's loss: `lost` says, for each acknowledged write in sequence order,
    whether it was lost."""
    flags = list(lost)
    out = zero()
    n = len(flags)
    i = 0
    while i < n:
        if not flags[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and flags[j + 1]:
            j += 1
        first, last = i == 0, j == n - 1
        cls = "all" if first and last else "prefix" if first else "suffix" if last else "middle"
        out[cls]["writes"] += j - i + 1
        out[cls]["runs"] += 1
        i = j + 1
    return out


def as_json(by_partition: dict[int, dict[str, dict[str, int]]]) -> dict[str, Any]:
    """The results.json field from per-partition shapes: partitions without lost writes are left out
    (string keys, ascending); `total` sums every partition (zeros when nothing was lost)."""
    total = zero()
    parts: dict[str, Any] = {}
    for p in sorted(by_partition):
        shape = by_partition[p]
        if not any(shape[c]["writes"] for c in CLASSES):
            continue
        parts[str(p)] = {c: dict(shape[c]) for c in CLASSES}
        for c in CLASSES:
            total[c]["writes"] += shape[c]["writes"]
            total[c]["runs"] += shape[c]["runs"]
    return {"by_partition": parts, "total": total}


def empty() -> dict[str, Any]:
    return as_json({})
