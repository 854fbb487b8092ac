"""Known answers for the totals in results.json (checkers/totals.py): per-partition counts, histograms over
the run's time axis, untimed findings and the lost writes' acknowledgement times, in both engines (the
Spark engine on its small path, where the driver counts, and its large path, where Spark aggregates)."""
from __future__ import annotations

import pytest

from rundir import formats as rf
from checkers import loss_shape, totals
from checkers.check import CheckOptions, check_run
from simulated_runs import Replica, RunBuilder
import checker_scenarios as sc

S = 1_000_000_000


def at(b: RunBuilder, seconds: float) -> None:
    """The builder's next operation happens exactly at `seconds` (each operation is 1 ms after the last)."""
    b.time = round(seconds * S) - 1_000_000


def damaged_run(tmp_path):
    """Two partitions, anomalies at known times; the history ends at exactly 12 s (0.2 s buckets, 60)."""
    b = RunBuilder()
    # partition 0: final log [10, 11, 10] (10 duplicated: untimed); 12 and 13 acked beyond the HW: lost
    b.assign(8, 0, 0)
    b.send(1, 0, 10, offset=0)
    b.send(1, 0, 11, offset=1)
    at(b, 1.0 - 0.001)
    b.send(1, 0, 12, offset=3)                          # ack at 1.0 s: bucket 5 (a bucket's first instant)
    at(b, 7.3 - 0.001)
    b.send(2, 0, 13, offset=4)                          # ack at 7.3 s: bucket 36
    # partition 1: final log [20, 21]; 22 acked beyond the HW at 4.2 s (bucket 21) and read twice (dirty)
    b.send(3, 1, 20, offset=0)
    b.send(3, 1, 21, offset=1)
    at(b, 4.2 - 0.001)
    b.send(3, 1, 22, offset=2)
    b.assign(5, 1, 2)
    at(b, 5.0 - 0.001)
    b.poll(5, 1, 2, [(2, 22)], hw=2)                   # first dirty read at 5.0 s: both reads in bucket 25
    b.assign(6, 1, 2)
    at(b, 9.9 - 0.001)
    b.poll(6, 1, 2, [(2, 22)], hw=2)
    # final phase; n3 of partition 1 holds 77 at offset 1 beyond its HW: residual divergence (untimed)
    at(b, 11.0)
    b.final(0, [10, 11, 10], process=9000)
    b.final(1, [20, 21], process=9001,
            replicas={"n1": Replica([(20, 1), (21, 1)], 2), "n2": Replica([(20, 1), (21, 1)], 2),
                      "n3": Replica([(20, 1), (77, 1)], 1)})
    # the last line of the history: a poll of partition 0 that skips offset 0, at exactly 12 s (its
    # bucket would be 60: the last bucket, 59, takes it)
    at(b, 12.0 - 0.001)
    b.poll(8, 0, 0, [(1, 11)], hw=3)
    assert b.ops[-1]["time"] == 12 * S
    b.write(tmp_path)


def shape(**classes: tuple[int, int]) -> dict:
    """A loss_shape entry: class=(writes, runs); classes not named are zero."""
    return {c: dict(zip(("writes", "runs"), classes.get(c, (0, 0)))) for c in loss_shape.CLASSES}


def hist(buckets: dict[int, int], untimed: int = 0, n: int = 60) -> dict:
    return {"counts": [buckets.get(i, 0) for i in range(n)], "untimed": untimed}


EXPECTED = {
    "lost-write": {"count": 3, "by_partition": {"0": 2, "1": 1}, "histogram": hist({5: 1, 21: 1, 36: 1}),
                   "ack_times": {"0": {"first_s": 1.0, "last_s": 7.3}, "1": {"first_s": 4.2, "last_s": 4.2}},
                   # both partitions lose the end of their acknowledged sequence (acks beyond the HW)
                   "loss_shape": {"by_partition": {"0": shape(suffix=(2, 1)), "1": shape(suffix=(1, 1))},
                                  "total": shape(suffix=(3, 2))}},
    "dirty-read": {"count": 2, "by_partition": {"1": 2}, "histogram": hist({25: 2})},
    # the same two polls reported HW 2 and returned offset 2 (a protocol rule, timed by the read: the
    # poll's completion + checkers.protocol_trace.READ_SLACK_NS, 5.005 s and 9.905 s)
    "read-uncommitted": {"count": 2, "by_partition": {"1": 2}, "histogram": hist({25: 1, 49: 1})},
    "duplicate": {"count": 1, "by_partition": {"0": 1}, "histogram": hist({}, untimed=1)},
    "divergence": {"count": 1, "by_partition": {"1": 1}, "histogram": hist({}, untimed=1)},
    "poll-skip": {"count": 1, "by_partition": {"0": 1}, "histogram": hist({59: 1})},
}
AXIS = {"start_s": 0.0, "end_s": 12.0, "bucket_s": 0.2, "buckets": 60}


def assert_totals(res: dict, expected: dict, axis: dict) -> None:
    assert res["time_axis"] == axis
    for kind in rf.ANOMALY_KINDS:
        a = res["anomalies"][kind]
        want = expected.get(kind) or {"count": 0, "by_partition": {}, "histogram": hist({}, n=axis["buckets"])}
        got = {k: a[k] for k in want}
        if kind == "lost-write":
            got["ack_times"], got["loss_shape"] = a["ack_times"], a["loss_shape"]
            # nothing lost: every class zero in the total, no partition listed
            want = {"ack_times": {}, "loss_shape": {"by_partition": {}, "total": shape()}, **want}
        assert got == want, kind
        # the totals add up to the count
        assert sum(a["by_partition"].values()) == a["count"], kind
        assert sum(a["histogram"]["counts"]) + a["histogram"]["untimed"] == a["count"], kind


def test_reference_totals_known_answer(tmp_path):
    damaged_run(tmp_path)
    assert_totals(check_run(tmp_path, CheckOptions(engine="reference")), EXPECTED, AXIS)


def test_reference_clean_history_has_empty_totals(tmp_path):
    b = RunBuilder()
    sc.clean(b, 0)
    b.write(tmp_path)
    res = check_run(tmp_path, CheckOptions(engine="reference"))
    # the clean scenario has 17 lines (3 sends, an assign, 3 polls: 2 lines each; a final read and the
    # final state), one every ms: it ends at 17 ms
    assert_totals(res, {}, {"start_s": 0.0, "end_s": 0.017, "bucket_s": 0.1, "buckets": 1})
    assert res["valid"] is True


@pytest.mark.spark
@pytest.mark.parametrize("path", ["small", "large"])
def test_spark_totals_known_answer(tmp_path, spark, monkeypatch, path):
    """Small: the driver buckets the collected findings; large: one Spark aggregation does."""
    from checkers.anomalies import engine

    if path == "large":
        monkeypatch.setenv("HIGHWATER_SPARK_SMALL_ROWS", "0")
    took = []
    real = engine._count_and_first
    monkeypatch.setattr(engine, "_count_and_first",
                        lambda allf, N, small, *rest: took.append(small) or real(allf, N, small, *rest))
    damaged_run(tmp_path)
    res = check_run(tmp_path, CheckOptions(engine="spark", spark=spark))
    assert took == [path == "small"]
    assert_totals(res, EXPECTED, AXIS)
    ref = check_run(tmp_path, CheckOptions(engine="reference", write=False))
    assert res["anomalies"] == ref["anomalies"]


@pytest.mark.spark
def test_spark_clean_history_has_empty_totals(tmp_path, spark):
    b = RunBuilder()
    sc.clean(b, 0)
    b.write(tmp_path)
    res = check_run(tmp_path, CheckOptions(engine="spark", spark=spark))
    assert_totals(res, {}, {"start_s": 0.0, "end_s": 0.017, "bucket_s": 0.1, "buckets": 1})


@pytest.mark.parametrize("end_s,bucket_s,buckets", [
    (0.0, 0.1, 1), (0.05, 0.1, 1), (10.0, 0.1, 100), (10.000000001, 0.2, 51), (20.0, 0.2, 100),
    (20.5, 0.5, 41), (3000.0, 30, 100), (9_000_000.0, 86400, 105)])
def test_time_axis_picks_the_smallest_bucket_that_fits(end_s, bucket_s, buckets):
    axis = totals.TimeAxis(round(end_s * S))
    assert (axis.bucket_s, axis.buckets) == (bucket_s, buckets)
    assert axis.bucket(0) == 0 and axis.bucket(round(end_s * S)) == buckets - 1
    assert axis.bucket(None) is None


def test_time_axis_buckets_by_integer_nanoseconds():
    axis = totals.TimeAxis(12 * S)                       # 0.2 s buckets
    assert axis.bucket(200_000_000 - 1) == 0 and axis.bucket(200_000_000) == 1
    assert axis.bucket(-5) == 0 and axis.bucket(13 * S) == 59


def test_results_written_before_totals_get_empty_ones():
    """results.build fills the totals of kinds an engine did not report (the report reads them)."""
    from checkers import results

    doc = results.build({"anomalies": {}, "unseen": {"count": 0, "partitions": [], "details": []},
                         "partitions": [], "stats": {"ops": {}}}, failing=[], checker={})
    assert doc["time_axis"] == {"start_s": 0.0, "end_s": 0.0, "bucket_s": 0.1, "buckets": 1}
    assert doc["anomalies"]["lost-write"]["ack_times"] == {}
    assert doc["anomalies"]["lost-write"]["loss_shape"] == {"by_partition": {}, "total": shape()}
    assert doc["anomalies"]["divergence"]["histogram"] == {"counts": [0], "untimed": 0}
