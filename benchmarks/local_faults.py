"""Figures for the local backend and its faults on the real broker: cluster start, kill -> restart ready,
pause/resume, partition install/heal (iptables when root), teardown.

    .venv/bin/python benchmarks/local_faults.py [--brokers 3] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusters.base import ClusterSpec  # noqa: E402
from clusters.local import LocalCluster  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        spec = ClusterSpec(f"bench-{os.getpid()}", Path(tmp), brokers=args.brokers,
                           controller_settings={"topics": [{"name": "hw", "partitions": 3,
                                                            "replication_factor": min(3, args.brokers)}]})
        c = LocalCluster(spec)
        try:
            figures["start (controller + brokers ready), ms"] = [timed(c.start)]
            for _ in range(args.rounds):
                figures.setdefault("kill (SIGKILL + reap), ms", []).append(timed(lambda: c.kill("n1")))
                figures.setdefault("restart until READY + connect, ms", []).append(timed(lambda: c.restart("n1")))
                figures.setdefault("pause (until state T), ms", []).append(timed(lambda: c.pause("n2")))
                figures.setdefault("resume, ms", []).append(timed(lambda: c.resume("n2")))
                if os.geteuid() == 0:
                    pairs = [("n1", n) for n in c.nodes() if n != "n1"] + [(n, "n1") for n in c.nodes() if n != "n1"]
                    figures.setdefault(f"partition install ({len(pairs)} drops), ms", []).append(
                        timed(lambda: c.drop(pairs)))
                    figures.setdefault("heal, ms", []).append(timed(c.heal))
            figures["stop_all (SIGTERM, graceful), ms"] = [timed(c.stop_all)]
        finally:
            figures["teardown, ms"] = [timed(c.teardown)]
    print(f"local backend, {args.brokers} brokers, {args.rounds} rounds, python {sys.version.split()[0]}")
    for name, values in figures.items():
        print(f"  {name:45s} median {statistics.median(values):8.1f}   max {max(values):8.1f}")


if __name__ == "__main__":
    main()
