"""Benchmark: provisioning and teardown of a 5-broker Docker cluster with a cached image, and the first
build of the base image.

Provisioning is `DockerCluster.start()`: network, 6 containers (controller + 5 brokers) with their keys,
SSH connections, configs uploaded, controller and brokers started and READY. Teardown is `stop_all()`
then `teardown()` (SIGTERM every daemon, remove containers and network). Target: <= 15 s together.

The first build is timed in a fresh cache directory under a throw-away version tag (debootstrap of the
root filesystem, then the import), so the cached `highwater/node-base` the tests use is not disturbed;
the throw-away image and tarball are removed afterwards. It needs root, debootstrap and the Debian mirror.

Usage: .venv/bin/python benchmarks/docker_provision.py [--rounds 3] [--brokers 5] [--skip-build]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusters.base import ClusterSpec  # noqa: E402
from clusters.docker import DockerCluster  # noqa: E402
from clusters.docker_hosts import engine  # noqa: E402
from clusters import docker_image  # noqa: E402


def provision_round(client, image: str, brokers: int, i: int) -> tuple[float, float, dict]:
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
        spec = ClusterSpec(f"bench-{int(time.time())}-{i}", Path(tmp), brokers=brokers,
                           controller_settings={"expected_brokers": brokers,
                                                "topics": [{"name": "hw", "partitions": 3,
                                                            "replication_factor": 3}]})
        cluster = DockerCluster(spec, client=client, image=image)
        t0 = time.perf_counter()
        try:
            cluster.start()
            t1 = time.perf_counter()
        finally:
            t_down = time.perf_counter()
            cluster.stop_all()
            cluster.teardown()
            t2 = time.perf_counter()
        return t1 - t0, t2 - t_down, dict(cluster.timings)


def first_build(client) -> float:
    version = f"bench-{int(time.time())}"
    with tempfile.TemporaryDirectory(prefix="hw-bench-cache-") as cache:
        import os
        old = os.environ.get("HIGHWATER_CACHE_DIR")
        os.environ["HIGHWATER_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        try:
            tag = docker_image.ensure_base_image(client, version=version, log=lambda m: print(f"  {m}"))
            elapsed = time.perf_counter() - t0
        finally:
            if old is None:
                os.environ.pop("HIGHWATER_CACHE_DIR", None)
            else:
                os.environ["HIGHWATER_CACHE_DIR"] = old
        client.images.remove(tag)
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=5)
    ap.add_argument("--skip-build", action="store_true", help="do not time the first base-image build")
    args = ap.parse_args()
    client = engine()
    t0 = time.perf_counter()
    image = docker_image.ensure_node_image(client, log=lambda m: print(f"  {m}"))
    print(f"node image {image} ready in {time.perf_counter() - t0:.1f}s (cached base)")
    ups, downs = [], []
    for i in range(args.rounds):
        up, down, parts = provision_round(client, image, args.brokers, i)
        ups.append(up)
        downs.append(down)
        print(f"round {i + 1}: provision {up:.2f}s (containers {parts.get('containers_s', 0):.2f}s, "
              f"ssh {parts.get('ssh_s', 0):.2f}s, daemons {up - sum(parts.values()):.2f}s), teardown {down:.2f}s, "
              f"total {up + down:.2f}s")
    total = [u + d for u, d in zip(ups, downs)]
    print(f"{args.brokers}-broker cluster (+ controller), cached image: provision median {statistics.median(ups):.2f}s, "
          f"teardown median {statistics.median(downs):.2f}s, total median {statistics.median(total):.2f}s "
          f"(target <= 15 s: {'met' if statistics.median(total) <= 15 else 'NOT met'})")
    if not args.skip_build:
        print("first build of the base image (fresh cache dir, debootstrap + import):")
        print(f"first base-image build: {first_build(client):.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
