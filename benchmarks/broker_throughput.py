"""Acknowledged writes per second and send latency of a local 3-broker cluster (real processes).

    .venv/bin/python benchmarks/broker_throughput.py [--seconds 8] [--threads 4] [--batch 100]
        [--partitions 3] [--flush always] [--acks 1,all]

Starts a controller and 3 brokers on loopback (RF=3, min.insync.replicas=2, leader-epoch truncation),
then for each acks setting runs `threads` client threads, each with its own Producer, sending batches
of `batch` values round-robin over the partitions for `seconds`. Prints acknowledged writes/s and the
p50/p99 latency of one send (one PRODUCE request). Kills every process it started.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.client import Admin, ClientError, Producer  # noqa: E402
from clusters.bare import BareCluster, wait_until  # noqa: E402
from timing import run_workers  # noqa: E402

TOPIC = "bench"


def add_load_options(ap: argparse.ArgumentParser, *, seconds: float = 8.0, flush: bool = True) -> None:
    """The load every throughput benchmark shares: client threads sending batches over the partitions."""
    ap.add_argument("--seconds", type=float, default=seconds, help="how long each phase sends")
    ap.add_argument("--threads", type=int, default=4, help="client threads, each with its own producer")
    ap.add_argument("--batch", type=int, default=100, help="values per send")
    ap.add_argument("--partitions", type=int, default=3)
    if flush:
        ap.add_argument("--flush", default="always", choices=["always", "interval", "never"])


def wait_full_isrs(controller, partitions: int, timeout_s: float = 30.0) -> None:
    """Return once every partition of the benchmark topic has a leader and all 3 replicas in its ISR."""
    admin = Admin(controller)
    try:
        wait_until(lambda: (lambda d: len(d) == partitions and all(
            p.leader is not None and len(p.isr) == 3 for p in d))(admin.describe(TOPIC)), timeout_s, "full ISRs")
    finally:
        admin.close()


def bench_cluster(tmp: str, partitions: int, flush: str) -> BareCluster:
    """A 3-broker cluster (RF=3, min.insync.replicas=2) with the benchmark topic, not yet started."""
    return BareCluster(tmp, brokers=3, broker_settings={"min_insync_replicas": 2, "flush": flush},
                       topics=[{"name": TOPIC, "partitions": partitions, "replication_factor": 3}])


def run_phase(controller, acks, threads: int, batch: int, partitions: int, seconds: float) -> dict:
    latencies: list[float] = []
    acked = [0]
    errors: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker(k: int) -> None:
        p = Producer(controller, acks=acks, timeout_s=5.0, retries=3)
        seq = 0
        mine: list[float] = []
        n = 0
        while time.monotonic() < stop_at:
            values = [b"%d-%d" % (k, seq + i) for i in range(batch)]
            part = (k + seq // batch) % partitions
            t0 = time.perf_counter()
            try:
                p.send(TOPIC, part, values)
            except ClientError as exc:
                with lock:
                    errors[exc.code] = errors.get(exc.code, 0) + 1
                continue
            mine.append(time.perf_counter() - t0)
            n += batch
            seq += batch
        p.close()
        with lock:
            latencies.extend(mine)
            acked[0] += n

    elapsed = run_workers(threads, worker)
    latencies.sort()
    q = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [float("nan")] * 99
    return {"acks": acks, "writes_per_s": acked[0] / elapsed, "sends": len(latencies),
            "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_load_options(ap)
    ap.add_argument("--acks", default="1,all")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
        with bench_cluster(tmp, args.partitions, args.flush) as c:
            wait_full_isrs(c.controller_address, args.partitions)
            print(f"3 brokers, RF=3, min.insync.replicas=2, flush={args.flush}, {args.partitions} partitions, "
                  f"{args.threads} client threads, {args.batch} values per send, {args.seconds:.0f} s per phase")
            for acks in [a if a == "all" else int(a) for a in args.acks.split(",")]:
                r = run_phase(c.controller_address, acks, args.threads, args.batch, args.partitions, args.seconds)
                print(f"acks={str(r['acks']):>3}: {r['writes_per_s']:9.0f} acknowledged writes/s  "
                      f"{r['sends']:6d} sends  p50 {r['p50_ms']:6.2f} ms  p99 {r['p99_ms']:6.2f} ms"
                      + (f"  errors {r['errors']}" if r["errors"] else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
