"""Consumer-group anomalies: the group workload's assignments, commits and polls (docs/formats.md, "Group
operations" and "Checker rules").

Its inputs are the `group_parts` table (one row per group operation line and partition: small, a few
rows per commit) and the group members' poll records (`reads` rows with a `group`). A run whose ops table
has no `group` at all (checkers/coverage.py column_filled: the Parquet statistics, no scan) plans empty
queries: the kinds are not exercised there and cost no scan.

  committed-regression   an observation of (g, p)'s committed offset c (a `committed` ok, a group-assign
                         ok's committed entry) below the highest offset of the acked commits of (g, p)
                         completed before the observation's invoke. A running max over (g, p)'s events in
                         index order (acked commits at their completion, observations at their invoke),
                         as keys.py does for a key's sends.
  group-resume-mismatch  a group-assign ok of p (process, group): the first poll record the process read
                         from p after the assign (before its next group-assign or group-revoke naming p)
                         is at offset S; E is the running max above at the assign's invoke. S != E, and no
                         commit of (g, p) in flight across the assign (not a fail, invoked before the
                         assign completed, not acked before its invoke) has offset S: an in-flight commit
                         can only have moved the committed offset to its own. An auto-commit of another
                         process counts as invoked before the assign whatever its index (the client
                         reports it once answered: invoke and completion are written together). No acked
                         commit: no E.
  lost-by-group          a record of p's final log (value not null) below (g, p)'s final committed offset
                         (the last `committed` ok) whose value no poll of g returned.
  commit-beyond-log      an acked commit of (g, p), or its final committed offset, above p's final HW (a
                         partition with a final log).
  assignment-overlap     group-assign oks of one group and generation n >= 0 by different (known, non-empty)
                         members naming p: one finding per (g, n, p), at the first assign by another member
                         than the first one's.
  group-reread           a value of p returned by polls of g more than once: counted, allowed.
"""
from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from rundir import formats as rf
from rundir import kinds
from checkers import coverage
from checkers.anomalies.context import CheckContext
from checkers.anomalies.lookup import ExampleDetails
from checkers.anomalies.tables import Counted, Order, finding, in_final_logs

K = kinds
KINDS = K.GROUP_KINDS
TABLE = "group_parts"

FIELDS = {k.name: k.example_fields for k in KINDS}


def _parts(ctx: CheckContext, exercised: bool) -> DataFrame:
    """The group_parts table (empty when the run has no group, or an older table set has none)."""
    schema = rf.arrow_schemas()[TABLE]
    path = Path(ctx.col_dir) / TABLE
    if not exercised or not path.is_dir():
        return ctx.spark.createDataFrame([], from_arrow_schema(schema))
    return ctx.spark.read.schema(from_arrow_schema(schema)).parquet(str(path.resolve())).select(*schema.names)


def analyze(ctx: CheckContext) -> DataFrame:
    """The six kinds' findings (module docstring), one union."""
    exercised = coverage.column_filled(ctx.col_dir, K.GROUP_REREAD.needs.column)
    gp = _parts(ctx, exercised)
    reads = ctx.t.reads if exercised else ctx.t.reads.limit(0)
    greads = (reads.filter(F.col("group").isNotNull() & (F.col("f") == "poll"))
              .select("group", "partition", "offset", "value", "index", "pos", "process", "time"))
    seen = _seen(greads)
    observed = _observed(gp)
    found = [_regression(observed), _resume(gp, observed, greads), _lost(ctx, reads, gp, seen),
             _beyond(ctx, gp), _overlap(gp), _reread(seen)]
    out = found[0]
    for df in found[1:]:
        out = out.unionByName(df)
    return out


def _acked(gp: DataFrame) -> DataFrame:
    return gp.filter((F.col("f") == rf.COMMIT_F) & (F.col("type") == "ok"))


def _observed(gp: DataFrame) -> DataFrame:
    """Every observation of a committed offset (committed ok, group-assign ok) with `prev`: the acked commit
    of its (group, partition) with the highest (offset, index) completed before its invoke (null: none)."""
    c, L = F.col, F.lit
    mark = F.struct(c("offset"), c("index"), c("time"), c("process"), c("member"), c("generation"))
    obs = F.struct(c("f"), c("offset"), c("index"), c("time"), c("invoke_index"), c("process"), c("member"),
                   c("generation"))
    acks = _acked(gp)
    mark_type = acks.select(mark.alias("m")).schema["m"].dataType
    obs_type = gp.select(obs.alias("o")).schema["o"].dataType
    views = gp.filter(c("f").isin(rf.COMMITTED_F, rf.GROUP_ASSIGN_F) & (c("type") == "ok"))
    events = (acks.select("group", "partition", c("index").alias("at"), mark.alias("mark"),
                          L(None).cast(obs_type).alias("obs"))
              .unionByName(views.select("group", "partition", c("invoke_index").alias("at"),
                                        L(None).cast(mark_type).alias("mark"), obs.alias("obs"))))
    w = Window.partitionBy("group", "partition").orderBy("at").rowsBetween(Window.unboundedPreceding, -1)
    return (events.select("group", "partition", "obs", F.max("mark").over(w).alias("prev"))
            .filter(c("obs").isNotNull()).select("group", "partition", "obs.*", "prev"))


def _regression(observed: DataFrame) -> DataFrame:
    c = F.col
    bad = observed.filter(c("prev").isNotNull() & (c("prev.offset") > c("offset")))
    previous = F.struct(*[c(f"prev.{n}").alias(n) for n in ("offset", "index", "time", "process", "member",
                                                              "generation")])
    return finding(bad, K.COMMITTED_REGRESSION.name,
                   ["group", "partition", "offset", "f", "index", "time", "invoke_index", "process",
                    previous.alias("previous")],
                   Order(c("index")), Counted(time=c("time")))


def _resume(gp: DataFrame, observed: DataFrame, greads: DataFrame) -> DataFrame:
    """group-resume-mismatch (module docstring)."""
    c, L = F.col, F.lit
    assigns = observed.filter((c("f") == rf.GROUP_ASSIGN_F) & c("prev").isNotNull()).select(
        "group", "partition", "process", "member", "generation", c("index").alias("a_index"),
        c("time").alias("a_time"), c("invoke_index").alias("a_invoke"), c("offset").alias("a_committed"),
        c("prev.offset").alias("expected"))
    # per (process, group, partition) in index order: the assign oks that set an expectation (kind 0), the
    # invokes of every group-assign and group-revoke naming the partition (kind 1: an owner's end), the
    # first record of each poll (kind 2); each poll belongs to the last kind-0/1 event before it
    owner = F.struct(c("at"), c("kind"))
    bounds = gp.filter(c("f").isin(rf.GROUP_ASSIGN_F, rf.GROUP_REVOKE_F) & (c("type") == "invoke")).select(
        "process", "group", "partition", c("index").alias("at"), L(1).alias("kind"), L(None).cast("long").alias("s"),
        L(None).cast("long").alias("s_time"))
    starts = assigns.select("process", "group", "partition", c("a_index").alias("at"), L(0).alias("kind"),
                            L(None).cast("long").alias("s"), L(None).cast("long").alias("s_time"))
    firsts = greads.filter(c("pos") == 0).select("process", "group", "partition", c("index").alias("at"),
                                                 L(2).alias("kind"), c("offset").alias("s"),
                                                 c("time").alias("s_time"))
    w = Window.partitionBy("process", "group", "partition").orderBy("at").rowsBetween(Window.unboundedPreceding, -1)
    ev = bounds.unionByName(starts).unionByName(firsts)
    owned = (ev.select("*", F.last(F.when(c("kind") != 2, owner), ignorenulls=True).over(w).alias("owner"))
             .filter((c("kind") == 2) & (c("owner.kind") == 0)))
    first = owned.groupBy("process", "group", "partition", c("owner.at").alias("a_index")).agg(
        F.min(F.struct(c("at"), c("s"), c("s_time"))).alias("poll"))
    cand = (assigns.join(first, ["process", "group", "partition", "a_index"])
            .filter(c("poll.s") != c("expected")))
    flight = gp.filter((c("f") == rf.COMMIT_F) & c("type").isin("ok", "info")).select(
        c("group").alias("f_group"), c("partition").alias("f_partition"), c("offset").alias("f_offset"),
        c("type").alias("f_type"), c("index").alias("f_index"), c("invoke_index").alias("f_invoke"),
        c("mode").alias("f_mode"), c("process").alias("f_process"))
    explained = (c("group") == c("f_group")) & (c("partition") == c("f_partition")) & (c("poll.s") == c("f_offset"))
    # an auto-commit is recorded when the client reports it, invoke and completion together: it may have
    # been sent before the assign whatever its invoke's index, unless the assigned member made it
    invoked = (c("f_invoke") < c("a_index")) | ((c("f_mode") == "auto") & (c("f_process") != c("process")))
    in_flight = explained & invoked & ((c("f_type") == "info") | (c("f_index") > c("a_invoke")))
    bad = cand.join(flight, in_flight, "left_anti")
    assign = F.struct(c("a_index").alias("index"), c("a_time").alias("time"), c("a_invoke").alias("invoke_index"),
                      c("a_committed").alias("committed"))
    return finding(bad, K.GROUP_RESUME_MISMATCH.name,
                   ["group", "partition", "member", "generation", c("poll.s").alias("offset"), "expected",
                    c("poll.at").alias("index"), c("poll.s_time").alias("time"), "process", assign.alias("assign")],
                   Order(c("poll.at")), Counted(time=c("poll.s_time")))


def _seen(greads: DataFrame) -> DataFrame:
    """Per (group, partition, value) the group polled: how often, and its first and last read."""
    c = F.col
    read = F.struct(c("index"), c("pos"), c("time"), c("process"), c("offset"))
    return (greads.filter(c("value").isNotNull()).groupBy("group", "partition", "value")
            .agg(F.count(F.lit(1)).alias("reads"), F.min(read).alias("first"), F.max(read).alias("last")))


def _final_committed(gp: DataFrame) -> DataFrame:
    """(group, partition) -> its last committed ok: `fc` (index, offset, time, process)."""
    c = F.col
    return (gp.filter((c("f") == rf.COMMITTED_F) & (c("type") == "ok"))
            .groupBy("group", "partition")
            .agg(F.max(F.struct(c("index"), c("offset"), c("time"), c("process"))).alias("fc")))


def _lost(ctx: CheckContext, reads: DataFrame, gp: DataFrame, seen: DataFrame) -> DataFrame:
    c = F.col
    fc = _final_committed(gp).filter(c("fc.offset") > 0)
    final = (in_final_logs(reads.filter(c("f") == "final-read"), ctx.recovered)
             .filter(c("value").isNotNull()).select("partition", "offset", "value").dropDuplicates())
    below = (final.join(F.broadcast(fc), "partition").filter(c("offset") < c("fc.offset"))
             .join(seen.select("group", "partition", "value"), ["group", "partition", "value"], "left_anti"))
    return finding(below, K.LOST_BY_GROUP.name,
                   ["group", "partition", "offset", "value", c("fc.offset").alias("committed"),
                    c("fc.index").alias("index"), c("fc.time").alias("time")],
                   Order(c("offset")), Counted(time=c("fc.time")))


def _beyond(ctx: CheckContext, gp: DataFrame) -> DataFrame:
    c, L = F.col, F.lit
    commits = _acked(gp).select("group", "partition", "offset", L(rf.COMMIT_F).alias("f"), "index", "time",
                                "process", "member", "generation")
    finals = _final_committed(gp).select("group", "partition", c("fc.offset").alias("offset"),
                                         L(rf.COMMITTED_F).alias("f"), c("fc.index").alias("index"),
                                         c("fc.time").alias("time"), c("fc.process").alias("process"),
                                         L(None).cast("string").alias("member"), L(None).cast("int").alias("generation"))
    bad = (commits.unionByName(finals).join(F.broadcast(ctx.recovered), "partition")
           .filter(c("offset") > c("fs_hw")).withColumnRenamed("fs_hw", "hw"))
    return finding(bad, K.COMMIT_BEYOND_LOG.name, list(FIELDS[K.COMMIT_BEYOND_LOG.name]),
                   Order(c("index")), Counted(time=c("time")))


def _overlap(gp: DataFrame) -> DataFrame:
    c = F.col
    key = ["group", "generation", "partition"]
    a = gp.filter((c("f") == rf.GROUP_ASSIGN_F) & (c("type") == "ok") & (c("generation") >= 0)
                  & c("member").isNotNull() & (c("member") != ""))
    who = F.struct(c("index"), c("time"), c("member"), c("process"))
    firsts = a.groupBy(*key).agg(F.min(who).alias("first"), F.array_sort(F.collect_set("member")).alias("members"))
    other = (a.join(firsts, key).filter(c("member") != c("first.member"))
             .groupBy(*key).agg(F.min(who).alias("second"), F.first("first").alias("first"),
                                F.first("members").alias("members")))
    first = F.struct(*[c(f"first.{n}").alias(n) for n in ("member", "index", "time", "process")])
    return finding(other, K.ASSIGNMENT_OVERLAP.name,
                   ["group", "generation", "partition", "members", c("second.member").alias("member"),
                    c("second.index").alias("index"), c("second.time").alias("time"),
                    c("second.process").alias("process"), first.alias("first")],
                   Order(c("second.index")), Counted(time=c("second.time")))


def _reread(seen: DataFrame) -> DataFrame:
    c = F.col
    first = F.struct(*[c(f"first.{n}").alias(n) for n in ("index", "time", "process", "offset")])
    return finding(seen.filter(c("reads") > 1), K.GROUP_REREAD.name,
                   ["group", "partition", "value", c("first.offset").alias("offset"), "reads",
                    c("last.index").alias("index"), c("last.time").alias("time"), c("last.process").alias("process"),
                    first.alias("first")],
                   Order(c("last.index"), c("last.pos")), Counted(time=c("last.time")))


def examples(top: dict[str, list[dict]], d: ExampleDetails) -> dict[str, list[dict]]:
    """The group kinds' examples: every field came with its finding, in the declared order."""
    return {k.name: [{n: r[n] for n in k.example_fields} for r in top[k.name]] for k in KINDS}
