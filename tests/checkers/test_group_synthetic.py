"""The synthetic run's group shape (checkers/synthetic.py Harness.groups): each partition's consumer a
member of one group that commits every poll, and the group's final committed offsets. The consumer's
injected damage is the group's: exactly the expected lost-by-group and group-reread, in both engines,
and a plain synthetic run of the same seed leaves the group kinds not exercised."""
from __future__ import annotations

import pytest

from checkers import synthetic
from checkers.check import CheckOptions, check_run
from rundir import formats as rf
from rundir import kinds

COMPARED = ("valid", "anomalies", "unseen", "partitions", "stats", "time_axis")
GROUPED = synthetic.Harness(groups=True)


def _counts(res: dict) -> dict[str, int]:
    return {k: res["anomalies"][k]["count"] for k in rf.ANOMALY_KINDS}


def test_group_shape_is_a_known_answer(tmp_path):
    expected = synthetic.generate(tmp_path / "g", 40_000, partitions=4, k=2, seed=3, harness=GROUPED)
    assert expected["lost-by-group"] > 0 and expected["group-reread"] > 0
    res = check_run(tmp_path / "g", CheckOptions(engine="reference", write=False))
    assert _counts(res) == {k: expected[k] for k in rf.ANOMALY_KINDS}
    assert all(res["anomalies"][k.name]["status"] == "checked" for k in kinds.GROUP_KINDS)
    plain = synthetic.generate(tmp_path / "p", 40_000, partitions=4, k=2, seed=3)
    res = check_run(tmp_path / "p", CheckOptions(engine="reference", write=False))
    assert _counts(res) == {k: plain[k] for k in rf.ANOMALY_KINDS}
    assert all(res["anomalies"][k.name]["status"] == "not-exercised" for k in kinds.GROUP_KINDS)


@pytest.mark.spark
def test_spark_finds_the_group_shape_as_the_reference_does(tmp_path, spark):
    expected = synthetic.generate(tmp_path, 40_000, partitions=4, k=2, seed=3, harness=GROUPED)
    got = check_run(tmp_path, CheckOptions(engine="spark", spark=spark, write=False))
    want = check_run(tmp_path, CheckOptions(engine="reference", write=False))
    assert _counts(got) == {k: expected[k] for k in rf.ANOMALY_KINDS}
    for key in COMPARED:
        assert got[key] == want[key], key
