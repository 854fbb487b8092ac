"""divergence: two replicas hold different records at the same offset (from the replica dumps).

A record is (value, epoch, crc_ok); a non-integer value is dumped as null and compared as null. An offset
diverges if the replicas holding a record there do not all hold the same one. It is `committed: true`
if two replicas whose checkpointed HW is above the offset hold different records there (both claim the
record committed); otherwise it is residual: the replicas still disagree after the final heal, beyond
some replica's HW (anywhere up to the LEO).

To avoid shuffling every replica record, replicas are first compared by block digests: per (node,
partition, block of 4096 offsets) the record count and two sums of independent hashes (a 44-bit slice
of xxhash64 and murmur3) of (offset, value, epoch, crc_ok). Only blocks whose digests differ between the
nodes holding them are compared record by record. A divergence could be missed only if both hash sums
collided on the same block (probability about 2^-70 per differing block).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rundir import kinds
from checkers.anomalies import digests
from checkers.anomalies.context import CheckContext
from checkers.anomalies.lookup import ExampleDetails
from checkers.anomalies.tables import Counted, Order, Tables, finding, rows

KINDS = (kinds.DIVERGENCE,)


def _differ(prefix: str) -> Column:
    c = lambda n: F.col(prefix + n)  # noqa: E731
    return (F.coalesce(c("vmin") != c("vmax"), F.lit(False))
            | ((c("nnull") > 0) & (c("nnull") < c("n")))
            | F.coalesce(c("emin") != c("emax"), F.lit(False))
            | F.coalesce(c("cmin") != c("cmax"), F.lit(False)))


BLOCK_BITS = 12


def suspicious_blocks(t: Tables) -> DataFrame:
    rec = [F.col("offset"), F.col("value"), F.col("epoch"), F.col("crc_ok")]
    per_node = (t.replicas.withColumn("block", digests.block_of(F.col("offset"), BLOCK_BITS))
               .groupBy("node", "partition", "block")
               .agg(F.count("*").alias("n"), F.sum(F.shiftright(F.xxhash64(*rec), 20)).alias("d1"),
                    F.sum(F.hash(*rec).cast("long")).alias("d2")))
    per_block = per_node.groupBy("partition", "block").agg(
        *[F.min(c).alias(c + "_min") for c in ("n", "d1", "d2")], *[F.max(c).alias(c + "_max") for c in ("n", "d1", "d2")])
    differ = (F.col("n_min") != F.col("n_max")) | (F.col("d1_min") != F.col("d1_max")) | (F.col("d2_min") != F.col("d2_max"))
    return per_block.filter(differ).select("partition", "block")


def analyze(ctx: CheckContext) -> DataFrame:
    """Replicas holding different records at one offset, in the blocks whose digests differ."""
    t = ctx.t
    # the blocks are few (at most one per 4096 offsets): collected, they become offset ranges that let
    # Parquet skip the rest of the replica dumps
    blocks = [(r["partition"], r["block"]) for r in rows(suspicious_blocks(t))]
    meta = t.replica_meta.select("node", "partition", F.col("hw").alias("rhw"))
    r = digests.restrict(t.replicas, blocks, BLOCK_BITS).join(F.broadcast(meta), ["node", "partition"], "left")
    crc = F.col("crc_ok").cast("int")
    committed = F.coalesce(F.col("rhw") > F.col("offset"), F.lit(False))

    def aggs(prefix: str, cond: Column | None) -> list[Column]:
        w = (lambda x: F.when(cond, x)) if cond is not None else (lambda x: x)  # noqa: E731
        return [F.min(w(F.col("value"))).alias(prefix + "vmin"), F.max(w(F.col("value"))).alias(prefix + "vmax"),
                F.count(w(F.when(F.col("value").isNull(), 1))).alias(prefix + "nnull"),
                F.count(w(F.lit(1))).alias(prefix + "n"),
                F.min(w(F.col("epoch"))).alias(prefix + "emin"), F.max(w(F.col("epoch"))).alias(prefix + "emax"),
                F.min(w(crc)).alias(prefix + "cmin"), F.max(w(crc)).alias(prefix + "cmax")]

    agg = r.groupBy("partition", "offset").agg(*aggs("", None), *aggs("c_", committed))
    out = agg.filter(_differ("")).select("partition", "offset", _differ("c_").alias("committed"))
    return finding(out, kinds.DIVERGENCE.name, ["offset", "committed"], Order(F.col("offset")),
                   Counted(flag=F.col("committed")))


def examples(top: dict[str, list[dict]], d: ExampleDetails) -> dict[str, list[dict]]:
    """The divergence examples (their replicas are attached later, checkers/explain.py)."""
    return {kinds.DIVERGENCE.name: [{"partition": r["partition"], "offset": r["offset"], "committed": r["committed"]}
                           for r in top[kinds.DIVERGENCE.name]]}
