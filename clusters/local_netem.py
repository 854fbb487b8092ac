"""Network degradation (delay with jitter, packet loss) of one run's one-way links: rules, delayer, cleanup.

Why not `tc netem` on `lo`: netem is an egress qdisc, and on loopback the only egress is the root of `lo`,
which every process on the machine shares. Two runs would have to agree on who creates that root, who
removes it and whose classes and filters are whose (tc objects carry no owner comment), and the very
presence of a queueing root turns lo's lockless `noqueue` into a queued device for all loopback traffic.
Kernels built without `sch_netem` (as some VM kernels are) cannot do it at all. So this backend does what
netem does with the firewall's ownership model instead (clusters/local_firewall.py), touching no qdisc:

- Rules: the iptables chain `HWN-<8 hex of the run id>` in the `mangle` table, jumped to from the top of
  `mangle PREROUTING` by a rule with the owner comment `highwater:<run id> owner=<pid>:<start time>`
  (exactly as the drop chain is). For each degraded one-way link SRC -> DST it holds, in this order,
  `-s SRC/32 -d DST/32 -m statistic --mode random --probability P -j DROP` (only when loss_pct > 0: the
  kernel drops that share, silently, on the receiving side as a lossy link does) and
  `-s SRC/32 -d DST/32 -j NFQUEUE --queue-num Q --queue-bypass`. Only packets between this run's /32
  addresses match; no other traffic on lo is looked at twice. PREROUTING comes before the filter table's
  INPUT, so a partition (drop chain) still applies to a degraded link.
- Delay: a delayer process per (delay, jitter) setting (`python -m clusters.local_netem delay ...`, this
  module's `main`) binds netfilter queue Q over netlink, and gives each queued packet its ACCEPT verdict
  `delay_ms` +- uniform(`jitter_ms`) after it arrived (so, as with netem, jitter reorders packets). It
  binds the first free queue number from a hash of the run id (a queue already bound by another run's
  delayer is refused by the kernel, so two runs never share one) and prints it. `--queue-bypass` and the
  queue's fail-open flag mean that a dead or overloaded delayer never turns a degraded link into a
  partition: packets then pass undelayed.
- Ownership and cleanup: the chain is found by `local_firewall.find_leftovers()` (it lists mangle chains
  too) with its owner from the jump comment, and removed by `highwater cleanup` when that owner is dead;
  delayer processes are recorded in the run registry as processes of the run (node name `delay-<Q>`),
  so cleanup stops them with the run's other processes. `restore(None)`, the cluster's teardown and an
  interrupted run's teardown delete the chain and stop the delayers.

Two runs at once each have their own chain, queues and delayers; nothing is shared but the mangle
PREROUTING chain, where each only inserts and deletes its own jump.
"""
from __future__ import annotations

import argparse
import heapq
import os
import random
import select
import shutil
import socket
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass, field

from clusters.base import ClusterError
from clusters.local_firewall import COMMENT_PREFIX, short_id
from clusters.run_registry import this_process_identity

TABLE = "mangle"
HOOK = "PREROUTING"
QUEUE_BASE, QUEUE_SPAN = 20000, 20000        # queue numbers this module picks from

SETTLE_S = 10.0                              # how long a delayer may take to print its queue


def _ipt(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["iptables", "-w", "-t", TABLE, *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise ClusterError(f"degrade: command failed ({r.returncode}): {' '.join(argv)}: "
                           f"{(r.stderr or r.stdout).strip()}")
    return r


def available() -> None:
    """Raise ClusterError naming what is missing for the degrade fault (root, iptables)."""
    if os.geteuid() != 0:
        raise ClusterError(f"the degrade fault needs root to install its iptables rules and bind a netfilter "
                           f"queue (running as uid {os.geteuid()})")
    if shutil.which("iptables") is None:
        raise ClusterError("the degrade fault needs iptables on PATH (install the Debian package 'iptables')")


@dataclass
class Delayer:
    """One delayer process: its queue, pid and start time (for the registry), argv."""
    queue: int
    proc: subprocess.Popen
    start_time: int
    argv: list[str]


@dataclass
class LinkDegradation:
    delay_ms: float
    jitter_ms: float
    loss_pct: float


@dataclass
class Degradation:
    """One run's degraded links on lo: the `HWN-` chain, its delayers and what each link has."""
    run_id: str
    python: str = sys.executable
    env: dict | None = None
    on_spawn: "object" = None                  # callable(Delayer): record the process (the run registry)
    on_exit: "object" = None                   # callable(Delayer): forget it
    links: dict[tuple[str, str], LinkDegradation] = field(default_factory=dict)
    delayers: dict[tuple[float, float], Delayer] = field(default_factory=dict)
    installed: bool = False

    @property
    def chain(self) -> str:
        return f"HWN-{short_id(self.run_id)}"

    @property
    def comment(self) -> str:
        pid, start = this_process_identity()
        return f"{COMMENT_PREFIX}{self.run_id[:200]} owner={pid}:{start}"

    def describe(self) -> dict:
        return {"kind": "iptables", "table": TABLE, "chain": self.chain}

    def install(self) -> None:
        if _ipt(["-n", "-L", self.chain], check=False).returncode != 0:
            _ipt(["-N", self.chain])
        jump = [HOOK, "-m", "comment", "--comment", self.comment, "-j", self.chain]
        if _ipt(["-C", *jump], check=False).returncode != 0:
            _ipt(["-I", HOOK, "1", *jump[1:]])
        self.installed = True

    def _delayer(self, delay_ms: float, jitter_ms: float, seed: int) -> Delayer:
        key = (float(delay_ms), float(jitter_ms))
        d = self.delayers.get(key)
        if d is not None and d.proc.poll() is None:
            return d
        argv = [self.python, "-m", "clusters.local_netem", "delay", "--run-id", self.run_id,
                "--setting", str(len(self.delayers)), "--delay-ms", repr(key[0]), "--jitter-ms", repr(key[1]),
                "--seed", str(seed)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env, start_new_session=True)
        ready, _, _ = select.select([proc.stdout], [], [], SETTLE_S)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("QUEUE "):
            proc.kill()
            proc.wait()
            err = (proc.stderr.read() or "").strip().splitlines()[-1:] or ["no output"]
            raise ClusterError(f"degrade: the delayer did not start ({err[0]})")
        from clusters.run_registry import proc_start_time
        d = Delayer(int(line.split()[1]), proc, proc_start_time(proc.pid) or 0, argv)
        self.delayers[key] = d
        if self.on_spawn:
            self.on_spawn(d)
        return d

    @staticmethod
    def _rules(src: str, dst: str, link: LinkDegradation, queue: int) -> list[list[str]]:
        match = ["-s", f"{src}/32", "-d", f"{dst}/32"]
        out = []
        if link.loss_pct > 0:
            out.append(match + ["-m", "statistic", "--mode", "random", "--probability",
                                f"{link.loss_pct / 100:.6f}", "-j", "DROP"])
        out.append(match + ["-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"])
        return out

    def degrade(self, pairs: list[tuple[str, str]], *, delay_ms: float, jitter_ms: float = 0.0,
                loss_pct: float = 0.0, seed: int = 0) -> None:
        """Degrade each one-way link src -> dst (addresses); a link already degraded gets the new setting."""
        if delay_ms < 0 or jitter_ms < 0 or not 0 <= loss_pct <= 100:
            raise ClusterError(f"degrade: delay_ms and jitter_ms must be >= 0 and loss_pct in 0..100, got "
                               f"delay_ms={delay_ms}, jitter_ms={jitter_ms}, loss_pct={loss_pct}")
        if not self.installed:
            self.install()
        d = self._delayer(delay_ms, jitter_ms, seed)
        for src, dst in pairs:
            self._unlink(src, dst)
            link = LinkDegradation(float(delay_ms), float(jitter_ms), float(loss_pct))
            for rule in self._rules(src, dst, link, d.queue):
                _ipt(["-A", self.chain, *rule])
            self.links[(src, dst)] = link
        self._stop_unused()

    def _unlink(self, src: str, dst: str) -> None:
        link = self.links.pop((src, dst), None)
        if link is None:
            return
        d = self.delayers.get((link.delay_ms, link.jitter_ms))
        for rule in self._rules(src, dst, link, d.queue if d else 0):
            _ipt(["-D", self.chain, *rule], check=False)

    def restore(self, pairs: list[tuple[str, str]] | None = None) -> None:
        """Remove the degradation of these links (None: of every link); stop the delayers left unused."""
        if pairs is None:
            if self.installed:
                _ipt(["-F", self.chain], check=False)
            self.links.clear()
        else:
            for src, dst in pairs:
                self._unlink(src, dst)
        self._stop_unused()

    def _stop_unused(self) -> None:
        used = {(link.delay_ms, link.jitter_ms) for link in self.links.values()}
        for key in [k for k in self.delayers if k not in used]:
            self._stop(self.delayers.pop(key))

    def _stop(self, d: Delayer) -> None:
        if d.proc.poll() is None:
            d.proc.terminate()
            try:
                d.proc.wait(5)
            except subprocess.TimeoutExpired:
                d.proc.kill()
                d.proc.wait()
        for f in (d.proc.stdout, d.proc.stderr):
            if f:
                f.close()
        if self.on_exit:
            self.on_exit(d)

    def remove(self) -> None:
        """Delete the jump and the chain, stop every delayer. Idempotent."""
        from clusters.local_firewall import remove_iptables_chain
        self.links.clear()
        for key in list(self.delayers):
            self._stop(self.delayers.pop(key))
        if self.installed:
            remove_iptables_chain(self.chain, TABLE)
            self.installed = False

    def rules(self) -> list[str]:
        r = _ipt(["-S", self.chain], check=False)
        return [line for line in r.stdout.splitlines() if line.startswith("-A ")]


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
    p = argparse.ArgumentParser(prog="python -m clusters.local_netem")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("delay", help="run a delayer: bind a free netfilter queue, print QUEUE <n>, delay its packets")
    d.add_argument("--run-id", required=True)
    d.add_argument("--setting", type=int, default=0)
    d.add_argument("--delay-ms", type=float, required=True)
    d.add_argument("--jitter-ms", type=float, default=0.0)
    d.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
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
