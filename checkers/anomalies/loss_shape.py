"""The Spark engine's loss shape: where each partition's lost writes fall in its acknowledged sequence.

The rule is checkers/loss_shape.py's. Only the blocks of 2^bits offsets (digests.py) that hold a lost
write are looked at record by record: their acknowledged sends come from the exact pass's persisted
input records (offsets.py; a block with a lost write is never clean, so they are all there). Every
other block of the partition with an acknowledged send holds no lost write, so for the runs it is one
kept element and enters the sequence as one marker row at its first offset. One window over those rows
per partition, ordered by (offset, history index), tells each lost write how many kept elements come
before it and whether the element before it was lost too; one small aggregation counts writes and run
starts per class. Nothing runs when nothing was lost.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import loss_shape
from checkers.anomalies import digests
from checkers.anomalies.tables import rows

BROADCAST_LOST = 2_000_000


def analyze(recs: DataFrame, blocks: list[dict[str, Any]], lost: list[tuple[int, int, int]] | DataFrame,
            n_lost: int, bits: int) -> dict[int, dict[str, dict[str, int]]]:
    """Per partition with lost writes, {class: {"writes", "runs"}} (checkers/loss_shape.py).

    `recs`: offsets.analyze's input records; `blocks`: digests.summarize's rows (with `acks`); `lost`:
    the lost writes as (partition, history index, acknowledged offset), a list on the driver or a
    DataFrame with those columns; `n_lost`: how many."""
    if not n_lost:
        return {}
    spark = recs.sparkSession
    c, L = F.col, F.lit
    if isinstance(lost, list):
        lost_blocks = {(p, o >> bits) for p, _i, o in lost}
        lost_df = spark.createDataFrame([(p, i) for p, i, _o in lost], "partition int, index long")
    else:
        lost_df = lost.select(c("partition").cast("int").alias("partition"), c("index").cast("long").alias("index"))
        lost_blocks = {(r["partition"], r["block"]) for r in rows(
            lost.select("partition", digests.block_of(c("offset"), bits).alias("block")).distinct())}
    lossy = {p for p, _b in lost_blocks}
    markers = [(b["partition"], b["block"] << bits, -1) for b in blocks
               if b["partition"] in lossy and b["acks"] and (b["partition"], b["block"]) not in lost_blocks]
    acks = digests.restrict(recs.filter(c("src") == 0).select("partition", "offset", c("key").alias("index")),
                            sorted(lost_blocks), bits)
    flagged = lost_df.select("partition", "index", L(True).alias("lost"))
    if n_lost <= BROADCAST_LOST:
        flagged = F.broadcast(flagged)
    seq = acks.join(flagged, ["partition", "index"], "left").select(
        "partition", "offset", "index", F.coalesce(c("lost"), L(False)).alias("lost"))
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
