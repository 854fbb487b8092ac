"""The central pass, per (partition, offset): inconsistent-offset, final-log coverage, and candidates.

One aggregation over every acknowledged send (offset, value), every record read by polls and every
record of the final reads. Per offset it keeps min/max of each source's values, so that:
- an offset where the acknowledged and read values are not all equal is an `inconsistent-offset`;
- the number of offsets in [0, hw) covered by final reads decides whether a partition's final committed
  log exists (final-state recovered and the final reads cover all of [0, hw); otherwise its
  acknowledged values are `unseen`);
- in partitions whose final-state says recovered, the offsets where the value-level checks
  (checkers/anomalies/values.py) must look are flagged: an acknowledged or polled value whose offset
  does not hold exactly that value in the final log (lost-write / dirty-read candidates), and a final
  log value not explained by an acknowledgement of the same value at that offset (duplicate
  candidates). Everywhere else every value at the offset is the final log's value there, which proves
  it present, so only the flagged offsets (few in a healthy run) go on to the next checks.
"""
from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.anomalies.tables import Tables, is_client, rows


def analyze(t: Tables, fs_rows: list[dict[str, Any]]) -> tuple[DataFrame, dict[int, dict[str, int]]]:
    """Returns (persisted flagged offsets, per partition counts: n_cover (offsets in [0, hw) covered by
    final reads), n_inconsistent, n_lost, n_dirty, n_dup, n_multi (flagged offsets of each sort)).

    Flagged columns: partition, offset, inconsistent, lost_cand, dirty_cand, dup_cand, multi_final, f_min.
    """
    L = F.lit
    acked = (t.ops.filter(is_client() & (F.col("f") == "send") & (F.col("type") == "ok"))
             .select("partition", "offset", "value", L(0).alias("src")))
    read = t.reads.select("partition", "offset", "value",
                          F.when(F.col("f") == "final-read", L(2)).otherwise(L(1)).alias("src"))
    src, v = F.col("src"), F.col("value")
    # repartition first: the shuffle carries the narrow input rows, not wide partial aggregates
    agg = acked.unionByName(read).repartition("partition", "offset").groupBy("partition", "offset").agg(
        F.min("value").alias("vmin"), F.max("value").alias("vmax"),
        F.min(F.when(src == 0, v)).alias("a_min"), F.max(F.when(src == 0, v)).alias("a_max"),
        F.count(F.when(src == 1, 1)).alias("r_n"),
        F.min(F.when(src == 2, v)).alias("f_min"), F.max(F.when(src == 2, v)).alias("f_max"))
    fs = t.spark.createDataFrame([(r["partition"], r["hw"], bool(r["recovered"])) for r in fs_rows],
                                 "partition int, fs_hw long, fs_rec boolean")
    j = agg.join(F.broadcast(fs), "partition", "left")
    in_final = F.coalesce((F.col("offset") >= 0) & (F.col("offset") < F.col("fs_hw")) & F.col("f_min").isNotNull(), L(False))
    single_final = in_final & (F.col("f_min") == F.col("f_max"))
    rec = F.coalesce(F.col("fs_rec"), L(False))
    has_ack = F.col("a_min").isNotNull()
    inconsistent = F.col("vmin") != F.col("vmax")
    lost_cand = rec & has_ack & ~(single_final & (F.col("a_min") == F.col("f_min")) & (F.col("a_max") == F.col("f_min")))
    dirty_cand = rec & (F.col("r_n") > 0) & ~(single_final & (F.col("vmin") == F.col("vmax")))
    dup_cand = rec & in_final & ~(single_final & has_ack & (F.col("a_min") == F.col("f_min"))
                                  & (F.col("a_max") == F.col("f_min")))
    flags = j.select("partition", "offset", inconsistent.alias("inconsistent"), lost_cand.alias("lost_cand"),
                     dirty_cand.alias("dirty_cand"), dup_cand.alias("dup_cand"),
                     (in_final & ~single_final).alias("multi_final"), "f_min", in_final.alias("in_final"))
    flagged = flags.filter(F.col("inconsistent") | F.col("lost_cand") | F.col("dirty_cand") | F.col("dup_cand"))
    n = lambda c: F.sum(F.col(c).cast("long"))  # noqa: E731
    summary = (flags.groupBy("partition")
               .agg(n("in_final").alias("n_cover"), n("inconsistent").alias("n_inconsistent"),
                    n("lost_cand").alias("n_lost"), n("dirty_cand").alias("n_dirty"), n("dup_cand").alias("n_dup"),
                    n("multi_final").alias("n_multi")))
    flag_cols = ["offset", "inconsistent", "lost_cand", "dirty_cand", "dup_cand", "multi_final", "f_min"]
    sum_cols = ["n_cover", "n_inconsistent", "n_lost", "n_dirty", "n_dup", "n_multi"]
    flag_types = dict(flags.dtypes)
    # both from one pass over the input: the two branches reuse the aggregation's shuffle
    both = (flagged.select("partition", *flag_cols, *[L(None).cast("long").alias(c) for c in sum_cols])
            .unionByName(summary.select("partition", *[L(None).cast(flag_types[c]).alias(c) for c in flag_cols],
                                        *sum_cols))
            .persist(StorageLevel.MEMORY_AND_DISK))
    summary_rows = {r["partition"]: {c: r[c] or 0 for c in sum_cols} for r in rows(both.filter(F.col("offset").isNull()))}
    return both.filter(F.col("offset").isNotNull()).select("partition", *flag_cols), summary_rows
