"""The exact pass, per (partition, offset): inconsistent-offset, final-log coverage, and candidates.

One aggregation over the acknowledged sends (offset, value), the records read by polls and the records
of the final reads, in the blocks that the block digests (digests.py) could not show clean. Per offset it keeps min/max of each source's values, so that:
- an offset where the acknowledged and read values are not all equal, or their leader epochs are not
  (those compared: checkers/explain.epoch_sources), is an `inconsistent-offset`: a record is its value
  and its epoch;
- the number of offsets in [0, hw) covered by final reads decides whether a partition's final committed
  log exists (final-state recovered and the final reads cover all of [0, hw); otherwise its
  acknowledged values are `unseen`);
- in partitions whose final-state says recovered, the offsets where the value-level checks
  (checkers/anomalies/values.py) must look are flagged: an acknowledged or polled value whose offset
  does not hold exactly that value in the final log (lost-write / dirty-read candidates), and a final
  log value not explained by an acknowledgement of the same value at that offset (duplicate
  candidates). Everywhere else every value at the offset is the final log's value there, which proves
  it present, so only the flagged offsets (few in a healthy run) go on to the next checks. (In clean
  blocks the same holds by the digests' argument, except that final records of sends that ended fail
  or info are not flagged as duplicate candidates: values.py checks all of those values.)
"""
from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rundir import kinds
from checkers import explain
from checkers.anomalies import digests
from checkers.anomalies.context import CheckContext
from checkers.anomalies.lookup import ExampleDetails
from checkers.anomalies.tables import Counted, Order, POS_BITS, Tables, finding, rows

KINDS = (kinds.INCONSISTENT_OFFSET,)


def analyze(ctx: CheckContext) -> DataFrame:
    """inconsistent-offset, from the exact pass's flagged offsets (`exact_pass`)."""
    return inconsistent(ctx.flagged)


def exact_pass(ctx: CheckContext) -> None:
    """The exact per-offset pass over the blocks the digests cannot vouch for (ctx.blocks): sets
    ctx.flagged and ctx.recs (persisted), ctx.cover (offsets of [0, hw) the final reads cover in those
    blocks) and ctx.ocount (the flagged offsets of each sort, summed)."""
    unclean = [b for b in ctx.blocks if not b["clean"]]
    final_rows: dict[int, int] = {}
    for b in unclean:
        final_rows[b["partition"]] = final_rows.get(b["partition"], 0) + b["final"]
    flagged, recs, osum = records(ctx.t, ctx.fs_rows, [(b["partition"], b["block"]) for b in unclean],
                                  digests.BLOCK_BITS, final_rows, ctx.compare_epochs)
    ctx.persisted += [flagged, recs]
    ctx.flagged, ctx.recs = flagged, recs
    ctx.cover = {p: c["n_cover"] for p, c in osum.items()}
    ctx.ocount = {k: sum(c[k] for c in osum.values())
                  for k in ("n_inconsistent", "n_lost", "n_dirty", "n_dup", "n_multi")}


def records(t: Tables, fs_rows: list[dict[str, Any]], blocks: list[tuple[int, int]], bits: int,
            final_rows: dict[int, int], compare_epochs: dict[str, set[int]] | None = None
            ) -> tuple[DataFrame, DataFrame, dict[int, dict[str, int]]]:
    """Returns (persisted flagged offsets, persisted input records, per partition counts: n_cover
    (offsets in [0, hw) covered by final reads), n_inconsistent, n_lost, n_dirty, n_dup, n_multi (flagged
    offsets of each sort)). Only the records of `blocks` [(partition, block: offset >> bits)] are looked
    at (digests.py shows the others clean) and the counts cover those blocks only; `final_rows` is the
    number of final-read records in [0, hw) in those blocks per partition (the digests count them).

    Flagged columns: partition, offset, inconsistent, lost_cand, dirty_cand, dup_cand, multi_final, f_min,
    f_extra (final reads of the offset beyond the first), first_time (the time of the offset's first
    observation in history order: its inconsistent-offset finding's time). Input records (what
    values.py needs of the candidates): partition, offset, value, src (0 ack, 1 poll record, 2 final-read
    record), key (the ack's history index, a read record's index * 2^POS_BITS + position), time.
    """
    acked, read = (digests.restrict(df, blocks, bits) for df in _inputs(t))
    recs = acked.unionByName(read).persist(StorageLevel.MEMORY_AND_DISK)
    agg = _per_offset(recs, compare_epochs or {"acks": set(), "polls": set()})
    flagged = _flagged(t, agg, fs_rows).persist(StorageLevel.MEMORY_AND_DISK)
    return flagged, recs, _counts(flagged, final_rows)


def _inputs(t: Tables) -> tuple[DataFrame, DataFrame]:
    """(the acknowledged sends, the records read) as input records (partition, offset, value, src, key,
    time) with their epochs."""
    L = F.lit
    acked = t.acks().select("partition", "offset", "value", L(0).alias("src"), F.col("index").alias("key"), "time",
                            "epoch")
    is_final = F.col("f") == "final-read"
    read = t.reads.select("partition", "offset", "value", F.when(is_final, L(2)).otherwise(L(1)).alias("src"),
                          (F.col("index") * (1 << POS_BITS) + F.col("pos")).alias("key"), "time", "epoch")
    return acked, read


def _per_offset(recs: DataFrame, cmp: dict[str, set[int]]) -> DataFrame:
    """One row per (partition, offset) of the input records: min/max of all values and of the compared
    epochs (`cmp`: checkers/explain.epoch_sources), of each source's values and counts, and the first
    observation in history order."""
    L = F.lit
    # the epochs compared: final reads' where a source is compared, and that source's
    in_p = lambda ps: F.col("partition").isin(*sorted(ps)) if ps else L(False)  # noqa: E731
    src_c = F.col("src")
    compared = (((src_c == 0) & in_p(cmp["acks"])) | ((src_c == 1) & in_p(cmp["polls"]))
                | ((src_c == 2) & in_p(cmp["acks"] | cmp["polls"])))
    known_epoch = F.when((F.col("epoch") >= 0) & compared, F.col("epoch"))
    src, v = F.col("src"), F.col("value")
    # repartition first: the shuffle carries the narrow input rows, not wide partial aggregates
    return recs.repartition("partition", "offset").groupBy("partition", "offset").agg(
        F.min("value").alias("vmin"), F.max("value").alias("vmax"),
        F.min(known_epoch).alias("emin"), F.max(known_epoch).alias("emax"),
        F.min(F.when(src == 0, v)).alias("a_min"), F.max(F.when(src == 0, v)).alias("a_max"),
        F.count(F.when(src == 1, 1)).alias("r_n"),
        F.min(F.when(src == 2, v)).alias("f_min"), F.max(F.when(src == 2, v)).alias("f_max"),
        F.count(F.when(src == 2, 1)).alias("f_n"),
        # the first observation in history order (an ack precedes the records of any later line)
        F.min(F.struct(F.when(src == 0, F.col("key") * (1 << POS_BITS)).otherwise(F.col("key")).alias("k"),
                       F.col("time").alias("t"))).alias("first"))


def _flagged(t: Tables, agg: DataFrame, fs_rows: list[dict[str, Any]]) -> DataFrame:
    """The offsets of `agg` (`_per_offset`) to look at again, with their flags (records' "Flagged
    columns"), given the final state of each partition (`fs_rows`)."""
    L = F.lit
    fs = t.spark.createDataFrame([(r["partition"], r["hw"], bool(r["recovered"])) for r in fs_rows],
                                 "partition int, fs_hw long, fs_rec boolean")
    j = agg.join(F.broadcast(fs), "partition", "left")
    in_final = F.coalesce((F.col("offset") >= 0) & (F.col("offset") < F.col("fs_hw")) & F.col("f_min").isNotNull(), L(False))
    single_final = in_final & (F.col("f_min") == F.col("f_max"))
    rec = F.coalesce(F.col("fs_rec"), L(False))
    has_ack = F.col("a_min").isNotNull()
    inconsistent = (F.col("vmin") != F.col("vmax")) | F.coalesce(F.col("emin") != F.col("emax"), L(False))
    lost_cand = rec & has_ack & ~(single_final & (F.col("a_min") == F.col("f_min")) & (F.col("a_max") == F.col("f_min")))
    dirty_cand = rec & (F.col("r_n") > 0) & ~(single_final & (F.col("vmin") == F.col("vmax")))
    dup_cand = rec & in_final & ~(single_final & has_ack & (F.col("a_min") == F.col("f_min"))
                                  & (F.col("a_max") == F.col("f_min")))
    # final reads of one offset beyond the first (overlapping chunks): coverage = rows - extra rows
    f_extra = F.when(in_final & (F.col("f_n") > 1), F.col("f_n") - 1).otherwise(L(0))
    flags = j.select("partition", "offset", inconsistent.alias("inconsistent"), lost_cand.alias("lost_cand"),
                     dirty_cand.alias("dirty_cand"), dup_cand.alias("dup_cand"),
                     (in_final & ~single_final).alias("multi_final"), "f_min", f_extra.alias("f_extra"),
                     F.col("first.t").alias("first_time"))
    return flags.filter(F.col("inconsistent") | F.col("lost_cand") | F.col("dirty_cand") | F.col("dup_cand")
                        | (F.col("f_extra") > 0))


def _counts(flagged: DataFrame, final_rows: dict[int, int]) -> dict[int, dict[str, int]]:
    """records' per partition counts, from one aggregation of the flagged offsets."""
    n = lambda c: F.sum(F.col(c).cast("long"))  # noqa: E731
    counts = {r["partition"]: r for r in rows(flagged.groupBy("partition").agg(
        n("f_extra").alias("f_extra"), n("inconsistent").alias("n_inconsistent"), n("lost_cand").alias("n_lost"),
        n("dirty_cand").alias("n_dirty"), n("dup_cand").alias("n_dup"), n("multi_final").alias("n_multi")))}
    summary = {}
    for p in set(counts) | set(final_rows):
        c = counts.get(p) or {}
        summary[p] = {k: c[k] or 0 if c else 0 for k in ("n_inconsistent", "n_lost", "n_dirty", "n_dup", "n_multi")}
        summary[p]["n_cover"] = final_rows.get(p, 0) - ((c["f_extra"] or 0) if c else 0)
    return summary


def inconsistent(flagged: DataFrame) -> DataFrame:
    """The inconsistent-offset findings among analyze's flagged offsets, timed by each offset's first
    observation."""
    return finding(flagged.filter(F.col("inconsistent")), kinds.INCONSISTENT_OFFSET.name, ["offset"],
                   Order(F.col("offset")), Counted(time=F.col("first_time")))


def examples(top: dict[str, list[dict]], d: ExampleDetails) -> dict[str, list[dict]]:
    """The inconsistent-offset examples: every observation of the offset (engine.look_up_details)."""
    out = []
    for r in top[kinds.INCONSISTENT_OFFSET.name]:
        o = sorted(d.observations.get((r["partition"], r["offset"]), []), key=lambda x: (x[0], x[1]))
        epochs, observations = explain.offset_observations(o)
        out.append({
            "partition": r["partition"], "offset": r["offset"], "values": sorted({x[3] for x in o})[:10],
            "epochs": epochs, "index": o[0][0], "observations": observations})
    return {kinds.INCONSISTENT_OFFSET.name: out}
