"""Value-level anomalies: lost-write, failed-write-present, duplicate, dirty-read, aborted-read.

In a partition whose final committed log exists ("recovered"):
  lost-write            an acknowledged (ok) send whose value is not in the final log
  failed-write-present  a failed send whose value is in the final log
  duplicate             a value at more than one offset of the final log
  dirty-read            a poll read a value that is not in the final log (counted per read)
and in any partition:
  aborted-read          a poll read a value whose send failed (counted per read)
Values are unique per partition (ingest enforces it), so a value has at most one send completion.

Only candidates are examined (see offsets.py for why that is complete): acknowledged sends and poll
reads at flagged offsets, values of the final log at flagged offsets, and the failed sends. Their
presence in the final log is decided by one scan of the final reads filtered by the candidate values.
Small candidate sets are broadcast, so the big tables are scanned, never shuffled.
"""
from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.anomalies.tables import POS_BITS, Tables, finding, is_client, type_code

BROADCAST_ROWS = 2_000_000


def _small(df: DataFrame, n: int) -> DataFrame:
    return F.broadcast(df) if n <= BROADCAST_ROWS else df


def _persist(df: DataFrame, keep: list[DataFrame]) -> DataFrame:
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    keep.append(df)
    return df


def analyze(t: Tables, flagged: DataFrame, recovered: DataFrame, keep: list[DataFrame], ocount: dict[str, int],
            n_failed: int) -> list[DataFrame]:
    """`flagged`: offsets.analyze's flagged offsets and `ocount` its counts (upper bounds here: they
    include partitions that turned out not recovered); `recovered`: (partition, fs_hw) of partitions with
    a final log; `n_failed`: failed sends. Returns findings (tables.finding)."""
    L = F.lit
    rec_b = F.broadcast(recovered)
    final_log = (t.reads.filter(F.col("f") == "final-read").join(rec_b, "partition")
                 .filter((F.col("offset") >= 0) & (F.col("offset") < F.col("fs_hw")))
                 .select("partition", "offset", "value"))
    flagged_rec = flagged.join(F.broadcast(recovered.select("partition")), "partition")
    n_lo, n_do, n_dup = ocount["n_lost"], ocount["n_dirty"], ocount["n_dup"]
    lost_off = flagged_rec.filter(F.col("lost_cand")).select("partition", "offset")
    dirty_off = flagged_rec.filter(F.col("dirty_cand")).select("partition", "offset")
    dup_off = flagged_rec.filter(F.col("dup_cand")).select("partition", "offset", "multi_final", "f_min")

    sends = t.sends.select("partition", "value", "stype", F.col("index").alias("sindex"),
                           F.col("offset").alias("soffset"))
    acks = sends.filter(F.col("stype") == 0)
    polls = (t.reads.filter(F.col("f") == "poll")
             .select("partition", "value", "offset", (F.col("index") * (1 << POS_BITS) + F.col("pos")).alias("rkey")))

    # candidates
    lost_c = _persist(acks.join(_small(lost_off.withColumnRenamed("offset", "soffset"), n_lo),
                                ["partition", "soffset"]), keep) if n_lo else None
    dirty_c = _persist(polls.join(_small(dirty_off, n_do), ["partition", "offset"]), keep) if n_do else None
    n_f = n_failed
    failed = sends.filter(F.col("stype") == 1).persist(StorageLevel.MEMORY_AND_DISK) if n_f else None
    if failed is not None:
        keep.append(failed)
    dup_vals = None
    if n_dup:
        multi = ocount["n_multi"]
        dup_vals = dup_off.filter(~F.col("multi_final")).select("partition", F.col("f_min").alias("value"))
        if multi:  # several values at one final offset: take them all from the final log
            dup_vals = dup_vals.unionByName(final_log.join(_small(dup_off.filter(F.col("multi_final")), multi),
                                                           ["partition", "offset"]).select("partition", "value"))
    parts = [df.select("partition", "value") for df in (lost_c, dirty_c, failed, dup_vals) if df is not None]
    out: dict[str, DataFrame] = {}
    if not parts:
        return []
    cand = parts[0]
    for p in parts[1:]:
        cand = cand.unionByName(p)
    cand = cand.distinct()
    n_c = n_lo + n_do + n_f + n_dup * 4
    # every final-log occurrence of a candidate value (few), by one filtered scan of the final reads
    occ = final_log.join(_small(cand, n_c), ["partition", "value"]).distinct().persist(StorageLevel.MEMORY_AND_DISK)
    keep.append(occ)
    present = occ.select("partition", "value").distinct()

    if lost_c is not None:
        out["lost-write"] = lost_c.join(present, ["partition", "value"], "left_anti").select(
            "partition", "value", "sindex", "soffset", "stype")
    if n_f:
        out["failed-write-present"] = failed.join(present, ["partition", "value"], "left_semi").select(
            "partition", "value", "sindex", "soffset", "stype")
    def with_send(small: DataFrame, n: int) -> DataFrame:
        """small + its send completion's (stype, sindex, soffset), null when never completed."""
        small = small.persist(StorageLevel.MEMORY_AND_DISK)
        keep.append(small)
        matched = sends.join(_small(small.select("partition", "value"), n), ["partition", "value"])
        return small.join(matched, ["partition", "value"], "left")

    if dup_vals is not None:
        out["duplicate"] = with_send(occ.join(dup_vals.distinct(), ["partition", "value"], "left_semi")
                                     .groupBy("partition", "value").agg(F.count("*").alias("n"))
                                     .filter(F.col("n") > 1).select("partition", "value"), n_dup * 4)
    if dirty_c is not None:
        out["dirty-read"] = with_send(dirty_c.join(present, ["partition", "value"], "left_anti")
                                      .groupBy("partition", "value")
                                      .agg(F.count("*").alias("reads"), F.min("rkey").alias("rkey")), n_do)
    if n_f:
        out["aborted-read"] = (polls.join(_small(failed.select("partition", "value", "sindex", "soffset", "stype"), n_f),
                                          ["partition", "value"])
                               .groupBy("partition", "value", "sindex", "soffset", "stype")
                               .agg(F.count("*").alias("reads"), F.min("rkey").alias("rkey")))
    send_cols = ["value", "sindex", "soffset", "stype"]
    keys = {"lost-write": ("sindex", None), "failed-write-present": ("sindex", None), "duplicate": ("value", None),
            "dirty-read": ("rkey", "reads"), "aborted-read": ("rkey", "reads")}
    found = []
    for kind, df in out.items():
        k1, w = keys[kind]
        cols = send_cols + (["reads", "rkey"] if w else [])
        found.append(finding(df, kind, cols, k1=F.col(k1), weight=F.col(w) if w else None))
    return found
