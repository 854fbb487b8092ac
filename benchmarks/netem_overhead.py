"""What degradation costs the broker: acks=all throughput of a local 3-broker cluster (real processes) with
no degradation, with the degradation machinery in place at 0 ms (pure overhead), and with a delay on every
link between the nodes.

    .venv/bin/python benchmarks/netem_overhead.py [--rounds 3] [--seconds 6] [--delay-ms 5] [--jitter-ms 1]

Needs root (clusters/local_netem.py: the run's mangle chain and delayer processes). The cluster is the local
backend's (clusters/local.py, one 127.x address per node, RF=3, min.insync.replicas=2); the measurement is
benchmarks/broker_throughput.py's `run_phase` (client threads sending batches with acks=all). Every link
between two nodes (replication fetches, controller traffic) is degraded; the clients, on 127.0.0.1, are
not nodes and their links stay as they are. The variants alternate within each round (their order rotates)
so drift of a shared machine hits them alike (a warm-up phase comes first and is not counted); the figure is the median over rounds, and the ratios are to
the undegraded median.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_throughput import TOPIC, add_load_options, run_phase, wait_full_isrs  # noqa: E402
from clusters.base import ClusterSpec  # noqa: E402
from clusters.local import LocalCluster  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    add_load_options(ap, seconds=6.0, flush=False)
    ap.add_argument("--delay-ms", type=float, default=5.0)
    ap.add_argument("--jitter-ms", type=float, default=1.0)
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("netem_overhead: needs root (degradation installs iptables rules)", file=sys.stderr)
        return 2
    variants = {"none": None, "0 ms in place": (0.0, 0.0),
                f"{args.delay_ms:g} ms +- {args.jitter_ms:g} ms": (args.delay_ms, args.jitter_ms)}
    results: dict[str, list[dict]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="hw-netem-bench-") as tmp:
        spec = ClusterSpec(f"netem-bench-{os.getpid()}", Path(tmp), brokers=3,
                           broker_settings={"min_insync_replicas": 2, "flush": "always"},
                           controller_settings={"topics": [{"name": TOPIC, "partitions": args.partitions,
                                                            "replication_factor": 3}]})
        c = LocalCluster(spec)
        try:
            c.check_faults(["degrade"])
            c.start()
            ctl = (c.controller().host, c.controller().port)
            wait_full_isrs(ctl, args.partitions)
            links = [(a, b) for a in c.nodes() for b in c.nodes() if a != b]
            print(f"3 brokers, RF=3, min.insync.replicas=2, flush=always, {args.partitions} partitions, acks=all, "
                  f"{args.threads} client threads x {args.batch} values per send, {args.seconds:g} s per phase, "
                  f"{args.rounds} rounds; degraded: all {len(links)} links between nodes", flush=True)
            run_phase(ctl, "all", args.threads, args.batch, args.partitions, min(3.0, args.seconds))  # warm-up
            names = list(variants)
            for r in range(args.rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    setting = variants[name]
                    if setting is not None:
                        c.degrade(links, delay_ms=setting[0], jitter_ms=setting[1])
                    try:
                        res = run_phase(ctl, "all", args.threads, args.batch, args.partitions, args.seconds)
                    finally:
                        if setting is not None:
                            c.restore()
                    results[name].append(res)
                    print(f"  round {r + 1} {name:>16}: {res['writes_per_s']:8.0f} writes/s  p50 {res['p50_ms']:6.2f} ms"
                          f"  p99 {res['p99_ms']:6.2f} ms" + (f"  errors {res['errors']}" if res["errors"] else ""),
                          flush=True)
        finally:
            c.teardown()
    base = statistics.median(x["writes_per_s"] for x in results["none"])
    print("median over rounds:")
    for name, rs in results.items():
        w = statistics.median(x["writes_per_s"] for x in rs)
        p50 = statistics.median(x["p50_ms"] for x in rs)
        print(f"  {name:>16}: {w:8.0f} writes/s  ({w / base:5.2f} x none)  p50 {p50:6.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
