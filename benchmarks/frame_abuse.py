"""Figures for issue 16: RSS and fd counts of a real broker and controller before and after hostile clients.

Starts a one-broker BareCluster, then prints the broker's and the controller's RSS (MiB) and open fds:
at start; after each round of aborted large frames (20 connections each send a 16 MiB length prefix and
15 MiB of it, then close; sent to the broker and to the controller); while 500 half-open connections (0-3
bytes sent) are held, and again after the frame timeout; after a batch of fuzzed frames; and whether a
produce + consume round trip still works.
Usage: .venv/bin/python benchmarks/frame_abuse.py [--rounds 8] [--fuzz 2000] [--half-open 500]
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.client import Consumer, Producer  # noqa: E402
from broker.protocol import probe  # noqa: E402
from clusters.bare import BareCluster  # noqa: E402


def figures(cluster: BareCluster) -> str:
    b, c = cluster.brokers[1].proc.pid, cluster.controller.proc.pid
    return (f"broker rss {probe.rss_mib(b):7.1f} MiB fds {probe.fd_count(b):4d} | "
            f"controller rss {probe.rss_mib(c):7.1f} MiB fds {probe.fd_count(c):4d}")


def round_trip(cluster: BareCluster, value: bytes) -> bool:
    sent = Producer(cluster.controller_address, acks="all", timeout_s=5.0, retries=3).send("t", 0, [value])
    got = Consumer(cluster.controller_address, timeout_s=5.0).fetch("t", 0, sent.offsets[0], max_records=1)
    return [r[2] for r in got.records] == [value]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--fuzz", type=int, default=2000)
    ap.add_argument("--half-open", type=int, default=500)
    ap.add_argument("--timeout-wait-s", type=float, default=12.0, help="wait after opening half-open connections")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="frame-abuse-") as tmp, \
            BareCluster(Path(tmp), brokers=1, topics=[{"name": "t", "partitions": 1, "replication_factor": 1}]) as cl:
        print(f"start:                {figures(cl)}  round trip ok={round_trip(cl, b'start')}", flush=True)
        for r in range(1, args.rounds + 1):
            probe.aborted_large_frames(cl.brokers[1].address)
            probe.aborted_large_frames(cl.controller_address)
            time.sleep(0.5)
            print(f"aborted round {r}:      {figures(cl)}", flush=True)
        socks = probe.half_open(cl.brokers[1].address, args.half_open // 2) + \
            probe.half_open(cl.controller_address, args.half_open - args.half_open // 2)
        time.sleep(1.0)
        print(f"{len(socks)} half-open held:  {figures(cl)}", flush=True)
        time.sleep(args.timeout_wait_s)
        print(f"after {args.timeout_wait_s:.0f}s:           {figures(cl)}", flush=True)
        for s in socks:
            s.close()
        time.sleep(0.5)
        rng = random.Random(16)
        t0 = time.monotonic()
        for i, data in enumerate(probe.fuzz_payloads(rng, args.fuzz)):
            probe.send_and_close(cl.brokers[1].address if i % 2 else cl.controller_address, data, 0.2)
        print(f"after {args.fuzz} fuzzed ({time.monotonic() - t0:.0f}s): {figures(cl)}  "
              f"round trip ok={round_trip(cl, b'end')}", flush=True)


if __name__ == "__main__":
    main()
