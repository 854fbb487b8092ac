"""Hostile-client probes of a frame listener, and /proc readings of the process behind it.

Used by benchmarks/frame_abuse.py and tests/broker/test_fuzz_frames.py to check that a broker or the
controller survives bad frames: aborted large frames, half-open connections and random or structured
garbage (see broker/protocol/framing.py for the frame layout). Linux only (reads /proc/<pid>).
"""
from __future__ import annotations

import os
import random
import socket
import struct
import threading

import msgpack

from broker.protocol import apis
from broker.protocol.framing import HEADER_SIZE, MAGIC, PROTOCOL_VERSION, REQUEST

MiB = 1024 * 1024


def rss_mib(pid: int) -> float:
    """Resident set size of `pid` in MiB (VmRSS of /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise ValueError(f"/proc/{pid}/status: no VmRSS line")


def fd_count(pid: int) -> int:
    """Open file descriptors of `pid` (entries of /proc/<pid>/fd)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def header(api: int = apis.PING, corr: int = 1, magic: bytes = MAGIC, version: int = PROTOCOL_VERSION,
           kind: int = REQUEST) -> bytes:
    return struct.pack(">2sBBIH", magic, version, kind, corr, api)


def frame_bytes(body: bytes, **header_fields) -> bytes:
    return struct.pack(">I", HEADER_SIZE + len(body)) + header(**header_fields) + body


def aborted_large_frames(address: tuple[str, int], *, connections: int = 20, declared: int = 16 * MiB,
                         sent: int = 15 * MiB) -> None:
    """`connections` clients at once each send a `declared`-byte length prefix and `sent` bytes of it,
    then close. A server that cuts a client off early (limit or budget) just ends that client sooner."""
    chunk = b"\0" * MiB

    def one() -> None:
        try:
            with socket.create_connection(address, timeout=10) as s:
                s.sendall(struct.pack(">I", declared))
                left = sent
                while left > 0:
                    n = min(left, len(chunk))
                    s.sendall(chunk[:n])
                    left -= n
        except OSError:
            pass

    threads = [threading.Thread(target=one) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


def half_open(address: tuple[str, int], count: int, seed: int = 0) -> list[socket.socket]:
    """`count` connections that each send 0-3 bytes (part of a length prefix) and stay open; the caller
    closes them."""
    rng = random.Random(seed)
    socks = []
    for i in range(count):
        s = socket.create_connection(address, timeout=5)
        n = i % 4
        if n:
            s.sendall(struct.pack(">I", 64)[:n] if rng.random() < 0.5 else rng.randbytes(n))
        socks.append(s)
    return socks


# well-formed frames with random fields go to these only: a lucky forged broker registration or ISR change
# would disturb the cluster (the control plane trusts its clients, see the controller docs)
_DATA_APIS = sorted(set(apis.NAMES) - {apis.REGISTER_BROKER, apis.HEARTBEAT, apis.ALTER_ISR, apis.LEADER_AND_ISR,
                                        apis.ERROR})


def fuzz_payloads(rng: random.Random, count: int) -> list[bytes]:
    """`count` bad or odd inputs: random bytes, truncated frames, huge prefixes, garbage bodies, valid
    prefix with a non-msgpack or non-map body, wrong magic/version/kind, unknown api keys, and
    well-formed frames with wrong field types."""
    def random_bytes():
        return rng.randbytes(rng.randint(1, 2000))

    def truncated():
        f = frame_bytes(msgpack.packb({"topic": "t", "partition": 0}), api=rng.choice(sorted(apis.NAMES)))
        return f[:rng.randint(1, len(f) - 1)]

    def huge_prefix():
        return struct.pack(">I", rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 16 * MiB + 1, 2 * MiB])) + rng.randbytes(64)

    def garbage_body():
        return frame_bytes(rng.randbytes(rng.randint(0, 500)), api=rng.choice(sorted(apis.NAMES)))

    def json_body():
        return frame_bytes(b'{"topic": "t", "partition": 0}', api=rng.choice(sorted(apis.NAMES)))

    def non_map():
        return frame_bytes(msgpack.packb(rng.choice([[1, 2], "x", 7, None, b"\0" * 10])))

    def bad_header():
        field = rng.choice(["magic", "version", "kind"])
        kw = {"magic": {"magic": b"XX"}, "version": {"version": 99}, "kind": {"kind": 7}}[field]
        return frame_bytes(msgpack.packb({}), **kw)

    def unknown_api():
        return frame_bytes(msgpack.packb({"a": 1}), api=rng.randint(101, 65535))

    def wrong_fields():
        body = {rng.choice(["topic", "partition", "offset", "records", "acks", "topics", "broker_id"]):
                rng.choice([None, -1, 2**63, "x" * 300, [], {}, b"\xff", True, 1.5]) for _ in range(rng.randint(0, 4))}
        return frame_bytes(msgpack.packb(body, use_bin_type=True), api=rng.choice(_DATA_APIS))

    def short_header():
        n = rng.randint(0, HEADER_SIZE - 1)
        return struct.pack(">I", n) + rng.randbytes(n)

    kinds = [random_bytes, truncated, huge_prefix, garbage_body, json_body, non_map, bad_header, unknown_api,
             wrong_fields, short_header]
    return [rng.choice(kinds)() for _ in range(count)]


def send_and_close(address: tuple[str, int], data: bytes, read_timeout_s: float = 0.5) -> None:
    """Send `data`, half-close, read whatever comes back for up to `read_timeout_s`, close."""
    try:
        with socket.create_connection(address, timeout=5) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(read_timeout_s)
            while s.recv(65536):
                pass
    except OSError:
        pass
