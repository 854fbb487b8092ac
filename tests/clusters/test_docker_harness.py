"""The harness on the Docker backend: a chaos run under kill and partition faults (runner API) is valid in
leader-epoch mode with a safe configuration, and the seeds' data-loss scenario is detected in hw mode."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clusters.docker_hosts import LABEL_RUN

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines() if line.strip()]


def _left_behind(run_id: str) -> list[str]:
    out = []
    for kind in ("container", "network"):
        r = subprocess.run(["docker", kind, "ls", *(["-a"] if kind == "container" else []), "-q",
                            "--filter", f"label={LABEL_RUN}={run_id}"], capture_output=True, text=True, check=True)
        out += r.stdout.split()
    return out


def test_chaos_run_on_docker_is_valid_in_leader_epoch_mode(tmp_path):
    from harness import config as config_mod
    from harness.runner import run_test
    cfg = config_mod.build(None, {
        "backend": "docker", "nodes": 3, "partitions": 2, "replication_factor": 3, "time_limit": 24,
        "nemesis": "kill,partition", "nemesis_interval": 4, "truncation": "leader-epoch", "acks": "all",
        "min_insync_replicas": 2, "unclean_election": False, "rate": 40, "concurrency": 2, "consumers": 1,
        "seed": 11, "results_dir": str(tmp_path / "results"), "checker": "reference", "final_wait": 60,
        "test_name": "docker-chaos"})
    outcome = run_test(cfg)
    assert outcome.problems == []
    assert outcome.exit_code == 0
    assert outcome.results["valid"] is True
    ops = _history(outcome.run_dir)
    started = {op["value"]["fault"] for op in ops
               if op["process"] == "nemesis" and op["type"] == "info" and op["value"].get("phase") == "start"}
    assert started == {"kill", "partition"}
    acked = [op for op in ops if op["type"] == "ok" and op["f"] == "send"]
    assert len(acked) > 100
    test = json.loads((outcome.run_dir / "test.json").read_text())
    assert test["cluster"]["backend"] == "docker"
    assert test["cluster"]["subnet"].startswith("10.213.")
    for node in ("n1", "n2", "n3"):
        assert (outcome.run_dir / "replicas" / node / "p0.jsonl").exists()
        assert (outcome.run_dir / "replicas" / node / "p1.jsonl").exists()
    assert _left_behind(test["run_id"]) == []


@pytest.mark.parametrize("truncation, exit_code, kinds", [("hw", 1, ["lost-write"]), ("leader-epoch", 0, [])])
def test_seed_data_loss_scenario_on_docker(tmp_path, truncation, exit_code, kinds):
    """Detected in hw mode; the same steps in leader-epoch mode lose nothing (so the detection is the
    broker's truncation, not an artefact of the backend)."""
    from harness import scenario as scenario_mod
    from rundir.expectation import found_kinds
    from harness.scenario_runner import run_scenario
    sc = scenario_mod.load(REPO / "scenarios" / "seed-data-loss.toml", truncation=truncation)
    sc.config.cluster.backend = "docker"
    sc.config.results_dir = str(tmp_path / "results")
    outcome, runner = run_scenario(sc)
    assert runner is not None and runner.failed is None, outcome.problems
    assert outcome.exit_code == exit_code
    assert found_kinds(outcome.results) == kinds
    test = json.loads((outcome.run_dir / "test.json").read_text())
    assert test["cluster"]["backend"] == "docker"
