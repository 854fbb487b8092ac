"""The Spark checker's inputs: the columnar tables as DataFrames, and small DataFrame helpers.

DataFrame API only (no RDDs, no Python UDFs), so the same job runs in local mode, on a cluster and
over Spark Connect.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any, Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

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
    final_state: DataFrame


def load(spark: SparkSession, col_dir: Path | str) -> Tables:
    col_dir = Path(col_dir)
    schemas = rf.arrow_schemas()

    def read(name: str) -> DataFrame:
        path = str((col_dir / name).resolve())
        df = spark.read.parquet(path)
        return df.select(*schemas[name].names)

    return Tables(spark, read("ops"), read("reads"), read("replicas"), read("replica_meta"), read("final_state"))


def is_client() -> Column:
    return ~F.col("process").isin(rf.NEMESIS_PROCESS, rf.HARNESS_PROCESS) & F.col("f").isin(*rf.CLIENT_FS)


def type_code(col: str = "type") -> Column:
    c = F.col(col)
    return F.when(c == "ok", 0).when(c == "fail", 1).when(c == "info", 2)


def key_filter(cols: tuple[str, str], keys: Iterable[tuple[int, Any]]) -> Column | None:
    """(partition = p AND other IN (...)) OR ... for a small set of (partition, other) keys."""
    by_part: dict[int, set] = {}
    for p, x in keys:
        by_part.setdefault(p, set()).add(x)
    conds = [(F.col(cols[0]) == p) & F.col(cols[1]).isin(sorted(xs)) for p, xs in sorted(by_part.items())]
    return reduce(lambda a, b: a | b, conds) if conds else None


def rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]
