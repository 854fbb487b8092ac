"""Per (partition, value): lost-write, failed-write-present, duplicate, dirty-read, aborted-read.

One aggregation over the send completions, the final committed log (final reads below the final HW of
partitions with a complete final log) and the records read by polls. Values are unique per partition
(ingest enforces it), so each value has at most one send completion. Flags, for a partition whose final
log exists ("recovered"):
  lost-write            the send ended ok and the value is not in the final log
  failed-write-present  the send failed and the value is in the final log
  duplicate             the value is at more than one offset of the final log
  dirty-read            a poll read the value and it is not in the final log (counted per read)
and in any partition:
  aborted-read          a poll read the value and its send failed (counted per read)
Only flagged values are kept (persisted); counts and examples come from that small set.
"""
from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.anomalies.tables import POS_BITS, Tables, is_client, type_code


def analyze(t: Tables, recovered: DataFrame) -> DataFrame:
    """`recovered`: (partition, fs_hw) of partitions with a final log. Returns the flagged values."""
    L = F.lit
    sends = (t.ops.filter(is_client() & (F.col("f") == "send") & (F.col("type") != "invoke"))
             .select("partition", "value", L(0).alias("src"), type_code().alias("stype"),
                     F.col("index").alias("sindex"), F.col("offset"), L(None).cast("long").alias("rkey")))
    final = (t.reads.filter(F.col("f") == "final-read").join(F.broadcast(recovered), "partition")
             .filter((F.col("offset") >= 0) & (F.col("offset") < F.col("fs_hw")))
             .select("partition", "value", L(1).alias("src"), L(None).cast("int").alias("stype"),
                     L(None).cast("long").alias("sindex"), "offset", L(None).cast("long").alias("rkey")))
    polls = (t.reads.filter(F.col("f") == "poll")
             .select("partition", "value", L(2).alias("src"), L(None).cast("int").alias("stype"),
                     L(None).cast("long").alias("sindex"), L(None).cast("long").alias("offset"),
                     (F.col("index") * (1 << POS_BITS) + F.col("pos")).alias("rkey")))
    src = F.col("src")
    agg = (sends.unionByName(final).unionByName(polls).groupBy("partition", "value").agg(
        F.max(F.when(src == 0, F.col("stype"))).alias("stype"),
        F.max(F.when(src == 0, F.col("sindex"))).alias("sindex"),
        F.max(F.when(src == 0, F.col("offset"))).alias("soffset"),
        F.count(F.when(src == 1, 1)).alias("final_n"),
        F.min(F.when(src == 1, F.col("offset"))).alias("fmin"),
        F.max(F.when(src == 1, F.col("offset"))).alias("fmax"),
        F.count(F.when(src == 2, 1)).alias("reads"),
        F.min(F.when(src == 2, F.col("rkey"))).alias("rkey"),
    ))
    rec = recovered.select("partition", L(True).alias("rec"))
    j = agg.join(F.broadcast(rec), "partition", "left")
    r = F.coalesce(F.col("rec"), L(False))
    flags = j.select(
        "partition", "value", "stype", "sindex", "soffset", "final_n", "reads", "rkey",
        (r & (F.col("stype") == 0) & (F.col("final_n") == 0)).alias("lost"),
        (r & (F.col("stype") == 1) & (F.col("final_n") > 0)).alias("failed_present"),
        (r & (F.col("fmin") != F.col("fmax"))).alias("duplicate"),
        (r & (F.col("reads") > 0) & (F.col("final_n") == 0)).alias("dirty"),
        (F.coalesce(F.col("stype") == 1, L(False)) & (F.col("reads") > 0)).alias("aborted"),
    )
    flagged = flags.filter(F.coalesce(F.col("lost"), L(False)) | F.coalesce(F.col("failed_present"), L(False))
                           | F.coalesce(F.col("duplicate"), L(False)) | F.coalesce(F.col("dirty"), L(False))
                           | F.col("aborted"))
    return flagged.persist(StorageLevel.MEMORY_AND_DISK)
