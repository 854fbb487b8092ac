"""Known answers for the synthetic run's event logs (checkers/synthetic.py `_events`): a clean run breaks
no protocol rule, and k injected violations of each rule are found exactly, by both engines, on the
Spark driver and in the rules' mapInArrow pass with ack-undecided as the range anti-join."""
from __future__ import annotations

import pytest

from checkers import synthetic
from checkers.check import CheckOptions, check_run
from rundir import formats as rf
from rundir import kinds

COMPARED = ("valid", "anomalies", "unseen", "partitions", "stats", "time_axis")


def _protocol(res: dict) -> dict[str, int]:
    return {k: res["anomalies"][k]["count"] for k in kinds.PROTOCOL_NAMES if res["anomalies"][k]["count"]}


def test_every_injected_rule_is_a_known_answer_and_a_clean_run_has_none(tmp_path):
    expected = synthetic.generate(tmp_path / "dirty", 40_000, partitions=4, k=2, seed=5)
    want = {k: n for k in kinds.PROTOCOL_NAMES if (n := expected[k])}
    assert set(synthetic.EVENT_INJECTED) <= set(want)
    assert set(want) == set(kinds.PROTOCOL_NAMES)   # every rule, the history-side ones too
    assert want["hw-reported-ahead"] == want["damaged-record-kept"] == 2
    assert want["leader-not-elected"] == 4          # its own 2 and epoch-two-leaders' 2
    res = check_run(tmp_path / "dirty", CheckOptions(engine="reference", write=False))
    assert {k: res["anomalies"][k]["count"] for k in rf.ANOMALY_KINDS} == {k: expected[k] for k in rf.ANOMALY_KINDS}
    synthetic.generate(tmp_path / "clean", 40_000, partitions=4, k=0, seed=5)
    assert _protocol(check_run(tmp_path / "clean", CheckOptions(engine="reference", write=False))) == {}


def test_ack_undecided_names_the_send_no_ack_covers(tmp_path):
    synthetic.generate(tmp_path, 40_000, partitions=4, k=1, seed=5)
    ex = check_run(tmp_path, CheckOptions(engine="reference", write=False))["anomalies"]["ack-undecided"]["examples"]
    assert len(ex) == 1 and ex[0]["node"] == "client"
    (sent,) = ex[0]["evidence"]
    assert sent["event"] == "sent" and ex[0]["detail"] == (
        f"a producer was told offset {sent['offset']} succeeded; no leader logged an acknowledgement of it")


@pytest.mark.spark
@pytest.mark.parametrize("path", ["driver", "executors"])
@pytest.mark.parametrize("k", [0, 2])
def test_spark_finds_the_injected_set_as_the_reference_does(tmp_path, spark, monkeypatch, path, k):
    from checkers.anomalies import protocol

    if path == "executors":
        monkeypatch.setattr(protocol, "DRIVER_ROWS", 0)
        monkeypatch.setattr(protocol, "SPAN_BUCKET", 1 << 10)   # acknowledged ranges over many join buckets
    expected = synthetic.generate(tmp_path, 40_000, partitions=4, k=k, seed=5)
    got = check_run(tmp_path, CheckOptions(engine="spark", spark=spark, write=False))
    want = check_run(tmp_path, CheckOptions(engine="reference", write=False))
    assert {kd: got["anomalies"][kd]["count"] for kd in rf.ANOMALY_KINDS} == {kd: expected[kd] for kd in rf.ANOMALY_KINDS}
    for key in COMPARED:
        assert got[key] == want[key], key
    assert (_protocol(got) == {}) is (k == 0)
