"""End to end on real processes: KAFKA-5435, the idempotent producer's state across a truncation
(scenarios/kafka-5435*.toml). n1 judges x0..x2 (values 0-2) from an idempotent producer, truncates y
(value 3, never acknowledged) away as a follower, leads again and gets x0..x2 resent byte for byte. With the
producer state kept exact across the truncation it answers them with offsets 0-2; with the planted bug it
appends them at offsets 3-5, and the run fails on three duplicates. Real brokers, real SIGSTOP, real Kafka
protocol requests, reference checker."""
from __future__ import annotations

import pytest

from rundir import formats as runformat
from e2e_helpers import REPO, found_kinds, load_json, run_dir_from_stdout, run_highwater


@pytest.mark.slow
@pytest.mark.parametrize("rebuilt, mode", [
    pytest.param(True, "leader-epoch", id="rebuilt-leader-epoch"),
    pytest.param(False, "leader-epoch", id="unrebuilt-leader-epoch"),
    # the hw pair: the nightly suite replays both with the same expectations
    pytest.param(True, "hw", id="rebuilt-hw", marks=pytest.mark.nightly),
    pytest.param(False, "hw", id="unrebuilt-hw", marks=pytest.mark.nightly),
])
def test_kafka_5435(tmp_path, rebuilt, mode):
    name = "kafka-5435" if rebuilt else "kafka-5435-unrebuilt"
    r = run_highwater("scenario", str(REPO / "scenarios" / f"{name}.toml"), "--truncation", mode,
                      "--results-dir", str(tmp_path), "--checker", "reference", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    timeline = load_json(run_dir / "scenario.json")
    assert timeline["failed"] is None, r.stderr
    assert {s["outcome"] for s in timeline["steps"]} == {"ok"}
    truncate = next(s for s in timeline["steps"] if s["do"] == "assert")
    assert f"why='{mode}'" in truncate["detail"], truncate
    resend = timeline["steps"][-1]
    assert resend["do"] == "resend"
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert "as expected" in r.stderr and "NOT as expected" not in r.stderr
    if rebuilt:
        assert r.returncode == 0, r.stderr
        assert found_kinds(results) == []
        assert resend["detail"] == ("resent 3 batches of step 2: "
                                    + "; ".join(f"seq {i}: answered with its first offset {i} by n1" for i in range(3)))
    else:
        assert r.returncode == 1, r.stderr
        assert found_kinds(results) == ["duplicate"]
        dup = results["anomalies"]["duplicate"]
        assert dup["fails_run"] is True
        assert [(e["value"], e["offsets"]) for e in dup["examples"]] == [(0, [0, 3]), (1, [1, 4]), (2, [2, 5])]
        assert resend["detail"] == ("resent 3 batches of step 2: " + "; ".join(
            f"seq {i}: appended again at offset {i + 3} by n1 (first at {i})" for i in range(3)))


def test_the_two_files_stage_the_same_steps():
    """Only the switch, the expectation and the notes differ (fast: parse only)."""
    from harness import scenario

    kept = scenario.load(REPO / "scenarios" / "kafka-5435.toml")
    planted = scenario.load(REPO / "scenarios" / "kafka-5435-unrebuilt.toml")
    assert (kept.config.broker.producer_state_rebuilt_after_truncation,
            planted.config.broker.producer_state_rebuilt_after_truncation) == (True, False)
    assert kept.config.client.idempotence and planted.config.client.idempotence
    assert kept.expect == {"hw": [], "leader-epoch": []}
    assert planted.expect == {"hw": ["duplicate"], "leader-epoch": ["duplicate"]}
    plays = [[(s.do, s.args) for s in sc.steps] for sc in (kept, planted)]
    assert plays[0] == plays[1] and len(plays[0]) == 18
