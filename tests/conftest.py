"""Shared pytest set-up: skip marked tests only when what they need truly cannot run here, saying why."""
from __future__ import annotations

import os
import shutil
import subprocess

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


@pytest.fixture(scope="session", autouse=True)
def shared_spark_driver(tmp_path_factory):
    """The test run's own shared Spark driver (checkers/spark_service.py), in a directory of its own: every
    Spark test, and every `highwater` command the tests start, uses it (warm after the first check), and
    none touches the user's. It starts only when a test first needs it and is stopped when the tests end;
    nothing of it may outlive them."""
    from checkers import spark_service

    d = tmp_path_factory.mktemp("spark-service")
    old = os.environ.get(spark_service.ENV_DIR)
    os.environ[spark_service.ENV_DIR] = str(d)
    try:
        yield d
    finally:
        state = spark_service._read_state(d) or {}
        spark_service.stop(d)
        if old is None:
            os.environ.pop(spark_service.ENV_DIR, None)
        else:
            os.environ[spark_service.ENV_DIR] = old
        left = [p for p in (state.get("pid"), state.get("jvm_pid")) if isinstance(p, int) and spark_service._alive(p)]
        assert not left, f"the test run's shared Spark driver outlived it: pids {left}"
