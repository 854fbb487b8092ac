"""The group workload's operations in the history (docs/formats.md "Client operations"): ingest keeps
them in `group_parts` and the ops table, pairs overlapping completions, closes the ones in flight, and
names the line and field of a malformed one; a history without them converts as before."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rundir import formats as rf
from rundir.formats import FormatError
from checkers import ingest
from simulated_runs import RunBuilder

import checker_scenarios as sc
import group_ops as g


def _table(run, name):
    return pq.read_table(run / rf.COLUMNAR_DIR / name).to_pylist()


def _group_run(tmp_path):
    b = RunBuilder()
    for k in range(4):
        b.send(1, 0, 10 + k, offset=k)
    g.group_assign(b, 5, "g1", "m-a", 1, {0: -1})
    b.assign(5, 0, 0)
    g.group_poll(b, 5, "g1", 1, 0, 0, [(0, 10), (1, 11)], hw=4)
    first = g.commit(b, 5, "g1", "m-a", 1, {0: 2}, outcome=None, mode="async")   # in flight while it polls
    g.group_poll(b, 5, "g1", 1, 0, 2, [(2, 12)], hw=4)
    g.commit(b, 5, "g1", "m-a", 1, {0: 3}, outcome=None, mode="async")
    g.complete(b, 5, "commit", g.commit_value("g1", "m-a", 1, {0: 2}, "async"))
    g.group_revoke(b, 5, "g1", "m-a", 1, [0])
    g.commit(b, 6, "g1", "m-b", 0, {0: 3}, outcome="fail")
    g.committed(b, 7, "g1", {0: 2})
    b.final(0, [10, 11, 12, 13], process=9)
    b.write(tmp_path)
    return tmp_path, first


def test_group_operations_are_kept(tmp_path):
    run, first = _group_run(tmp_path)
    ingest.ingest(run)
    parts = _table(run, "group_parts")
    commits = [r for r in parts if r["f"] == "commit"]
    # the async commit of 2 completes after the invoke of 3: paired by its offsets, not its process alone
    ok2 = next(r for r in commits if r["type"] == "ok")
    assert (ok2["offset"], ok2["invoke_index"], ok2["mode"]) == (2, first, "async")
    # the commit of 3 never completed: an info row at the end of the history
    open3 = [r for r in commits if r["offset"] == 3 and r["type"] == "info" and r["process"] == "5"]
    assert len(open3) == 1 and open3[0]["error"].startswith("no completion")
    assert [r["type"] for r in commits if r["process"] == "6"] == ["invoke", "fail"]
    assigned = [r for r in parts if r["f"] == "group-assign" and r["type"] == "ok"]
    assert [(r["group"], r["member"], r["generation"], r["partition"], r["offset"]) for r in assigned] == [
        ("g1", "m-a", 1, 0, -1)]
    fetched = [r for r in parts if r["f"] == "committed" and r["type"] == "ok"]
    assert [(r["partition"], r["offset"], r["member"], r["generation"]) for r in fetched] == [(0, 2, None, None)]
    polls = [r for r in _table(run, "ops") if r["f"] == "poll" and r["type"] == "ok" and r["process"] == "5"]
    assert {(r["group"], r["generation"]) for r in polls} == {("g1", 1)}
    reads = [r for r in _table(run, "reads") if r["f"] == "poll"]
    assert {r["group"] for r in reads} == {"g1"}
    finals = [r for r in _table(run, "reads") if r["f"] == "final-read"]
    assert {r["group"] for r in finals} == {None}


def test_history_without_groups_unchanged(tmp_path):
    b = RunBuilder()
    sc.clean(b, 0)
    b.write(tmp_path)
    ingest.ingest(tmp_path)
    assert _table(tmp_path, "group_parts") == []
    assert {r["group"] for r in _table(tmp_path, "ops")} == {None}


@pytest.mark.parametrize("line,mutate,message", [
    (0, lambda v: v.pop("group"), "field 'value.group' must be a non-empty string, got None"),
    (0, lambda v: v.__setitem__("generation", "one"), "field 'value.generation' must be an integer, got 'one'"),
    (0, lambda v: v.__setitem__("partitions", [1, 1]),
     "field 'value.partitions' must be a list of distinct non-negative integers, got [1, 1]"),
    (1, lambda v: v.__setitem__("committed", [[0, 1]]),
     "field 'value.committed' names partitions [0], not the operation's partitions [0, 1]"),
    (2, lambda v: v.__setitem__("mode", "eager"), "field 'value.mode' must be one of sync, async, auto, got 'eager'"),
    (2, lambda v: v.__setitem__("offsets", {"0": 3}),
     "field 'value.offsets' must be a list of [partition, offset] integer pairs (each partition once, offset -1 "
     "or more), got {'0': 3}"),
])
def test_malformed_group_line_names_line_and_field(tmp_path, line, mutate, message):
    b = RunBuilder()
    g.group_assign(b, 5, "g1", "m-a", 1, {0: -1, 1: 4})
    g.commit(b, 5, "g1", "m-a", 1, {0: 3})
    b.write(tmp_path)
    lines = (tmp_path / rf.HISTORY).read_text().splitlines()
    op = json.loads(lines[line])
    mutate(op["value"])
    lines[line] = json.dumps(op)
    (tmp_path / rf.HISTORY).write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as e:
        ingest.ingest(tmp_path)
    assert str(e.value) == f"{tmp_path / rf.HISTORY}:{line + 1}: {message}"


def test_completion_must_match_an_invoke(tmp_path):
    b = RunBuilder()
    g.commit(b, 5, "g1", "m-a", 1, {0: 3}, outcome=None)
    g.complete(b, 5, "commit", g.commit_value("g1", "m-a", 1, {0: 4}))
    b.write(tmp_path)
    with pytest.raises(FormatError, match=r"history.jsonl:2: 'ok' completion of commit \(process '5', group 'g1', "
                                          r"partitions \[0\]\) without a pending invoke"):
        ingest.ingest(tmp_path)
