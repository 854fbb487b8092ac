"""Order anomalies of one client: nonmonotonic-send, poll-skip, nonmonotonic-poll.

nonmonotonic-send: for one producer process and partition, consecutive acknowledged sends (in history
order) where the later one's offset is below the earlier one's.
poll-skip / nonmonotonic-poll: for one consumer process and partition, the records its polls returned,
in history order (then position in the poll), with its `assign`s interleaved. Each record is compared
with the element just before it: after a record at offset o the next is expected at o + 1; after an
assign to offset a the next record is expected at a. A record beyond the expected offset is a
`poll-skip` (gap = how many offsets were skipped), at or below the previous record a `nonmonotonic-poll`.
"""
from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.anomalies.tables import Tables, is_client


def nonmonotonic_send(t: Tables) -> DataFrame:
    acked = (t.ops.filter(is_client() & (F.col("f") == "send") & (F.col("type") == "ok"))
             .select("process", "partition", "index", "time", "value", "offset", "epoch"))
    w = Window.partitionBy("process", "partition").orderBy("index")
    prev = {c: F.lag(c).over(w) for c in ("index", "time", "value", "offset", "epoch")}
    out = acked.select("*", *[prev[c].alias("p_" + c) for c in prev])
    return out.filter(F.col("offset") < F.col("p_offset")).persist(StorageLevel.MEMORY_AND_DISK)


def poll_order(t: Tables) -> DataFrame:
    """Records out of order; column `kind` is 'poll-skip' or 'nonmonotonic-poll'."""
    L = F.lit
    assigns = (t.ops.filter(is_client() & (F.col("f") == "assign") & (F.col("type") == "ok"))
               .select("process", "partition", "index", L(-1).alias("pos"), "offset",
                       L(None).cast("long").alias("value"), "time", L(True).alias("is_assign")))
    reads = (t.reads.filter(F.col("f") == "poll")
             .select("process", "partition", "index", "pos", "offset", "value", "time", L(False).alias("is_assign")))
    w = Window.partitionBy("process", "partition").orderBy("index", "pos")
    seq = assigns.unionByName(reads).select(
        "*", *[F.lag(c).over(w).alias("p_" + c) for c in ("index", "offset", "value", "time", "is_assign")])
    base = F.when(F.col("p_is_assign"), F.col("p_offset") - 1).otherwise(F.col("p_offset"))
    kind = (F.when(F.col("offset") > base + 1, L("poll-skip"))
            .when(F.col("offset") <= base, L("nonmonotonic-poll")))
    out = (seq.filter(~F.col("is_assign") & F.col("p_index").isNotNull())
           .select("*", kind.alias("kind"), (F.col("offset") - base - 1).alias("gap"))
           .filter(F.col("kind").isNotNull()))
    return out.persist(StorageLevel.MEMORY_AND_DISK)
