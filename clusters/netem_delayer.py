"""The delayer of a degraded link: binds a free netfilter queue over netlink and holds each packet queued to
it for delay_ms +- uniform(jitter_ms) before its ACCEPT verdict (clusters/local_netem.py explains where it
is used). Standard library only, so the SSH and Docker backends can copy this one file to a node and run
it with the node's python3:

    python3 netem_delayer.py --run-id RUN --setting K --delay-ms 50 --jitter-ms 20 --seed 7
    # prints "QUEUE <n>" once bound, then runs until SIGTERM
"""
from __future__ import annotations

import argparse
import heapq
import os
import random
import select
import socket
import struct
import sys
import time
import zlib

QUEUE_BASE, QUEUE_SPAN = 20000, 20000        # queue numbers this module picks from

# --- netfilter queue over netlink (linux/netfilter/nfnetlink_queue.h) ------------------------------
NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO = 1, 4
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2


def _attr(kind: int, payload: bytes) -> bytes:
    n = 4 + len(payload)
    return struct.pack("=HH", n, kind) + payload + b"\0" * ((4 - n % 4) % 4)


def _message(msg: int, queue: int, attrs: bytes, *, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


class NetfilterQueue:
    """One bound netfilter queue: packet ids in, verdicts out."""

    def __init__(self, queue: int, maxlen: int = 65536):
        self.queue = queue
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.setsockopt(270, 5, 1)        # SOL_NETLINK, NETLINK_NO_ENOBUFS
        self.sock.bind((0, 0))
        self._config(_attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET)))
        self._config(_attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
                     + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen))
                     + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO))
                     + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO)))

    def _config(self, attrs: bytes) -> None:
        self.sock.send(_message(NFQNL_MSG_CONFIG, self.queue, attrs, flags=NLM_F_REQUEST | NLM_F_ACK, seq=1))
        data = self.sock.recv(65536)
        ln, kind = struct.unpack_from("=IH", data)
        if kind == NLMSG_ERROR:
            err = -struct.unpack_from("=i", data, 16)[0]
            if err:
                raise OSError(err, f"netfilter queue {self.queue}: {os.strerror(err)}")

    def packet_ids(self) -> list[int]:
        """The ids of the packets in one read (non-blocking callers select() first)."""
        data = self.sock.recv(1 << 20)
        ids, off = [], 0
        while off + 16 <= len(data):
            ln, kind = struct.unpack_from("=IH", data, off)
            if ln < 16:
                break
            if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                a = off + 20
                while a + 4 <= off + ln:
                    alen, atype = struct.unpack_from("=HH", data, a)
                    if alen < 4:
                        break
                    if atype & 0x7FFF == NFQA_PACKET_HDR:
                        ids.append(struct.unpack_from("!I", data, a + 4)[0])
                    a += (alen + 3) & ~3
            off += (ln + 3) & ~3
        return ids

    def accept(self, packet_id: int) -> None:
        self.sock.send(_message(NFQNL_MSG_VERDICT, self.queue,
                                _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id))))


def bind_free_queue(run_id: str, setting: int) -> NetfilterQueue:
    """Bind the first queue number not bound by anyone, starting from a hash of (run, setting)."""
    start = zlib.crc32(f"{run_id}/{setting}".encode()) % QUEUE_SPAN
    for i in range(QUEUE_SPAN):
        try:
            return NetfilterQueue(QUEUE_BASE + (start + i) % QUEUE_SPAN)
        except OSError as exc:
            if exc.errno != 16:                 # EBUSY: another process holds that queue
                raise
    raise OSError("no free netfilter queue number")


def delay_loop(q: NetfilterQueue, delay_ms: float, jitter_ms: float, seed: int) -> None:
    """Hold every packet of the queue for delay_ms +- uniform(jitter_ms) (never below 0), then accept it."""
    rng = random.Random(seed)
    held: list[tuple[float, int]] = []
    while True:
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
        ready, _, _ = select.select([q.sock], [], [], timeout)
        now = time.monotonic()
        if ready:
            for pid in q.packet_ids():
                wait = delay_ms + (rng.uniform(-jitter_ms, jitter_ms) if jitter_ms else 0.0)
                heapq.heappush(held, (now + max(0.0, wait) / 1000.0, pid))
        while held and held[0][0] <= time.monotonic():
            q.accept(heapq.heappop(held)[1])


def main(argv: list[str] | None = None) -> int:
    d = argparse.ArgumentParser(prog="python -m clusters.netem_delayer",
                                description="bind a free netfilter queue, print QUEUE <n>, delay its packets")
    d.add_argument("--run-id", required=True)
    d.add_argument("--setting", type=int, default=0)
    d.add_argument("--delay-ms", type=float, required=True)
    d.add_argument("--jitter-ms", type=float, default=0.0)
    d.add_argument("--seed", type=int, default=0)
    a = d.parse_args(argv)
    try:
        q = bind_free_queue(a.run_id, a.setting)
    except OSError as exc:
        print(f"delayer: cannot bind a netfilter queue: {exc}", file=sys.stderr)
        return 2
    print(f"QUEUE {q.queue}", flush=True)
    try:
        delay_loop(q, a.delay_ms, a.jitter_ms, a.seed)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
