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
- Delay: a delayer process per (delay, jitter) setting (`python -m clusters.netem_delayer ...`) binds
  netfilter queue Q over netlink, and gives each queued packet its ACCEPT verdict
  `delay_ms` +- uniform(`jitter_ms`) after it arrived (so, as with netem, jitter reorders packets). It
  binds the first free queue number from a hash of the run id (a queue already bound by another run's
  delayer is refused by the kernel, so two runs never share one) and prints it. `--queue-bypass` and the
  queue's fail-open flag mean that a dead or overloaded delayer never turns a degraded link into a
  partition: packets then pass undelayed. That is not silent: `restore` (the end of every degrade
  window) raises ClusterError naming the dead delayer and its links (after removing them), so the run
  records the window's error; a later degrade with that setting starts a new delayer and moves the
  setting's links to its queue. Each link remembers its queue, and its rules are deleted by it.
- A caveat of netfilter queues: unregistering any netfilter hook of the namespace (for one, deleting an
  nft table with a base chain, as the nft partition backend's removal does) makes the kernel drop every
  packet held in every queue. A degraded TCP link then resends; docs/local-backend.md says more.
- Ownership and cleanup: the chain is found by `local_firewall.find_leftovers()` (it lists mangle chains
  too) with its owner from the jump comment, and removed by `highwater cleanup` when that owner is dead;
  delayer processes are recorded in the run registry as processes of the run (node name `delay-<Q>`),
  so cleanup stops them with the run's other processes. `restore(None)`, the cluster's teardown and an
  interrupted run's teardown delete the chain and stop the delayers.

Two runs at once each have their own chain, queues and delayers; nothing is shared but the mangle
PREROUTING chain, where each only inserts and deletes its own jump.
"""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from clusters.base import ClusterError
from clusters.local_firewall import COMMENT_PREFIX, short_id
from clusters.run_registry import this_process_identity

TABLE = "mangle"
HOOK = "PREROUTING"

SETTLE_S = 10.0                              # how long a delayer may take to print its queue


def _ipt(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["iptables", "-w", "-t", TABLE, *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        said = " | ".join(x.strip() for x in (r.stderr or r.stdout).splitlines() if x.strip())
        raise ClusterError(f"degrade: command failed ({r.returncode}): {' '.join(argv)}: {said}")
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
    """One degraded link's setting and the queue its NFQUEUE rule names (its rules are deleted by it)."""
    delay_ms: float
    jitter_ms: float
    loss_pct: float
    queue: int = 0


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
        argv = [self.python, "-m", "clusters.netem_delayer", "--run-id", self.run_id,
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
        new = Delayer(int(line.split()[1]), proc, proc_start_time(proc.pid) or 0, argv)
        self.delayers[key] = new
        if d is not None:           # the dead one it replaces: close its pipes, drop it from the registry
            self._stop(d)
        if self.on_spawn:
            self.on_spawn(new)
        return new

    @staticmethod
    def _rules(src: str, dst: str, link: LinkDegradation) -> list[list[str]]:
        match = ["-s", f"{src}/32", "-d", f"{dst}/32"]
        out = []
        if link.loss_pct > 0:
            out.append(match + ["-m", "statistic", "--mode", "random", "--probability",
                                f"{link.loss_pct / 100:.6f}", "-j", "DROP"])
        out.append(match + ["-j", "NFQUEUE", "--queue-num", str(link.queue), "--queue-bypass"])
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
        key = (float(delay_ms), float(jitter_ms))
        # links of this setting still queued to a delayer that died (and was just replaced) move to the new one
        asked = set(pairs)
        stale = [(p, link.loss_pct) for p, link in self.links.items()
                 if (link.delay_ms, link.jitter_ms) == key and link.queue != d.queue and p not in asked]
        todo = [(p, float(loss_pct)) for p in pairs] + stale
        for (src, dst), loss in todo:
            self._unlink(src, dst)
            link = LinkDegradation(key[0], key[1], loss, d.queue)
            for rule in self._rules(src, dst, link):
                _ipt(["-A", self.chain, *rule])
            self.links[(src, dst)] = link
        self._stop_unused()

    def _unlink(self, src: str, dst: str) -> None:
        link = self.links.pop((src, dst), None)
        if link is None:
            return
        for rule in self._rules(src, dst, link):     # by the queue the rule was made with
            _ipt(["-D", self.chain, *rule], check=False)

    def dead(self, pairs: list[tuple[str, str]] | None = None) -> list[str]:
        """One line per delayer that serves one of these links (None: any link) but has exited: those
        links have passed undelayed since (the rules' queue bypass), so the degradation did not hold."""
        out = []
        for key, d in sorted(self.delayers.items()):
            links = sorted(p for p, link in self.links.items() if link.queue == d.queue
                           and (pairs is None or p in pairs))
            if links and d.proc.poll() is not None:
                out.append(f"the delayer of queue {d.queue} ({key[0]:g}ms+-{key[1]:g}ms) exited with code "
                           f"{d.proc.returncode}: {', '.join(f'{s}->{t}' for s, t in links)} passed undelayed")
        return out

    def restore(self, pairs: list[tuple[str, str]] | None = None) -> None:
        """Remove the degradation of these links (None: of every link); stop the delayers left unused.
        Raises ClusterError (after removing them) when a delayer of these links had died (`dead`)."""
        dead = self.dead(None if pairs is None else [tuple(p) for p in pairs])
        self._restore(pairs)
        if dead:
            raise ClusterError("degrade: " + "; ".join(dead))

    def _restore(self, pairs: list[tuple[str, str]] | None) -> None:
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
