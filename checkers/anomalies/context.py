"""One Spark check's shared state: what every anomaly family reads, in one object.

checkers/anomalies/engine.py builds a `CheckContext` for the run (its tables, the small tables read on
the driver, the protocol facts) and fills in the intermediate results as its stages run: the sends that
ended fail or info, the block digests, the exact per-offset pass and which partitions have a final log.
Each family then has one entry point, `analyze(ctx)`, that returns its findings (tables.finding rows);
the protocol family's returns its kinds' findings whole. A family persists what it reuses with
`ctx.keep`, and the engine unpersists all of it at the end.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from checkers import totals
from checkers.anomalies.tables import Tables


@dataclass
class CheckContext:
    """A check's tables and settings, then what its stages found (module docstring)."""

    t: Tables
    col_dir: Path
    examples: int                                  # examples kept per kind
    small: bool                                    # a small input (engine._tune): one job collects all
    facts: dict[str, Any] | None = None            # the protocol rules' (checkers/protocol_trace.run_facts)
    persisted: list[DataFrame] = field(default_factory=list)
    # the small tables, read on the driver
    fs_rows: list[dict] = field(default_factory=list)
    final_state: dict[int, dict] = field(default_factory=dict)
    meta: dict[tuple[str, int], dict] = field(default_factory=dict)
    nodes_by_part: dict[int, list[str]] = field(default_factory=dict)
    axis: totals.TimeAxis | None = None
    # the stages' results, in the order they are set
    stats: dict[str, Any] = field(default_factory=dict)
    partitions: set[int] = field(default_factory=set)
    nonok: DataFrame | None = None                 # sends that ended fail or info (persisted: few)
    n_nonok: int = 0
    blocks: list[dict] = field(default_factory=list)           # digests.summarize's rows
    compare_epochs: dict[str, set[int]] | None = None
    flagged: DataFrame | None = None               # offsets.exact_pass's flagged offsets
    recs: DataFrame | None = None                  # ... and its input records
    cover: dict[int, int] = field(default_factory=dict)        # partition -> offsets of [0, hw) covered
    ocount: dict[str, int] = field(default_factory=dict)       # the exact pass's counts, summed
    reason: dict[int, str | None] = field(default_factory=dict)  # partition -> why no final log (None)
    recovered: DataFrame | None = None             # (partition, fs_hw) of partitions with a final log

    @property
    def spark(self):
        return self.t.spark

    def keep(self, df: DataFrame) -> DataFrame:
        """`df` persisted (memory, then disk) until the end of the check."""
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.persisted.append(df)
        return df
