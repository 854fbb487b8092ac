"""Process faults on an external cluster's brokers through SSH: `--cluster external --nodes-file FILE`.

The brokers run on hosts someone else manages; the harness installs and starts nothing there. A nodes
file (the SSH backend's format and keys, clusters/ssh.py, with a [[broker]] per broker and no
[controller]) says how to log in to each broker's host and how to find and restart its process:

    known_hosts = "~/.ssh/known_hosts"        # optional
    [defaults]
    user = "root"
    key = "~/.ssh/id_ed25519"
    [[broker]]
    host = "10.0.0.2"                         # SSH address
    service_port = 9092                       # the broker's Kafka port there (default 9092)
    node_id = 1                               # optional: its Kafka node id (default: the broker that
                                              # Metadata lists at host:service_port)
    restart = "systemctl start kafka"         # starts it again after a kill; must return

kill = SIGKILL of the process listening on service_port (found with `ss -ltnp`), restart = the entry's
`restart` command, then a wait until the port listens again; pause/resume = SIGSTOP/SIGCONT of that
process. Only these process faults (kill, kill-leader, pause, pause-leader) are offered: there is no
controller node to act on, and network faults are not built for this backend.
"""
from __future__ import annotations

import shlex
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from clusters.base import ClusterError, ClusterSpec, Killable, Pausable
from clusters.external import ExternalAccess, ExternalCluster
from clusters.ssh import NODE, parse_ssh_entry, read_nodes_file
from clusters.ssh_control import SshNode, SshTarget
from rundir.settings import Setting, declare, header_lines

BROKER_PORT = 9092

ENTRY = {**NODE, **declare(
    Setting("node_id", int, None, "the broker's Kafka node id (default: matched by host and service_port)", min=0),
    Setting("restart", str, "", "shell command that starts the broker again after a kill (must return)"),
)}
TOP = declare(
    Setting("known_hosts", str, "", "host keys are checked against this file"),
    Setting("defaults", dict, {}, "applied to every [[broker]]"),
    Setting("broker", list, [], "one [[broker]] per broker of the cluster"),
)


@dataclass
class HostEntry:
    target: SshTarget
    service_port: int
    node_id: int | None
    restart: str
    where: str               # "[[broker]] #2 (line 7)"


@dataclass
class HostsFile:
    path: Path
    brokers: list[HostEntry]
    known_hosts: Path | None


def load_hosts_file(path: Path | str) -> HostsFile:
    """Read and validate an external cluster's nodes file; ClusterError names the file, entry and field."""
    path = Path(path)
    text, top = read_nodes_file(path, TOP, "unknown key {key!r} for the external backend (known: {known})")
    if not top["broker"]:
        raise ClusterError(f"nodes file {path}: needs at least one [[broker]] entry")
    lines = header_lines(text, "broker")
    brokers = []
    for i, raw in enumerate(top["broker"]):
        where = f"[[broker]] #{i + 1}" + (f" (line {lines[i]})" if i < len(lines) else "")
        target, v = parse_ssh_entry(path, where, raw, top["defaults"], ENTRY, f"broker #{i + 1}")
        brokers.append(HostEntry(target, v["service_port"] or BROKER_PORT, v["node_id"], v["restart"], where))
    known = top["known_hosts"]
    return HostsFile(path, brokers, Path(known).expanduser() if known else None)


class ExternalHostsCluster(ExternalCluster, Killable, Pausable):
    """An external cluster whose brokers' hosts are reachable over SSH: process faults on the brokers."""

    def __init__(self, spec: ClusterSpec, access: ExternalAccess = ExternalAccess(), *,
                 command_timeout_s: float = 30.0, ready_timeout_s: float = 30.0, timeout_s: float = 5.0):
        super().__init__(spec, access, ready_timeout_s=ready_timeout_s, timeout_s=timeout_s)
        self.hosts = load_hosts_file(access.nodes_file)
        self.accept_unknown_hosts = access.accept_unknown_hosts
        self.command_timeout_s = command_timeout_s
        self._entries: dict[str, HostEntry] = {}
        self._ssh: dict[str, SshNode] = {}
        self._lock = threading.RLock()

    def check_faults(self, faults: list[str]) -> None:
        self._offered_only(faults, "a nodes file", ": process faults on the brokers' hosts")
        if any(f.startswith("kill") for f in faults):
            missing = [e.where for e in self.hosts.brokers if not e.restart.strip()]
            if missing:
                raise ClusterError(f"nodes file {self.hosts.path}: {', '.join(missing)}: field 'restart' is needed "
                                   "by kill faults (the command that starts the broker again)")

    def prepare(self) -> None:
        super().prepare()
        by_id = {nid: name for name, nid in self._node_ids.items()}
        by_address = {(a.host, a.port): name for name, a in self._brokers.items()}
        for e in self.hosts.brokers:
            name = by_id.get(e.node_id) if e.node_id is not None else by_address.get((e.target.host, e.service_port))
            if name is None:
                wanted = f"node id {e.node_id}" if e.node_id is not None else f"{e.target.host}:{e.service_port}"
                raise ClusterError(f"nodes file {self.hosts.path}: {e.where}: the cluster's Metadata lists no broker "
                                   f"at {wanted} (it lists {self._listing()}); set node_id")
            if name in self._entries:
                raise ClusterError(f"nodes file {self.hosts.path}: {e.where}: broker {name} is listed twice")
            self._entries[name] = e
        self._check_every_broker_bound(self._entries, f"nodes file {self.hosts.path}", "[[broker]] host")
        for name, e in self._entries.items():
            self._ssh[name] = SshNode(SshTarget(name, e.target.host, e.target.port, e.target.user, e.target.key_file,
                                                e.target.agent), known_hosts=self.hosts.known_hosts,
                                      accept_unknown_hosts=self.accept_unknown_hosts,
                                      command_timeout_s=self.command_timeout_s).connect()

    def layout(self) -> dict:
        out = super().layout()
        for name, e in self._entries.items():
            out["nodes"][name]["ssh"] = f"{e.target.user}@{e.target.host}:{e.target.port}"
        return out

    # --- the broker's process ----------------------------------------------------------------------
    def _host(self, node: str) -> tuple[SshNode, HostEntry]:
        if node not in self._ssh:
            raise ClusterError(f"unknown node {node!r} (the external cluster's hosts: "
                               f"{', '.join(self._ssh) or 'none'})")
        return self._ssh[node], self._entries[node]

    def pid(self, node: str) -> int | None:
        """The pid of the process listening on the broker's port on its host, None when nothing listens."""
        ssh, e = self._host(node)
        r = ssh.run(f"ss -Hltnp {shlex.quote(f'sport = :{e.service_port}')} | grep -o 'pid=[0-9]*' | cut -d= -f2 "
                    "| sort -u")
        pids = [int(p) for p in r.stdout.split() if p.isdigit()]
        if len(pids) > 1:
            raise ClusterError(f"{node} ({e.target.host}): more than one process listens on port {e.service_port}: "
                               f"{', '.join(map(str, pids))}")
        return pids[0] if pids else None

    def _signal(self, node: str, sig: str) -> int:
        pid = self.pid(node)
        if pid is None:
            ssh, e = self._host(node)
            raise ClusterError(f"{node} ({e.target.host}): kill -{sig}: no process listens on port {e.service_port}")
        self._ssh[node].run(f"kill -{sig} {pid}")
        return pid

    def kill(self, node: str) -> str:
        with self._lock:
            pid = self._signal(node, "KILL")
            ssh, e = self._host(node)
            deadline = time.monotonic() + 10
            while self.pid(node) == pid and time.monotonic() < deadline:
                time.sleep(0.05)
            return f"SIGKILL {node} pid {pid} on {e.target.host}"

    def restart(self, node: str) -> str:
        with self._lock:
            ssh, e = self._host(node)
            pid = self.pid(node)
            if pid is not None:
                return f"{node} already running (pid {pid})"
            if not e.restart.strip():
                raise ClusterError(f"{node}: nodes file {self.hosts.path}: {e.where} has no 'restart' command")
            r = ssh.run(f"( {e.restart} ) </dev/null >/dev/null 2>&1", check=False)
            if r.exit_status != 0:
                raise ClusterError(f"{node} ({e.target.host}): restart command `{e.restart}` exited {r.exit_status}")
            deadline = time.monotonic() + self.ready_timeout_s
            while (pid := self.pid(node)) is None:
                if time.monotonic() > deadline:
                    raise ClusterError(f"{node} ({e.target.host}): nothing listens on port {e.service_port} "
                                       f"{self.ready_timeout_s:.0f}s after `{e.restart}`")
                time.sleep(0.1)
            return f"restarted {node} as pid {pid} (`{e.restart}`)"

    def pause(self, node: str) -> str:
        with self._lock:
            return f"SIGSTOP {node} pid {self._signal(node, 'STOP')}"

    def resume(self, node: str) -> str:
        with self._lock:
            return f"SIGCONT {node} pid {self._signal(node, 'CONT')}"

    def is_running(self, node: str) -> bool:
        """Whether a process listens on the broker's port on its host (a paused one counts)."""
        return self.pid(node) is not None

    def teardown(self) -> None:
        for ssh in self._ssh.values():
            ssh.close()
