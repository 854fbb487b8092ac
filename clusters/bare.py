"""A bare cluster: a controller and N broker nodes as real local processes on loopback, with no run
directory, registry, firewall or history. For the broker's own tests and the benchmarks that drive the
broker directly (broker_throughput, frame_abuse, kafka_client_throughput, the mutation benchmark's start
check); a harness run uses the local backend (clusters/local.py) instead.

    with BareCluster(tmp_path, brokers=3, broker_settings={"min_insync_replicas": 2},
                      topics=[{"name": "t", "partitions": 1, "replication_factor": 3}]) as c:
        c.controller_address          # ("127.0.0.1", port)
        c.kill(1); c.start_broker(1)  # SIGKILL broker 1, restart it on the same port and data dir

Every process is started with `python -m broker ...`, waited on until it prints `READY host:port`, and
killed (SIGKILL) by `close()`; the context manager guarantees that.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from clusters.base import ClusterError

READY_TIMEOUT_S = 20.0
REPO_ROOT = Path(__file__).resolve().parents[1]    # `python -m broker` runs from here: this checkout's broker


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class NodeProcess:
    """One `python -m broker ...` process; stdout+stderr go to `<dir>/stdout.log`."""

    def __init__(self, name: str, args: list[str], workdir: Path):
        self.name = name
        self.args = args
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.address: tuple[str, int] | None = None

    def start(self) -> tuple[str, int]:
        out = open(self.workdir / "stdout.log", "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "broker", *self.args], stdout=subprocess.PIPE,
                                     stderr=out, env=env, cwd=str(REPO_ROOT))
        line = _read_line_with_timeout(self.proc, READY_TIMEOUT_S)
        if not line.startswith("READY "):
            self.kill()
            tail = (self.workdir / "stdout.log").read_text()[-2000:]
            raise ClusterError(f"{self.name} did not print READY (got {line!r}); output:\n{tail}")
        host, port = line.split()[1].rsplit(":", 1)
        self.address = (host, int(port))
        # keep draining stdout into the log file so the child never blocks on a full pipe
        threading.Thread(target=_drain, args=(self.proc.stdout, out), daemon=True).start()
        return self.address

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout_s: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                return None
        return self.proc.returncode


def _read_line_with_timeout(proc: subprocess.Popen, timeout_s: float) -> str:
    result: list[bytes] = []
    t = threading.Thread(target=lambda: result.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout_s)
    if not result:
        return "<timeout>"
    return result[0].decode(errors="replace").strip()


def _drain(pipe, out) -> None:
    try:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            out.write(chunk)
            out.flush()
    except (OSError, ValueError):
        pass


class BareCluster:
    def __init__(self, workdir: Path | str, *, brokers: int = 3, host: str = "127.0.0.1",
                 broker_settings: dict | None = None, controller_settings: dict | None = None,
                 topics: list[dict] | None = None):
        self.workdir = Path(workdir)
        self.host = host
        self.n = brokers
        self.broker_settings = dict(broker_settings or {})
        self.controller_settings = dict(controller_settings or {})
        self.topics = list(topics or [])
        self.controller: NodeProcess | None = None
        self.brokers: dict[int, NodeProcess] = {}
        self.ports: dict[int, int] = {}

    # --- paths ----------------------------------------------------------------------------------
    def node_dir(self, name: str) -> Path:
        d = self.workdir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def event_log(self, broker_id: int) -> Path:
        return self.node_dir(f"n{broker_id}") / "broker.log"

    def events(self, broker_id: int) -> list[dict]:
        path = self.event_log(broker_id)
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def data_dir(self, broker_id: int) -> Path:
        return self.node_dir(f"n{broker_id}") / "data"

    @property
    def controller_address(self) -> tuple[str, int]:
        return self.controller.address

    # --- life cycle -----------------------------------------------------------------------------
    def start(self) -> "BareCluster":
        cdir = self.node_dir("c0")
        cport = free_port(self.host)
        ccfg = {"host": self.host, "port": cport, "data_dir": str(cdir / "data"), "log_file": str(cdir / "controller.log"),
                "topics": self.topics, "expected_brokers": self.n, **self.controller_settings}
        (cdir / "controller.json").write_text(json.dumps(ccfg, indent=2))
        self.controller = NodeProcess("c0", ["controller", "--config", str(cdir / "controller.json")], cdir)
        self.controller.start()
        for b in range(1, self.n + 1):
            self.ports[b] = free_port(self.host)
            self.start_broker(b)
        return self

    def broker_config(self, broker_id: int) -> dict:
        ndir = self.node_dir(f"n{broker_id}")
        return {"node_id": broker_id, "host": self.host, "port": self.ports[broker_id],
                "controller_host": self.controller.address[0], "controller_port": self.controller.address[1],
                "data_dir": str(self.data_dir(broker_id)), "log_file": str(ndir / "broker.log"),
                **self.broker_settings}

    def start_broker(self, broker_id: int) -> tuple[str, int]:
        ndir = self.node_dir(f"n{broker_id}")
        path = ndir / "broker.json"
        path.write_text(json.dumps(self.broker_config(broker_id), indent=2))
        node = NodeProcess(f"n{broker_id}", ["node", "--config", str(path)], ndir)
        self.brokers[broker_id] = node
        deadline = time.monotonic() + 10
        while True:   # the port of a just-killed broker may linger briefly
            try:
                return node.start()
            except ClusterError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def signal(self, broker_id: int, sig: int) -> None:
        node = self.brokers[broker_id]
        if node.running():
            node.proc.send_signal(sig)

    def close(self) -> None:
        for node in list(self.brokers.values()):
            if node.running():
                node.proc.send_signal(signal.SIGCONT)   # a stopped process cannot be reaped otherwise
            node.kill()
        if self.controller is not None:
            self.controller.kill()

    def __enter__(self) -> "BareCluster":
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = 0.05):
    """Poll `predicate()` until it returns something truthy (returned) or raise TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.1f}s waiting for {what} (last: {last!r})")
