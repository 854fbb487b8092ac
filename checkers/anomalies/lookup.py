"""Point lookups for the examples: the few history lines, reads and replica records they cite.

Counting and flagging run in Spark; once the first N findings of each kind are known, their details are
a handful of rows looked up by key. Those lookups read the columnar tables on the driver with pyarrow
(the driver always has them: ingest wrote them there), which prunes row groups by their statistics and
filters the rest in vectorised C++, where each as a Spark job cost seconds of scanning on a small
machine. Memory stays bounded: the dataset is filtered batch by batch and only matching rows are kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any, Iterable

import pyarrow.compute as pc
import pyarrow.dataset as pads

from rundir import formats as rf


def field(name: str) -> pc.Expression:
    return pc.field(name)


def any_of(*exprs: pc.Expression | None) -> pc.Expression | None:
    """OR of the given conditions, None when there are none."""
    present = [e for e in exprs if e is not None]
    return reduce(lambda a, b: a | b, present) if present else None


EQUALITIES = 256


def one_of(name: str, values: Iterable[Any]) -> pc.Expression | None:
    """`name` is one of `values` (None when there are none). A few values become separate equalities,
    which prune row groups by their statistics one by one (an IN list is not pruned that way)."""
    vs = sorted(set(values))
    if not vs:
        return None
    if len(vs) > EQUALITIES:
        return field(name).isin(vs)
    return any_of(*[field(name) == v for v in vs])


def keyed(cols: tuple[str, str], keys: Iterable[tuple[int, Any]]) -> pc.Expression | None:
    """(partition = p AND other IN (...)) OR ... for a small set of (partition, other) keys."""
    by_part: dict[int, set] = {}
    for p, x in keys:
        by_part.setdefault(p, set()).add(x)
    return any_of(*[(field(cols[0]) == p) & field(cols[1]).isin(sorted(xs)) for p, xs in sorted(by_part.items())])


def is_client() -> pc.Expression:
    return field("f").isin(list(rf.CLIENT_FS))


def fetch(col_dir: Path | str, table: str, where: pc.Expression | None, columns: list[str]) -> list[dict[str, Any]]:
    """The rows of `table` matching `where` (none when `where` is None), as dicts of `columns`."""
    if where is None:
        return []
    data = pads.dataset(str(Path(col_dir) / table), format="parquet")
    # little read-ahead: the driver's memory stays near one batch per thread, not a file's worth
    scan = data.scanner(columns=columns, filter=where, batch_readahead=2, fragment_readahead=1)
    return scan.to_table().to_pylist()


def read_all(col_dir: Path | str, table: str, columns: list[str]) -> list[dict[str, Any]]:
    """Every row of a small table (final_state, replica_meta: one row per partition or replica)."""
    return pads.dataset(str(Path(col_dir) / table), format="parquet").to_table(columns=columns).to_pylist()


@dataclass
class ExampleDetails:
    """What the point lookups for the examples found (engine.look_up_details), for the families'
    `examples` functions to build their examples from."""
    ops_by_index: dict[int, dict[str, Any]]          # history lines the examples cite, by index
    dup_sends: dict[tuple[int, Any], dict[str, Any]]  # (partition, value) -> send completion of a duplicated value
    poll_records: dict[tuple[int, int], dict[str, Any]]  # (partition, read key) -> first poll read of a value
    final_at: dict[tuple[int, int], set]             # (partition, offset) -> values there in the final log
    final_of: dict[tuple[int, Any], set]             # (partition, value) -> its offsets in the final log
    skip_at: dict[int, dict[int, set]]               # partition -> skipped offset -> final-log values there
    observations: dict[tuple[int, int], list[tuple]]  # (partition, offset) -> (index, pos, source, value,
                                                      # time, process, epoch) at inconsistent offsets
