"""The protocol family on Spark: the white-box rules of broker/rules over a run's event logs and polls.

The events table is laid out by partition, each partition's rows in time order (rundir/formats.py
EVENTS_PARTITION_FILE), so nothing is shuffled or sorted: the rules run in a `mapInArrow` function over a
range of task ids, each task reading its partitions' events files in Arrow batches on the executor and
feeding them to the rules with the rows that cannot break one folded in column-wise
(checkers/protocol_trace.py `check_partition`, checkers/quiet_rows.py). The other rows the rules read (the
polls, a storage fault's damage, a broker's `start`) are few, and go to the tasks with their work. This
is the one place of the Spark checker that runs Python on the executors, because the rules are defined
once, in Python, for the simulator and both engines. Only broken rules come back, with the offsets each
partition's leaders acknowledged as ranges: ack-undecided is the anti-join of the ok sends against
those (`_undecided`), in Spark.

A run whose logs and history hold fewer than DRIVER_ROWS rows for the rules (a 60-s run has some tens
of thousands) is checked on the driver instead, by the reference engine's row-by-row pass over the same
rows; so is a table not laid out by partition (a synthetic run of an older generator).

On a cluster the executors must import the project (broker.rules and checkers), and read the run
directory, as they find both here (the local driver and the standalone test cluster).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rundir import kinds
from checkers import protocol_trace as trace
from checkers import quiet_rows
from checkers.anomalies.context import CheckContext
from checkers.anomalies.tables import Tables, rows
from broker.rules import names
from broker.rules.catalogue import undecided_detail

KINDS = kinds.PROTOCOL_NAMES
FAMILY = kinds.BY_NAME[KINDS[0]].family    # this module's family: the engine runs it apart
DRIVER_ROWS = 1_000_000        # below this many rows (`rule_rows`) the rules run on the driver
OUT_SCHEMA = ("kind string, partition int, node string, ts long, epoch int, detail string, evidence string, "
              "lo long, hi long")
OUT_BATCH = 10_000             # violations per Arrow batch out of the rules' worker
JUDGED = "ack-undecided/judged"     # a marker row of the rules' output: ack-undecided judges this partition
DECIDED = "ack-undecided/decided"   # one of the offsets [lo, hi) its leaders acknowledged
SPAN_BUCKET = 1 << 16          # offsets per bucket of the acknowledged ranges' join (`_undecided`)


def _rules_over(tasks_json: str, settings_json: str):
    """The function mapInArrow runs: task ids in, each task's partitions' violations (and markers) out."""

    def run(batches):
        import pyarrow as pa

        from broker.rules import RuleSettings
        from checkers import protocol_trace as trace

        tasks = json.loads(tasks_json)
        settings = RuleSettings(**json.loads(settings_json))
        names = ["kind", "partition", "node", "ts", "epoch", "detail", "evidence", "lo", "hi"]
        types = [pa.string(), pa.int32(), pa.string(), pa.int64(), pa.int32(), pa.string(), pa.string(),
                 pa.int64(), pa.int64()]
        schema = pa.schema(list(zip(names, types)))

        def batch(out: list[tuple]) -> Any:
            return pa.RecordBatch.from_arrays([pa.array(col, t) for col, t in zip(zip(*out), types)], schema=schema)

        for ids in batches:
            for task in ids.column("id").to_pylist():
                for partition, path, extras in tasks[task]:
                    found, judged, decided = trace.check_partition(partition, path, extras, settings)
                    out = [(v.kind, v.partition, v.node, v.ts, v.epoch if isinstance(v.epoch, int) else None,
                            v.detail, json.dumps([dict(e) for e in v.evidence], sort_keys=True), None, None)
                           for v in found]
                    if judged:
                        out.append((JUDGED, partition, None, None, None, None, None, None, None))
                        out += [(DECIDED, partition, None, None, None, None, None, lo, hi)
                                for lo, hi in zip(decided.starts, decided.ends)]
                    for i in range(0, len(out), OUT_BATCH):
                        yield batch(out[i:i + OUT_BATCH])

    return run


def _table_rows(col_dir: Path, table: str) -> int:
    """Rows of a columnar table, from the Parquet footers (no scan); 0 without one."""
    import pyarrow.parquet as pq

    path = col_dir / table
    if not path.is_dir():
        return 0
    return sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(path.glob("*.parquet")))


def rule_rows(col_dir: Path) -> int:
    """At most how many rows the rules read: every event line, and a row per ok send and poll (bounded by
    the history's operations). The driver's pass holds them all in memory, so it is only for small runs."""
    return _table_rows(col_dir, "events") + _table_rows(col_dir, "ops")


def _undecided(t: Tables, judged: list[int], ranges: list[tuple[int, int, int]], start_wall_ns: int) -> DataFrame:
    """ack-undecided (OUT_SCHEMA): the ok sends told an offset, in the partitions the rules judge, that no
    leader acknowledged: an anti-join against the acknowledged ranges [lo, hi), which are few (one per
    stretch of acks without a gap), cut into SPAN_BUCKET buckets so that the join is a broadcast hash join
    on (partition, bucket) and no send is shuffled. The same findings as broker/rules/catalogue.py
    `undecided_sends`: its detail, the send as evidence."""
    spark = t.spark
    cut = [(p, b, lo, hi) for p, lo, hi in ranges for b in range(lo // SPAN_BUCKET, (hi - 1) // SPAN_BUCKET + 1)]
    spans = spark.createDataFrame(cut or [(-1, -1, 0, 0)], "r_partition int, r_bucket long, lo long, hi long")
    sends = (t.ops.filter((F.col("f") == "send") & (F.col("type") == "ok") & F.col("partition").isin(judged)
                          & F.col("offset").isNotNull() & (F.col("offset") >= 0))
             .select("partition", "offset", "index", "time", "value",
                     F.floor(F.col("offset") / SPAN_BUCKET).alias("bucket")))
    covered = ((sends["partition"] == spans["r_partition"]) & (sends["bucket"] == spans["r_bucket"])
               & (sends["offset"] >= spans["lo"]) & (sends["offset"] < spans["hi"]))
    left = sends.join(F.broadcast(spans), covered, "left_anti")
    ts = F.lit(start_wall_ns + trace.READ_SLACK_NS) + F.col("time")
    evidence = F.to_json(F.array(F.struct(F.lit("sent").alias("event"), F.col("index"), F.lit("client").alias("node"),
                                          F.col("offset"), F.col("partition"), F.col("time"),
                                          ts.alias("ts"), F.col("value"))))
    head, tail = undecided_detail(0).split("0", 1)
    return left.select(F.lit(names.ACK_UNDECIDED).alias("kind"), F.col("partition").cast("int").alias("partition"),
                       F.lit("client").alias("node"), ts.alias("ts"), F.lit(None).cast("int").alias("epoch"),
                       F.concat(F.lit(head), F.col("offset").cast("string"), F.lit(tail)).alias("detail"),
                       evidence.alias("evidence"))


def _tasks(files: dict[int, str], extras: dict[int, list[dict]], partitions: list[int], n: int) -> list[list]:
    """The partitions shared out over n tasks, the largest events files first, each to the lightest task."""
    import os

    load = [0] * n
    tasks: list[list] = [[] for _ in range(n)]
    size = {p: os.path.getsize(files[p]) if p in files else 0 for p in partitions}
    for p in sorted(partitions, key=lambda q: (-size[q], q)):
        i = load.index(min(load))
        tasks[i].append((p, files.get(p), extras.get(p, [])))
        load[i] += size[p] + 1
    return tasks


def violations_df(t: Tables, col_dir: Path, facts: dict[str, Any],
                  partitions: list[int]) -> tuple[DataFrame, DataFrame] | None:
    """The broken rules as a DataFrame (OUT_SCHEMA's first seven columns), or None when the run has
    neither event logs nor a history placed on their clock (test.json `start_wall_ns`): nothing for the
    rules to read; with the rules' own output, persisted (the caller unpersists it). The events table
    must be laid out by partition (`quiet_rows.partition_files`)."""
    layout = quiet_rows.partition_files(Path(col_dir) / "events")
    logs = layout is not None
    if not logs and facts.get("start_wall_ns") is None:
        return None
    files = layout[0] if logs else {}
    parts = sorted(set(partitions) | set(files))
    extras = trace.partition_extras(col_dir, facts, parts)
    spark = t.spark
    n = max(1, min(len(parts), int(spark.conf.get("spark.sql.shuffle.partitions", "4"))))
    tasks = json.dumps(_tasks(files, extras, parts, n))
    settings = json.dumps(facts["settings"].__dict__)
    out = spark.range(0, n, 1, n).mapInArrow(_rules_over(tasks, settings), OUT_SCHEMA).persist()
    cols = ["kind", "partition", "node", "ts", "epoch", "detail", "evidence"]
    v = out.filter(~F.col("kind").isin(JUDGED, DECIDED)).select(*cols)
    if logs and facts.get("start_wall_ns") is not None:
        # ack-undecided is judged only beside the controller's log: without logs a send says nothing
        marks = rows(out.filter(F.col("kind").isin(JUDGED, DECIDED)).select("kind", "partition", "lo", "hi"))
        judged = sorted({r["partition"] for r in marks if r["kind"] == JUDGED})
        if judged:
            ranges = [(r["partition"], r["lo"], r["hi"]) for r in marks if r["kind"] == DECIDED]
            v = v.unionByName(_undecided(t, judged, ranges, facts["start_wall_ns"]))
    return v, out


def analyze(ctx: CheckContext) -> dict[str, dict]:
    """{kind: {"count", "examples", "promised", "buckets": [(partition, bucket, n, tmin, tmax)]}} for every
    protocol kind (the same as trace.findings gives the reference engine, with bucketed totals)."""
    t, col_dir, facts, examples, axis = ctx.t, ctx.col_dir, ctx.facts, ctx.examples, ctx.axis
    partitions = sorted(ctx.partitions)
    if (rule_rows(Path(col_dir)) < DRIVER_ROWS
            or ((Path(col_dir) / "events").is_dir() and quiet_rows.partition_files(Path(col_dir) / "events") is None)):
        return trace.findings(trace.check_reference(col_dir, facts), facts, examples)
    out = trace.empty_findings(facts)
    found = violations_df(t, col_dir, facts, partitions)
    if found is None:
        return out
    v, rules_out = found
    start = facts.get("start_wall_ns")
    time = (F.col("ts") - F.lit(start)) if start is not None else F.lit(None).cast("long")
    v = v.withColumn("time", time).persist()
    try:
        bucket = F.when(F.col("time").isNotNull(),
                        F.least(F.greatest(F.floor(F.col("time") / F.lit(axis.bucket_ns)), F.lit(0)),
                                F.lit(axis.buckets - 1)))
        counts = rows(v.groupBy("kind", "partition", bucket.alias("bucket"))
                      .agg(F.count(F.lit(1)).alias("n"), F.min("time").alias("tmin"), F.max("time").alias("tmax")))
        w = Window.partitionBy("kind").orderBy("partition", "ts", "node", "detail")
        first = rows(v.select("*", F.row_number().over(w).alias("rn")).filter(F.col("rn") <= examples))
    finally:
        v.unpersist()
        rules_out.unpersist()
    for r in counts:
        slot = out[r["kind"]]
        slot["count"] += r["n"]
        slot["buckets"].append((r["partition"], r["bucket"], r["n"], r["tmin"], r["tmax"]))
    from broker.rules import Violation
    for r in sorted(first, key=lambda r: (r["kind"], r["rn"])):
        viol = Violation(r["kind"], r["partition"], r["node"], r["ts"], r["epoch"], r["detail"],
                         tuple(json.loads(r["evidence"])))
        out[r["kind"]]["examples"].append(trace.example(viol, start, out[r["kind"]]["promised"]))
    return out
