"""Known-answer tests: each hand-built scenario must give exactly its findings, with both engines."""
from __future__ import annotations

import pytest

from rundir import formats as rf
from checkers import loss_shape
from checkers.check import CheckOptions, check_run
from checkers.policy import DEFAULT_ALLOWED
from simulated_runs import RunBuilder
import checker_scenarios as sc


def build(tmp_path, chosen):
    b = RunBuilder()
    expected = [s(b, p) for p, s in enumerate(chosen)]
    b.write(tmp_path)
    return expected


def assert_findings(res: dict, expected: list[dict]) -> None:
    for kind in rf.ANOMALY_KINDS:
        a = res["anomalies"][kind]
        assert a["count"] == sum(e["counts"].get(kind, 0) for e in expected), kind
        exs = [e["examples"].get(kind, []) for e in expected]
        if all(x is not None for x in exs):
            assert a["examples"] == [x for xs in exs for x in xs], kind
    shape = res["anomalies"]["lost-write"]["loss_shape"]
    want = {str(p): {c: e["loss_shape"].get(c, {"writes": 0, "runs": 0}) for c in loss_shape.CLASSES}
            for p, e in enumerate(expected) if e.get("loss_shape")}
    assert shape["by_partition"] == want
    assert shape["total"] == {c: {k: sum(w[c][k] for w in want.values()) for k in ("writes", "runs")}
                              for c in loss_shape.CLASSES}
    assert sum(s["writes"] for s in shape["total"].values()) == res["anomalies"]["lost-write"]["count"]
    div = res["anomalies"]["divergence"]
    assert div["committed"] == sum(e.get("divergence", {}).get("committed", 0) for e in expected)
    assert div["residual"] == sum(e.get("divergence", {}).get("residual", 0) for e in expected)
    assert res["unseen"]["count"] == sum(e.get("unseen", 0) for e in expected)
    assert res["unseen"]["details"] == [{"partition": p, "reason": e["reason"], "acked": e["unseen"],
                                         "values": e["unseen_values"]}
                                        for p, e in enumerate(expected) if "reason" in e]
    assert res["unseen"]["values"] == [{"partition": p, "value": v} for p, e in enumerate(expected)
                                       for v in e.get("unseen_values", [])][:10]
    assert res["unknown_reasons"] == [{"file": None, "line": None, "partition": p,
                                       "reason": f"{e['reason']}: {e['unseen']} acknowledged sends not checked"}
                                      for p, e in enumerate(expected) if "reason" in e]
    failing = any(res["anomalies"][k]["count"] for k in rf.ANOMALY_KINDS if k not in DEFAULT_ALLOWED)
    assert res["valid"] == (False if failing else "unknown" if res["unseen"]["count"] else True)


@pytest.mark.parametrize("scenario", sc.SCENARIOS, ids=lambda s: s.__name__)
def test_reference_known_answer(tmp_path, scenario):
    expected = build(tmp_path, [scenario])
    res = check_run(tmp_path, CheckOptions(engine="reference"))
    assert_findings(res, expected)
    assert (tmp_path / rf.RESULTS_JSON).exists()


@pytest.mark.parametrize("scenario,valid", [(sc.clean, True), (sc.tricky_clean, True), (sc.lost_write, False),
                                            (sc.unrecovered, "unknown"), (sc.final_gap, "unknown"),
                                            (sc.duplicate, True), (sc.divergence_residual, False),
                                            (sc.realtime_order, False), (sc.realtime_overlap, True),
                                            (sc.key_reorder, False), (sc.key_order_clean, True)],
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_reference_verdicts(tmp_path, scenario, valid):
    build(tmp_path, [scenario])
    assert check_run(tmp_path, CheckOptions(engine="reference"))["valid"] == valid


@pytest.mark.spark
def test_spark_known_answers_all_scenarios(tmp_path, spark):
    expected = build(tmp_path, sc.SCENARIOS)
    res = check_run(tmp_path, CheckOptions(engine="spark", spark=spark))
    assert_findings(res, expected)
    ref = check_run(tmp_path, CheckOptions(engine="reference", write=False))
    for key in ("valid", "anomalies", "time_axis", "unseen", "partitions", "stats"):
        assert res[key] == ref[key], key
    assert res["valid"] is False
    assert res["checker"]["engine"] == "spark"
