"""Helpers for the end-to-end tests: run `highwater` as a subprocess, and look for anything a run left
behind (processes whose command line names the run directory, its firewall chain or table)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The start of a scenario file for a one-broker cluster (one partition, one replica); a scenario adds its
# own broker settings right after it, then its [checker], [expect] and steps.
ONE_BROKER_SCENARIO = """final_wait = 20
[cluster]
nodes = 1
[topic]
partitions = 1
replication_factor = 1
[broker]
min_insync_replicas = 1
"""

# The first steps of such a scenario: wait until n1 leads, then produce two records (values 0 and 1).
N1_LEADS_THEN_TWO_SENDS = """[[step]]
do = "wait"
leader = "n1"
[[step]]
do = "produce"
count = 2
"""

# A whole scenario of a few seconds: those steps on one broker, expecting nothing (for tests of what the
# harness does around a scenario, not of a staged case)
TWO_SENDS_SCENARIO = 'name = "two-sends"\n' + ONE_BROKER_SCENARIO + """[checker]
engine = "reference"
[expect]
leader-epoch = []

""" + N1_LEADS_THEN_TWO_SENDS


def highwater_argv(*args) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def run_highwater(*args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(highwater_argv(*args), capture_output=True, text=True, cwd=REPO, timeout=timeout, env=env())


def sigterm_when_checking(*args, timeout=300) -> tuple[int, str, str]:
    """Start `highwater ARGS` (with --plain, so phases print one line each), send SIGTERM once the replica
    collection ends (the check starts then), and return (exit code, stdout, stderr)."""
    import signal
    proc = subprocess.Popen(highwater_argv(*args), cwd=REPO, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("highwater: collecting replicas "):
                proc.send_signal(signal.SIGTERM)
                break
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, stdout, "".join(seen) + stderr


def run_dir_from_stdout(stdout: str) -> Path:
    last = stdout.strip().splitlines()[-1]
    assert last.endswith("report.html"), f"last stdout line is not the report path: {last!r}"
    return Path(last).parent


def processes_mentioning(text: str) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd and int(pid) != os.getpid():
            out.append(f"{pid}: {cmd}")
    return out


def firewall_leftovers(run_id: str) -> list[str]:
    from clusters.local_firewall import short_id
    sid = short_id(run_id)
    found = []
    if shutil.which("iptables"):
        r = subprocess.run(["iptables", "-S"], capture_output=True, text=True)
        found += [line for line in r.stdout.splitlines() if f"HW-{sid}" in line or f"highwater:{run_id}" in line]
    if shutil.which("nft"):
        r = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True)
        found += [line for line in r.stdout.splitlines() if f"highwater_{sid}" in line]
    return found


def load_json(path: Path):
    return json.loads(Path(path).read_text())


def found_kinds(results: dict) -> list[str]:
    return sorted(k for k, a in results["anomalies"].items() if a["count"] > 0 and a.get("fails_run", True))
