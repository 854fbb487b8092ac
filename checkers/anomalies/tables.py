"""The Spark checker's inputs: the columnar tables as DataFrames, and small DataFrame helpers.

DataFrame API only (no RDDs, no Python UDFs), so the same job runs in local mode, on a cluster and
over Spark Connect.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from harness import runformat as rf

# a poll record's place in the history as one sortable long: index * 2^24 + position in the poll
POS_BITS = 24
TYPE_CODE = {"ok": 0, "fail": 1, "info": 2}
TYPE_NAME = {v: k for k, v in TYPE_CODE.items()}


@dataclass
class Tables:
    spark: SparkSession
    ops: DataFrame
    reads: DataFrame
    replicas: DataFrame
    replica_meta: DataFrame
    sends: DataFrame     # send completions (a narrow projection of ops, read by several families)
    col_dir: Path        # where the tables are (the driver reads small ones and point lookups itself)

    def acks(self) -> DataFrame:
        """Acknowledged sends: partition, value, stype (0), index, offset, process."""
        return self.sends.filter(F.col("stype") == 0)


def load(spark: SparkSession, col_dir: Path | str) -> Tables:
    col_dir = Path(col_dir)
    schemas = rf.arrow_schemas()

    def read(name: str) -> DataFrame:
        path = str((col_dir / name).resolve())
        # the schema is known (ingest writes it): giving it skips Spark's schema-inference job per table
        df = spark.read.schema(from_arrow_schema(schemas[name])).parquet(path)
        return df.select(*schemas[name].names)

    ops = read("ops")
    sends = (ops.filter((F.col("f") == "send") & (F.col("type") != "invoke"))
             .select("partition", "value", type_code().alias("stype"), "index", "offset", "process"))
    # not cached: building the in-memory cache of 10M sends took ~6 s, rescanning the Parquet columns ~0.6 s
    return Tables(spark, ops, read("reads"), read("replicas"), read("replica_meta"), sends, col_dir)


def is_client() -> Column:
    """Client operations: their `f` is a client kind (nemesis and harness operations never use those)."""
    return F.col("f").isin(*rf.CLIENT_FS)


def type_code(col: str = "type") -> Column:
    c = F.col(col)
    return F.when(c == "ok", 0).when(c == "fail", 1).when(c == "info", 2)


def join_by_value(big: DataFrame, small: DataFrame, how: str = "inner", broadcast: bool = True) -> DataFrame:
    """`big` joined with `small` on (partition, value), adding small's other columns.

    Joined on one 64-bit hash of the pair, with the pair itself compared as the join's residual
    condition: a hash join on a single long key uses Spark's long-keyed hash map, several times faster
    per probe than the generic map of a two-column key (profiled: the probes of 10M reads against a
    small table were ~35% of the checker's task time). The residual condition keeps the join exact;
    it is written so that Spark does not take it for a second join key."""
    extra = [c for c in small.columns if c not in ("partition", "value")]
    s = small.select(F.xxhash64("partition", "value").alias("_pv_s"), F.col("partition").alias("_p_s"),
                     F.col("value").alias("_v_s"), *extra)
    if broadcast:
        s = F.broadcast(s)
    b = big.withColumn("_pv", F.xxhash64("partition", "value"))
    same = ((F.col("value").bitwiseXOR(F.col("_v_s")))
            .bitwiseOR(F.col("partition").cast("long").bitwiseXOR(F.col("_p_s").cast("long"))) == 0)
    return b.join(s, (F.col("_pv") == F.col("_pv_s")) & same, how).drop("_pv", "_pv_s", "_p_s", "_v_s")


def rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


# --- findings: every family's flagged rows in one shape, so counts and examples take two Spark jobs --
FINDING_COLS = ("kind", "partition", "k1", "k2", "weight", "flag", "payload")


def finding(df: DataFrame, kind: str | Column, payload: list[str | Column], k1: Column, k2: Column | None = None,
            weight: Column | None = None, flag: Column | None = None) -> DataFrame:
    """Rows of `df` as findings: sort keys (partition, k1, k2), count contribution `weight` (default 1),
    a boolean `flag` (divergence: committed) and the example's fields as JSON text."""
    return df.select(
        (F.lit(kind) if isinstance(kind, str) else kind).alias("kind"),
        F.col("partition").cast("int").alias("partition"),
        k1.cast("long").alias("k1"),
        (k2 if k2 is not None else F.lit(0)).cast("long").alias("k2"),
        (weight if weight is not None else F.lit(1)).cast("long").alias("weight"),
        (flag if flag is not None else F.lit(False)).cast("boolean").alias("flag"),
        F.to_json(F.struct(*[F.col(c) if isinstance(c, str) else c for c in payload]),
                  {"ignoreNullFields": "false"}).alias("payload"))
