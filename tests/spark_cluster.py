"""A real Spark standalone cluster on loopback for tests: one master and N workers from the installed pyspark.

`StandaloneCluster(base_dir, workers=2).start()` launches `bin/spark-class ...Master` and `...Worker` (each in
its own process group, SPARK_LOCAL_IP=127.0.0.1, free ports picked now, conf/work/log directories under
`base_dir`, a spark-defaults.conf there that drivers started with `client_env()` read too) and waits, bounded, until the master's JSON page lists every worker ALIVE. `stop()` ends the
process groups it started (SIGTERM, then SIGKILL) and returns every process still carrying the cluster's
marker variable (HIGHWATER_TEST_SPARK_CLUSTER=<id>, inherited by executors, Python daemons and drivers
started with `client_env()`), after SIGKILLing those by PID: an empty list means nothing was left behind.

Reusable for other cluster kinds (a Spark Connect server is one more `spark-class` process: `launch`).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from polling import wait_until

MARKER = "HIGHWATER_TEST_SPARK_CLUSTER"
LOOPBACK = "127.0.0.1"


def spark_home() -> Path:
    """The installed pyspark's own distribution (bin/spark-class, jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def marked_pids(marker_value: str) -> list[int]:
    """PIDs of this user's processes whose environment carries MARKER=marker_value."""
    needle = f"{MARKER}={marker_value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry.name))
    return found


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StandaloneCluster:
    def __init__(self, base_dir: Path, workers: int = 2, *, cores: int = 1, memory: str = "1g",
                 daemon_memory: str = "256m", start_timeout: float = 90.0):
        self.base = Path(base_dir)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.start_timeout = start_timeout
        self.id = uuid.uuid4().hex
        self.conf_dir = self.base / "conf"
        self.log_dir = self.base / "logs"
        self.procs: dict[str, subprocess.Popen] = {}
        self.port = self.webui_port = 0

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def master_json_url(self) -> str:
        return f"http://{LOOPBACK}:{self.webui_port}/json/"

    def env(self) -> dict[str, str]:
        """Environment of every cluster process: loopback only, an empty conf dir, small daemon heaps."""
        return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": LOOPBACK,
                "SPARK_CONF_DIR": str(self.conf_dir), "SPARK_LOG_DIR": str(self.log_dir),
                "SPARK_DAEMON_MEMORY": self.daemon_memory, "PYSPARK_PYTHON": sys.executable, MARKER: self.id}

    def client_env(self) -> dict[str, str]:
        """Environment for a driver (e.g. `highwater check --spark-master ...`) talking to this cluster."""
        return self.env()

    def launch(self, name: str, *args: str) -> subprocess.Popen:
        """Start `bin/spark-class ARGS` in its own process group, output to logs/<name>.log."""
        log = open(self.log_dir / f"{name}.log", "ab")
        try:
            proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self.env(),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.base, start_new_session=True)
        finally:
            log.close()
        self.procs[name] = proc
        return proc

    def master_state(self) -> dict:
        with urllib.request.urlopen(self.master_json_url, timeout=5) as r:
            return json.load(r)

    def alive_workers(self) -> int:
        return sum(1 for w in self.master_state().get("workers", []) if w.get("state") == "ALIVE")

    def applications(self) -> list[dict]:
        """Running and finished applications as the master lists them (id, name, cores, ...)."""
        state = self.master_state()
        return state.get("activeapps", []) + state.get("completedapps", [])

    def executor_logs(self, app_id: str) -> list[Path]:
        """The stderr of every executor the workers ran for `app_id`."""
        return sorted((self.base / "work").glob(f"worker*/{app_id}/*/stderr"))

    def _check_running(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode} at start-up:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.log_dir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def start(self) -> "StandaloneCluster":
        for d in (self.conf_dir, self.log_dir, self.base / "work"):
            d.mkdir(parents=True, exist_ok=True)
        # read by the master, the workers and every driver started with client_env(): no REST submission
        # server (it would take the fixed port 6066), executors as small as the workers offer
        (self.conf_dir / "spark-defaults.conf").write_text(
            f"spark.master.rest.enabled false\nspark.executor.memory {self.memory}\n")
        self.port, self.webui_port = free_port(), free_port()
        self.launch("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                    "--port", str(self.port), "--webui-port", str(self.webui_port))
        for i in range(1, self.workers + 1):
            work = self.base / "work" / f"worker{i}"
            work.mkdir(parents=True, exist_ok=True)
            self.launch(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.master_url,
                        "--host", LOOPBACK, "--port", str(free_port()), "--webui-port", str(free_port()),
                        "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work))

        def ready() -> bool:
            self._check_running()
            return self.alive_workers() == self.workers

        wait_until(ready, timeout=self.start_timeout, interval=0.5,
                   what=f"{self.workers} ALIVE workers at {self.master_json_url}",
                   retry_on=(OSError, ValueError))
        return self

    def stop(self, timeout: float = 20.0) -> list[int]:
        """Stop every process group started here (workers first); SIGKILL what remains and return the PIDs
        of processes that were still carrying the marker after that (killed now, but a leak all the same)."""
        order = sorted(self.procs, key=lambda n: n == "master")
        for name in order:
            try:
                os.killpg(self.procs[name].pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        for name in order:
            proc = self.procs[name]
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            while group_alive(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if group_alive(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.wait(10)
        leftover = marked_pids(self.id)
        for pid in leftover:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return leftover

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
