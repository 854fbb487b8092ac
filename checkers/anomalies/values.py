"""Value-level anomalies: lost-write, failed-write-present, duplicate, dirty-read, aborted-read.

In a partition whose final committed log exists ("recovered"):
  lost-write            an acknowledged (ok) send whose value is not in the final log
  failed-write-present  a failed send whose value is in the final log
  duplicate             a value at more than one offset of the final log
  dirty-read            a poll read a value that is not in the final log (counted per read)
and in any partition:
  aborted-read          a poll read a value whose send failed (counted per read)
Values are unique per partition (ingest enforces it), so a value has at most one send completion.

Only candidates are examined (see offsets.py and digests.py for why that is complete): acknowledged
sends and poll reads at flagged offsets, values of the final log at flagged offsets, and every send
that ended fail or info. One scan of the sends, one of the poll records and one of the final reads
(filtered by the candidate values, which decides their presence in the final log) find them all.
Small candidate sets are broadcast, so the big tables are scanned, never shuffled.
"""
from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.anomalies.tables import POS_BITS, Tables, finding

BROADCAST_ROWS = 2_000_000


def _small(df: DataFrame, n: int) -> DataFrame:
    return F.broadcast(df) if n <= BROADCAST_ROWS else df


def _persist(df: DataFrame, keep: list[DataFrame]) -> DataFrame:
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    keep.append(df)
    return df


def analyze(t: Tables, flagged: DataFrame, recovered: DataFrame, keep: list[DataFrame], ocount: dict[str, int],
            n_failed: int, n_info: int = 0) -> list[DataFrame]:
    """`flagged`: offsets.analyze's flagged offsets and `ocount` its counts (upper bounds here: they
    include partitions that turned out not recovered); `recovered`: (partition, fs_hw) of partitions with
    a final log; `n_failed`, `n_info`: sends that ended fail, info. Returns findings (tables.finding)."""
    L = F.lit
    rec_b = F.broadcast(recovered)
    final_log = (t.reads.filter(F.col("f") == "final-read").join(rec_b, "partition")
                 .filter((F.col("offset") >= 0) & (F.col("offset") < F.col("fs_hw")))
                 .select("partition", "offset", "value"))
    flagged_rec = flagged.join(F.broadcast(recovered.select("partition")), "partition")
    n_lo, n_do = ocount["n_lost"], ocount["n_dirty"]
    n_dup = ocount["n_dup"] + n_failed + n_info  # candidate values for duplicates (upper bound)
    lost_off = flagged_rec.filter(F.col("lost_cand")).select("partition", "offset")
    dirty_off = flagged_rec.filter(F.col("dirty_cand")).select("partition", "offset")
    dup_off = flagged_rec.filter(F.col("dup_cand")).select("partition", "offset", "multi_final", "f_min")

    sends = t.sends.select("partition", "value", "stype", F.col("index").alias("sindex"),
                           F.col("offset").alias("soffset"))
    polls = (t.reads.filter(F.col("f") == "poll")
             .select("partition", "value", "offset", (F.col("index") * (1 << POS_BITS) + F.col("pos")).alias("rkey")))

    # one scan of the sends: those that ended fail or info, and the acks at lost-write candidate offsets
    # (the send of every dirty-read value is among them: an acked value absent from the final log makes
    # its own offset a lost-write candidate)
    lost_key = lost_off.select("partition", F.col("offset").alias("soffset"), L(True).alias("lost_key"))
    cand_sends = _persist(sends.join(_small(lost_key, n_lo), ["partition", "soffset"], "left")
                          .filter((F.col("stype") != 0) | F.col("lost_key").isNotNull()).drop("lost_key"), keep)
    lost_c = cand_sends.filter(F.col("stype") == 0) if n_lo else None
    failed = cand_sends.filter(F.col("stype") == 1) if n_failed else None
    # one scan of the poll records: those at dirty-read candidate offsets and those of failed values
    polls_c = None
    if n_do or n_failed:
        def mark(df: DataFrame, keys: DataFrame | None, on: str, name: str, n: int) -> DataFrame:
            """df + a column `name`: true where (partition, on) is among `keys`, else null."""
            if keys is None or not n:
                return df.withColumn(name, L(None).cast("boolean"))
            return df.join(_small(keys.select("partition", on, L(True).alias(name)), n), ["partition", on], "left")
        pc = mark(mark(polls, dirty_off, "offset", "dirty_key", n_do), failed, "value", "failed_key", n_failed)
        polls_c = _persist(pc.filter(F.col("dirty_key").isNotNull() | F.col("failed_key").isNotNull()), keep)
    dirty_c = polls_c.filter(F.col("dirty_key").isNotNull()) if n_do else None
    # duplicate candidates: every value of a send that ended fail or info (block digests do not vouch for
    # those), and the final values at flagged offsets that no acknowledgement explains
    dup_vals = cand_sends.filter(F.col("stype") != 0).select("partition", "value")
    if ocount["n_dup"]:
        multi = ocount["n_multi"]
        dup_vals = dup_vals.unionByName(dup_off.filter(~F.col("multi_final")).select("partition", F.col("f_min").alias("value")))
        if multi:  # several values at one final offset: take them all from the final log
            dup_vals = dup_vals.unionByName(final_log.join(_small(dup_off.filter(F.col("multi_final")), multi),
                                                           ["partition", "offset"]).select("partition", "value"))
    cand = dup_vals
    for df in (lost_c, dirty_c):
        if df is not None:
            cand = cand.unionByName(df.select("partition", "value"))
    cand = cand.distinct()
    n_c = n_lo + n_do + n_dup * 4
    # every final-log occurrence of a candidate value (few), by one filtered scan of the final reads
    occ = _persist(final_log.join(_small(cand, n_c), ["partition", "value"]).distinct(), keep)
    present = occ.select("partition", "value").distinct()
    send_info = cand_sends.select("partition", "value", "sindex", "soffset", "stype")

    out: dict[str, DataFrame] = {}
    if lost_c is not None:
        out["lost-write"] = lost_c.join(present, ["partition", "value"], "left_anti").select(
            "partition", "value", "sindex", "soffset", "stype")
    if failed is not None:
        out["failed-write-present"] = failed.join(present, ["partition", "value"], "left_semi").select(
            "partition", "value", "sindex", "soffset", "stype")
    # the send of a duplicated value is looked up for the examples only (engine._examples)
    out["duplicate"] = (occ.join(dup_vals.distinct(), ["partition", "value"], "left_semi")
                        .groupBy("partition", "value").agg(F.count("*").alias("n")).filter(F.col("n") > 1)
                        .select("partition", "value", *[L(None).cast("long").alias(c) for c in ("sindex", "soffset")],
                                L(None).cast("int").alias("stype")))
    if dirty_c is not None:
        out["dirty-read"] = (dirty_c.join(present, ["partition", "value"], "left_anti").groupBy("partition", "value")
                             .agg(F.count("*").alias("reads"), F.min("rkey").alias("rkey"))
                             .join(send_info, ["partition", "value"], "left"))
    if failed is not None:
        out["aborted-read"] = (polls_c.filter(F.col("failed_key").isNotNull()).groupBy("partition", "value")
                               .agg(F.count("*").alias("reads"), F.min("rkey").alias("rkey"))
                               .join(send_info.filter(F.col("stype") == 1), ["partition", "value"]))
    send_cols = ["value", "sindex", "soffset", "stype"]
    keys = {"lost-write": ("sindex", None), "failed-write-present": ("sindex", None), "duplicate": ("value", None),
            "dirty-read": ("rkey", "reads"), "aborted-read": ("rkey", "reads")}
    found = []
    for kind, df in out.items():
        k1, w = keys[kind]
        cols = send_cols + (["reads", "rkey"] if w else [])
        found.append(finding(df, kind, cols, k1=F.col(k1), weight=F.col(w) if w else None))
    return found
