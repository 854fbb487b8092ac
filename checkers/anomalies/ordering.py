"""Order anomalies: nonmonotonic-send, poll-skip, nonmonotonic-poll (one client), realtime-order (all).

nonmonotonic-send: for one producer process and partition, consecutive acknowledged sends (in history
order) where the later one's offset is below the earlier one's.

realtime-order: acknowledged sends A and B of one partition (any processes) where A completed before B
was invoked (A's completion index < B's invoke index; overlapping sends are never compared) and A's
offset is at or above B's. One finding per B; its `previous` is such an A with the highest offset (then
the highest index). As in watermarks.py, each ack is an event twice, as a completion at its index and as
a query at its invoke index, and a running max over the partition's events in index order gives each
query the highest offset acknowledged before it.

poll-skip / nonmonotonic-poll: for one consumer process and partition, the records its polls returned,
in history order (then position in the poll), with its `assign`s interleaved. Each record is compared
with the element just before it: after a record at offset o the next is expected at o + 1; after an
assign to offset a the next record is expected at a. A record beyond the expected offset is a
`poll-skip` (gap = how many offsets were skipped), at or below the previous record a `nonmonotonic-poll`.

The poll check never sorts every record: each poll is summarised by one aggregation keyed by its
history index (its records are adjacent in the input, so this barely shuffles): first and last record,
and whether offset - position is constant over positions 0..n-1, which makes every pair inside the
poll consecutive. Only polls that are not so are compared record by record; the comparisons across
polls (first record against the previous poll's last record or the assign before it) run on the
summaries, one row per poll.
"""
from __future__ import annotations

from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rundir import kinds
from checkers import explain
from checkers.anomalies.context import CheckContext
from checkers.anomalies.lookup import ExampleDetails
from checkers.anomalies.tables import Counted, Order, Tables, finding, is_client, rows

KINDS = (kinds.NONMONOTONIC_SEND, kinds.POLL_SKIP, kinds.NONMONOTONIC_POLL, kinds.REALTIME_ORDER)


def analyze(ctx: CheckContext) -> DataFrame:
    """Every kind's findings: nonmonotonic-send, poll-skip and nonmonotonic-poll, realtime-order."""
    return (nonmonotonic_send(ctx.t).unionByName(poll_order(ctx.t, ctx.persisted))
            .unionByName(realtime_order(ctx.t)))


def nonmonotonic_send(t: Tables) -> DataFrame:
    """Later acks below the earlier ack of the same (process, partition); details fetched by the engine."""
    acked = t.acks().select("process", "partition", "index", "offset", "time")
    w = Window.partitionBy("process", "partition").orderBy("index")
    out = acked.select("*", F.lag("index").over(w).alias("p_index"), F.lag("offset").over(w).alias("p_offset"))
    bad = out.filter(F.col("offset") < F.col("p_offset"))
    return finding(bad, kinds.NONMONOTONIC_SEND.name, ["process", "index", "p_index"], Order(F.col("index")),
                   Counted(time=F.col("time")))


RT_COLS = ["offset", "value", "epoch", "index", "time", "process", "invoke_index", "invoke_time"]


def realtime_order(t: Tables) -> DataFrame:
    """Acks at or below an offset acknowledged before they were invoked; everything the example shows
    (the earlier ack too) travels with the finding."""
    L = F.lit
    acks = (t.ops.filter((F.col("f") == "send") & (F.col("type") == "ok"))
            .select("partition", *RT_COLS))
    # struct order is comparison order: the highest offset, then the highest index
    mark = F.struct(*[F.col(c) for c in ("offset", "index", "time", "process", "value", "epoch")])
    me = F.struct(*[F.col(c) for c in RT_COLS])
    mark_type = acks.select(mark.alias("m")).schema["m"].dataType
    me_type = acks.select(me.alias("m")).schema["m"].dataType
    completions = acks.select("partition", F.col("index").alias("key"), mark.alias("mark"),
                              L(None).cast(me_type).alias("me"))
    # an ack without its invoke (--lenient) has no invoke index: it is only ever the earlier one
    queries = acks.filter(F.col("invoke_index").isNotNull()).select(
        "partition", F.col("invoke_index").alias("key"), L(None).cast(mark_type).alias("mark"), me.alias("me"))
    w = Window.partitionBy("partition").orderBy("key").rowsBetween(Window.unboundedPreceding, -1)
    ev = completions.unionByName(queries)
    ev = ev.select("partition", "me", F.max("mark").over(w).alias("prev"))
    bad = (ev.filter(F.col("me").isNotNull() & (F.col("prev.offset") >= F.col("me.offset")))
           .select("partition", "me.*", "prev"))
    prev = F.struct(*[F.col("prev." + c).alias(c) for c in ("index", "time", "process", "value", "offset", "epoch")])
    return finding(bad, kinds.REALTIME_ORDER.name, [*RT_COLS, prev.alias("prev")], Order(F.col("index")),
                   Counted(time=F.col("time")))


def _judge(df: DataFrame, offset: Column, base: Column) -> DataFrame:
    kind = (F.when(offset > base + 1, F.lit(kinds.POLL_SKIP.name))
            .when(offset <= base, F.lit(kinds.NONMONOTONIC_POLL.name)))
    return df.select("*", kind.alias("kind"), (offset - base - 1).alias("gap")).filter(F.col("kind").isNotNull())


COLS = ["process", "partition", "index", "pos", "time", "offset", "value",
        "p_is_assign", "p_index", "p_time", "p_offset", "p_value", "kind", "gap"]


ODD_POLLS_AS_FILTER = 256


def poll_order(t: Tables, keep: list[DataFrame]) -> DataFrame:
    """Records out of order; column `kind` is 'poll-skip' or 'nonmonotonic-poll'. The per-poll summaries
    (one row per poll: few) are persisted and appended to `keep` for the caller to unpersist."""
    L = F.lit
    reads = t.reads.filter(F.col("f") == "poll").select("process", "partition", "index", "pos", "offset", "value", "time")
    d = F.col("offset") - F.col("pos")
    polls = reads.groupBy("index", "process", "partition").agg(
        F.count("*").alias("n"), F.min("pos").alias("min_pos"), F.max("pos").alias("max_pos"),
        F.min(d).alias("min_d"), F.max(d).alias("max_d"), F.min("time").alias("time"),
        F.min_by("offset", "pos").alias("first_off"), F.min_by("value", "pos").alias("first_val"),
        F.max_by("offset", "pos").alias("last_off"), F.max_by("value", "pos").alias("last_val"))
    clean = ((F.col("min_d") == F.col("max_d")) & (F.col("min_pos") == 0)
             & (F.col("max_pos") - F.col("min_pos") + 1 == F.col("n")))
    polls = polls.select("*", clean.alias("clean")).persist(StorageLevel.MEMORY_AND_DISK)
    keep.append(polls)
    # inside the polls that are not plainly consecutive (few): record by record; a few are picked out
    # of the reads by index (row groups are skipped by their statistics), many by a join
    odd_polls = polls.filter(~F.col("clean")).select("index")
    odd = [r["index"] for r in rows(odd_polls)]
    if len(odd) <= ODD_POLLS_AS_FILTER:
        odd_reads = reads.filter(reduce(lambda a, b: a | b, [F.col("index") == i for i in odd], L(False)))
    else:
        odd_reads = reads.join(F.broadcast(odd_polls), "index")
    w_in = Window.partitionBy("index").orderBy("pos")
    inner = (odd_reads
             .select("*", *[F.lag(c).over(w_in).alias("p_" + c) for c in ("offset", "value", "time", "index")],
                     L(False).alias("p_is_assign"))
             .filter(F.col("p_index").isNotNull()))
    inner = _judge(inner, F.col("offset"), F.col("p_offset")).select(*COLS)
    # across polls and assigns: one row per poll or assign
    assigns = (t.ops.filter(is_client() & (F.col("f") == "assign") & (F.col("type") == "ok"))
               .select("process", "partition", "index", F.col("offset").alias("first_off"),
                       L(None).cast("long").alias("first_val"), F.col("offset").alias("last_off"),
                       L(None).cast("long").alias("last_val"), "time", L(True).alias("is_assign"),
                       L(None).cast("int").alias("min_pos")))
    seq = assigns.unionByName(polls.select("process", "partition", "index", "first_off", "first_val", "last_off",
                                           "last_val", "time", L(False).alias("is_assign"), "min_pos"))
    w = Window.partitionBy("process", "partition").orderBy("index")
    seq = seq.select("*", *[F.lag(c).over(w).alias("p_" + c) for c in ("index", "last_off", "last_val", "time", "is_assign")])
    cross = seq.filter(~F.col("is_assign") & F.col("p_index").isNotNull())
    base = F.when(F.col("p_is_assign"), F.col("p_last_off") - 1).otherwise(F.col("p_last_off"))
    cross = _judge(cross, F.col("first_off"), base).select(
        "process", "partition", "index", F.col("min_pos").alias("pos"), "time", F.col("first_off").alias("offset"),
        F.col("first_val").alias("value"), "p_is_assign", "p_index", "p_time", F.col("p_last_off").alias("p_offset"),
        F.col("p_last_val").alias("p_value"), "kind", "gap")
    out = inner.unionByName(cross)
    return finding(out, F.col("kind"), [c for c in COLS if c not in ("partition", "kind")],
                   Order(F.col("index"), F.col("pos")), Counted(time=F.col("time")))


def examples(top: dict[str, list[dict]], d: ExampleDetails) -> dict[str, list[dict]]:
    """The examples of this family's kinds; a nonmonotonic-send's two acks are history lines looked up by
    index (engine.look_up_details), a poll-skip's skipped offsets are read in the final log, and a
    realtime-order's two acks came with the finding."""
    ex: dict[str, list[dict]] = {}
    ex[kinds.NONMONOTONIC_SEND.name] = []
    for r in top[kinds.NONMONOTONIC_SEND.name]:
        earlier, later = ({k: d.ops_by_index[i][k] for k in ("index", "time", "value", "offset", "epoch")}
                          for i in (r["p_index"], r["index"]))
        ex[kinds.NONMONOTONIC_SEND.name].append({"partition": r["partition"], "process": r["process"],
                                                 "index": r["index"],
                                        "earlier": earlier, "later": later})
    for kind in (kinds.POLL_SKIP.name, kinds.NONMONOTONIC_POLL.name):
        ex[kind] = []
        for r in top[kind]:
            e = {"partition": r["partition"], "process": r["process"], "index": r["index"], "time": r["time"],
                 "offset": r["offset"], "value": r["value"],
                 "previous": {"kind": "assign" if r["p_is_assign"] else "read", "index": r["p_index"], "time": r["p_time"],
                              "offset": r["p_offset"], "value": r["p_value"]}}
            if kind == kinds.POLL_SKIP.name:
                e["gap"] = r["gap"]
                e["skipped"] = explain.skipped(r["offset"], r["gap"], d.skip_at.get(r["partition"], {}))
            ex[kind].append(e)
    ex[kinds.REALTIME_ORDER.name] = [{"partition": r["partition"], **{c: r[c] for c in RT_COLS},
                                      "previous": dict(r["prev"])}
                            for r in top[kinds.REALTIME_ORDER.name]]
    return ex
