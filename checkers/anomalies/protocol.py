"""The protocol family on Spark: the white-box rules of broker/rules over a run's event logs and polls.

The rows are built with DataFrames (the `events` table, a broker's node-wide `start` rows and the
storage faults' `damaged` rows given to every partition, one `read` row per ok poll, one `sent` row per
ok send: the same rows as
checkers/protocol_trace.py builds for the reference engine), shuffled so that each partition of the
topic sits in one Spark partition in (ts, node, seq) order, and the rules run over them in a
`mapInArrow` function: the one place of the Spark checker that runs Python on the executors, because
the rules are defined once, in Python, for the simulator and both engines. Only broken rules come
back: their counts per (kind, partition, time bucket) and the first N of each kind.

A run whose logs and history hold fewer than DRIVER_ROWS rows for the rules (a 60-s run has some tens
of thousands) is checked on the driver instead, by the reference engine's reading of the same tables: a shuffle and a
Python worker cost a cold few seconds, the driver's pass a fraction of one (the other small tables are
read on the driver for the same reason, engine.py). Both paths run the same rules over the same rows.

On a cluster the executors must import the project (broker.rules and checkers.protocol_trace), as they
find it in the driver's environment here (the local driver and the standalone test cluster).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rundir import formats as rf
from rundir import kinds
from checkers import protocol_trace as trace
from checkers.anomalies.tables import Tables, rows
from broker.rules.catalogue import undecided_detail

KINDS = kinds.PROTOCOL_NAMES
DRIVER_ROWS = 1_000_000        # below this many rows (`rule_rows`) the rules run on the driver
OUT_SCHEMA = "kind string, partition int, node string, ts long, epoch int, detail string, evidence string"
OUT_BATCH = 10_000             # violations per Arrow batch out of the rules' worker
JUDGED = "ack-undecided/judged"   # a marker row of the rules' output: ack-undecided judges this partition
SPAN_BUCKET = 1 << 16          # offsets per group of the acks' coverage sweep (`_undecided`)


def _rules_over(settings_json: str):
    """The function mapInArrow runs: rows in (partition, ts, node, seq) order in, violations out (the
    trace adapter's own row building and rule loop, on the executor)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from broker.rules import RuleSettings
        from checkers import protocol_trace as trace

        def rows() -> Iterator[dict]:
            for batch in batches:
                c = batch.to_pydict()
                for ts, node, src, seq, part, fields in zip(c["ts"], c["node"], c["src"], c["seq"],
                                                            c["partition"], c["fields"]):
                    row = trace.event_row(ts, node, src, seq, fields)
                    row["partition"] = part
                    yield row

        schema = pa.schema([("kind", pa.string()), ("partition", pa.int32()), ("node", pa.string()),
                            ("ts", pa.int64()), ("epoch", pa.int32()), ("detail", pa.string()),
                            ("evidence", pa.string())])

        def batch(found: list) -> Any:
            return pa.RecordBatch.from_pydict({
                "kind": [v.kind for v in found], "partition": [v.partition for v in found],
                "node": [v.node for v in found], "ts": [v.ts for v in found],
                "epoch": [v.epoch if isinstance(v.epoch, int) else None for v in found],
                "detail": [v.detail for v in found],
                "evidence": [json.dumps([dict(e) for e in v.evidence], sort_keys=True) for v in found]},
                schema=schema)

        # the violations leave in batches as they are found: the worker holds one partition's rule state
        # and at most OUT_BATCH violations, however many the rows break
        judged: list[int] = []
        found: list = []
        for v in trace.check_sorted(rows(), RuleSettings(**json.loads(settings_json)), judged):
            found.append(v)
            if len(found) >= OUT_BATCH:
                yield batch(found)
                found = []
        if found:
            yield batch(found)
        if judged:      # the partitions ack-undecided may judge (`_undecided`), as marker rows
            none = [None] * len(judged)
            yield pa.RecordBatch.from_pydict({"kind": [JUDGED] * len(judged), "partition": judged, "node": none,
                                              "ts": none, "epoch": none, "detail": none, "evidence": none},
                                             schema=schema)

    return run


def _read_rows(t: Tables, start_wall_ns: int, poll_hw: bool) -> DataFrame:
    """One `read` row per ok poll (fields as trace.read_row writes them)."""
    highest = (t.reads.filter(F.col("f") == "poll").groupBy("index").agg(F.max("offset").alias("max_offset")))
    polls = (t.ops.filter((F.col("f") == "poll") & (F.col("type") == "ok") & F.col("partition").isNotNull())
             .select("index", "time", "partition", "epoch", "hw").join(highest, "index", "left"))
    known_epoch = F.col("epoch").isNotNull() & (F.col("epoch") >= 0)
    epoch = F.when(known_epoch, F.col("epoch"))
    reported = F.when(F.col("hw").isNotNull() & (F.col("hw") >= 0), F.col("hw"))
    hw = reported if poll_hw else F.when(known_epoch, reported)
    fields = F.to_json(F.struct(F.lit("read").alias("event"), F.col("partition"),
                                F.col("max_offset").alias("offset"), epoch.alias("epoch"), hw.alias("hw"),
                                reported.alias("reported_hw"), F.col("index"), F.col("time")),
                       {"ignoreNullFields": "false"})
    return polls.select((F.lit(start_wall_ns + trace.READ_SLACK_NS) + F.col("time")).alias("ts"),
                        F.lit("client").alias("node"), F.lit("client").alias("src"), F.col("index").alias("seq"),
                        F.col("partition"), fields.alias("fields"))


def _sent_rows(t: Tables, start_wall_ns: int) -> DataFrame:
    """One `sent` row per ok send told its offset (fields as trace.sent_row writes them)."""
    sends = t.ops.filter((F.col("f") == "send") & (F.col("type") == "ok") & F.col("partition").isNotNull()
                         & F.col("offset").isNotNull() & (F.col("offset") >= 0))
    fields = F.to_json(F.struct(F.lit("sent").alias("event"), F.col("partition"), F.col("offset"), F.col("value"),
                                F.col("index"), F.col("time")))
    return sends.select((F.lit(start_wall_ns + trace.READ_SLACK_NS) + F.col("time")).alias("ts"),
                        F.lit("client").alias("node"), F.lit("client").alias("src"), F.col("index").alias("seq"),
                        F.col("partition"), fields.alias("fields"))


def _damage_rows(t: Tables, start_wall_ns: int, parts: DataFrame) -> DataFrame:
    """One `damaged` row per (node a corrupt fault damaged, partition) (fields as trace.damage_row writes)."""
    starts = t.ops.filter((F.col("process") == rf.NEMESIS_PROCESS) & (F.col("fault") == "corrupt")
                          & (F.col("phase") == "start") & (F.col("type") != "invoke") & F.col("targets").isNotNull())
    entry = F.split(F.col("entry"), "/")
    # a part the entry leaves empty (or a bare target) is null: the row then names no partition or offset
    part = F.when(F.size(entry) > 1, F.nullif(entry.getItem(1), F.lit(""))).cast("int")
    offset = F.when(F.size(entry) > 2, F.nullif(entry.getItem(2), F.lit(""))).cast("long")
    fields = F.to_json(F.struct(F.lit("damaged").alias("event"), F.col("index"), F.col("time"),
                                F.col("damaged_partition"), F.col("damaged_offset")))
    damage = F.col("damage") if "damage" in t.ops.columns else F.lit(None).cast("string")   # an older table
    return (starts.select(F.explode(F.split(F.coalesce(damage, F.col("targets")), ",")).alias("entry"), "index", "time")
            .select(entry.getItem(0).alias("node"), "index", "time", part.alias("damaged_partition"),
                    offset.alias("damaged_offset"))
            .crossJoin(F.broadcast(parts))
            .select((F.lit(start_wall_ns) + F.col("time")).alias("ts"), "node", F.lit("nemesis").alias("src"),
                    F.col("index").alias("seq"), F.col("p").alias("partition"), fields.alias("fields")))


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


def _ack_spans(raw: DataFrame) -> DataFrame:
    """(partition, first, last) per `ack` line of a broker: the offsets it decided to acknowledge (as
    broker/rules/catalogue.py `ack_span`: a `base` above `last`, or none, leaves the last alone)."""
    acks = (raw.filter(F.col("partition").isNotNull() & (F.col("src") == "broker") & (F.col("event") == "ack"))
            .select("partition", F.from_json("fields", "base long, last long").alias("a")))
    base, last = F.col("a.base"), F.col("a.last")
    return (acks.filter(last.isNotNull())
            .select("partition", F.when(base.isNotNull() & (base <= last), base).otherwise(last).alias("first"),
                    last.alias("last")))


def _undecided(t: Tables, spans: DataFrame, judged: DataFrame, start_wall_ns: int) -> DataFrame:
    """ack-undecided as a range anti-join (OUT_SCHEMA): the ok sends told an offset, in the partitions the
    rules judge (`judged`), that no ack's [first, last] covers. A sort-merge sweep, not a per-offset
    explode: each span is cut at SPAN_BUCKET boundaries (almost every span lies in one bucket), the
    spans and sends of a bucket are ordered by offset (a span before a send at its first offset), and a
    send is covered when the running maximum of the spans' last offsets before it reaches it. The same
    findings as broker/rules/catalogue.py `undecided_sends`: its detail, the send as evidence."""
    sends = (t.ops.filter((F.col("f") == "send") & (F.col("type") == "ok") & F.col("partition").isNotNull()
                          & F.col("offset").isNotNull() & (F.col("offset") >= 0))
             .join(F.broadcast(judged), "partition", "left_semi")
             .select("partition", F.floor(F.col("offset") / SPAN_BUCKET).alias("bucket"),
                     F.col("offset").alias("pos"), F.lit(1).alias("tag"), F.lit(None).cast("long").alias("reach"),
                     "index", "time", "value"))
    cut = (spans.join(F.broadcast(judged), "partition", "left_semi")
           .select("partition", "first", "last",
                   F.explode(F.sequence(F.floor(F.col("first") / SPAN_BUCKET),
                                        F.floor(F.col("last") / SPAN_BUCKET))).alias("bucket"))
           .select("partition", "bucket", F.greatest("first", F.col("bucket") * SPAN_BUCKET).alias("pos"),
                   F.lit(0).alias("tag"), F.col("last").alias("reach"), F.lit(None).cast("long").alias("index"),
                   F.lit(None).cast("long").alias("time"), F.lit(None).cast(t.ops.schema["value"].dataType).alias("value")))
    w = (Window.partitionBy("partition", "bucket").orderBy("pos", "tag")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    swept = sends.unionByName(cut).select("*", F.max("reach").over(w).alias("covered_to"))
    left = swept.filter((F.col("tag") == 1) & (F.col("covered_to").isNull() | (F.col("covered_to") < F.col("pos"))))
    ts = F.lit(start_wall_ns + trace.READ_SLACK_NS) + F.col("time")
    evidence = F.to_json(F.array(F.struct(F.lit("sent").alias("event"), F.col("index"), F.lit("client").alias("node"),
                                          F.col("pos").alias("offset"), F.col("partition"), F.col("time"),
                                          ts.alias("ts"), F.col("value"))))
    head, tail = undecided_detail(0).split("0", 1)
    return left.select(F.lit("ack-undecided").alias("kind"), F.col("partition").cast("int").alias("partition"),
                       F.lit("client").alias("node"), ts.alias("ts"), F.lit(None).cast("int").alias("epoch"),
                       F.concat(F.lit(head), F.col("pos").cast("string"), F.lit(tail)).alias("detail"),
                       evidence.alias("evidence"))


def violations_df(t: Tables, col_dir: Path, facts: dict[str, Any],
                  partitions: list[int]) -> tuple[DataFrame, DataFrame] | None:
    """The broken rules as a DataFrame (OUT_SCHEMA), or None when the run has neither event logs nor a
    history placed on their clock (test.json `start_wall_ns`): nothing for the rules to read; with the
    rules' own output, persisted (the caller unpersists it). The rules' worker sees no `sent` row:
    ack-undecided is the range anti-join `_undecided`, over the partitions the worker marks (JUDGED rows,
    which the first DataFrame no longer holds)."""
    path = Path(col_dir) / "events"
    logs = path.is_dir()
    if not logs and facts.get("start_wall_ns") is None:
        return None
    from pyspark.sql.pandas.types import from_arrow_schema

    spark = t.spark
    cols = ["ts", "node", "src", "seq", "partition", "fields"]
    schema = from_arrow_schema(rf.arrow_schemas()["events"])
    raw = spark.read.schema(schema).parquet(str(path.resolve())) if logs else spark.createDataFrame([], schema)
    ev = raw.select(*cols)
    parts = spark.createDataFrame([(p,) for p in partitions] or [(0,)], "p int")
    wide = (ev.filter(F.col("partition").isNull() & (F.col("src") == "broker")).crossJoin(F.broadcast(parts))
            .select("ts", "node", "src", "seq", F.col("p").alias("partition"), "fields"))
    all_rows = ev.filter(F.col("partition").isNotNull()).unionByName(wide)
    if facts.get("start_wall_ns") is not None:
        all_rows = all_rows.unionByName(_read_rows(t, facts["start_wall_ns"], facts.get("poll_hw", True)))
        all_rows = all_rows.unionByName(_damage_rows(t, facts["start_wall_ns"], parts))
    n = max(1, min(len(partitions), int(spark.conf.get("spark.sql.shuffle.partitions", "4"))))
    settings = json.dumps(facts["settings"].__dict__)
    out = (all_rows.repartition(n, "partition").sortWithinPartitions("partition", "ts", "node", "seq")
           .mapInArrow(_rules_over(settings), OUT_SCHEMA)).persist()
    v = out.filter(F.col("kind") != JUDGED)
    if logs and facts.get("start_wall_ns") is not None:
        # ack-undecided is judged only beside the controller's log: without logs a send says nothing
        judged = out.filter(F.col("kind") == JUDGED).select("partition").distinct()
        v = v.unionByName(_undecided(t, _ack_spans(raw), judged, facts["start_wall_ns"]))
    return v, out


def analyze(t: Tables, col_dir: Path, facts: dict[str, Any], partitions: list[int], examples: int,
            axis) -> dict[str, dict]:
    """{kind: {"count", "examples", "promised", "buckets": [(partition, bucket, n, tmin, tmax)]}} for every
    protocol kind (the same as trace.findings gives the reference engine, with bucketed totals)."""
    if rule_rows(Path(col_dir)) < DRIVER_ROWS:
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
