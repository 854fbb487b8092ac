"""Random histories: valid ones must be valid; with injected anomalies, Spark and the reference must agree."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rundir import formats as rf
import simulated_runs as simulate
from checkers import synthetic
from checkers.check import CheckOptions, check_run
from checkers.policy import DEFAULT_ALLOWED

COMPARED = ("valid", "anomalies", "time_axis", "unseen", "partitions", "stats")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), partitions=st.integers(1, 3), steps=st.integers(20, 400))
def test_random_valid_histories_are_valid(tmp_path_factory, seed, partitions, steps):
    run = simulate.simulate(seed, partitions=partitions, steps=steps).write(tmp_path_factory.mktemp("run"))
    res = check_run(run, CheckOptions(engine="reference"))
    bad = {k: a["count"] for k, a in res["anomalies"].items() if a["count"] and k not in DEFAULT_ALLOWED}
    assert bad == {}
    assert res["valid"] is True
    assert res["unseen"]["count"] == 0


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_injected_anomalies_are_found_by_the_reference(tmp_path, seed):
    b = simulate.simulate(seed, partitions=3, steps=500)
    done = simulate.inject(b, seed, n=30)
    res = check_run(b.write(tmp_path), CheckOptions(engine="reference"))
    assert done, "nothing injected"
    assert res["valid"] is not True, done


@pytest.mark.spark
@pytest.mark.parametrize("seed", [101, 202, 303])
def test_spark_agrees_with_reference_on_random_damaged_histories(tmp_path, spark, seed):
    b = simulate.simulate(seed, partitions=4, steps=700)
    done = simulate.inject(b, seed, n=40)
    run = b.write(tmp_path)
    got = check_run(run, CheckOptions(engine="spark", spark=spark, examples=50))
    want = check_run(run, CheckOptions(engine="reference", examples=50, write=False))
    assert {k: got["anomalies"][k]["count"] for k in rf.ANOMALY_KINDS} == \
           {k: want["anomalies"][k]["count"] for k in rf.ANOMALY_KINDS}, done
    for key in COMPARED:
        assert got[key] == want[key], (key, done)
    assert sum(a["count"] for a in got["anomalies"].values()) > 0


@pytest.mark.spark
@pytest.mark.parametrize("bits,max_ranges,few", [(2, 256, 64), (3, 1, 0)])
def test_spark_agrees_with_reference_with_small_digest_blocks(tmp_path, spark, monkeypatch, bits, max_ranges, few):
    """Blocks of 4-8 offsets: clean and unclean blocks interleave, so the block digests, the exact pass
    restricted to unclean blocks (as offset ranges, or by a join when there are too many ranges) and the
    duplicate check of non-ok values are all exercised; fault windows, and polls whose records are not
    plainly consecutive, are picked out one by one (`few` of them at most) or matched by a join; findings
    and statistics must equal the reference's."""
    from checkers.anomalies import digests, ordering, stats

    monkeypatch.setattr(digests, "BLOCK_BITS", bits)
    monkeypatch.setattr(digests, "MAX_RANGES", max_ranges)
    monkeypatch.setattr(stats, "CASE_WINDOWS", few)
    monkeypatch.setattr(ordering, "ODD_POLLS_AS_FILTER", few)
    b = simulate.simulate(404 + bits, partitions=3, steps=600)
    done = simulate.inject(b, 404 + bits, n=25)
    run = b.write(tmp_path)
    got = check_run(run, CheckOptions(engine="spark", spark=spark, examples=50))
    want = check_run(run, CheckOptions(engine="reference", examples=50, write=False))
    for key in COMPARED:
        assert got[key] == want[key], (key, done)
    assert sum(a["count"] for a in got["anomalies"].values()) > 0
    avail = got["stats"]["availability"]
    assert avail["fault_windows"] > 0 and avail["counts"]["in_fault"]["total"] > 0
    assert got["anomalies"]["poll-skip"]["count"] + got["anomalies"]["nonmonotonic-poll"]["count"] > 0


@pytest.mark.spark
def test_spark_valid_random_history_is_valid(tmp_path, spark):
    run = simulate.simulate(7, partitions=4, steps=800).write(tmp_path)
    got = check_run(run, CheckOptions(engine="spark", spark=spark))
    assert got["valid"] is True
    assert got == {**got, **{k: check_run(run, CheckOptions(engine="reference", write=False))[k] for k in COMPARED}}


@pytest.mark.spark
def test_synthetic_parquet_run_known_anomalies(tmp_path, spark):
    """The benchmark generator's run at small scale: both engines find exactly the injected set."""
    expected = synthetic.generate(tmp_path, 60_000, partitions=4, k=2, seed=5)
    got = check_run(tmp_path, CheckOptions(engine="spark", spark=spark))
    want = check_run(tmp_path, CheckOptions(engine="reference", write=False))
    for kind in rf.ANOMALY_KINDS:
        a = got["anomalies"][kind]
        assert a["count"] == expected[kind], kind
        # the totals count every finding (the examples are only the first 10)
        assert sum(a["by_partition"].values()) == a["count"], kind
        assert sum(a["histogram"]["counts"]) + a["histogram"]["untimed"] == a["count"], kind
        assert a["histogram"]["untimed"] == (a["count"] if kind in ("duplicate", "divergence") else 0), kind
    assert got["anomalies"]["divergence"]["committed"] == expected["divergence_committed"]
    assert sorted(got["anomalies"]["lost-write"]["ack_times"]) == sorted(got["anomalies"]["lost-write"]["by_partition"])
    for key in COMPARED:
        assert got[key] == want[key], key
    assert got["valid"] is False
