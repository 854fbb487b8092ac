"""The Spark checker: runs every anomaly family on the columnar tables and assembles the findings.

Heavy work (aggregations and windows over the whole history and the replica dumps) stays in Spark and
only flagged rows are kept; counts and the first N examples of each kind (in a fixed order, the same as
the reference's, taking every partition's first before any partition's second) are collected, then the few history lines, reads and replica records the examples
need are looked up on the driver (lookup.py) and attached. The counts come with their totals over
the run (per partition and time bucket: checkers/totals.py) from the same aggregation. Order of work:
the small tables, read on the driver; statistics; the sends that ended fail or info (persisted: few);
block digests (digests.py) and the exact per-offset pass on the blocks they cannot vouch for
(offsets.py, whose input records are persisted for values.py); the value, order, watermark and
divergence families as one union of flagged rows; two small jobs over that union (one for small
inputs); where writes were lost, their places in the acknowledged sequences (loss_shape.py). At 10M sends on 2 cores the cost is mostly per query (code generation, JIT warm-up, planning)
and per full scan, so each table is scanned as few times as the dependencies allow and small
intermediate results are persisted rather than recomputed.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from rundir import formats as rf
from rundir import kinds
from checkers import explain, totals
from checkers import loss_shape as shape_rule
from checkers import protocol_trace
from checkers.anomalies import digests, lookup, loss_shape, offsets, protocol, stats
from checkers.anomalies.context import CheckContext
from checkers.anomalies.tables import POS_BITS, Tables, load, rows

FINDING_TASKS = 4

# the anomaly families, one module per family of rundir/kinds.py (checkers/anomalies/<family>.py), in its
# order: each finds the kinds its KINDS lists with `analyze(ctx)`, one union of flagged rows between them,
# and builds their examples with `examples(top, details)`; the protocol family (the white-box rules) runs
# apart, on the event logs, and builds its own examples
FAMILIES = tuple(importlib.import_module(f"checkers.anomalies.{name}") for name in kinds.FAMILY_NAMES
                 if name != protocol.FAMILY)


def analyze(spark: SparkSession, col_dir: Path | str, examples: int = 10,
            step: Callable[[str], None] | None = None, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every kind's findings; the protocol kinds only with `facts` (checkers/protocol_trace.run_facts)."""
    say = step or (lambda _m: None)
    small = _tune(spark, Path(col_dir))
    ctx = CheckContext(load(spark, col_dir), Path(col_dir), examples, small, facts)
    try:
        return _analyze(ctx, say)
    finally:
        for df in ctx.persisted:
            df.unpersist()


def _analyze(ctx: CheckContext, say: Callable[[str], None]) -> dict[str, Any]:
    """The stages in order (module docstring): each sets what the next ones read on `ctx`."""
    _small_tables(ctx)
    say("statistics")
    ctx.stats = stats.analyze(ctx.t)
    ctx.partitions = set(ctx.stats["partitions"]) | set(ctx.final_state) | set(ctx.nodes_by_part)
    # the sends that ended fail or info (few): the digests set their values aside, values.py checks them
    ctx.nonok = ctx.keep(ctx.t.sends.filter(F.col("stype") != 0)
                         .select("partition", "value", "stype", "index", "offset", "time"))
    sends = ctx.stats["ops"].get("send", {})
    ctx.n_nonok = sends.get("fail", 0) + sends.get("info", 0)
    say("block digests")
    ctx.blocks, ctx.compare_epochs = digests.summarize(ctx.t, ctx.fs_rows, ctx.nonok, digests.BLOCK_BITS)
    say("offsets and final logs")
    offsets.exact_pass(ctx)
    _final_logs(ctx)
    say("anomalies")
    found = [family.analyze(ctx) for family in FAMILIES]
    allf = found[0]
    for df in found[1:]:
        allf = allf.unionByName(df)
    count_rows, top_rows, lost = _count_and_first(allf, ctx.examples, ctx.small, ctx.persisted, ctx.axis)
    tot = totals.Totals(ctx.axis)
    counts, lost_by_part, committed_n = _tally(count_rows, tot)
    top: dict[str, list[dict]] = {k: [] for k in rf.ANOMALY_KINDS}
    for r in top_rows:
        top[r["kind"]].append(dict(json.loads(r["payload"]), partition=r["partition"]))
    if counts[kinds.LOST_WRITE.name]:
        say("loss shape")
    shapes = loss_shape.analyze(ctx.recs, ctx.blocks, lost, {p: n for p, n in lost_by_part.items() if n},
                                digests.BLOCK_BITS)
    say("explaining examples")
    examples = _explained(ctx, top)
    anomalies = {kind: {"count": counts[kind], "examples": examples.get(kind, []), **tot.for_kind(kind)}
                 for kind in counts}
    div = kinds.DIVERGENCE.name
    anomalies[div].update(committed=committed_n, residual=counts[div] - committed_n)
    if ctx.facts is not None:
        say("protocol rules")
        protocol_trace.attach(anomalies, protocol.analyze(ctx), tot)
    anomalies[kinds.LOST_WRITE.name]["loss_shape"] = shape_rule.as_json(shapes)
    return {"anomalies": anomalies, "time_axis": ctx.axis.as_json(), **_summary(ctx, lost_by_part)}


def _small_tables(ctx: CheckContext) -> None:
    """The small tables, read on the driver: as Spark jobs they cost seconds on a cold JVM."""
    ctx.fs_rows = lookup.read_all(ctx.col_dir, "final_state", rf.arrow_schemas()["final_state"].names)
    ctx.final_state = {r["partition"]: r for r in ctx.fs_rows}
    meta_rows = lookup.read_all(ctx.col_dir, "replica_meta", ["node", "partition", "leo", "hw"])
    ctx.meta = {(r["node"], r["partition"]): {"leo": r["leo"], "hw": r["hw"]} for r in meta_rows}
    for r in meta_rows:
        ctx.nodes_by_part.setdefault(r["partition"], []).append(r["node"])
    for p in ctx.nodes_by_part:
        ctx.nodes_by_part[p].sort()
    ctx.axis = totals.TimeAxis(totals.end_time_ns(ctx.col_dir))   # from the Parquet statistics: no scan


def _final_logs(ctx: CheckContext) -> None:
    """Which partitions have a final committed log: recovered, with final reads covering [0, hw)."""
    for b in ctx.blocks:
        ctx.cover[b["partition"]] = ctx.cover.get(b["partition"], 0) + b["covered"]
    for p in sorted(ctx.partitions):
        fs = ctx.final_state.get(p)
        if fs is None:
            ctx.reason[p] = "no final-state"
        elif not fs["recovered"]:
            ctx.reason[p] = "not recovered"
        elif ctx.cover.get(p, 0) != fs["hw"]:
            ctx.reason[p] = "final reads do not cover [0, hw)"
        else:
            ctx.reason[p] = None
    rec_rows = [(p, ctx.final_state[p]["hw"]) for p in sorted(ctx.partitions) if ctx.reason[p] is None]
    ctx.recovered = ctx.spark.createDataFrame(rec_rows, "partition int, fs_hw long")


def _tally(count_rows: list, tot: totals.Totals) -> tuple[dict[str, int], dict[int, int], int]:
    """(count per kind, every kind present; lost writes per partition; committed divergences), and the
    buckets added to `tot`."""
    counts: dict[str, int] = {}
    lost_by_part: dict[int, int] = {}
    committed_n = 0
    for r in count_rows:
        tot.add_bucket(r["kind"], r["partition"], r["bucket"], r["n"], r["tmin"], r["tmax"])
        counts[r["kind"]] = counts.get(r["kind"], 0) + r["n"]
        if r["kind"] == kinds.LOST_WRITE.name:
            lost_by_part[r["partition"]] = lost_by_part.get(r["partition"], 0) + r["n"]
        if r["kind"] == kinds.DIVERGENCE.name and r["flag"]:
            committed_n += r["n"]
    for k in rf.ANOMALY_KINDS:
        counts.setdefault(k, 0)
    return counts, lost_by_part, committed_n


def _explained(ctx: CheckContext, top: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The examples of every family's kinds, with the replica records they cite."""
    # the acks at inconsistent offsets are among the exact pass's records (such offsets are never in a
    # clean block): their history indices come from there, and the lookup below goes by index
    inc = sorted({(r["partition"], r["offset"]) for r in top[kinds.INCONSISTENT_OFFSET.name]})
    inc_acks = set()
    if inc:
        at = ctx.spark.createDataFrame(inc, "partition int, offset long")
        inc_acks = {r["key"] for r in rows(ctx.recs.filter(F.col("src") == 0)
                                           .join(F.broadcast(at), ["partition", "offset"], "left_semi").select("key"))}
    examples = _examples(ctx.col_dir, top, ctx.final_state, ctx.reason, inc_acks)
    offs, vals = explain.wanted_keys(examples)
    where = lookup.any_of(lookup.keyed(("partition", "offset"), offs), lookup.keyed(("partition", "value"), vals))
    rep_rows = [(r["node"], r["partition"], r["offset"], r["epoch"], r["value"], r["crc_ok"])
                for r in lookup.fetch(ctx.col_dir, "replicas", where,
                                      ["node", "partition", "offset", "epoch", "value", "crc_ok"])]
    explain.attach(examples, explain.ReplicaIndex(rep_rows, ctx.nodes_by_part, ctx.meta))
    return examples


def _summary(ctx: CheckContext, lost_by_part: dict[int, int]) -> dict[str, Any]:
    """The partitions, the acknowledged writes no final log could show (unseen), and the statistics."""
    st, reason = ctx.stats, ctx.reason
    acked = st["acked"]
    parts_out = []
    for p in sorted(ctx.partitions):
        fs = ctx.final_state.get(p) or {}
        parts_out.append({"partition": p, "recovered": reason[p] is None, "reason": reason[p],
                          "hw": fs.get("hw"), "leader": fs.get("leader"), "epoch": fs.get("epoch"),
                          "acked": acked.get(p, 0), "committed": ctx.cover.get(p, 0) if reason[p] is None else None,
                          "lost": lost_by_part.get(p, 0)})
    unseen_parts = sorted(p for p in ctx.partitions if reason[p] is not None)
    shown = _unseen_values(ctx.t, [p for p in unseen_parts if acked.get(p, 0)])
    shown = {p: shown.get(p, []) for p in unseen_parts}
    return {
        "unseen": {"count": sum(acked.get(p, 0) for p in unseen_parts), "partitions": unseen_parts,
                   "values": explain.unseen_values(shown),
                   "details": [{"partition": p, "reason": reason[p], "acked": acked.get(p, 0), "values": shown[p]}
                               for p in unseen_parts]},
        "partitions": parts_out,
        "stats": {"ops": st["ops"], "availability": st["availability"], "fault_windows": st["fault_windows"]},
    }


def _unseen_values(t: Tables, parts: list[int]) -> dict[int, list]:
    """partition -> its first UNSEEN_VALUES_SHOWN acknowledged values, sorted (one job; none without parts)."""
    if not parts:
        return {}
    w = Window.partitionBy("partition").orderBy("value")
    first = (t.acks().filter(F.col("partition").isin(parts)).select("partition", "value")
             .select("*", F.row_number().over(w).alias("rn")).filter(F.col("rn") <= explain.UNSEEN_VALUES_SHOWN))
    out: dict[int, list] = {}
    for r in sorted(rows(first), key=lambda r: (r["partition"], r["value"])):
        out.setdefault(r["partition"], []).append(r["value"])
    return out


def _count_and_first(allf: DataFrame, N: int, small: bool, persisted: list[DataFrame],
                     axis: totals.TimeAxis) -> tuple[list, list, list | DataFrame]:
    """Counts per (kind, partition, flag, time bucket) with the first and last time in each (`n`,
    `tmin`, `tmax`; bucket null: untimed), the first N findings of each kind in example order, and the
    lost writes as (partition, history index) for
    loss_shape.py. Small inputs have few findings: one job collects them all and the driver counts and
    orders them (the lost writes: a list). Otherwise two Spark jobs over the persisted union (the lost
    writes: a DataFrame over it, not yet computed)."""
    order = ("partition", "order_key", "order_subkey", "payload")
    if small:
        found = rows(allf)
        sums: dict[tuple, list] = {}
        for r in found:
            t = r["time"]
            key = (r["kind"], r["partition"], r["flag"], axis.bucket(t))
            s = sums.get(key)
            if s is None:
                sums[key] = [r["weight"], t, t]
            else:
                s[0] += r["weight"]
                if t is not None:
                    s[1] = t if s[1] is None else min(s[1], t)
                    s[2] = t if s[2] is None else max(s[2], t)
        count_rows = [{"kind": k, "partition": p, "flag": f, "bucket": b, "n": n, "tmin": lo, "tmax": hi}
                      for (k, p, f, b), (n, lo, hi) in sums.items()]
        # nulls first, as Spark's ascending sort puts them
        def ordered(r):
            return tuple((r[c] is not None, r[c]) for c in order)
        rank: dict[tuple, int] = {}
        ranked = []
        for r in sorted(found, key=lambda r: (r["kind"], *ordered(r))):
            k = (r["kind"], r["partition"])
            rank[k] = rank.get(k, 0) + 1
            ranked.append((rank[k], r))
        taken: dict[str, int] = {}
        top_rows = []
        for prn, r in sorted(ranked, key=lambda pr: (pr[1]["kind"], pr[0], *ordered(pr[1]))):
            if taken.get(r["kind"], 0) < N:
                taken[r["kind"]] = taken.get(r["kind"], 0) + 1
                top_rows.append(r)
        lost = [(r["partition"], r["order_key"]) for r in found if r["kind"] == kinds.LOST_WRITE.name]
        return count_rows, top_rows, lost
    # the union has one partition per shuffle partition of every family (hundreds at 10M sends) but holds
    # only flagged rows: fewer, larger tasks read it (the families' last steps still run on every core)
    allf = allf.coalesce(FINDING_TASKS).persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(allf)
    t = F.col("time")
    bucket = F.when(t.isNotNull(), F.least(F.greatest(F.expr(f"`time` div {axis.bucket_ns}"), F.lit(0)),
                                            F.lit(axis.buckets - 1))).cast("int")
    count_rows = rows(allf.groupBy("kind", "partition", "flag", bucket.alias("bucket")).agg(
        F.sum("weight").alias("n"), F.min(t).alias("tmin"), F.max(t).alias("tmax")))
    lost = allf.filter(F.col("kind") == kinds.LOST_WRITE.name).select("partition", F.col("order_key").alias("index"))
    if not count_rows or N <= 0:
        return count_rows, [], lost
    by_partition = Window.partitionBy("kind", "partition").orderBy(*order)
    w = Window.partitionBy("kind").orderBy("prn", *order)
    first = (allf.select("*", F.row_number().over(by_partition).alias("prn")).filter(F.col("prn") <= N)
             .select("*", F.row_number().over(w).alias("rn")).filter(F.col("rn") <= N))
    return count_rows, sorted(rows(first), key=lambda r: (r["kind"], r["rn"])), lost


ROWS_PER_SHUFFLE_PARTITION = 1_500_000
SMALL_ROWS = 300_000


def _tune(spark: SparkSession, col_dir: Path) -> bool:
    """Local mode: settings for the input's size, set both ways (a shared session serves many checks).

    Small inputs (a demo run has ~10k rows): one shuffle partition, no adaptive execution and no
    whole-stage code generation. There each query's cost is planning and compiling, not rows: adaptive
    execution turns every shuffle into a job of its own and re-plans after each, and generated code is
    compiled anew whenever a plan differs, while the interpreted operators are already warm in a shared
    driver. Larger inputs: adaptive execution, code generation, and as many shuffle partitions as the
    input needs (each task's hash maps fit in memory) and no more (every partition costs a task)."""
    import os

    try:
        if not str(spark.conf.get("spark.master", "")).startswith("local"):
            return False
        import pyarrow.dataset as pads

        n = sum(pads.dataset(str(col_dir / name), format="parquet").count_rows()
                for name in ("ops", "reads", "replicas"))
    except Exception:  # noqa: BLE001 - keep the session's settings
        return False
    try:
        small = n <= int(os.environ.get("HIGHWATER_SPARK_SMALL_ROWS", SMALL_ROWS))
    except ValueError:
        raise ValueError(f"HIGHWATER_SPARK_SMALL_ROWS={os.environ['HIGHWATER_SPARK_SMALL_ROWS']!r}: "
                         "expected a whole number of rows") from None
    spark.conf.set("spark.sql.adaptive.enabled", "false" if small else "true")
    spark.conf.set("spark.sql.codegen.wholeStage", "false" if small else "true")
    if not os.environ.get("HIGHWATER_SPARK_SHUFFLE_PARTITIONS"):
        parts = 1 if small else max(4, min(128, n // ROWS_PER_SHUFFLE_PARTITION))
        spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    return small


def _and(a, b):
    return None if b is None else a & b


def _examples(col_dir: Path, top: dict[str, list[dict]], final_state: dict, reason: dict,
              inc_acks: set[int]) -> dict[str, list[dict]]:
    """Turn the collected top rows into the examples of docs/formats.md: the details they need are looked
    up once for all kinds, then each family builds the examples of its own kinds."""
    details = look_up_details(col_dir, top, final_state, reason, inc_acks)
    ex: dict[str, list[dict]] = {}
    for family in FAMILIES:
        ex.update(family.examples(top, details))
    return ex


def look_up_details(col_dir: Path, top: dict[str, list[dict]], final_state: dict, reason: dict,
                    inc_acks: set[int]) -> lookup.ExampleDetails:
    """The history lines, poll records and final-log records the examples in `top` cite, in one filtered
    scan of the history and one of the reads. `inc_acks`: the history indices of the acks at the
    inconsistent offsets in `top`."""
    # one filtered scan of the history: the lines the examples cite by index (with the acks at
    # inconsistent offsets) and the sends of duplicated values
    idx = {r["sindex"] for kind in (kinds.LOST_WRITE.name, kinds.FAILED_WRITE_PRESENT.name, kinds.ABORTED_READ.name)
           for r in top[kind] if r["sindex"] is not None}
    idx |= {r[k] for r in top[kinds.NONMONOTONIC_SEND.name] for k in ("index", "p_index")}
    keys = {(r["partition"], r["offset"]) for r in top[kinds.INCONSISTENT_OFFSET.name]}
    dup_keys = {(r["partition"], r["value"]) for r in top[kinds.DUPLICATE.name]}
    fld = lookup.field
    sent = (fld("f") == "send") & lookup.is_client()
    where = lookup.any_of(lookup.one_of("index", idx | inc_acks),
                          sent & (fld("type") != "invoke") & lookup.keyed(("partition", "value"), dup_keys)
                          if dup_keys else None)
    ops = lookup.fetch(col_dir, "ops", where, ["index", "time", "process", "epoch", "invoke_index", "error", "f",
                                               "type", "partition", "offset", "value"])
    # one filtered scan of the reads: first reads of dirty / aborted values, the final committed log at
    # the offsets / of the values the examples need, and every read at inconsistent offsets
    ridx = {r["rkey"] >> POS_BITS for kind in (kinds.DIRTY_READ.name, kinds.ABORTED_READ.name) for r in top[kind]}
    f_offs = {(r["partition"], r["soffset"]) for r in top[kinds.LOST_WRITE.name]}
    f_vals = {(r["partition"], r["value"]) for k in (kinds.FAILED_WRITE_PRESENT.name, kinds.DUPLICATE.name)
              for r in top[k]}
    skip_offs = {(r["partition"], o) for r in top[kinds.POLL_SKIP.name]
                 for o in explain.skipped_offsets(r["offset"], r["gap"])}
    is_final = fld("f") == "final-read"
    where = lookup.any_of(_and(fld("f") == "poll", lookup.one_of("index", ridx)),
                          _and(is_final, lookup.keyed(("partition", "offset"), f_offs | skip_offs)),
                          _and(is_final, lookup.keyed(("partition", "value"), f_vals)),
                          lookup.keyed(("partition", "offset"), keys))
    reads = lookup.fetch(col_dir, "reads", where, ["index", "pos", "partition", "offset", "value", "time",
                                                   "process", "f", "epoch"])
    d = lookup.ExampleDetails(ops_by_index={}, dup_sends={}, poll_records={}, final_at={}, final_of={},
                              skip_at={}, observations={})
    for r in ops:
        d.ops_by_index[r["index"]] = r
        if r["f"] != "send" or r["type"] == "invoke":
            continue
        if r["type"] == "ok" and (r["partition"], r["offset"]) in keys:
            d.observations.setdefault((r["partition"], r["offset"]), []).append(
                (r["index"], -1, "send", r["value"], r["time"], r["process"], r["epoch"]))
        if (r["partition"], r["value"]) in dup_keys:
            d.dup_sends[(r["partition"], r["value"])] = r
    for r in reads:
        p, o, v = r["partition"], r["offset"], r["value"]
        if r["f"] == "poll" and r["index"] in ridx:
            d.poll_records[(p, (r["index"] << POS_BITS) + r["pos"])] = r
        if r["f"] == "final-read" and reason.get(p, "?") is None and 0 <= o < final_state[p]["hw"]:
            if (p, o) in skip_offs:
                d.skip_at.setdefault(p, {}).setdefault(o, set()).add(v)
            if (p, o) in f_offs or (p, v) in f_vals:
                d.final_at.setdefault((p, o), set()).add(v)
                d.final_of.setdefault((p, v), set()).add(o)
        if (p, o) in keys:
            d.observations.setdefault((p, o), []).append((r["index"], r["pos"], r["f"], v, r["time"], r["process"],
                                                          r["epoch"]))
    return d
