"""Heavy but legal Kafka requests against a real broker: the longest event-loop stall each causes, the
answer's size, and whether the controller fenced anyone meanwhile (issue 28 item 2).

    .venv/bin/python benchmarks/heavy_requests.py [--repeat 3] [--metadata-topics 600000]

Starts a 3-broker BareCluster (RF=3) with three one-partition topics: `small` (5,000 records of 1 KB),
`ten-k` (300 records of 10 KB) and `half-m` (20 records of 500 KB). Then, against the partition's leader,
each case is sent `repeat` times over a fresh Kafka connection:

- `fetch-200x`: one Fetch v11 naming `small` partition 0 two hundred times (1 MiB per partition, no total
  limit: max_bytes 0x7fffffff);
- `fetch-max-bytes-0`: one Fetch naming it once with max_bytes 0 (as the old broker read it: no limit);
- `metadata-600k`: one Metadata v9 naming N unknown topics;
- `fetch-10k-at-100k` and `fetch-500k-at-100k`: a consumer's Fetch of 100 KB (partition and total) from
  `ten-k` / `half-m`, 20 times in a row from offset 0;
- `recovery-scan`: a topic `scan` filled with `--scan-mib` MiB of 10 KB records; a byte of its last record
  is flipped in the leader's segment file, and a Fetch of that record makes the leader find the
  corruption and recover the replica, whose recovery scan reads the whole partition (pings go on for
  `--linger` seconds after the answer, to see the scan).

A second process pings the same broker with ApiVersions every 10 ms over its own connection; a stall is
the longest ping round trip while the case ran (the broker serves every connection on one event loop,
so this is also how long its heartbeats waited). `fenced` counts the controller's `fenced` events during
the case for missed heartbeats (a recovered replica's deliberate re-registration is not counted). Target:
every stall <= 500 ms and nothing fenced. Kills every process it started.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.client import Admin, Producer  # noqa: E402
from broker.kafka import versions as V  # noqa: E402
from broker.kafka.messages import decode_response, encode_request  # noqa: E402
from clusters.bare import BareCluster, wait_until  # noqa: E402
from clusters.event_logs import parse_event_log  # noqa: E402

TOPICS = {"small": (5000, 1024), "ten-k": (300, 10 * 1024), "half-m": (20, 500 * 1024)}
STALL_TARGET_S = 0.5


def _read_frame(sock: socket.socket) -> bytes:
    head = _read_exact(sock, 4)
    return _read_exact(sock, struct.unpack(">i", head)[0])


def _read_exact(sock: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _pinger(address, stop, out) -> None:
    """In its own process (so the benchmark's own reading holds no lock it needs): ApiVersions round
    trips, every 10 ms; puts (monotonic end time, seconds) for each."""
    sock = socket.create_connection(address, timeout=30)
    frame = encode_request(V.API_VERSIONS, 0, 1, "pinger", {})
    samples = []
    while not stop.is_set():
        t0 = time.monotonic()
        sock.sendall(frame)
        _read_frame(sock)
        t1 = time.monotonic()
        samples.append((t1, t1 - t0))
        time.sleep(0.01)
    sock.close()
    out.put(samples)


def _fetch(topic: str, copies: int, offset: int, part_max: int, max_bytes: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": part_max} for _ in range(copies)]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _cases(metadata_topics: int) -> dict[str, list[tuple[int, int, dict]]]:
    """case -> the requests it sends one after another: (api key, version, body)."""
    names = [{"name": f"unknown-{i:07d}"} for i in range(metadata_topics)]
    return {
        "fetch-200x": [(V.FETCH, 11, _fetch("small", 200, 0, 1 << 20, 0x7FFFFFFF))],
        "fetch-max-bytes-0": [(V.FETCH, 11, _fetch("small", 1, 0, 1 << 20, 0))],
        "metadata-600k": [(V.METADATA, 9, {"topics": names, "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})],
        "fetch-10k-at-100k": [(V.FETCH, 11, _fetch("ten-k", 1, 0, 100_000, 100_000))] * 20,
        "fetch-500k-at-100k": [(V.FETCH, 11, _fetch("half-m", 1, 0, 100_000, 100_000))] * 20,
        "recovery-scan": [],          # made when the case runs: the offset of the damaged record
    }


def _damage_last(cluster: BareCluster, leader: int) -> None:
    """Flip a value byte of the last record of `scan` partition 0 in the leader's segment file."""
    from broker.storage.codec import HEADER_SIZE
    from broker.storage.partition_store import partition_dir_name
    from broker.storage.scan import scan_partition
    scan = scan_partition(cluster.data_dir(leader) / partition_dir_name("scan", 0))
    seg = scan.segments[-1]
    at = seg.positions[-1] + HEADER_SIZE + 3
    with open(seg.path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 1]))


def _fenced(cluster: BareCluster) -> int:
    """The controller's `fenced` events for a broker that missed its heartbeats (a broker that registers
    again on purpose, as a recovered replica does, is fenced as `re-registered`: not counted)."""
    events = parse_event_log((cluster.node_dir("c0") / "controller.log").read_bytes())
    return sum(e.get("event") == "fenced" and e.get("why") != "re-registered" for e in events)


def run_case(cluster, address, requests, linger_s: float = 0.3, before=None) -> dict:
    ctx = mp.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    pinger = ctx.Process(target=_pinger, args=(address, stop, out), daemon=True)
    pinger.start()
    time.sleep(1.0)                                   # its first pings: the broker is idle
    fenced_before = _fenced(cluster)
    if before is not None:
        before()
    sock = socket.create_connection(address, timeout=60)
    t0 = time.monotonic()
    size, errors = 0, set()
    for i, (api, version, body) in enumerate(requests):
        try:
            sock.sendall(encode_request(api, version, i, "heavy", body))
            frame = _read_frame(sock)
        except (ConnectionError, OSError):
            errors.add("connection closed")         # the broker's answer to a request over its limits
            break
        size = max(size, len(frame) + 4)
        if api == V.FETCH and len(frame) < 1 << 16:     # small: worth a look for error codes
            answer = decode_response(api, version, frame)[1]
            errors |= {p["error_code"] for t in answer["responses"] for p in t["partitions"]} - {0}
    t1 = time.monotonic()
    sock.close()
    time.sleep(linger_s)
    stop.set()
    samples = out.get(timeout=60)
    pinger.join(10)
    during = [s for end, s in samples if t0 <= end <= t1 + linger_s]
    return {"stall_s": max(during, default=0.0), "answer_bytes": size, "took_s": t1 - t0,
            "errors": sorted(errors, key=str),
            "fenced": _fenced(cluster) - fenced_before, "pings": len(during)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="times each case is sent (the worst is shown)")
    ap.add_argument("--metadata-topics", type=int, default=600_000)
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--scan-mib", type=int, default=256, help="size of the partition the recovery scan reads")
    ap.add_argument("--linger", type=float, default=15.0, help="seconds of pings after the recovery-scan fetch")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    a = ap.parse_args(argv)
    cases = _cases(a.metadata_topics)
    wanted = [c for c in (a.only.split(",") if a.only else cases) if c]
    unknown = [c for c in wanted if c not in cases]
    if unknown:
        ap.error(f"unknown case {unknown[0]!r} (cases: {', '.join(cases)})")
    results = {}
    with tempfile.TemporaryDirectory(prefix="hw-heavy-") as tmp:
        sizes = dict(TOPICS)
        if "recovery-scan" in wanted:
            sizes["scan"] = (a.scan_mib * 1024 * 1024 // (10 * 1024), 10 * 1024)
        topics = [{"name": t, "partitions": 1, "replication_factor": 3} for t in sizes]
        with BareCluster(tmp, brokers=3, broker_settings={"min_insync_replicas": 2}, topics=topics) as c:
            admin = Admin(c.controller_address)
            wait_until(lambda: all(len(admin.describe(t)[0].isr) == 3 for t in sizes), 30, "full ISRs")
            producer = Producer(c.controller_address, acks="all", timeout_s=30.0, retries=3)
            for t, (n, size) in sizes.items():
                per_send = max(1, (256 * 1024) // size)
                for start in range(0, n, per_send):
                    producer.send(t, 0, [b"%08d" % i + b"v" * (size - 8) for i in range(start, min(n, start + per_send))])
            print(f"3 brokers; topics {', '.join(f'{t} ({n} x {s // 1024} KiB)' for t, (n, s) in sizes.items())}; "
                  f"ApiVersions pings every 10 ms from another process", flush=True)
            for name in wanted:
                topic = ("ten-k" if "10k" in name else "half-m" if "500k" in name else
                         "scan" if name == "recovery-scan" else "small")
                runs = []
                for _ in range(1 if name == "recovery-scan" else a.repeat):
                    # the leader now: an earlier case may have moved it
                    wait_until(lambda: admin.describe(topic)[0].leader is not None, 30, "a leader")
                    leader = admin.describe(topic)[0].leader
                    if name == "recovery-scan":
                        n = sizes["scan"][0]
                        runs.append(run_case(c, (c.host, c.ports[leader]),
                                             [(V.FETCH, 11, _fetch("scan", 1, n - 1, 100_000, 100_000))],
                                             linger_s=a.linger, before=lambda: _damage_last(c, leader)))
                    else:
                        runs.append(run_case(c, (c.host, c.ports[leader]), cases[name]))
                worst = max(runs, key=lambda r: r["stall_s"])
                worst["fenced"] = sum(r["fenced"] for r in runs)
                results[name] = worst
                ok = worst["stall_s"] <= STALL_TARGET_S and worst["fenced"] == 0
                if worst["errors"]:
                    print(f"{name:<20} answered errors {worst['errors']}", flush=True)
                print(f"{name:<20} stall {worst['stall_s'] * 1000:7.0f} ms  answer {worst['answer_bytes'] / 1e6:8.2f} MB  "
                      f"took {worst['took_s']:6.2f} s  fenced {worst['fenced']}  "
                      f"{'ok' if ok else 'OVER TARGET'}", flush=True)
            admin.close()
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["stall_s"] <= STALL_TARGET_S and r["fenced"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
