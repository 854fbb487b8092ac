"""Helpers for the broker tests that drive real processes: a Python writer run until it reports ready and
then SIGKILLed (a crash mid-write), and waiting for a partition's leader with the full ISR.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from clusters.bare import wait_until

REPO = Path(__file__).resolve().parents[2]


def run_then_sigkill(script: str, *args: str) -> str:
    """Run `python -c script *args` in the repository, wait for its first stdout line, SIGKILL it and
    return that line (with its newline). A writer that exits before printing fails with its stderr."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.strip():
            raise AssertionError(f"writer died: {proc.stderr.read()}")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return line


def wait_full_isr(admin, topic: str, timeout_s: float, what: str, *, replica_states: bool = True,
                  isr_size: int = 3):
    """Partition 0 of `topic` once it has a leader and `isr_size` in-sync replicas (and, with
    `replica_states`, a reported state for every replica); fails with `what` after `timeout_s`."""
    def ready():
        d = admin.describe(topic)
        if not d or d[0].leader is None or len(d[0].isr) != isr_size:
            return None
        if replica_states and not all(s is not None for s in d[0].replica_state.values()):
            return None
        return d[0]
    return wait_until(ready, timeout_s, what)
