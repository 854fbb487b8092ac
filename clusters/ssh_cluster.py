"""A cluster whose nodes are reached over SSH: the part the SSH and Docker backends share.

`RemoteCluster` implements the Cluster interface and every capability (Killable, Stoppable, Pausable,
Partitionable, Degradable; clusters/base.py) on top of one `SshNode` per node (clusters/ssh_control.py).
Subclasses only say how nodes come to exist (`_provision`: containers, or hosts from a nodes file) and
how they go away (`_deprovision`); everything else is common:

- Node configs are written locally to `run_dir/nodes/<node>/controller.json|broker.json` (as on the local
  backend) and uploaded to the node's remote directory `<workdir>/runs/<run id>/<node>/`, which also holds
  `data/`, `broker.log`, `stdout.log` (earlier starts' output is appended to `stdout.prev.log`) and
  `server.pid`.
- Daemons: `python3 -m broker controller|node --config ...` under nohup; start() returns when each has
  printed READY. kill = SIGKILL, stop = SIGTERM (SIGKILL after the stop grace), pause/resume =
  SIGSTOP/SIGCONT (the Docker backend freezes the whole container instead), restart = start again with
  the same data directory.
- Partitions: a one-way drop src -> dst is a DROP rule for src's address in the run's chain on dst (the
  local backend's rule model, applied on the receiving node).
- Degradation: likewise on dst: its mangle chain queues src's packets to a delayer daemon on dst
  (clusters/ssh_control.RemoteDegradation; the node needs python3 and iptables, as for partitions).
- collect(): node logs to `run_dir/nodes/<node>/`; `python3 -m broker dump` runs on each broker and its
  output is downloaded to `run_dir/replicas/<node>/`.
"""
from __future__ import annotations

import json
import posixpath
import shlex
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from clusters.base import (Cluster, ClusterError, ClusterSpec, Degradable, EventLogs, Killable, NodeAddress,
                           NodeTimeouts, Partitionable, Pausable, Stoppable)
from clusters.event_logs import parse_event_log
from clusters.local_firewall import short_id
from clusters.ssh_control import RemoteDegradation, RemoteFirewall, SshNode

CONTROLLER = "c0"
CONTROLLER_PORT = 9000
BROKER_PORT = 9092
PIDFILE = "server.pid"


def dump_command(python: str, code_dir: str, rdir: str, node: str) -> str:
    """The remote shell command that dumps a broker's data dir into `rdir/dump`; every value quoted."""
    q = shlex.quote
    out = posixpath.join(rdir, "dump")
    return (f"rm -rf {q(out)} && mkdir -p {q(out)} && cd {q(rdir)} && "
            f"PYTHONPATH={q(code_dir)} {q(python)} -m broker dump "
            f"{q(posixpath.join(rdir, 'data'))} --out {q(out)} --node {q(node)}")


def parallel(fn, items, *, what: str) -> list:
    """fn(item) for every item on threads; raise one ClusterError listing every failure."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = [(item, pool.submit(fn, item)) for item in items]
        results, errors = [], []
        for item, fut in futures:
            try:
                results.append(fut.result())
            except Exception as exc:  # noqa: BLE001 - collected and reported together
                errors.append(str(exc) if isinstance(exc, ClusterError) else f"{item}: {type(exc).__name__}: {exc}")
    if errors:
        raise ClusterError(f"{what}: " + "; ".join(errors))
    return results


class RemoteCluster(Cluster, Killable, Stoppable, Pausable, Partitionable, Degradable, EventLogs):
    backend_name = "remote"
    python = "python3"

    def __init__(self, spec: ClusterSpec, *, timeouts: NodeTimeouts = NodeTimeouts()):
        if spec.brokers < 1:
            raise ClusterError(f"a cluster needs at least one broker, got brokers={spec.brokers}")
        self.spec = spec
        self.timeouts = timeouts
        self._addresses: dict[str, NodeAddress] = {}
        self._ssh: dict[str, SshNode] = {}
        self._firewalls: dict[str, RemoteFirewall] = {}
        self._degradations: dict[str, RemoteDegradation] = {}
        self._started: set[str] = set()      # nodes whose daemon was started at least once
        self._lock = threading.RLock()
        self._provisioned = False

    # --- what subclasses provide ---------------------------------------------------------------------
    def _provision(self) -> None:
        """Make the nodes exist and be reachable: fill self._addresses and self._ssh (connected)."""
        raise NotImplementedError

    def _deprovision(self, errors: list[str]) -> None:
        """Remove what _provision created (append problems to errors instead of raising)."""

    def workdir(self, node: str) -> str:
        """Remote base directory for this node (runs live under <workdir>/runs/<run id>/)."""
        raise NotImplementedError

    def code_dir(self, node: str) -> str:
        """Remote directory holding the `broker` package (PYTHONPATH for the daemons)."""
        raise NotImplementedError

    def _reachable(self, node: str) -> None:
        """Make sure the node's SSH endpoint answers (the Docker backend starts a crashed container)."""

    # --- layout ------------------------------------------------------------------------------------------
    def _names(self) -> list[str]:
        return [CONTROLLER] + [f"n{i}" for i in range(1, self.spec.brokers + 1)]

    def _check(self, node: str) -> None:
        if node not in self._names():
            raise ClusterError(f"unknown node {node!r} (this cluster has {', '.join(self._names())})")
        if node not in self._addresses:
            raise ClusterError(f"{node}: the cluster has no addresses yet (start() not called)")

    def controller(self) -> NodeAddress:
        self._check(CONTROLLER)
        return self._addresses[CONTROLLER]

    def brokers(self) -> dict[str, NodeAddress]:
        return {n: self._address_or_fail(n) for n in self._names()[1:]}

    def _address_or_fail(self, node: str) -> NodeAddress:
        self._check(node)
        return self._addresses[node]

    def node_dir(self, node: str) -> Path:
        """Local directory of the node in the run (config, collected logs)."""
        return Path(self.spec.run_dir).resolve() / "nodes" / node

    def remote_dir(self, node: str) -> str:
        return posixpath.join(self.workdir(node), "runs", self.spec.run_id, node)

    def ssh(self, node: str) -> SshNode:
        self._check(node)
        return self._ssh[node]

    def layout(self) -> dict:
        return {"backend": self.backend_name,
                "nodes": {n: {"host": a.host, "port": a.port} for n, a in self._addresses.items()}}

    # --- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            if self._provisioned:
                raise ClusterError(f"cluster {self.spec.run_id} was already started")
            self._provisioned = True
            try:
                self._provision()
                parallel(self._prepare_node, self._names(), what="preparing nodes")
                self._start_daemon(CONTROLLER)
                self._wait_ready(CONTROLLER)
                parallel(self._start_daemon, self._names()[1:], what="starting brokers")
                parallel(self._wait_ready, self._names()[1:], what="waiting for brokers")
            except BaseException:
                self.teardown()
                raise

    def _config(self, node: str) -> tuple[str, str, dict]:
        addr, rdir = self._addresses[node], self.remote_dir(node)
        base = {"host": addr.host, "port": addr.port, "data_dir": posixpath.join(rdir, "data"),
                "log_file": posixpath.join(rdir, "broker.log")}
        if node == CONTROLLER:
            return "controller", "controller.json", {**base, **self.spec.controller_settings}
        c = self._addresses[CONTROLLER]
        return "node", "broker.json", {"node_id": int(node[1:]), **base, "controller_host": c.host,
                                       "controller_port": c.port, **self.spec.broker_settings}

    def _prepare_node(self, node: str) -> None:
        role, name, config = self._config(node)
        text = json.dumps(config, indent=2) + "\n"
        local = self.node_dir(node)
        local.mkdir(parents=True, exist_ok=True)
        (local / name).write_text(text)
        rdir = self.remote_dir(node)
        ssh = self._ssh[node]
        ssh.run(f"mkdir -p {shlex.quote(posixpath.join(rdir, 'data'))}")
        ssh.write_file(posixpath.join(rdir, name), text.encode())

    def _start_daemon(self, node: str) -> int:
        role, name, _ = self._config(node)
        rdir = self.remote_dir(node)
        ssh = self._ssh[node]
        q = shlex.quote(rdir)
        ssh.run(f"cd {q} && if [ -s stdout.log ]; then cat stdout.log >> stdout.prev.log; fi; true")
        pid = ssh.start_daemon([self.python, "-m", "broker", role, "--config", posixpath.join(rdir, name)],
                               cwd=rdir, env={"PYTHONPATH": self.code_dir(node), "PYTHONUNBUFFERED": "1"},
                               stdout=posixpath.join(rdir, "stdout.log"), pidfile=posixpath.join(rdir, PIDFILE))
        self._started.add(node)
        return pid

    def _wait_ready(self, node: str) -> str:
        rdir = self.remote_dir(node)
        return self._ssh[node].wait_ready(stdout=posixpath.join(rdir, "stdout.log"),
                                          pidfile=posixpath.join(rdir, PIDFILE), timeout_s=self.timeouts.ready_s)

    def _pidfile(self, node: str) -> str:
        return posixpath.join(self.remote_dir(node), PIDFILE)

    def stop_all(self) -> None:
        with self._lock:
            report = []
            for group in (self._names()[1:], [CONTROLLER]):
                live = [n for n in group if n in self._ssh and n in self._started]

                def stop(node: str) -> str:
                    self._reachable(node)
                    return f"{node}: " + self._ssh[node].stop_daemon(self._pidfile(node),
                                                                      grace_s=self.timeouts.stop_grace_s)
                report += parallel(stop, live, what="stopping daemons")
            self.last_stop_report = report

    def teardown(self) -> None:
        with self._lock:
            errors: list[str] = []
            if self._ssh:
                try:
                    self.stop_all()
                except Exception as exc:  # noqa: BLE001 - the rest must still be cleaned
                    errors.append(f"stop: {exc}")
                for what, held in (("firewall", self._firewalls), ("degradation", self._degradations)):
                    for node, rules in list(held.items()):
                        try:
                            rules.remove()
                            del held[node]
                        except Exception as exc:  # noqa: BLE001
                            errors.append(f"{what} on {node}: {exc}")
            self._deprovision(errors)
            for ssh in self._ssh.values():
                ssh.close()
            self._started.clear()        # a second teardown has no daemon left to stop
            if errors:
                raise ClusterError(f"teardown of {self.spec.run_id} incomplete: {'; '.join(errors)}")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    # --- process faults ------------------------------------------------------------------------------------
    def kill(self, node: str) -> str:
        with self._lock:
            pid = self.ssh(node).signal(self._pidfile(node), "KILL")
            return f"SIGKILL {node} pid {pid}"

    def restart(self, node: str) -> str:
        with self._lock:
            self._check(node)
            self._reachable(node)
            pid = self._ssh[node].pid_of(self._pidfile(node))
            if pid is not None:
                return f"{node} already running (pid {pid})"
            pid = self._start_daemon(node)
            self._wait_ready(node)
            return f"restarted {node} as pid {pid}"

    def pause(self, node: str) -> str:
        with self._lock:
            pid = self.ssh(node).signal(self._pidfile(node), "STOP")
            self._wait_state(node, lambda s: s == "T", "stopped")
            return f"SIGSTOP {node} pid {pid}"

    def resume(self, node: str) -> str:
        with self._lock:
            pid = self.ssh(node).signal(self._pidfile(node), "CONT")
            self._wait_state(node, lambda s: s != "T", "running")
            return f"SIGCONT {node} pid {pid}"

    def _wait_state(self, node: str, ok, what: str, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self._ssh[node].process_state(self._pidfile(node))
            if state is None or ok(state):
                return
            time.sleep(0.02)
        raise ClusterError(f"{node}: daemon did not become {what} within {timeout_s:.0f}s")

    def is_running(self, node: str) -> bool:
        return self.remote_pid(node) is not None

    def remote_pid(self, node: str) -> int | None:
        """The daemon's pid on its node (not a local pid), None when not running."""
        return self.ssh(node).pid_of(self._pidfile(node))

    def stop(self, node: str) -> str:
        """Graceful stop of one node's daemon (SIGTERM, SIGKILL after the grace); restart() starts it."""
        with self._lock:
            self._check(node)
            self._reachable(node)
            return f"{node}: " + self._ssh[node].stop_daemon(self._pidfile(node), grace_s=self.timeouts.stop_grace_s)

    def process_state(self, node: str) -> str | None:
        return self.ssh(node).process_state(self._pidfile(node))

    # --- network faults ------------------------------------------------------------------------------------
    def _firewall_shell(self, node: str):
        """What runs the node's iptables commands (an SshNode; the Docker backend may reach a frozen
        container's network namespace from the host instead)."""
        return self._ssh[node]

    def _firewall(self, node: str) -> RemoteFirewall:
        if node not in self._firewalls:
            self._firewalls[node] = RemoteFirewall(self._firewall_shell(node), self.spec.run_id)
        return self._firewalls[node]

    def drop(self, pairs: list[tuple[str, str]]) -> str:
        with self._lock:
            by_dst = self._by_dst(pairs)
            parallel(lambda d: self._firewall(d).drop_from(by_dst[d]), by_dst, what="installing drops")
            return "dropping " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to drop"

    def heal(self, pairs: list[tuple[str, str]] | None = None) -> str:
        with self._lock:
            if pairs is not None:
                return self._heal_pairs(pairs)
            installed = [n for n, fw in self._firewalls.items() if fw.installed]
            if not installed:
                return "no drop rules installed"
            parallel(lambda n: self._firewalls[n].heal(), installed, what="healing")
            return "healed (all drop rules removed)"

    def _heal_pairs(self, pairs: list[tuple[str, str]]) -> str:
        """Partial heal: delete only the drops src -> dst named (on each dst, the rules for src)."""
        by_dst = self._by_dst(pairs)
        live = [d for d in by_dst if d in self._firewalls]
        parallel(lambda d: self._firewalls[d].heal_from(by_dst[d]), live, what="healing")
        return "healed " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to heal"

    # --- event logs -------------------------------------------------------------------------------------------
    def events(self, node: str) -> list[dict]:
        """The node's event log so far, read over SFTP from its remote directory (sshd keeps answering while
        the broker process is killed or SIGSTOPped)."""
        return parse_event_log(self._read_event_log(node))

    def _read_event_log(self, node: str) -> bytes:
        self._check(node)
        ssh, remote = self._ssh[node], posixpath.join(self.remote_dir(node), "broker.log")
        try:
            return ssh.read_file(remote)
        except ClusterError as exc:
            if ssh.run(f"test -f {shlex.quote(remote)}", check=False).exit_status != 0:
                return b""          # not written yet
            raise ClusterError(f"{node}: cannot read its event log: {exc}") from None

    def _degradation(self, node: str) -> RemoteDegradation:
        if node not in self._degradations:
            self._degradations[node] = RemoteDegradation(self._ssh[node], self.spec.run_id, self.remote_dir(node),
                                                         self.python)
        return self._degradations[node]

    def degrade(self, pairs: list[tuple[str, str]], *, delay_ms: float, jitter_ms: float = 0.0,
                loss_pct: float = 0.0) -> str:
        """Delay/loss of the links src -> dst, applied on each dst (its mangle chain and delayer daemons)."""
        if delay_ms < 0 or jitter_ms < 0 or not 0 <= loss_pct <= 100:
            raise ClusterError(f"degrade: delay_ms and jitter_ms must be >= 0 and loss_pct in 0..100, got "
                               f"delay_ms={delay_ms}, jitter_ms={jitter_ms}, loss_pct={loss_pct}")
        with self._lock:
            by_dst = self._by_dst(pairs)
            seed = int(short_id(self.spec.run_id), 16)
            parallel(lambda d: self._degradation(d).degrade(by_dst[d], delay_ms, jitter_ms, loss_pct, seed),
                     by_dst, what="degrading")
            what = f"{delay_ms:g}ms+-{jitter_ms:g}ms loss {loss_pct:g}%"
            return (f"degrading {', '.join(f'{s}->{d}' for s, d in pairs)}: {what}" if pairs
                    else "nothing to degrade")

    def restore(self, pairs: list[tuple[str, str]] | None = None) -> str:
        with self._lock:
            if pairs is None:
                live = [n for n, deg in self._degradations.items() if deg.installed]
                if not live:
                    return "no degradation installed"
                parallel(lambda n: self._degradations[n].restore(), live, what="restoring")
                return "restored (all degradation removed)"
            by_dst = self._by_dst(pairs)
            live = [d for d in by_dst if d in self._degradations]
            parallel(lambda d: self._degradations[d].restore(by_dst[d]), live, what="restoring")
            return "restored " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to restore"

    def _by_dst(self, pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
        """The source hosts of the links src -> dst, by dst (every node name checked first)."""
        for s, d in pairs:
            self._check(s)
            self._check(d)
        by_dst: dict[str, list[str]] = {}
        for s, d in pairs:
            by_dst.setdefault(d, []).append(self._addresses[s].host)
        return by_dst

    def degrade_rules(self, node: str) -> list[str]:
        """The rules currently in the run's degradation chain on `node` (for tests and diagnostics)."""
        deg = self._degradations.get(node)
        return deg.rules() if deg is not None and deg.installed else []

    def drop_rules(self, node: str) -> list[str]:
        """The DROP rules currently in the run's chain on `node` (for tests and diagnostics)."""
        fw = self._firewalls.get(node)
        return fw.rules() if fw is not None and fw.installed else []

    # --- ground truth ----------------------------------------------------------------------------------------
    def collect(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        with self._lock:
            running = [n for n in self._names()[1:] if n in self._started and self.is_running(n)]
            if running:
                raise ClusterError(f"collect needs stopped brokers; still running: {', '.join(running)}")

            def one(node: str) -> None:
                self._reachable(node)
                ssh, rdir = self._ssh[node], self.remote_dir(node)
                dst = run_dir / "nodes" / node
                dst.mkdir(parents=True, exist_ok=True)
                for name in ("broker.log", "stdout.log", "stdout.prev.log"):
                    remote = posixpath.join(rdir, name)
                    if ssh.run(f"test -f {shlex.quote(remote)}", check=False).exit_status == 0:
                        (dst / name).write_bytes(ssh.read_file(remote))
                if node == CONTROLLER:
                    return
                out = posixpath.join(rdir, "dump")
                ssh.run(dump_command(self.python, self.code_dir(node), rdir, node), timeout_s=300)
                ssh.download_tree(out, run_dir / "replicas" / node)
            parallel(one, self._names(), what="collect")
