"""Shared pytest set-up: skip marked tests only when what they need truly cannot run here, saying why."""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys

import pytest


def _docker_engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client installed"
    try:
        r = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if r.returncode != 0:
        return "no Docker engine answers (" + (r.stderr.strip().splitlines() or ["?"])[-1] + ")"
    return None


def pytest_collection_modifyitems(config, items):
    docker_problem = None
    docker_checked = False
    for item in items:
        if "docker" in item.keywords:
            if not docker_checked:
                docker_problem, docker_checked = _docker_engine_problem(), True
            if docker_problem:
                item.add_marker(pytest.mark.skip(reason=f"Docker test skipped: {docker_problem}"))
        if "browser" in item.keywords and not (shutil.which("chromium") or shutil.which("chromium-browser")):
            item.add_marker(pytest.mark.skip(reason="browser test skipped: Debian package 'chromium' not installed"))
        if "root" in item.keywords and os.geteuid() != 0:
            item.add_marker(pytest.mark.skip(reason="needs root (iptables / network namespaces)"))


LEFTOVERS_LOCK = "/tmp/highwater-tests-leftovers.lock"
NFQUEUE_LOCK = "/tmp/highwater-tests-nfqueue.lock"


@contextlib.contextmanager
def _flock(path: str, mode: int):
    with open(path, "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _machine_locks(request):
    """Machine-wide locks, shared by every pytest worker (and every test run on the machine):

    - `leftovers`: one test at a time. `highwater cleanup` sweeps machine-wide firewall objects whose
      owner is dead, so one test's cleanup would otherwise take the chain another test planted between
      that test's dry run and its real run.
    - `nfqueue`: tests that hold packets in a netfilter queue (the local backend's delayers) share the
      lock; `nfqueue(flushes=True)` tests take it alone. A flushing test deletes an nft base chain, and
      the kernel then drops every packet queued in any netfilter queue of the network namespace (hook
      unregistration flushes them all), so a delay test would count a held datagram as lost.

    Unmarked tests pass straight through."""
    with contextlib.ExitStack() as stack:
        if request.node.get_closest_marker("leftovers") is not None:
            stack.enter_context(_flock(LEFTOVERS_LOCK, fcntl.LOCK_EX))
        nfq = request.node.get_closest_marker("nfqueue")
        if nfq is not None:
            stack.enter_context(_flock(NFQUEUE_LOCK, fcntl.LOCK_EX if nfq.kwargs.get("flushes") else fcntl.LOCK_SH))
        yield


@pytest.fixture(scope="session", autouse=True)
def shared_spark_driver(tmp_path_factory):
    """The test run's own shared Spark driver (checkers/spark_service.py), in a directory of its own: every
    Spark test, and every `highwater` command the tests start, uses it (warm after the first check), and
    none touches the user's. It starts only when a test first needs it and is stopped when the tests end;
    nothing of it may outlive them.

    PYSPARK_PYTHON is set for the tests' processes too: the driver's settings (its key) name the Python of
    its Spark workers, by default the asking process's sys.executable, which is .venv/bin/python3.11 in a
    `highwater` script and .venv/bin/python under `python -m`; two spellings of one interpreter would
    make each replace the driver the other started, and an in-process session (tests/checkers/conftest.py)
    would be left talking to a stopped server."""
    from checkers import spark_service

    d = tmp_path_factory.mktemp("spark-service")
    saved = {k: os.environ.get(k) for k in (spark_service.ENV_DIR, "PYSPARK_PYTHON")}
    os.environ[spark_service.ENV_DIR] = str(d)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        yield d
    finally:
        state = spark_service._read_state(d) or {}
        spark_service.stop(d)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        left = [p for p in (state.get("pid"), state.get("jvm_pid")) if isinstance(p, int) and spark_service._alive(p)]
        assert not left, f"the test run's shared Spark driver outlived it: pids {left}"
