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


def analyze(t: Tables, fs_rows: list[dict[str, Any]]) -> tuple[DataFrame, dict[int, int]]:
    """Returns (persisted flagged offsets, {partition: covered offsets below hw}).

    Flagged columns: partition, offset, inconsistent, lost_cand, dirty_cand, dup_cand, multi_final, f_min.
    """
    L = F.lit
    acked = (t.ops.filter(is_client() & (F.col("f") == "send") & (F.col("type") == "ok"))
             .select("partition", "offset", "value", L(0).alias("src")))
    read = t.reads.select("partition", "offset", "value",
                          F.when(F.col("f") == "final-read", L(2)).otherwise(L(1)).alias("src"))
    src, v = F.col("src"), F.col("value")
    agg = acked.unionByName(read).groupBy("partition", "offset").agg(
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
    summary = (flags.filter(F.col("in_final")).groupBy("partition").agg(F.count("*").alias("n"))
               .select("partition", L(None).cast("long").alias("offset"), L(None).cast("boolean").alias("inconsistent"),
                       L(None).cast("boolean").alias("lost_cand"), L(None).cast("boolean").alias("dirty_cand"),
                       L(None).cast("boolean").alias("dup_cand"), L(None).cast("boolean").alias("multi_final"),
                       F.col("n").alias("f_min")))
    # both from one pass over the input: the two branches reuse the aggregation's shuffle
    both = flagged.drop("in_final").unionByName(summary).persist(StorageLevel.MEMORY_AND_DISK)
    cover = {r["partition"]: r["f_min"] for r in rows(both.filter(F.col("offset").isNull()))}
    return both.filter(F.col("offset").isNotNull()), cover
