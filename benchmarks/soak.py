"""A long chaos run in the safe configuration, sampling the memory and open files of the harness and of
every broker, to show that neither grows with time (issue 28).

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--every 30] [--results-dir DIR] [--json FILE]

Runs `highwater run` (local backend, leader-epoch truncation, acks=all, min.insync.replicas 2, brokers
with power-loss emulation) for `minutes` with the faults kill, kill-leader, partition, partition-leader,
pause, pause-leader, power-loss-leader, disk-full and disk-full-leader drawn at random. Every `every`
seconds it samples the RSS (MiB) and the open fds of the harness process and of each broker process (the
harness's descendants whose command line is a broker's; a broker restarted by the nemesis is a new process
with the same node name). Prints each sample, then for the harness and the brokers (summed) the first
sample after warm-up (the second sample) against the last (for brokers, the mean over those running at
the sample), and the verdict.

Target: VALID, and the last sample within 20% of the first after warm-up, for RSS and for fds.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from broker.protocol import probe  # noqa: E402

FAULTS = "kill,kill-leader,partition,partition-leader,pause,pause-leader,power-loss-leader,disk-full,disk-full-leader"
TARGET = 0.20


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def _descendants(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _broker_node(pid: int) -> str | None:
    """The node name (n1, ...) of a broker process, from its `--config .../nodes/<node>/broker.json`."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for a in argv:
        if a.endswith(b"/broker.json"):
            return Path(a.decode()).parent.name
    return None


def sample(harness: int) -> dict:
    brokers = {}
    for pid in _descendants(harness):
        node = _broker_node(pid)
        if node is not None:
            try:
                brokers[node] = {"rss_mib": probe.rss_mib(pid), "fds": probe.fd_count(pid)}
            except (OSError, ValueError):
                pass
    return {"t": time.monotonic(), "harness": {"rss_mib": probe.rss_mib(harness), "fds": probe.fd_count(harness)},
            "brokers": brokers}


def _mean(s: dict, key: str) -> float:
    """The mean over the brokers running at the sample (one down for a fault is left out, not counted 0)."""
    vals = [b[key] for b in s["brokers"].values()]
    return sum(vals) / len(vals) if vals else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--results-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    results = a.results_dir or Path(tempfile.mkdtemp(prefix="hw-soak-"))
    cmd = [sys.executable, "-m", "harness.cli", "run", "--time-limit", str(a.minutes * 60), "--seed", str(a.seed),
           "--nemesis", FAULTS, "--power-loss", "--acks", "all", "--truncation", "leader-epoch",
           "--results-dir", str(results), "--test-name", "soak", "--plain"]
    print("running:", " ".join(cmd[1:]), flush=True)
    log_path = results / "soak-harness-output.txt"
    results.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
    samples = []
    start = time.monotonic()
    next_at = start + a.every
    while proc.poll() is None:
        if time.monotonic() >= next_at and time.monotonic() - start < a.minutes * 60:
            next_at += a.every
            try:
                s = sample(proc.pid)
            except (OSError, ValueError):
                continue
            samples.append(s)
            print(f"{s['t'] - start:6.0f} s  harness rss {s['harness']['rss_mib']:6.1f} MiB fds {s['harness']['fds']:4d}"
                  f"  brokers " + "  ".join(f"{n} {b['rss_mib']:5.1f} MiB/{b['fds']} fds"
                                            for n, b in sorted(s['brokers'].items())), flush=True)
        time.sleep(0.5)
    lines = log_path.read_text(errors="replace").splitlines()
    verdict = next((ln for ln in reversed(lines) if "highwater: " in ln and "(exit" in ln), "no verdict line")
    print(verdict)
    out = {"verdict": verdict, "exit": proc.returncode, "samples": samples}
    ok = proc.returncode == 0
    if len(samples) >= 3:
        first, last = samples[1], samples[-1]
        for label, f_val, l_val in (
                ("harness rss MiB", first["harness"]["rss_mib"], last["harness"]["rss_mib"]),
                ("harness fds", first["harness"]["fds"], last["harness"]["fds"]),
                ("broker rss MiB (mean)", _mean(first, "rss_mib"), _mean(last, "rss_mib")),
                ("broker fds (mean)", _mean(first, "fds"), _mean(last, "fds"))):
            change = (l_val - f_val) / f_val if f_val else 0.0
            flat = abs(change) <= TARGET
            ok = ok and flat
            out[label] = {"first": f_val, "last": l_val, "change": round(change, 4)}
            print(f"{label:<22} first after warm-up {f_val:8.1f}  last {l_val:8.1f}  change {change:+6.1%}  "
                  f"{'flat' if flat else 'OVER TARGET'}")
    else:
        print("too few samples to compare (run longer or sample more often)")
    if a.json:
        a.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
