"""Totals of every anomaly kind over the whole run: counts per partition and a histogram over time.

Both engines tell this module each finding's (kind, partition, operation time, weight) and it turns
them into the results.json fields of docs/formats.md: the run's `time_axis`, and per kind
`by_partition`, `histogram` ({"counts", "untimed"}) and, for lost-write, `ack_times` (first and last
acknowledgement of the lost writes per partition). The Spark engine aggregates its findings into
(kind, partition, bucket, weight, first time, last time) rows first and passes those (`add_bucket`);
the reference passes every finding with its time (`add`).

Which kinds are timed is declared in rundir/kinds.py (`timed`). Which operation a finding's time is (the
same in both engines):
  lost-write, failed-write-present   the send's completion (the ack, or the fail): the example's `time`
  inconsistent-offset                the first observation of the offset in history order (the line the
                                     example's `index` names; `observations[0].time`)
  dirty-read, aborted-read           the value's first poll read (the example's `time`); all reads of
                                     the value (its count) fall in that read's bucket
  nonmonotonic-send                  the later acknowledgement (`later.time`)
  poll-skip, nonmonotonic-poll       the poll (`time`)
  hw-regression(-cross-epoch)        the regressed observation (`time`)
  realtime-order                     the later send's acknowledgement (B's completion: `time`)
  key-reorder                        the later send's completion, whatever its outcome (`time`)
  committed-regression               the committed offset's observation (a committed or group-assign ok: `time`)
  group-resume-mismatch              the member's first poll after the assign (`time`)
  lost-by-group                      the group's final committed read (`time`)
  commit-beyond-log                  the acknowledged commit, or the final committed read (`time`)
  assignment-overlap                 the assignment of the second member (`time`)
  group-reread                       the record's last poll by the group (`time`)
  duplicate, divergence              none (facts about the final log and the replica dumps): `untimed`
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rundir import kinds
from checkers import loss_shape

# candidate bucket widths in seconds; the smallest that covers the run in at most MAX_BUCKETS is used
BUCKET_STEPS_S = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
MAX_BUCKETS = 100
NS = 1_000_000_000
TIMED_KINDS = tuple(k.name for k in kinds.KINDS if k.timed)   # the others are all `untimed`


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class TimeAxis:
    """The run's time axis: [0, end] in `buckets` buckets of `bucket_ns` nanoseconds (the last one also
    takes anything later)."""

    def __init__(self, end_ns: int | None):
        self.end_ns = max(0, int(end_ns or 0))
        for step in BUCKET_STEPS_S:
            self.bucket_ns = int(round(step * NS))
            self.bucket_s = step
            if _ceil_div(self.end_ns, self.bucket_ns) <= MAX_BUCKETS:
                break
        self.buckets = max(1, _ceil_div(self.end_ns, self.bucket_ns))

    def bucket(self, t_ns: int | None) -> int | None:
        """Bucket index of a time in nanoseconds (None: untimed); earlier than 0 counts in bucket 0."""
        if t_ns is None:
            return None
        return max(0, min(t_ns // self.bucket_ns, self.buckets - 1))

    def as_json(self) -> dict[str, Any]:
        return {"start_s": 0.0, "end_s": round(self.end_ns / NS, 6), "bucket_s": float(self.bucket_s),
                "buckets": self.buckets}


def end_time_ns(col_dir: Path | str) -> int | None:
    """The largest `time` of the history's lines (the ops table), from the Parquet row groups' statistics
    (no scan) where every row group has them, else by reading the column on the driver."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    d = pads.dataset(str(Path(col_dir) / "ops"), format="parquet")
    best: int | None = None
    for frag in d.get_fragments():
        md = pq.ParquetFile(frag.path).metadata
        col = md.schema.names.index("time")
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            if rg.num_rows == 0:
                continue
            st = rg.column(col).statistics
            if st is None or not st.has_min_max:
                return _scan_max(d, pc)
            if best is None or st.max > best:
                best = st.max
    return best


def _scan_max(d, pc) -> int | None:
    best = None
    for b in d.to_batches(columns=["time"]):
        m = pc.max(b.column("time")).as_py()
        if m is not None and (best is None or m > best):
            best = m
    return best


class Totals:
    """Accumulates findings into per-kind partition counts, histogram buckets and first/last times."""

    def __init__(self, axis: TimeAxis):
        self.axis = axis
        self.by_part: dict[str, dict[int, int]] = {}
        self.hist: dict[str, list[int]] = {}
        self.untimed: dict[str, int] = {}
        self.span: dict[str, dict[int, list[int]]] = {}   # kind -> partition -> [first, last] time

    def add(self, kind: str, partition: int | None, t_ns: int | None, n: int = 1) -> None:
        """One finding (weight n) at time t_ns (None: untimed)."""
        self.add_bucket(kind, partition, self.axis.bucket(t_ns), n, t_ns, t_ns)

    def add_bucket(self, kind: str, partition: int | None, bucket: int | None, n: int,
                   t_min: int | None, t_max: int | None) -> None:
        """n findings of one (kind, partition) in one bucket (None: untimed), their times within [t_min, t_max]."""
        if not n:
            return
        if partition is not None:
            bp = self.by_part.setdefault(kind, {})
            bp[partition] = bp.get(partition, 0) + n
        if bucket is None:
            self.untimed[kind] = self.untimed.get(kind, 0) + n
        else:
            self.hist.setdefault(kind, [0] * self.axis.buckets)[bucket] += n
        if t_min is not None and partition is not None:
            s = self.span.setdefault(kind, {}).setdefault(partition, [t_min, t_max])
            s[0], s[1] = min(s[0], t_min), max(s[1], t_max)

    def for_kind(self, kind: str) -> dict[str, Any]:
        """The kind's results.json fields: by_partition, histogram (and ack_times for lost-write)."""
        out: dict[str, Any] = {
            "by_partition": {str(p): n for p, n in sorted(self.by_part.get(kind, {}).items()) if n},
            "histogram": {"counts": list(self.hist.get(kind) or [0] * self.axis.buckets),
                          "untimed": self.untimed.get(kind, 0)}}
        if kind == kinds.LOST_WRITE.name:
            out["ack_times"] = {str(p): {"first_s": round(a / NS, 6), "last_s": round(b / NS, 6)}
                                for p, (a, b) in sorted(self.span.get(kind, {}).items())}
        return out


def empty(kind: str, axis: dict[str, Any] | None) -> dict[str, Any]:
    """The fields of a kind without findings, on a results.json time axis (None: one bucket)."""
    buckets = (axis or {}).get("buckets") or 1
    out: dict[str, Any] = {"by_partition": {}, "histogram": {"counts": [0] * buckets, "untimed": 0}}
    if kind == kinds.LOST_WRITE.name:
        out["ack_times"] = {}
        out["loss_shape"] = loss_shape.empty()
    return out
