"""Value-level anomalies: lost-write, failed-write-present, duplicate, dirty-read, aborted-read.

In a partition whose final committed log exists ("recovered"):
  lost-write            an acknowledged (ok) send whose value is not in the final log
  failed-write-present  a failed send whose value is in the final log
  duplicate             a value at more than one offset of the final log
  dirty-read            a poll read a value that is not in the final log (counted per read)
and in any partition:
  aborted-read          a poll read a value whose send failed (counted per read)
Values are unique per partition (ingest enforces it), so a value has at most one send completion.

Only candidates are examined (see offsets.py and digests.py for why that is complete): the acks and
poll records at flagged offsets (taken from the exact pass's own input records, no new scan), the final
log's values at flagged offsets, and every send that ended fail or info. One filtered scan of the reads
finds the final-log occurrences of all candidate values and the poll records of failed values; then a
single aggregation per (partition, value) over those few rows decides every kind at once.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rundir import kinds
from checkers.anomalies.context import CheckContext
from checkers.anomalies.lookup import ExampleDetails
from checkers.anomalies.tables import Counted, Order, POS_BITS, TYPE_CODE, TYPE_NAME, finding, in_final_logs

KINDS = (kinds.LOST_WRITE, kinds.FAILED_WRITE_PRESENT, kinds.DUPLICATE, kinds.DIRTY_READ, kinds.ABORTED_READ)

BROADCAST_ROWS = 2_000_000


def _small(df: DataFrame, n: int) -> DataFrame:
    return F.broadcast(df) if n <= BROADCAST_ROWS else df


# the columns of every candidate row; a row only fills its own
_COLS = {"stype": "int", "sindex": "long", "soffset": "long", "stime": "long", "lost_key": "boolean",
         "dup_key": "boolean", "foff": "long", "dirty_rkey": "long", "failed_rkey": "long", "rtime": "long"}


def _rows(df: DataFrame, **cols: Column) -> DataFrame:
    return df.select("partition", "value", *[cols.get(n, F.lit(None)).cast(t).alias(n) for n, t in _COLS.items()])


def analyze(ctx: CheckContext) -> DataFrame:
    """From `ctx`: `flagged`, `recs`, the exact pass's flagged offsets and input records (offsets.py
    exact_pass), `ocount` its counts (upper bounds here: they include partitions that turned out not
    recovered); `recovered`: (partition, fs_hw) of partitions with a final log; `nonok`: the sends that
    ended fail or info (partition, value, stype, index, offset, time), `n_nonok` how many. Returns the
    findings of every kind (tables.finding), timed by the send's completion (lost-write,
    failed-write-present) or the value's first read (dirty-read, aborted-read); duplicates are untimed."""
    cand, n_cand = _candidates(ctx)
    return _findings(_per_value(_with_occurrences(ctx, cand, n_cand), ctx.recovered))


def _candidates(ctx: CheckContext) -> tuple[DataFrame, int]:
    """The candidate rows (_COLS) and an upper bound of their (partition, value)s: every non-ok send, and
    from the exact pass the acks at lost-write candidate offsets (the send of every dirty-read value is
    among them: an acked value absent from the final log makes its own offset a lost-write candidate),
    the poll records at dirty-read candidate offsets and the final values at duplicate candidate offsets."""
    flagged, recs, recovered, ocount = ctx.flagged, ctx.recs, ctx.recovered, ctx.ocount
    L, c = F.lit, F.col
    T = L(True)
    n_lo, n_do, n_dup = ocount["n_lost"], ocount["n_dirty"], ocount["n_dup"]
    flagged_rec = flagged.join(F.broadcast(recovered.select("partition")), "partition")
    at = lambda cond, n: _small(flagged_rec.filter(cond).select("partition", "offset"), n)  # noqa: E731
    parts = [_rows(ctx.nonok, stype=c("stype"), sindex=c("index"), soffset=c("offset"), stime=c("time"), dup_key=T)]
    if n_lo:
        acks = recs.filter(c("src") == 0).join(at(c("lost_cand"), n_lo), ["partition", "offset"], "left_semi")
        parts.append(_rows(acks, stype=L(0), sindex=c("key"), soffset=c("offset"), stime=c("time"), lost_key=T))
    if n_do:
        polls = recs.filter(c("src") == 1).join(at(c("dirty_cand"), n_do), ["partition", "offset"], "left_semi")
        parts.append(_rows(polls, dirty_rkey=c("key"), rtime=c("time")))
    if n_dup:
        finals = (in_final_logs(recs.filter(c("src") == 2), recovered)
                  .join(at(c("dup_cand"), n_dup), ["partition", "offset"], "left_semi"))
        parts.append(_rows(finals, dup_key=T))
    cand = parts[0]
    for df in parts[1:]:
        cand = cand.unionByName(df)
    return cand, ctx.n_nonok + n_lo + n_do * 4 + n_dup * 4


def _with_occurrences(ctx: CheckContext, cand: DataFrame, n_cand: int) -> DataFrame:
    """The candidates with, from one filtered scan of the reads, every final-log occurrence of a candidate
    value and every poll record of a failed value."""
    L, c = F.lit, F.col
    recovered = ctx.recovered
    keys = (cand.groupBy("partition", "value")
            .agg(F.max(F.coalesce(c("stype") == 1, L(False))).alias("failed")))
    hit = ctx.t.reads.select("partition", "value", "offset", "f", "index", "pos", "time").join(
        _small(keys, n_cand), ["partition", "value"])
    final = in_final_logs(hit.filter(c("f") == "final-read"), recovered)
    failed_polls = hit.filter((c("f") == "poll") & c("failed"))
    return cand.unionByName(_rows(final, foff=c("offset"))).unionByName(
        _rows(failed_polls, failed_rkey=c("index") * (1 << POS_BITS) + c("pos"), rtime=c("time")))


def _per_value(found: DataFrame, recovered: DataFrame) -> DataFrame:
    """One row per (partition, value) of `found`: its send, what it is a candidate of, its final-log
    occurrences and its reads (count and first), and `rec`: whether its partition has a final log."""
    L, c = F.lit, F.col
    # a value's first read of one sort: (read key, its time), null where the row is not such a read
    first = lambda key: F.when(c(key).isNotNull(), F.struct(c(key).alias("k"), c("rtime").alias("t")))  # noqa: E731
    per_value = found.groupBy("partition", "value").agg(
        F.max("stype").alias("stype"), F.max("sindex").alias("sindex"), F.max("soffset").alias("soffset"),
        F.max("stime").alias("stime"),
        F.max(F.coalesce(c("lost_key"), L(False))).alias("lost"), F.max(F.coalesce(c("dup_key"), L(False))).alias("dup"),
        F.count("foff").alias("n_final"), F.min("foff").alias("foff_min"), F.max("foff").alias("foff_max"),
        F.count("dirty_rkey").alias("dirty_n"), F.min(first("dirty_rkey")).alias("dirty_first"),
        F.count("failed_rkey").alias("failed_n"), F.min(first("failed_rkey")).alias("failed_first"))
    return per_value.join(F.broadcast(recovered.select("partition", L(True).alias("rec"))), "partition", "left")


def _findings(v: DataFrame) -> DataFrame:
    """Every kind each value of `_per_value` is found as, one finding per kind."""
    L, c = F.lit, F.col
    rec = F.coalesce(c("rec"), L(False))
    present = c("n_final") > 0
    kind = F.array_compact(F.array(
        F.when(rec & c("lost") & (c("stype") == 0) & ~present, L(kinds.LOST_WRITE.name)),
        F.when(rec & (c("stype") == 1) & present, L(kinds.FAILED_WRITE_PRESENT.name)),
        F.when(rec & c("dup") & (c("foff_min") != c("foff_max")), L(kinds.DUPLICATE.name)),
        F.when(rec & (c("dirty_n") > 0) & ~present, L(kinds.DIRTY_READ.name)),
        F.when((c("stype") == 1) & (c("failed_n") > 0), L(kinds.ABORTED_READ.name))))
    out = v.select("*", F.explode(kind).alias("kind"))
    k = c("kind")
    is_dirty, is_aborted = k == kinds.DIRTY_READ.name, k == kinds.ABORTED_READ.name
    reads = F.when(is_dirty, c("dirty_n")).when(is_aborted, c("failed_n"))
    rkey = F.when(is_dirty, c("dirty_first.k")).when(is_aborted, c("failed_first.k"))
    when = (F.when(is_dirty, c("dirty_first.t")).when(is_aborted, c("failed_first.t"))
            .when(k != kinds.DUPLICATE.name, c("stime")))
    # a duplicate's send is looked up for its example only (examples() below)
    send = lambda col: F.when(k != kinds.DUPLICATE.name, c(col))  # noqa: E731
    order_key = F.when(k == kinds.DUPLICATE.name, c("value")).when(is_dirty | is_aborted, rkey).otherwise(c("sindex"))
    return finding(out, k, ["value", send("sindex").alias("sindex"), send("soffset").alias("soffset"),
                            send("stype").alias("stype"), reads.alias("reads"), rkey.alias("rkey")],
                   Order(order_key), Counted(weight=F.coalesce(reads, L(1)), time=when))


def _send(stype, sindex, soffset) -> dict | None:
    if stype is None:
        return None
    return {"type": TYPE_NAME[stype], "index": sindex, "offset": soffset}


def examples(top: dict[str, list[dict]], d: ExampleDetails) -> dict[str, list[dict]]:
    """The examples of this family's kinds (docs/formats.md) from their first findings `top` and the
    details looked up for them (engine.look_up_details)."""
    ex: dict[str, list[dict]] = {}
    ex[kinds.LOST_WRITE.name] = []
    for r in top[kinds.LOST_WRITE.name]:
        o = d.ops_by_index[r["sindex"]]
        ex[kinds.LOST_WRITE.name].append({
            "partition": r["partition"], "value": r["value"], "offset": r["soffset"], "epoch": o["epoch"],
            "index": r["sindex"], "time": o["time"], "process": o["process"], "invoke_index": o["invoke_index"],
            "final_values_at_offset": sorted(d.final_at.get((r["partition"], r["soffset"]), ()))})
    ex[kinds.FAILED_WRITE_PRESENT.name] = []
    for r in top[kinds.FAILED_WRITE_PRESENT.name]:
        o = d.ops_by_index[r["sindex"]]
        ex[kinds.FAILED_WRITE_PRESENT.name].append({
            "partition": r["partition"], "value": r["value"], "index": r["sindex"], "time": o["time"],
            "process": o["process"], "invoke_index": o["invoke_index"], "error": o["error"],
            "final_offsets": sorted(d.final_of.get((r["partition"], r["value"]), ()))[:10]})
    ex[kinds.DUPLICATE.name] = []
    for r in top[kinds.DUPLICATE.name]:
        s = d.dup_sends.get((r["partition"], r["value"]))
        if s is not None:
            r["stype"], r["sindex"], r["soffset"] = TYPE_CODE[s["type"]], s["index"], s["offset"]
        offs = sorted(d.final_of.get((r["partition"], r["value"]), ()))
        ex[kinds.DUPLICATE.name].append({
            "partition": r["partition"], "value": r["value"], "offsets": offs[:10], "count": len(offs),
            "index": r["sindex"], "send": _send(r["stype"], r["sindex"], r["soffset"])})
    for kind in (kinds.DIRTY_READ.name, kinds.ABORTED_READ.name):
        ex[kind] = []
        for r in top[kind]:
            first = d.poll_records[(r["partition"], r["rkey"])]
            e = {"partition": r["partition"], "value": r["value"], "offset": first["offset"], "index": first["index"],
                 "time": first["time"], "process": first["process"], "reads": r["reads"],
                 "send": _send(r["stype"], r["sindex"], r["soffset"])}
            if kind == kinds.ABORTED_READ.name:
                e["error"] = d.ops_by_index[r["sindex"]]["error"]
            ex[kind].append(e)
    return ex
