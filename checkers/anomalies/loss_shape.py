"""The Spark engine's loss shape: where each partition's lost writes fall in its acknowledged sequence.

The rule is checkers/loss_shape.py's. The acknowledged sends of the blocks of 2^bits offsets that the
digests (digests.py) could not show clean come from the exact pass's persisted input records
(offsets.py); every lost write is among them (a block holding one is never clean). A clean block holds
no lost write, so for the runs its acknowledged sends are one kept element: it enters the sequence as
one marker row at its first offset. One window over those rows per partition with lost writes,
ordered by (offset, history index), tells each lost write how many kept elements come before it and
whether the element before it was lost too; one small aggregation counts writes and run starts per
class. One Spark job, and none when nothing was lost.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import loss_shape
from checkers.anomalies.tables import rows

BROADCAST_LOST = 2_000_000


def analyze(recs: DataFrame, blocks: list[dict[str, Any]], lost: list[tuple[int, int]] | DataFrame,
            lossy: dict[int, int], bits: int) -> dict[int, dict[str, dict[str, int]]]:
    """Per partition with lost writes, {class: {"writes", "runs"}} (checkers/loss_shape.py).

    `recs`: offsets.exact_pass's input records; `blocks`: digests.summarize's rows (with `acks`); `lost`:
    the lost writes as (partition, history index), a list on the driver or a DataFrame with columns
    partition, index; `lossy`: the number of lost writes per partition (only partitions with some);
    `bits`: the digests' block size."""
    if not lossy:
        return {}
    spark = recs.sparkSession
    c, L = F.col, F.lit
    parts = sorted(lossy)
    if isinstance(lost, list):
        lost = spark.createDataFrame(lost, "partition int, index long")
    flagged = lost.select(c("partition").cast("int").alias("partition"), c("index").cast("long").alias("index"),
                          L(True).alias("lost"))
    if sum(lossy.values()) <= BROADCAST_LOST:
        flagged = F.broadcast(flagged)
    acks = recs.filter((c("src") == 0) & c("partition").isin(parts)).select(
        "partition", "offset", c("key").alias("index"))
    seq = acks.join(flagged, ["partition", "index"], "left").select(
        "partition", "offset", "index", F.coalesce(c("lost"), L(False)).alias("lost"))
    markers = [(b["partition"], b["block"] << bits, -1) for b in blocks
               if b["partition"] in lossy and b["clean"] and b["acks"]]
    if markers:
        seq = seq.unionByName(spark.createDataFrame(markers, "partition int, offset long, index long")
                              .select("partition", "offset", "index", L(False).alias("lost")))
    w = Window.partitionBy("partition").orderBy("offset", "index")
    kept = F.when(c("lost"), L(0)).otherwise(L(1))
    placed = seq.select(
        "partition", "lost", F.lag("lost").over(w).alias("prev_lost"),
        F.sum(kept).over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("kept_before"),
        F.sum(kept).over(w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)).alias("kept"))
    cls = (F.when(c("kept") == 0, L("all")).when(c("kept_before") == 0, L("prefix"))
           .when(c("kept_before") == c("kept"), L("suffix")).otherwise(L("middle")))
    starts = F.when(c("prev_lost").isNull() | ~c("prev_lost"), L(1)).otherwise(L(0))
    counted = (placed.filter(c("lost")).groupBy("partition", cls.alias("cls"))
               .agg(F.count(L(1)).alias("writes"), F.sum(starts).alias("runs")))
    out: dict[int, dict[str, dict[str, int]]] = {}
    for r in rows(counted):
        shape = out.setdefault(r["partition"], loss_shape.zero())
        shape[r["cls"]] = {"writes": int(r["writes"]), "runs": int(r["runs"])}
    return out
