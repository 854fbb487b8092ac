"""hw-regression: an observed high watermark of a partition going backwards.

Every ok `poll` / `final-read` observes (hw, leader epoch). Observation B regresses if some observation
A of the same partition completed before B was invoked (real-time order: A's completion index < B's
invoke index, so overlapping operations are never compared) and A.hw > B.hw. If such an A exists in
B's own leader epoch it is an `hw-regression` (a leader's HW went back: an anomaly); otherwise, if one
exists in another epoch, it is an `hw-regression-cross-epoch` (a new leader's HW may lag: reported, not
failing by default). An epoch of -1 (a Kafka client that cannot tell it) is nobody's own epoch: a
regression there is only ever cross-epoch. The example's `previous` is the earlier observation with the
highest HW (then the highest index).
"""
from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rundir import kinds
from checkers.anomalies.context import CheckContext
from checkers.anomalies.lookup import ExampleDetails
from checkers.anomalies.tables import Counted, Order, finding, is_client

KINDS = (kinds.HW_REGRESSION, kinds.HW_REGRESSION_CROSS_EPOCH)


def analyze(ctx: CheckContext) -> DataFrame:
    """Findings of both kinds; the observations (one per ok poll / final-read: few) are persisted, and
    their DataFrame kept on `ctx` for the engine to unpersist."""
    t, keep = ctx.t, ctx.persisted
    L = F.lit
    cols = ["partition", "epoch", "hw", "index", "time", "process", "invoke_index", "f"]
    obs = (t.ops.filter(is_client() & F.col("f").isin("poll", "final-read") & (F.col("type") == "ok")
                        & F.col("hw").isNotNull())
           .select(*cols).persist(StorageLevel.MEMORY_AND_DISK))
    keep.append(obs)
    mark = F.struct(F.col("hw"), F.col("index"), F.col("epoch"), F.col("time"), F.col("process"))
    me = F.struct(*[F.col(c) for c in cols])
    # each observation twice: as a completion (its mark, at its completion index) and as a query (itself,
    # at its invoke index), so a query sees exactly the completions before its invocation
    me_type = obs.select(me.alias("me")).schema["me"].dataType
    completions = obs.select("partition", "epoch", F.col("index").alias("key"), mark.alias("mark"),
                             L(None).cast(me_type).alias("me"))
    queries = obs.select("partition", "epoch", F.col("invoke_index").alias("key"),
                         L(None).cast(completions.schema["mark"].dataType).alias("mark"), me.alias("me"))
    ev = completions.unionByName(queries)
    before = Window.unboundedPreceding
    w_epoch = Window.partitionBy("partition", "epoch").orderBy("key").rowsBetween(before, -1)
    w_part = Window.partitionBy("partition").orderBy("key").rowsBetween(before, -1)
    ev = ev.select("*", F.max("mark").over(w_epoch).alias("prev_same"))
    ev = ev.select("*", F.max("mark").over(w_part).alias("prev_any"))
    q = ev.filter(F.col("me").isNotNull()).select("me.*", "prev_same", "prev_any")
    # a negative epoch is unknown (a Kafka client that cannot tell it, docs/formats.md): never "the same"
    same = (F.col("epoch") >= 0) & (F.col("prev_same.hw") > F.col("hw"))
    kind = (F.when(same, L(kinds.HW_REGRESSION.name))
            .when(F.col("prev_any.hw") > F.col("hw"), L(kinds.HW_REGRESSION_CROSS_EPOCH.name)))
    prev = F.when(same, F.col("prev_same")).otherwise(F.col("prev_any"))
    out = q.select(*cols, kind.alias("kind"), prev.alias("prev")).filter(F.col("kind").isNotNull())
    return finding(out, F.col("kind"), ["epoch", "hw", "index", "time", "process", "invoke_index", "f", "prev"],
                   Order(F.col("index")), Counted(time=F.col("time")))


def examples(top: dict[str, list[dict]], d: ExampleDetails) -> dict[str, list[dict]]:
    """The examples of both kinds: everything they show was found with them."""
    return {kind: [{"partition": r["partition"], "epoch": r["epoch"], "hw": r["hw"], "index": r["index"],
                    "time": r["time"], "process": r["process"], "invoke_index": r["invoke_index"], "f": r["f"],
                    "previous": dict(r["prev"])} for r in top[kind]]
            for kind in (kinds.HW_REGRESSION.name, kinds.HW_REGRESSION_CROSS_EPOCH.name)}
