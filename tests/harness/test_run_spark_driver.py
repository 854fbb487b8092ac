"""A real chaos run checked by Spark, as a user runs it: the terminal shows no JVM or Spark log line, the
driver's lines are in harness.log instead, and no Spark process outlives what asked for it: the shared
driver a run starts stops itself once idle, and with the shared driver switched off nothing survives
the run at all."""
from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from checkers import spark_service
from e2e_helpers import REPO, highwater_argv, run_dir_from_stdout
from polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

# what log4j, the Spark launcher and the JVM print: "26/11/24 00:30:47 WARN SparkConf: ...", "Using Spark's
# default log4j profile", "WARNING: Using incubator modules", "Setting default log level", py4j/JVM traces
JVM_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) |log4j|"
                      r"^WARNING: |setLogLevel|^\s+at (org|java|scala)\.|SparkConf|NativeCodeLoader", re.M)
MARKER = "HIGHWATER_TEST_RUN_MARKER"


def _marked(value: str) -> list[int]:
    needle = f"{MARKER}={value}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                if (needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                        and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"):
                    found.append(int(pid))  # a zombie has exited: only its parent has not collected it
            except (OSError, IndexError):
                continue
    return found


def _run(tmp_path: Path, **env_extra: str) -> tuple[subprocess.CompletedProcess, str]:
    marker = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", MARKER: marker, **env_extra}
    r = subprocess.run(highwater_argv("run", "--time-limit", "5", "--nemesis", "kill", "--plain",
                                      "--results-dir", str(tmp_path / "results")),
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert r.returncode in (0, 1, 2), r.stdout[-2000:] + r.stderr[-2000:]
    return r, marker


def test_run_terminal_is_quiet_and_its_shared_driver_stops_when_idle(tmp_path):
    d = tmp_path / "spark-service"
    r, marker = _run(tmp_path, **{spark_service.ENV_DIR: str(d), spark_service.ENV_IDLE: "5",
                                  spark_service.ENV_WARMUP: "1"})
    assert not JVM_LINE.search(r.stdout + r.stderr), r.stdout + r.stderr
    run_dir = run_dir_from_stdout(r.stdout)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["checker"]["master"].startswith("local[2] (shared driver sc://127.0.0.1:")
    assert results["checker"]["jvm_profile"] == "c1"     # the shared driver's, read from its command line
    # the driver's own log lines went to the run's log instead of the terminal
    assert "spark driver: " in (run_dir / "harness.log").read_text()
    # the run asked for the shared driver; nobody uses it now, so it stops itself after 5 s idle
    wait_until(lambda: not _marked(marker), timeout=90, what="the shared driver to stop when idle")
    assert spark_service.status(d) is None and not (d / "state.json").exists()


def test_run_with_a_private_driver_leaves_no_process(tmp_path):
    r, marker = _run(tmp_path, **{spark_service.ENV_SWITCH: "off",
                                  spark_service.ENV_DIR: str(tmp_path / "unused-service")})
    assert not JVM_LINE.search(r.stdout + r.stderr), r.stdout + r.stderr
    results = json.loads((run_dir_from_stdout(r.stdout) / "results.json").read_text())
    assert results["checker"]["master"] == "local[2]"
    assert results["checker"]["jvm_profile"] == "c1"     # a small input, read from the JVM's own arguments
    # the driver JVM exits when its parent does (it reads the end of its stdin); give it a moment
    wait_until(lambda: not _marked(marker), timeout=20, what="no process of the run left")
    assert not (tmp_path / "unused-service" / "state.json").exists()
