"""One local server process of a node: spawn, readiness, signals, graceful stop.

A node process runs in its own session (so a Ctrl-C aimed at the harness does not hit it; the harness
stops it deliberately), with stdout and stderr appended to the node's stdout.log. Ready means: the
process wrote `READY host:port` to stdout after this spawn, and a TCP connect to host:port succeeds.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from clusters.base import ClusterError, NodeAddress
from clusters.run_registry import proc_start_time, proc_state


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no output file)"
    chunk = text.splitlines()[-lines:]
    return "\n".join("    " + ln for ln in chunk) if chunk else "    (empty)"


class NodeProcess:
    """The server of the node at `address` (its name, and the host:port it must be ready on), run as
    `argv` in `cwd` with output appended to `stdout_path`."""

    def __init__(self, address: NodeAddress, argv: list[str], stdout_path: Path, cwd: Path,
                 env: dict[str, str] | None = None):
        self.node, self.host, self.port = address.name, address.host, address.port
        self.argv = argv
        self.stdout_path, self.cwd, self.env = stdout_path, cwd, env
        self.proc: subprocess.Popen | None = None
        self.start_time: int | None = None
        self._ready_offset = 0

    # --- state -----------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def state(self) -> str | None:
        """Kernel process state letter (T = stopped), None when not running."""
        return proc_state(self.proc.pid) if self.alive() else None

    # --- lifecycle ---------------------------------------------------------------------------------
    def spawn(self) -> None:
        if self.alive():
            raise ClusterError(f"{self.node}: already running (pid {self.pid})")
        self.stdout_path.parent.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        self._term_sent = False
        with open(self.stdout_path, "ab") as out:
            self._ready_offset = out.tell()
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.cwd, env=self.env,
                                         start_new_session=True)
        self.start_time = proc_start_time(self.proc.pid) or 0

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        want = f"READY {self.host}:{self.port}"
        seen_ready = False
        while time.monotonic() < deadline:
            code = self.proc.poll() if self.proc else -1
            if code is not None:
                raise ClusterError(f"{self.node} exited with status {code} before it was ready "
                                   f"(command: {' '.join(self.argv)}); last lines of {self.stdout_path}:\n"
                                   f"{tail(self.stdout_path)}")
            if not seen_ready:
                seen_ready = self._ready_line_seen(want)
            if seen_ready and self._connects():
                return
            time.sleep(0.05)
        what = "accepted no TCP connection" if seen_ready else f"printed no '{want}' line"
        raise ClusterError(f"{self.node} was not ready within {timeout_s:.0f}s: it {what} "
                           f"(pid {self.pid}); last lines of {self.stdout_path}:\n{tail(self.stdout_path)}")

    def _ready_line_seen(self, want: str) -> bool:
        try:
            with open(self.stdout_path, "rb") as fh:
                fh.seek(self._ready_offset)
                data = fh.read().decode(errors="replace")
        except OSError:
            return False
        return any(line.strip() == want for line in data.splitlines())

    def _connects(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0):
                return True
        except OSError:
            return False

    def signal(self, sig: int) -> None:
        if not self.alive():
            raise ClusterError(f"{self.node}: not running, cannot send {signal.Signals(sig).name}")
        os.kill(self.proc.pid, sig)

    def kill(self) -> int:
        """SIGKILL and reap; returns the pid that was killed."""
        pid = self.pid
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        return pid

    def request_stop(self) -> None:
        """SIGTERM, plus SIGCONT so a stopped (paused) process can act on it."""
        self._term_sent = self.alive()
        if self._term_sent:
            os.kill(self.proc.pid, signal.SIGTERM)
            os.kill(self.proc.pid, signal.SIGCONT)

    def finish_stop(self, deadline: float) -> str:
        """Wait for the exit until `deadline` (monotonic), then SIGKILL. Returns what happened."""
        if self.proc is None:
            return f"{self.node} never started"
        pid = self.proc.pid
        if self.proc.poll() is not None:
            after = " after SIGTERM" if getattr(self, "_term_sent", False) else ""
            return f"{self.node} pid {pid} exited {self.proc.returncode}{after}"
        try:
            code = self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            return f"{self.node} pid {pid} exited {code} after SIGTERM"
        except subprocess.TimeoutExpired:
            # a hung node: SIGABRT first, so Python's faulthandler (PYTHONFAULTHANDLER=1 in the node's
            # environment) writes every thread's stack to stdout.log, then SIGKILL
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1.0)
            if self.proc.poll() is None:
                os.kill(pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            return (f"{self.node} pid {pid} SIGKILLed after the grace period (stacks dumped to "
                    f"{self.stdout_path})")

    def terminate(self, grace_s: float) -> str:
        self.request_stop()
        return self.finish_stop(time.monotonic() + grace_s)
