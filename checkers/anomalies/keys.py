"""Key anomalies: key-reorder, the per-key order of the keyed workload's records in the final log.

key-reorder: sends A and B of one key (their history `key`), in a partition with a final log, where A was
acknowledged before B was invoked (A's completion index < B's invoke index), both records are in the
final log, and B's record sits below A's. A value's place is its lowest offset in the final log (a value
at two offsets is a duplicate, a kind of its own). B may have any outcome: an unknown send that landed
below an acknowledged record of its key is as out of order as an acknowledged one. One finding per B;
its `previous` is such an A with the highest offset (then the highest index).

As in ordering.py's realtime-order, each placed ack is an event twice over: a completion at its index,
which makes its place visible, and every placed send a query at its invoke index; a running max over a
key's events in index order gives each query the highest place acknowledged before it. Only sends with
a key are read, and a run with none (checkers/coverage.py column_filled: the Parquet statistics, no scan)
plans an empty query: the kind is not exercised there.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rundir import kinds
from checkers import coverage
from checkers.anomalies.context import CheckContext
from checkers.anomalies.lookup import ExampleDetails
from checkers.anomalies.tables import Counted, Order, finding, in_final_logs, type_code

KINDS = (kinds.KEY_REORDER,)

ME = ("key", "value", "offset", "type", "index", "time", "invoke_index")   # a finding's own fields
MARK = ("offset", "index", "value", "time")                                 # comparison order: the place first


def analyze(ctx: CheckContext) -> DataFrame:
    """key-reorder's findings (module docstring), timed by the later send's completion."""
    t, c, L = ctx.t, F.col, F.lit
    ops = t.ops if coverage.column_filled(ctx.col_dir, kinds.KEY_REORDER.needs.column) else t.ops.limit(0)
    sends = (ops.filter((c("f") == "send") & (c("type") != "invoke") & c("key").isNotNull())
             .select("partition", "key", "value", "type", type_code().alias("stype"), "index", "time",
                     "invoke_index"))
    places = (in_final_logs(t.reads.filter(c("f") == "final-read"), ctx.recovered)
              .join(sends.select("partition", "value"), ["partition", "value"], "left_semi")
              .groupBy("partition", "value").agg(F.min("offset").alias("offset")))
    placed = sends.join(places, ["partition", "value"])
    mark = F.struct(*[c(n) for n in MARK])
    me = F.struct(*[c(n) for n in ME])
    mark_type = placed.select(mark.alias("m")).schema["m"].dataType
    me_type = placed.select(me.alias("m")).schema["m"].dataType
    completions = placed.filter(c("stype") == 0).select(
        "partition", "key", c("index").alias("at"), mark.alias("mark"), L(None).cast(me_type).alias("me"))
    queries = placed.filter(c("invoke_index").isNotNull()).select(
        "partition", "key", c("invoke_index").alias("at"), L(None).cast(mark_type).alias("mark"), me.alias("me"))
    w = Window.partitionBy("partition", "key").orderBy("at").rowsBetween(Window.unboundedPreceding, -1)
    ev = completions.unionByName(queries).select("partition", "me", F.max("mark").over(w).alias("prev"))
    bad = (ev.filter(c("me").isNotNull() & (c("prev.offset") > c("me.offset")))
           .select("partition", "me.*", "prev"))
    return finding(bad, kinds.KEY_REORDER.name, [*ME, "prev"], Order(c("index")), Counted(time=c("time")))


def examples(top: dict[str, list[dict]], d: ExampleDetails) -> dict[str, list[dict]]:
    """key-reorder's examples: both sends came with the finding."""
    return {kinds.KEY_REORDER.name: [
        {"partition": r["partition"], **{n: r[n] for n in ME},
         "previous": {n: r["prev"][n] for n in ("value", "offset", "index", "time")}}
        for r in top[kinds.KEY_REORDER.name]]}
