"""`highwater check --spark-master spark://...` on a real standalone cluster (a master and two workers on
loopback, tests/spark_cluster.py) gives the same results.json as the local default, apart from `checker`.

Each run directory is ingested once beforehand, so both checks read the same columnar tables and report
the same `input` block; each check writes its own results file (--output). The cluster check runs its own
driver (HIGHWATER_SPARK_SERVICE=off), a client of the cluster only, inside the cluster fixture's process
accounting; the local check is served by the test run's shared driver (tests/conftest.py), started
outside the cluster's environment, so the comparison costs no second driver JVM. The cluster fixture stops
every process it started and fails if any process carrying its marker is left.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rundir import formats as rf
from checkers import ingest, synthetic
from simulated_runs import RunBuilder
from spark_cluster import StandaloneCluster, group_alive

import checker_scenarios as sc

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
HIGHWATER = str(Path(sys.executable).with_name("highwater"))
CHECK_TIMEOUT = 900


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1, memory="1g")
    try:
        cluster.start()
        yield cluster
    finally:
        pids = {name: p.pid for name, p in cluster.procs.items()}
        leftover = cluster.stop()
        assert leftover == [], f"processes left by the cluster (now killed): {leftover}"
        assert not [n for n, pid in pids.items() if group_alive(pid)], "a cluster process group survived"


def _scenarios_run(run_dir: Path, chosen) -> dict[str, int]:
    """A JSON run directory of hand-built scenarios; their expected counts by kind."""
    b = RunBuilder()
    expected = [s(b, p) for p, s in enumerate(chosen)]
    b.write(run_dir)
    return {k: sum(e["counts"].get(k, 0) for e in expected) for k in rf.ANOMALY_KINDS}


def _synthetic_run(run_dir: Path) -> dict[str, int]:
    return synthetic.generate(run_dir, 20_000, partitions=2, k=1, seed=3)


RUNS = {
    # Parquet written directly, one anomaly of every injected kind
    "synthetic-anomalies": (_synthetic_run, 1),
    # history.jsonl and replica dumps through ingest; no failing anomaly
    "scenarios-clean": (lambda d: _scenarios_run(d, [sc.clean, sc.tricky_clean]), 0),
    # every hand-built known-answer scenario in one run, one partition each
    "scenarios-all": (lambda d: _scenarios_run(d, sc.SCENARIOS), 1),
}


def _check(env: dict, run_dir: Path, output: Path, *master: str) -> tuple[dict, float]:
    t0 = time.monotonic()
    r = subprocess.run([HIGHWATER, "check", str(run_dir), "--quiet", "--output", str(output), *master],
                       capture_output=True, text=True, timeout=CHECK_TIMEOUT, env=env, cwd=REPO)
    elapsed = time.monotonic() - t0
    assert output.exists(), f"highwater check {' '.join(master)} wrote nothing (exit {r.returncode}):\n{r.stderr[-4000:]}"
    doc = json.loads(output.read_text())
    doc["_exit"] = r.returncode
    return doc, elapsed


# one run kind in the default selection; the others (~3.5 min together) with the nightly marker
@pytest.mark.parametrize("name", [n if n == "scenarios-all" else pytest.param(n, marks=pytest.mark.nightly)
                                  for n in RUNS])
def test_standalone_cluster_matches_local(tmp_path, standalone, name):
    build, exit_code = RUNS[name]
    run_dir = tmp_path / name
    expected = build(run_dir)
    ingest.ingest(run_dir)  # convert now: neither check below converts, so their `input` blocks agree

    apps_before = {a["id"] for a in standalone.applications()}
    cluster_env = {**standalone.client_env(), "PYTHONPATH": str(REPO), "HIGHWATER_SPARK_SERVICE": "off"}
    on_cluster, t_cluster = _check(cluster_env, run_dir, tmp_path / "results-cluster.json",
                                   "--spark-master", standalone.master_url)
    # the shared driver (its directory is in this process's environment); not the cluster's environment,
    # whose spark-defaults.conf a driver started with it would read
    local, t_local = _check({**os.environ, "PYTHONPATH": str(REPO)}, run_dir, tmp_path / "results-local.json")
    print(f"{name}: cluster {t_cluster:.1f} s, local {t_local:.1f} s")

    assert on_cluster["checker"]["master"] == standalone.master_url
    assert local["checker"]["master"].startswith("local[2] (shared driver sc://")
    assert on_cluster["_exit"] == local["_exit"] == exit_code
    assert {k: v for k, v in on_cluster.items() if k != "checker"} == \
        {k: v for k, v in local.items() if k != "checker"}
    assert {k: on_cluster["anomalies"][k]["count"] for k in rf.ANOMALY_KINDS} == \
        {k: expected[k] for k in rf.ANOMALY_KINDS}

    # the work really ran on the workers' executors
    apps = [a for a in standalone.applications() if a["id"] not in apps_before]
    assert [a["name"] for a in apps] == ["highwater-check"], apps
    logs = standalone.executor_logs(apps[0]["id"])
    assert logs, f"no executor ran for {apps[0]['id']}"
    assert any("Running task" in p.read_text(errors="replace") for p in logs), logs

