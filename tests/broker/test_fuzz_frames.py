"""Hostile clients against a real broker and a real controller process (issue 16): aborted large frames do
not grow memory, half-open connections are closed after the frame timeout, the connection cap holds, and
after a bounded batch of random and structured bad frames both still serve a produce + consume round trip
with RSS and fd counts (read from /proc/<pid>) within bounds."""
from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from broker.client import Consumer, Producer
from broker.controller.server import MAX_CONNECTIONS, MAX_REQUEST_FRAME
from broker.protocol import apis, probe
from broker.protocol.framing import RESPONSE, read_frame_blocking
from broker.server.launch import LocalCluster, wait_until
from broker.server.rpc import FRAME_READ_TIMEOUT_S

CONTROLLER_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("fuzz"), brokers=1,
                      controller_settings={"frame_read_timeout_ms": int(CONTROLLER_TIMEOUT_S * 1000)},
                      topics=[{"name": "t", "partitions": 1, "replication_factor": 1}]) as c:
        yield c


def pids(cluster) -> tuple[int, int]:
    return cluster.brokers[1].proc.pid, cluster.controller.proc.pid


def round_trip(cluster, value: bytes) -> None:
    sent = Producer(cluster.controller_address, acks="all", timeout_s=5.0, retries=3).send("t", 0, [value])
    got = Consumer(cluster.controller_address, timeout_s=5.0).fetch("t", 0, sent.offsets[0], max_records=1)
    assert [r[2] for r in got.records] == [value]


def settle_fds(pid: int, at_most: int, timeout_s: float) -> None:
    wait_until(lambda: probe.fd_count(pid) <= at_most, timeout_s, f"pid {pid} back to <= {at_most} fds")


def test_aborted_large_frames_do_not_grow_memory(cluster):
    """Before the fix one round (20 x 16 MiB prefix + 15 MiB, then close) added ~300 MiB to each process,
    and the broker kept growing round after round. Now the peak is bounded by the partial-frame budget
    (64 MiB) plus the stream buffers of 20 connections, and it is given back once the clients are gone."""
    round_trip(cluster, b"warm")
    b, c = pids(cluster)
    base_b, base_c = probe.rss_mib(b), probe.rss_mib(c)
    for _ in range(3):
        probe.aborted_large_frames(cluster.brokers[1].address)
        probe.aborted_large_frames(cluster.controller_address)
        assert probe.rss_mib(b) < base_b + 100, (base_b, probe.rss_mib(b))
        assert probe.rss_mib(c) < base_c + 20, (base_c, probe.rss_mib(c))
    wait_until(lambda: probe.rss_mib(b) < base_b + 40, 5.0, f"broker RSS back under {base_b + 40:.0f} MiB")
    round_trip(cluster, b"after-aborted")


def test_controller_rejects_frames_over_its_limit(cluster):
    with socket.create_connection(cluster.controller_address, timeout=5) as s:
        s.sendall(struct.pack(">I", MAX_REQUEST_FRAME + 1))
        frame = read_frame_blocking(s)
    assert (frame.kind, frame.api, frame.body["error"]) == (RESPONSE, apis.ERROR, "INVALID_REQUEST")
    assert frame.body["message"] == (f"declared frame length {MAX_REQUEST_FRAME + 1} exceeds this listener's "
                                     f"{MAX_REQUEST_FRAME}-byte limit")


@pytest.mark.parametrize("server", ["controller", pytest.param("broker", marks=pytest.mark.slow)])
def test_half_open_connections_are_closed(cluster, server):
    """0-3 bytes, then silence: the server closes them after its frame read timeout (the controller's
    frame_read_timeout_ms, the broker's FRAME_READ_TIMEOUT_S). Before the fix the broker started that
    timeout only once the 4-byte prefix was complete, so these stayed."""
    b, c = pids(cluster)
    pid, address, timeout_s = {
        "controller": (c, cluster.controller_address, CONTROLLER_TIMEOUT_S),
        "broker": (b, cluster.brokers[1].address, FRAME_READ_TIMEOUT_S),
    }[server]
    base = probe.fd_count(pid)
    socks = probe.half_open(address, 100)
    try:
        wait_until(lambda: probe.fd_count(pid) >= base + 90, 5.0, f"{server} accepted the connections")
        settle_fds(pid, base + 3, timeout_s + 5)
    finally:
        for s in socks:
            s.close()


def test_controller_connection_cap(cluster):
    _b, c = pids(cluster)
    base = probe.fd_count(c)
    socks = probe.half_open(cluster.controller_address, MAX_CONNECTIONS + 20)
    try:
        time.sleep(0.3)
        assert probe.fd_count(c) <= base + MAX_CONNECTIONS
    finally:
        for s in socks:
            s.close()
    settle_fds(c, base + 3, CONTROLLER_TIMEOUT_S + 5)
    round_trip(cluster, b"after-cap")


def test_fuzzed_frames_leave_both_serving_within_bounds(cluster):
    b, c = pids(cluster)
    round_trip(cluster, b"before-fuzz")
    base = {pid: (probe.rss_mib(pid), probe.fd_count(pid)) for pid in (b, c)}
    t0 = time.monotonic()
    for i, data in enumerate(probe.fuzz_payloads(random.Random(16), 400)):
        probe.send_and_close(cluster.brokers[1].address if i % 2 else cluster.controller_address, data, 0.2)
    assert time.monotonic() - t0 < 60
    round_trip(cluster, b"after-fuzz")
    for pid, (rss, fds) in base.items():
        settle_fds(pid, fds + 2, 3.0)
        assert probe.rss_mib(pid) < rss + 40, (pid, rss, probe.rss_mib(pid))
