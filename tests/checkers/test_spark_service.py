"""The shared Spark driver's lifecycle (checkers/spark_service.py), with real servers in directories of
their own: started once however many ask at once, kept while leased, stopped when idle, replaced when
its settings change, stopped by `highwater spark stop` and `highwater cleanup`; and a real check served
by it gives the same results as a private driver."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from checkers import spark_service
from checkers.check import CheckOptions, check_run
from simulated_runs import RunBuilder
import checker_scenarios as cs
from polling import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def _gone(state: dict) -> bool:
    return not any(spark_service._alive(state[k]) for k in ("pid", "jvm_pid"))


def _cli(d: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, **{spark_service.ENV_DIR: str(d)}, **(env or {}))
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)


@pytest.fixture
def service_dir(tmp_path, monkeypatch):
    d = tmp_path / "svc"
    monkeypatch.setenv(spark_service.ENV_DIR, str(d))
    yield d
    state = spark_service._read_state(d)
    spark_service.stop(d)
    if state and "jvm_pid" in state:
        assert _gone(state), "a test's Spark service outlived it"


def test_started_once_kept_while_leased_and_stopped_when_idle(service_dir, monkeypatch):
    monkeypatch.setenv(spark_service.ENV_IDLE, "3")
    got: list[spark_service.Service] = []
    starters = [threading.Thread(target=lambda: got.append(spark_service.ensure())) for _ in range(3)]
    for t in starters:
        t.start()
    for t in starters:
        t.join(300)
    assert len(got) == 3 and len({s.jvm_pid for s in got}) == 1, got
    state = spark_service._read_state(service_dir)
    assert state["url"].startswith("sc://127.0.0.1:") and state["ready"]

    lease = spark_service.Lease(service_dir)
    time.sleep(6)  # twice the idle time: a leased service stays
    assert spark_service.status(service_dir) is not None, "the service stopped while a client held it"
    lease.release()
    wait_until(lambda: _gone(state), timeout=60, what="the idle service to stop")
    assert not (service_dir / "state.json").exists()
    assert "idle for 3 s: stopping" in (service_dir / "supervisor.log").read_text()


def test_check_through_service_equals_private_driver(shared_spark_driver, tmp_path):
    """The test run's shared driver (tests/conftest.py: a service like the others here, started on demand)
    serves the first check; its start and stop are the other tests' subject, so none is started here."""
    service_dir = shared_spark_driver
    b = RunBuilder()
    expected = cs.lost_write(b, 1)
    cs.clean(b, 2)
    b.write(tmp_path / "run")
    via_service = check_run(tmp_path / "run", CheckOptions(write=False))
    assert via_service["checker"]["master"].startswith("local[2] (shared driver sc://127.0.0.1:")
    # PySpark cannot mix Connect and a local driver in one process: the private driver checks in another
    r = _cli(service_dir, "check", str(tmp_path / "run"), "--spark-master", "local[1]", "-o", str(tmp_path / "p.json"))
    assert r.returncode == 1, r.stdout + r.stderr
    private = json.loads((tmp_path / "p.json").read_text())
    assert private["checker"]["master"] == "local[1]"
    # the same server named explicitly, as a Spark Connect URL, by a process that does not use the service
    url = spark_service.status(service_dir).url
    r = _cli(service_dir, "check", str(tmp_path / "run"), "--spark-master", url, "-o", str(tmp_path / "c.json"),
             env={spark_service.ENV_SWITCH: "off"})
    assert r.returncode == 1, r.stdout + r.stderr
    connect = json.loads((tmp_path / "c.json").read_text())
    assert connect["checker"]["master"] == url
    for doc in (via_service, private, connect):
        doc.pop("checker")
        doc["input"].pop("converted")  # the first check converted the history, the second reused it
    assert via_service == private == connect
    assert via_service["anomalies"]["lost-write"]["count"] == expected["counts"]["lost-write"] > 0


@pytest.mark.leftovers
def test_settings_change_replaces_it_and_commands_stop_it(service_dir, monkeypatch):
    first = spark_service.ensure()
    monkeypatch.setenv("HIGHWATER_SPARK_DRIVER_MEMORY", "1g")
    second = spark_service.ensure()
    assert second.jvm_pid != first.jvm_pid and second.key != first.key
    assert _gone({"pid": first.pid, "jvm_pid": first.jvm_pid})

    r = _cli(service_dir, "spark", "status")
    assert r.returncode == 0 and second.url in r.stdout, r.stdout + r.stderr
    r = _cli(service_dir, "spark", "stop")
    assert r.returncode == 0 and r.stdout.strip() == "stopped"
    assert _gone({"pid": second.pid, "jvm_pid": second.jvm_pid})
    assert _cli(service_dir, "spark", "status").returncode == 3

    third = spark_service.ensure()
    with spark_service.lease(service_dir):  # in use: cleanup leaves it
        r = _cli(service_dir, "cleanup", "--no-docker", "--registry", str(service_dir / "registry"))
        assert "a check is using it" in r.stdout and spark_service.status(service_dir) is not None
    r = _cli(service_dir, "cleanup", "--no-docker", "--registry", str(service_dir / "registry"))
    assert r.returncode == 0 and f"stopped shared Spark driver {third.url}" in r.stdout, r.stdout + r.stderr
    assert _gone({"pid": third.pid, "jvm_pid": third.jvm_pid})
    assert not (service_dir / "state.json").exists()
