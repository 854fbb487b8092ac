"""Statistics: ok/fail/info per operation kind (the client and the group operations), availability
inside and outside fault windows.

A fault window runs from a nemesis `start` completion to the `stop` completion with the same id (no
stop: to the end of the history). Availability is the fraction of `send` and `poll` completions that
were `ok`, split by whether the completion's time lies inside some fault window (bounds included).
Windows are merged on the driver (they are few); an operation's time is tested against each merged
window, or, beyond CASE_WINDOWS of them, matched with a broadcast join on a time bucket.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from rundir import formats as rf
from checkers.anomalies import lookup
from checkers.anomalies.tables import Tables, is_client, rows

BUCKETS = 4096
CASE_WINDOWS = 64  # up to this many (merged) windows are tested one by one; more are matched by a join


def fault_windows(t: Tables) -> list[tuple[int, float]]:
    """[(start, stop)] as the history defines them (stop = inf while open), in fault-id order of first start.
    The nemesis's few lines are read on the driver (lookup.py): a Spark job would scan the same column."""
    fld = lookup.field
    nem = lookup.fetch(t.col_dir, "ops", (fld("process") == rf.NEMESIS_PROCESS) & (fld("type") != "invoke")
                       & fld("fault_id").is_valid(), ["index", "time", "phase", "fault_id"])
    windows: dict[int, list] = {}
    for r in sorted(nem, key=lambda r: r["index"]):
        w = windows.setdefault(r["fault_id"], [None, None])
        if r["phase"] == "start" and w[0] is None:
            w[0] = r["time"]
        elif r["phase"] == "stop":
            w[1] = r["time"]
    return [(s, e if e is not None else float("inf")) for s, e in windows.values() if s is not None]


def _merge(intervals: list[tuple[int, float]]) -> list[list]:
    merged: list[list] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def analyze(t: Tables) -> dict[str, Any]:
    intervals = fault_windows(t)
    merged = _merge(intervals)
    closed = [(s, int(e)) for s, e in merged if e != float("inf")]
    open_from = min((s for s, e in merged if e == float("inf")), default=None)
    # the client operations and the group operations (these name no partition: counted, not placed)
    ops = t.ops.filter(is_client() | F.col("f").isin(*rf.GROUP_FS)).select("partition", "f", "type", "time")
    in_fault = F.lit(False)
    if 0 < len(closed) <= CASE_WINDOWS:
        for s, e in closed:
            in_fault = in_fault | F.col("time").between(s, e)
    elif closed:
        lo, hi = closed[0][0], closed[-1][1]
        width = max(1, (hi - lo) // BUCKETS + 1)
        brows = []
        for s, e in closed:
            for b in range((s - lo) // width, (e - lo) // width + 1):
                brows.append((b, s, e))
        buckets = t.spark.createDataFrame(brows, "bucket long, w_start long, w_stop long")
        ops = ops.withColumn("bucket", F.floor((F.col("time") - F.lit(lo)) / F.lit(width)).cast("long"))
        ops = ops.join(F.broadcast(buckets),
                       (ops["bucket"] == buckets["bucket"]) & (ops["time"] >= buckets["w_start"])
                       & (ops["time"] <= buckets["w_stop"]), "left")
        in_fault = F.col("w_start").isNotNull()
    if open_from is not None:
        in_fault = in_fault | (F.col("time") >= F.lit(open_from))
    counts = rows(ops.groupBy("partition", "f", "type", in_fault.alias("in_fault")).count())
    op_counts: dict[str, dict[str, int]] = {}
    avail = {"in_fault": {"ok": 0, "total": 0}, "outside_fault": {"ok": 0, "total": 0}}
    acked: dict[int, int] = {}
    partitions = set()
    for r in counts:
        if r["partition"] is not None:
            partitions.add(r["partition"])
        if r["type"] == "invoke":
            continue
        c = op_counts.setdefault(r["f"], {"ok": 0, "fail": 0, "info": 0})
        c[r["type"]] += r["count"]
        if r["f"] in ("send", "poll"):
            a = avail["in_fault" if r["in_fault"] else "outside_fault"]
            a["total"] += r["count"]
            a["ok"] += r["count"] if r["type"] == "ok" else 0
        if r["f"] == "send" and r["type"] == "ok":
            acked[r["partition"]] = acked.get(r["partition"], 0) + r["count"]
    return {"ops": {f: op_counts[f] for f in sorted(op_counts)}, "availability": avail,
            "fault_windows": len(intervals), "acked": acked, "partitions": partitions}
