"""The checker's totals as the report shows them: per-partition counts and where each anomaly kind falls in time.

The checker lists only its first few examples of each anomaly kind, but it counts all of them:
results.json has `partitions[].acked` / `.lost`, `anomalies.<kind>.by_partition`, `.histogram` on the
shared `time_axis`, and `anomalies["lost-write"].ack_times` and `.loss_shape` (docs/formats.md). Every number the report
prints per partition comes from here, never from counting examples. A results.json written before those
fields existed has only the examples: then the counts are taken from the examples and flagged
(`from_examples`), so the page can say that they are a lower bound.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rundir import formats as runformat
from rundir.kinds import LOST_WRITE

LOST = LOST_WRITE.name
SHAPE_CLASSES = ("prefix", "middle", "suffix")   # and "all": every acknowledged write lost
SHAPE_WORDS = {"prefix": "at the start", "middle": "in the middle", "suffix": "at the end"}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _anomalies(results: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    a = (results or {}).get("anomalies")
    if not isinstance(a, dict):
        return {}
    return {k: v for k, v in a.items() if isinstance(v, dict)}


def _by_partition(body: dict[str, Any]) -> dict[int, int] | None:
    """`by_partition` with integer keys, or None when absent or not readable (an old results.json)."""
    bp = body.get("by_partition")
    if not isinstance(bp, dict):
        return None
    out: dict[int, int] = {}
    for k, v in bp.items():
        try:
            p = int(k)
        except (TypeError, ValueError):
            return None
        n = _int(v)
        if n is None:
            return None
        if n:
            out[p] = n
    return out


def _from_examples(body: dict[str, Any]) -> dict[int, int]:
    out: dict[int, int] = {}
    for ex in body.get("examples") or []:
        if isinstance(ex, dict) and _int(ex.get("partition")) is not None:
            out[ex["partition"]] = out.get(ex["partition"], 0) + 1
    return out


@dataclass
class PartitionTotals:
    partition: int
    acked: int | None = None          # acknowledged sends to this partition
    lost: int = 0                     # of those, lost (the checker's total, or examples when flagged)
    lost_from_examples: bool = False  # the results.json has no total: `lost` counts examples only
    first_ack_s: float | None = None  # first and last acknowledgement of this partition's lost writes
    last_ack_s: float | None = None
    kinds: dict[str, int] = field(default_factory=dict)  # other anomaly kinds found in this partition
    kinds_from_examples: set[str] = field(default_factory=set)
    shape: dict[str, tuple[int, int]] | None = None  # loss shape: class -> (writes, runs); None: not given

    @property
    def shape_text(self) -> str | None:
        """'3 at the start (in 1 stretch), 12 at the end (in 2 stretches)', 'every one of its 6
        acknowledged writes', or None without a loss shape (nothing lost, or a results.json written
        before it existed)."""
        if not self.shape:
            return None
        every = self.shape.get("all", (0, 0))[0]
        if every:
            return f"every one of its {every:,} acknowledged writes"
        parts = []
        for c in SHAPE_CLASSES:
            n, runs = self.shape.get(c, (0, 0))
            if n:
                parts.append(f"{n:,} {SHAPE_WORDS[c]} (in {runs:,} stretch{'' if runs == 1 else 'es'})")
        return ", ".join(parts) or "none"

    @property
    def lost_text(self) -> str:
        """'340 lost of 2,000 acknowledged', or 'at least 10 lost (from examples) of ...' for old files."""
        of = f" of {self.acked:,} acknowledged" if self.acked is not None else " acknowledged writes"
        if self.lost_from_examples:
            if not self.lost:
                return "lost writes not counted per partition (no example here)" + (
                    f"; {self.acked:,} acknowledged" if self.acked is not None else "")
            return f"at least {self.lost:,} lost{of} (counted from examples)"
        return f"{self.lost:,} lost{of}"

    @property
    def bad(self) -> bool:
        return bool(self.lost or any(self.kinds.values()))


def partition_totals(results: dict[str, Any] | None) -> dict[int, PartitionTotals]:
    """Per partition: acknowledged and lost writes and the other kinds' counts, from the checker's totals."""
    if not isinstance(results, dict):
        return {}
    out: dict[int, PartitionTotals] = {}

    def get(p: int) -> PartitionTotals:
        if p not in out:
            out[p] = PartitionTotals(p)
        return out[p]

    listed_lost: dict[int, int] = {}
    for item in results.get("partitions") or []:
        if isinstance(item, dict) and _int(item.get("partition")) is not None:
            pt = get(item["partition"])
            pt.acked = _int(item.get("acked"))
            if _int(item.get("lost")) is not None:
                listed_lost[pt.partition] = item["lost"]
    anomalies = _anomalies(results)
    lw = anomalies.get(LOST)
    if lw is not None:
        bp = _by_partition(lw)
        if bp is None and not listed_lost and (_int(lw.get("count")) or 0) > 0:
            for p, n in _from_examples(lw).items():
                get(p).lost, get(p).lost_from_examples = n, True
            for pt in out.values():  # partitions without an example: unknown, not zero
                pt.lost_from_examples = True
        else:
            for p, n in (bp or {}).items():
                get(p).lost = n
        for p, n in listed_lost.items():  # partitions[].lost is the per-partition total itself
            get(p).lost = n
        times = lw.get("ack_times")
        if isinstance(times, dict):
            for k, span in times.items():
                try:
                    p = int(k)
                except (TypeError, ValueError):
                    continue
                if isinstance(span, dict) and p in out:
                    out[p].first_ack_s, out[p].last_ack_s = _num(span.get("first_s")), _num(span.get("last_s"))
        for p, shape in _loss_shapes(lw).items():
            if p in out:
                out[p].shape = shape
    elif listed_lost:
        for p, n in listed_lost.items():
            get(p).lost = n
    for kind, body in anomalies.items():
        if kind == LOST or not (_int(body.get("count")) or 0):
            continue
        bp = _by_partition(body)
        exact = bp is not None
        for p, n in (bp if exact else _from_examples(body)).items():
            pt = get(p)
            pt.kinds[kind] = n
            if not exact:
                pt.kinds_from_examples.add(kind)
    return dict(sorted(out.items()))


def _loss_shapes(lost: dict[str, Any]) -> dict[int, dict[str, tuple[int, int]]]:
    """`loss_shape.by_partition` as {partition: {class: (writes, runs)}}; partitions whose entry is not
    readable are left out."""
    ls = lost.get("loss_shape")
    bp = ls.get("by_partition") if isinstance(ls, dict) else None
    if not isinstance(bp, dict):
        return {}
    out: dict[int, dict[str, tuple[int, int]]] = {}
    for k, body in bp.items():
        try:
            p = int(k)
        except (TypeError, ValueError):
            continue
        if not isinstance(body, dict):
            continue
        shape = {}
        for c in (*SHAPE_CLASSES, "all"):
            entry = body.get(c) or {}
            n, runs = (_int(entry.get("writes")), _int(entry.get("runs"))) if isinstance(entry, dict) else (None, None)
            if n is None or runs is None:
                break
            shape[c] = (n, runs)
        else:
            out[p] = shape
    return out


@dataclass
class TimeAxis:
    end_s: float
    bucket_s: float
    buckets: int

    def span(self, i: int) -> tuple[float, float]:
        """Seconds covered by bucket i (the last one ends at end_s: later times are counted in it)."""
        t0 = i * self.bucket_s
        t1 = (i + 1) * self.bucket_s
        if i == self.buckets - 1 and self.end_s > t0:
            t1 = self.end_s
        return t0, t1


@dataclass
class KindBand:
    """One anomaly kind's findings per time bucket, for the band under the timeline."""
    kind: str
    count: int
    fails_run: bool
    counts: list[int]
    untimed: int
    first_s: float | None  # start of the first and end of the last non-empty bucket
    last_s: float | None

    @property
    def timed(self) -> int:
        return sum(self.counts)


def time_axis(results: dict[str, Any] | None) -> TimeAxis | None:
    ta = (results or {}).get("time_axis")
    if not isinstance(ta, dict):
        return None
    end, bs, n = _num(ta.get("end_s")), _num(ta.get("bucket_s")), _int(ta.get("buckets"))
    if end is None or bs is None or n is None or bs <= 0 or n < 1:
        return None
    return TimeAxis(end, bs, n)


def kind_bands(results: dict[str, Any] | None) -> tuple[TimeAxis | None, list[KindBand]]:
    """The time axis and, for every kind with findings and a readable histogram, its band (documented
    kind order). ([], None) for a results.json without histograms."""
    axis = time_axis(results)
    if axis is None:
        return None, []
    anomalies = _anomalies(results)
    order = [k for k in runformat.ANOMALY_KINDS if k in anomalies] + sorted(
        k for k in anomalies if k not in runformat.ANOMALY_KINDS)
    bands = []
    for kind in order:
        body = anomalies[kind]
        count = _int(body.get("count")) or 0
        hist = body.get("histogram")
        if not count or not isinstance(hist, dict):
            continue
        counts = hist.get("counts")
        if not isinstance(counts, list) or len(counts) != axis.buckets or any(_int(c) is None for c in counts):
            continue
        nonzero = [i for i, c in enumerate(counts) if c]
        first = axis.span(nonzero[0])[0] if nonzero else None
        last = axis.span(nonzero[-1])[1] if nonzero else None
        if kind == LOST and isinstance(body.get("ack_times"), dict):  # exact acknowledgement times
            spans = [s for s in body["ack_times"].values() if isinstance(s, dict)]
            firsts = [v for v in (_num(s.get("first_s")) for s in spans) if v is not None]
            lasts = [v for v in (_num(s.get("last_s")) for s in spans) if v is not None]
            if firsts and lasts:
                first, last = min(firsts), max(lasts)
        bands.append(KindBand(kind, count, bool(body.get("fails_run", True)), list(counts),
                              _int(hist.get("untimed")) or 0, first, last))
    return axis, bands
