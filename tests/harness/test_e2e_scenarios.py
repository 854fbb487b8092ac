"""End to end on real processes: each shipped scenario shows its anomaly with hw truncation and none
with leader-epoch truncation (`highwater scenario`, real brokers, real iptables, reference checker)."""
from __future__ import annotations

import pytest

from rundir.verdict import failing_kinds
from rundir import formats as runformat
from e2e_helpers import (REPO, TWO_SENDS_SCENARIO, found_kinds, load_json, run_dir_from_stdout, run_highwater,
                         sigterm_when_checking)


def _case(name: str, anomaly: str, mode: str, *marks) -> pytest.param:
    return pytest.param(name, anomaly, mode, marks=marks, id=f"{name}-{mode}")


# the nightly suite replays every one of these with the same expectations; the nightly marker here: the
# seeds' data-loss case in hw mode is also CI's smoke suite's seed-data-loss-hw (suites/smoke.toml), and
# kip-279 and kafka-7128 are left to the nightly suite
NIGHT_ONLY = (("kip-279", "divergence"), ("kafka-7128", "lost-write"))
CASES = [_case("seed-data-loss", "lost-write", "hw", pytest.mark.nightly),
         _case("seed-data-loss", "lost-write", "leader-epoch"),
         _case("seed-divergence", "divergence", "hw"),
         _case("seed-divergence", "divergence", "leader-epoch")] + \
        [_case(name, anomaly, mode, pytest.mark.nightly) for name, anomaly in NIGHT_ONLY
         for mode in ("hw", "leader-epoch")]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("name, anomaly, mode", CASES)
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
def test_scenario_sigterm_during_the_check_exits_2(tmp_path):
    """`highwater scenario` stopped by SIGTERM once its check starts (the steps do not matter: a one-broker
    scenario of two sends, a few seconds, not a staged case of twenty)."""
    f = tmp_path / "two-sends.toml"
    f.write_text(TWO_SENDS_SCENARIO)
    code, stdout, stderr = sigterm_when_checking(
        "scenario", str(f), "--results-dir", str(tmp_path / "res"), "--plain")
    assert "SIGTERM: stopping the run" in stderr
    assert code == 2, stderr


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("mode", ["leader-epoch", pytest.param("hw", marks=pytest.mark.nightly)])
@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "plain-retries"])
def test_idempotent_failover(tmp_path, mode, idempotence):
    """scenarios/idempotent-failover.toml: librdkafka resends a batch the new leader already holds. With
    idempotence the retry is recognised and the value stored once (the run is valid, and a duplicate would
    have failed it); the same scenario with idempotence off and retries on stores it twice (`duplicate`,
    counted, allowed, so still valid and as expected)."""
    text = (REPO / "scenarios" / "idempotent-failover.toml").read_text()
    if not idempotence:
        text = text.replace("idempotence = true", "idempotence = false\nretries = 3")
    path = tmp_path / "idempotent-failover.toml"
    path.write_text(text)
    r = run_highwater("scenario", str(path), "--truncation", mode, "--results-dir", str(tmp_path / "results"),
                      "--checker", "reference", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    timeline = load_json(run_dir / "scenario.json")
    assert timeline["failed"] is None, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert r.returncode == 0, r.stderr
    assert results["valid"] is True
    if idempotence:
        assert "duplicate" in failing_kinds(results) and found_kinds(results) == []
    else:
        assert "duplicate" not in failing_kinds(results)
        assert results["anomalies"]["duplicate"]["count"] == 1, results["anomalies"]["duplicate"]

