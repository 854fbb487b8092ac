"""The Spark checker's inputs: the columnar tables as DataFrames, and small DataFrame helpers.

DataFrame API only (no RDDs, no Python UDFs), so the same job runs in local mode, on a cluster and
over Spark Connect.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from rundir import formats as rf

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
        """Acknowledged sends: partition, value, stype (0), index, offset, process, time, epoch."""
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
             .select("partition", "value", type_code().alias("stype"), "index", "offset", "process", "time",
                     "epoch"))
    # not cached: building the in-memory cache of 10M sends took ~6 s, rescanning the Parquet columns ~0.6 s
    return Tables(spark, ops, read("reads"), read("replicas"), read("replica_meta"), sends, col_dir)


def in_final_logs(df: DataFrame, recovered: DataFrame) -> DataFrame:
    """The rows of `df` (a partition and an offset each) that a final log holds: of a partition that has
    one (`recovered`: partition, fs_hw; engine._final_logs) and in [0, its HW). They gain `fs_hw`."""
    return (df.join(F.broadcast(recovered), "partition")
            .filter((F.col("offset") >= 0) & (F.col("offset") < F.col("fs_hw"))))


def is_client() -> Column:
    """Client operations: their `f` is a client kind (nemesis and harness operations never use those)."""
    return F.col("f").isin(*rf.CLIENT_FS)


def type_code(col: str = "type") -> Column:
    c = F.col(col)
    return F.when(c == "ok", 0).when(c == "fail", 1).when(c == "info", 2)


def rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


# --- findings: every family's flagged rows in one shape, so counts and examples take two Spark jobs --
# Examples are the first findings of each kind in the order (partition, order_key, order_subkey, payload):
# order_key is what the kind's order names after the partition (docs/formats.md, "Checker rules": the
# history index, the offset or the value), order_subkey breaks ties (a poll record's position; else 0).


class Order(NamedTuple):
    """Where a finding sorts among its kind's examples, after its partition: `key` is what the kind's
    order names (the history index, the offset or the value), `subkey` breaks ties (a poll record's
    position; None: 0)."""
    key: Column
    subkey: Column | None = None


class Counted(NamedTuple):
    """What a finding adds to its kind's count and totals: its `weight` (None: 1), a `flag` (divergence:
    committed; None: false) and the time of the operation it is about (history nanoseconds; None: none,
    see checkers/totals.py)."""
    weight: Column | None = None
    flag: Column | None = None
    time: Column | None = None


def finding(df: DataFrame, kind: str | Column, payload: list[str | Column], order: Order,
            counted: Counted = Counted()) -> DataFrame:
    """Rows of `df` as findings: the kind, the partition, the example order and the count contribution
    as columns, and the example's fields as JSON text."""
    L = F.lit
    return df.select(
        (L(kind) if isinstance(kind, str) else kind).alias("kind"),
        F.col("partition").cast("int").alias("partition"),
        order.key.cast("long").alias("order_key"),
        (order.subkey if order.subkey is not None else L(0)).cast("long").alias("order_subkey"),
        (counted.weight if counted.weight is not None else L(1)).cast("long").alias("weight"),
        (counted.flag if counted.flag is not None else L(False)).cast("boolean").alias("flag"),
        (counted.time if counted.time is not None else L(None)).cast("long").alias("time"),
        F.to_json(F.struct(*[F.col(c) if isinstance(c, str) else c for c in payload]),
                  {"ignoreNullFields": "false"}).alias("payload"))
