"""End to end on real processes: each shipped scenario shows its anomaly with hw truncation and none
with leader-epoch truncation (`highwater scenario`, real brokers, real iptables, reference checker)."""
from __future__ import annotations

import pytest

from rundir import formats as runformat
from e2e_helpers import REPO, found_kinds, load_json, run_dir_from_stdout, run_highwater, sigterm_when_checking

CASES = [pytest.param("seed-data-loss", "lost-write", id="seed-data-loss"),
         pytest.param("seed-divergence", "divergence", id="seed-divergence"),
         # the nightly suite replays these two with the same expectations (nightly marker here)
         pytest.param("kip-279", "divergence", marks=pytest.mark.nightly, id="kip-279"),
         pytest.param("kafka-7128", "lost-write", marks=pytest.mark.nightly, id="kafka-7128")]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("mode", ["hw", "leader-epoch"])
@pytest.mark.parametrize("name, anomaly", CASES)
def test_scenario(tmp_path, name, anomaly, mode):
    r = run_highwater("scenario", str(REPO / "scenarios" / f"{name}.toml"), "--truncation", mode,
                      "--results-dir", str(tmp_path), "--checker", "reference", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    timeline = load_json(run_dir / "scenario.json")
    assert timeline["failed"] is None, f"{r.stderr}"
    assert all(s["outcome"] == "ok" or (s["outcome"] == "skipped" and mode not in s.get("mode", [mode]))
               for s in timeline["steps"])
    results = load_json(run_dir / runformat.RESULTS_JSON)
    final = load_json(run_dir / runformat.FINAL_JSON)
    assert all(p["recovered"] for p in final["partitions"]), final
    if mode == "hw":
        assert r.returncode == 1, r.stderr
        assert results["valid"] is False
        assert anomaly in found_kinds(results)
        assert "as expected" in r.stderr and "NOT as expected" not in r.stderr
    else:
        assert r.returncode == 0, r.stderr
        assert results["valid"] is True
        assert found_kinds(results) == []
    # the history records the scenario's faults as nemesis operations, each start with its stop
    nemesis = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.NEMESIS)]
    starts = {op["value"]["id"] for op in nemesis if op["type"] == "info" and op["value"]["phase"] == "start"}
    stops = {op["value"]["id"] for op in nemesis if op["type"] == "info" and op["value"]["phase"] == "stop"}
    assert starts and starts == stops


@pytest.mark.slow
@pytest.mark.root
def test_scenario_sigterm_during_the_check_exits_2(tmp_path):
    code, stdout, stderr = sigterm_when_checking(
        "scenario", str(REPO / "scenarios" / "seed-data-loss.toml"), "--truncation", "leader-epoch",
        "--results-dir", str(tmp_path), "--checker", "reference", "--plain")
    assert "SIGTERM: stopping the run" in stderr
    assert code == 2, stderr
