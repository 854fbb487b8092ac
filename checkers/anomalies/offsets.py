"""Per (partition, offset): inconsistent-offset, and which partitions have a complete final log.

One aggregation over every acknowledged send (its offset and value) and every record read (polls and
final reads). An offset at which two different values were acknowledged or read is an
`inconsistent-offset`. The same pass counts, per partition, the distinct offsets in [0, hw) covered by
final reads: a partition's final committed log exists only if its final-state says recovered and the
final reads cover all of [0, hw) (otherwise its acknowledged values are `unseen`).
"""
from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.anomalies.tables import Tables, is_client, rows


def analyze(t: Tables, fs_rows: list[dict[str, Any]]) -> tuple[DataFrame, dict[int, int]]:
    """Returns (persisted DataFrame of inconsistent offsets, {partition: covered offsets below hw})."""
    acked = (t.ops.filter(is_client() & (F.col("f") == "send") & (F.col("type") == "ok"))
             .select("partition", "offset", "value", F.lit(False).alias("final")))
    read = t.reads.select("partition", "offset", "value", (F.col("f") == "final-read").alias("final"))
    agg = (acked.unionByName(read).groupBy("partition", "offset")
           .agg(F.min("value").alias("vmin"), F.max("value").alias("vmax"),
                F.max(F.col("final").cast("int")).alias("final")))
    hw = t.spark.createDataFrame([(r["partition"], r["hw"]) for r in fs_rows], "partition int, fs_hw long")
    summary = (agg.filter(F.col("final") == 1).join(F.broadcast(hw), "partition")
               .filter((F.col("offset") >= 0) & (F.col("offset") < F.col("fs_hw")))
               .groupBy("partition").agg(F.count("*").alias("n")))
    bad = agg.filter(F.col("vmin") != F.col("vmax"))
    # both results from one pass: the aggregation's shuffle is reused by the two branches
    both = (bad.select("partition", "offset", F.lit(None).cast("long").alias("n"))
            .unionByName(summary.select("partition", F.lit(None).cast("long").alias("offset"), "n")))
    both = both.persist(StorageLevel.MEMORY_AND_DISK)
    cover = {r["partition"]: r["n"] for r in rows(both.filter(F.col("offset").isNull()))}
    return both.filter(F.col("offset").isNotNull()).select("partition", "offset"), cover
