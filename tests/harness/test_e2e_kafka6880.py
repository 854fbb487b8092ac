"""End to end on real processes: KAFKA-6880, the zombie fetcher (scenarios/kafka-6880*.toml). Without
KIP-320 fencing the zombie n2 is served by n1 in epoch 2 and keeps its x1 x2 (values 1, 2) where n1 and
n3 hold c1 c2 (values 3, 4): a divergence at offsets 1-2 in both truncation modes. With fencing n1
refuses it and nothing diverges. Real brokers, real SIGSTOP and iptables, reference checker."""
from __future__ import annotations

import json

import pytest

from rundir import formats as runformat
from e2e_helpers import REPO, found_kinds, load_json, run_dir_from_stdout, run_highwater

ZOMBIE_FETCH = {"partition": 0, "replica": 2, "request": "fetch", "request_epoch": 0, "leader_epoch": 2}


def node_events(run_dir, node: str, event: str) -> list[dict]:
    out = []
    for line in (run_dir / runformat.NODES_DIR / node / runformat.BROKER_LOG).read_text().splitlines():
        obj = json.loads(line)
        if obj["event"] == event:
            out.append({k: v for k, v in obj.items() if k not in ("ts", "node", "event")})
    return out


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("fencing, mode", [
    pytest.param(False, "hw", id="unfenced-hw"),
    pytest.param(True, "leader-epoch", id="fenced-leader-epoch"),
    # the other two pairs: the nightly suite replays all four with the same expectations
    pytest.param(False, "leader-epoch", id="unfenced-leader-epoch", marks=pytest.mark.nightly),
    pytest.param(True, "hw", id="fenced-hw", marks=pytest.mark.nightly),
])
def test_kafka_6880(tmp_path, fencing, mode):
    name = "kafka-6880" if fencing else "kafka-6880-unfenced"
    r = run_highwater("scenario", str(REPO / "scenarios" / f"{name}.toml"), "--truncation", mode,
                      "--results-dir", str(tmp_path), "--checker", "reference", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    timeline = load_json(run_dir / "scenario.json")
    assert timeline["failed"] is None, r.stderr
    # every step played out, the asserts too; the one assert of the other truncation mode is skipped
    outcomes = {s["step"]: s["outcome"] for s in timeline["steps"]}
    mode_only = {29: "hw", 30: "leader-epoch"} if fencing else {30: "leader-epoch"}
    for step, its_mode in mode_only.items():
        assert outcomes.pop(step) == ("ok" if its_mode == mode else "skipped"), step
    assert set(outcomes.values()) == {"ok"}, outcomes
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert "as expected" in r.stderr and "NOT as expected" not in r.stderr
    if fencing:
        assert r.returncode == 0, r.stderr
        assert found_kinds(results) == []
        assert node_events(run_dir, "n1", "fetch-fenced") == [{**ZOMBIE_FETCH, "error": "FENCED_LEADER_EPOCH"}]
        assert node_events(run_dir, "n1", "stale-fetch-served") == []
        # n2 hears from the controller again and cuts x1 x2
        why = "hw" if mode == "hw" else "leader-epoch"
        # flush = "always": the line also says what the log counts as fsynced after the cut
        assert node_events(run_dir, "n2", "truncate") == [{"partition": 0, "from": 3, "to": 1, "why": why,
                                                           "flushed": 1, "log_start": 0}]
    else:
        assert r.returncode == 1, r.stderr
        assert found_kinds(results) == ["divergence"]
        examples = results["anomalies"]["divergence"]["examples"]
        assert [(e["offset"], {n: rep["record"]["value"] for n, rep in e["replicas"].items()}) for e in examples] == [
            (1, {"n1": 3, "n2": 1, "n3": 3}), (2, {"n1": 4, "n2": 2, "n3": 4})]
        assert node_events(run_dir, "n1", "stale-fetch-served") == [ZOMBIE_FETCH]
        assert node_events(run_dir, "n1", "fetch-fenced") == []
        assert node_events(run_dir, "n2", "truncate") == []
    if mode == "leader-epoch":
        # n2's one OffsetsForLeaderEpoch round after the heal: asked about its latest epoch (0 if it was
        # fenced; 2 if it copied a3 as a zombie, and then nothing is cut)
        asked, cut = (0, 1) if fencing else (2, None)
        assert [(q["epoch"], q["current_epoch"], q["error"], q["truncate_to"])
                for q in node_events(run_dir, "n2", "epoch-query")] == [(asked, 2, None, cut)]


def test_the_two_files_stage_the_same_steps():
    """Only the switch, the expectation and the asserts on what the switch changes differ (fast: parse only)."""
    from harness import scenario

    fenced = scenario.load(REPO / "scenarios" / "kafka-6880.toml")
    unfenced = scenario.load(REPO / "scenarios" / "kafka-6880-unfenced.toml")
    assert (fenced.config.broker.fetch_fencing, unfenced.config.broker.fetch_fencing) == (True, False)
    assert fenced.expect == {"hw": [], "leader-epoch": []}
    assert unfenced.expect == {"hw": ["divergence"], "leader-epoch": ["divergence"]}
    plays = [[(s.do, s.args) for s in sc.steps if s.do != "assert"] for sc in (fenced, unfenced)]
    assert plays[0] == plays[1] and len(plays[0]) == 26
    assert [s.args["event"] for s in fenced.steps if s.do == "assert"] == [
        "fetch-fenced", "stale-fetch-served", "truncate", "epoch-query"]
    assert [s.args["event"] for s in unfenced.steps if s.do == "assert"] == [
        "stale-fetch-served", "fetch-fenced", "truncate", "epoch-query"]
