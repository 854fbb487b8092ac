"""Block digests: prove most of the log consistent without shuffling every record.

The exact per-offset pass (offsets.py) shuffles every acknowledged send, poll record and final-read
record by (partition, offset); at 10M sends that is ~30M rows and was most of the checker's time. In a
healthy stretch of a log every observation of an offset agrees, and that can be shown per block of
2^BLOCK_BITS offsets with sums that Spark combines before its shuffle (one small row per block and
input task). For a block of a partition whose final-state says recovered, with R = the block's offsets
inside [0, hw):
  final     final-read records at offsets in R: count n_f, record digest D_f = sum of h(offset, value),
            offset digest G = sum of g(offset); and the count of final reads in the block outside R
  final-ok  the same records without those whose value belongs to a send that ended fail or info
            ("non-ok" values): n_fok, D_fok
  acks      acknowledged sends at offsets in the block: n_a, D_a
  polls     records returned by polls at offsets in the block: n_r, D_r
The block is *clean* when
  1. the final reads hold each offset of R exactly once and nothing else: n_f = |R|, G = g-sum of R,
     and no final read of the block lies outside [0, hw);
  2. the acknowledged sends are exactly the ok-valued final records: (n_a, D_a) = (n_fok, D_fok);
  3. the polls read the block's final log a whole number m >= 0 of times: n_r = m n_f, D_r = m D_f;
  4. 2 (and 3) hold as well for the digests of (offset, value, epoch) when the partition's acknowledgements
     (polls) have their epochs compared, so each such observation's epoch is the final log's. A source's
     epochs are compared in a partition when all of its observations there carry one, and so do the
     final reads inside [0, hw) (-1 is unknown: a Kafka client's send, a history from before records had
     epochs); checkers/reference.py decides the same, so the engines agree.
In a clean block every acknowledged send and every poll record agrees with the final log at its
offset, the final log has one record per offset, and every final record not acknowledged at its offset
carries a non-ok value. So offsets.py would flag nothing there but those non-ok records as duplicate
candidates, and values.py checks every non-ok value for duplicates anyway. Only unclean blocks, and
every block of a partition without a final log, go through the exact pass.

h and g are pairs of sums of independent hashes (a 40-bit slice of xxhash64 and 32-bit murmur3), so an
unclean block passes as clean only if both sums collide (about 2^-70 per block); sums stay far from
overflow (a block with 2^22 or more poll records is simply not clean).
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers import explain
from checkers.anomalies.tables import Tables, rows

BLOCK_BITS = 12
MAX_POLL_RECORDS = 1 << 22


def block_of(offset: Column, bits: int) -> Column:
    return F.shiftright(offset, bits)


def _h(*cols: Column) -> tuple[Column, Column]:
    return F.shiftright(F.xxhash64(*cols), 24), F.hash(*cols).cast("long")


# the sums of a block (`_block_sums`): per input its count and digest pair, the final reads' offset digest
# (g1, g2) and count outside [0, hw) (n_out), the digests with epochs (condition 4), the unknown epochs
_SUMS = ("n_a", "a1", "a2", "n_r", "r1", "r2", "n_f", "f1", "f2", "n_fok", "fok1", "fok2", "g1", "g2", "n_out",
         "a1e", "a2e", "r1e", "r2e", "f1e", "f2e", "fok1e", "fok2e", "n_unk_a", "n_unk_r", "n_unk_f")


def summarize(t: Tables, fs_rows: list[dict[str, Any]], nonok: DataFrame, bits: int = BLOCK_BITS
              ) -> tuple[list[dict[str, Any]], dict[str, set[int]]]:
    """(rows, {"acks": partitions, "polls": partitions} whose epochs are compared). One row per
    (partition, block) holding any record: partition, block, clean, covered (|R| when clean, else 0),
    final (final-read records in R), acks (acknowledged sends in the block). Partitions without a recovered final-state have no clean block. `nonok`: the sends that
    ended fail or info (columns partition, value)."""
    fs = t.spark.createDataFrame([(r["partition"], r["hw"], bool(r["recovered"])) for r in fs_rows],
                                 "partition int, fs_hw long, fs_rec boolean")
    got = rows(_judged(_block_sums(t, fs, nonok, bits), bits))
    unknown: dict[int, tuple[int, int, int]] = {}
    for r in got:
        a, p, f = unknown.get(r["partition"], (0, 0, 0))
        unknown[r["partition"]] = (a + r["n_unk_a"], p + r["n_unk_r"], f + r["n_unk_f"])
    compare = explain.epoch_sources(unknown)

    def ok(r: dict) -> bool:
        return bool(r["clean"] and (r["partition"] not in compare["acks"] or r["acks_e"])
                    and (r["partition"] not in compare["polls"] or r["polls_e"]))
    return [{"partition": r["partition"], "block": r["block"], "clean": ok(r),
             "covered": r["n_range"] if ok(r) else 0, "final": r["n_f"], "acks": r["n_a"]} for r in got], compare


def _block_sums(t: Tables, fs: DataFrame, nonok: DataFrame, bits: int) -> DataFrame:
    """The _SUMS of every (partition, block) holding any record, with its partition's final state `fs`
    (fs_hw, fs_rec)."""
    L = F.lit
    o, v = F.col("offset"), F.col("value")
    h1, h2 = _h(o, v)
    e = F.col("epoch")
    k1, k2 = _h(o, v, e)          # the record digests with its epoch (condition 4)
    g1, g2 = _h(o)
    zero = L(0).cast("long")
    no_epoch = F.when(e < 0, L(1)).otherwise(zero)

    def source(df: DataFrame, **cols: Column) -> DataFrame:
        """One input's rows as (partition, block, every summed column; those it does not feed are 0)."""
        return df.select("partition", block_of(o, bits).alias("block"),
                         *[cols.get(n, zero).cast("long").alias(n) for n in _SUMS])

    # each input computes only its own columns, so the aggregation below is plain sums
    acks = source(t.acks(), n_a=L(1), a1=h1, a2=h2, a1e=k1, a2e=k2, n_unk_a=no_epoch)
    polls = source(t.reads.filter(F.col("f") == "poll"), n_r=L(1), r1=h1, r2=h2, r1e=k1, r2e=k2, n_unk_r=no_epoch)
    nonok = nonok.select("partition", "value", L(True).alias("nonok"))
    final = (t.reads.filter(F.col("f") == "final-read").select("partition", "offset", "value", "epoch")
             .join(F.broadcast(fs), "partition", "left")
             .join(F.broadcast(nonok), ["partition", "value"], "left"))
    in_r = F.coalesce((o >= 0) & (o < F.col("fs_hw")), L(False))
    ok = in_r & F.col("nonok").isNull()
    one = lambda cond, x=L(1): F.when(cond, x).otherwise(zero)  # noqa: E731
    final = source(final, n_f=one(in_r), f1=one(in_r, h1), f2=one(in_r, h2), n_fok=one(ok), fok1=one(ok, h1),
                   fok2=one(ok, h2), g1=one(in_r, g1), g2=one(in_r, g2), n_out=one(~in_r),
                   f1e=one(in_r, k1), f2e=one(in_r, k2), fok1e=one(ok, k1), fok2e=one(ok, k2),
                   n_unk_f=one(in_r & (e < 0)))
    return (acks.unionByName(polls).unionByName(final).groupBy("partition", "block")
            .agg(*[F.sum(n).alias(n) for n in _SUMS])
            .join(F.broadcast(fs), "partition", "left"))


def _judged(blocks: DataFrame, bits: int) -> DataFrame:
    """Each block of `_block_sums` judged: clean (conditions 1 to 3), acks_e and polls_e (condition 4 for
    the acknowledgements and the polls), with the counts the verdicts need."""
    L, c = F.lit, F.col
    zero = L(0).cast("long")
    # R = [lo, hi): the block's offsets inside [0, hw), and its offset digest
    lo = F.greatest(F.shiftleft(c("block"), bits), L(0).cast("long"))
    hi = F.least(F.shiftleft(c("block") + 1, bits), F.coalesce(c("fs_hw"), L(0).cast("long")))
    n_range = F.greatest(hi - lo, L(0).cast("long"))
    blocks = blocks.select("*", lo.alias("lo"), hi.alias("hi"), n_range.alias("n_range"))
    seq = F.when(c("n_range") > 0, F.sequence(c("lo"), c("hi") - 1)).otherwise(F.array().cast("array<long>"))
    e1 = F.aggregate(seq, zero, lambda acc, x: acc + F.shiftright(F.xxhash64(x), 24))
    e2 = F.aggregate(seq, zero, lambda acc, x: acc + F.hash(x).cast("long"))
    m = F.when(c("n_f") > 0, F.floor(c("n_r") / c("n_f"))).otherwise(L(0)).cast("long")
    polls_ok = (c("n_r") < MAX_POLL_RECORDS) & F.when(
        c("n_f") == 0, c("n_r") == 0).otherwise((c("n_r") == m * c("n_f")) & (c("r1") == m * c("f1"))
                                                & (c("r2") == m * c("f2")))
    acks_e = (c("a1e") == c("fok1e")) & (c("a2e") == c("fok2e"))
    polls_e = (c("r1e") == m * c("f1e")) & (c("r2e") == m * c("f2e"))
    clean = (F.coalesce(c("fs_rec"), L(False)) & (c("n_out") == 0) & (c("n_f") == c("n_range"))
             & (c("g1") == e1) & (c("g2") == e2)
             & (c("n_a") == c("n_fok")) & (c("a1") == c("fok1")) & (c("a2") == c("fok2")) & polls_ok)
    return blocks.select("partition", "block", clean.alias("clean"), acks_e.alias("acks_e"),
                         polls_e.alias("polls_e"), "n_unk_a", "n_unk_r", "n_unk_f", "n_range", "n_f", "n_a")


MAX_RANGES = 256


def restrict(df: DataFrame, blocks: list[tuple[int, int]], bits: int) -> DataFrame:
    """The rows of `df` (columns partition, offset) inside the given (partition, block)s.

    Runs of adjacent blocks become offset ranges: as a plain filter (up to MAX_RANGES ranges) Parquet
    skips the row groups whose offset statistics miss every range; more ranges are matched by a
    broadcast join instead."""
    ranges: list[list[int]] = []
    for p, b in sorted(set(blocks)):
        if ranges and ranges[-1][0] == p and ranges[-1][2] == b:
            ranges[-1][2] = b + 1
        else:
            ranges.append([p, b, b + 1])
    if not ranges:
        return df.limit(0)
    o = F.col("offset")
    if len(ranges) <= MAX_RANGES:
        conds = [(F.col("partition") == p) & (o >= (lo << bits)) & (o < (hi << bits)) for p, lo, hi in ranges]
        cond = conds[0]
        for c in conds[1:]:
            cond = cond | c
        return df.filter(cond)
    spark = df.sparkSession
    keys = spark.createDataFrame(sorted(set(blocks)), "partition int, block long")
    return (df.withColumn("block", block_of(o, bits)).join(F.broadcast(keys), ["partition", "block"], "left_semi")
            .drop("block"))

