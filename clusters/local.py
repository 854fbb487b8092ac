"""The embedded default backend: controller and brokers as local processes on their own loopback addresses.

Node c0 (controller) listens on 127.A.B.1, broker nK on 127.A.B.(K+1); the prefix and ports come from
clusters/addresses.py under the run registry's lock, so concurrent runs never collide. Each node lives in
`run_dir/nodes/<node>/`: its config file (controller.json / broker.json), `data/`, the structured
`broker.log` and `stdout.log`. Every process started is recorded in the registry (clusters/run_registry.py)
so `highwater cleanup` can find it if the harness dies. Partitions are kernel packet drops between the
run's addresses (clusters/local_firewall.py); the firewall object is created at the first drop and
registered before it is installed. Partitions match on source addresses: the broker binds its outgoing
connections to its own host (broker/controller/client.open_connection_from), so they carry the node's
address, not 127.0.0.1. Degradation (delay, jitter, loss of one-way links) is the run's own mangle chain
plus delayer processes bound to netfilter queues (clusters/local_netem.py); it never touches a qdisc.
With a disk-full fault, each broker's `data/` is a tmpfs of its own (clusters/local_disks.py), which the
fault fills and frees; teardown copies the data back and unmounts it.

    cluster = LocalCluster(ClusterSpec(run_id, run_dir, brokers=3, broker_settings={...},
                                       controller_settings={...}))
    cluster.check_faults(["partition"])   # before start: raises ClusterError naming what is missing
    cluster.start()                        # returns when every node printed READY and accepts connections
    ...
    cluster.stop_all(); cluster.collect(run_dir); cluster.teardown()
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from clusters.addresses import Allocation, allocate
from clusters.base import (Cluster, ClusterError, ClusterSpec, Corruptible, Degradable, EventLogs,
                           Killable, NodeAddress, NodeTimeouts, Partitionable, Pausable, Stoppable)
from clusters.event_logs import parse_event_log
from clusters.local_firewall import Firewall, available_tool, make_firewall, short_id
from clusters.local_netem import Degradation
from clusters import local_disks, local_netem
from clusters.processes import NodeProcess
from clusters.run_registry import ProcessRecord, Registry
from clusters.storage_faults import StorageFault, corrupt_data_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTROLLER = "c0"

# (node, role "controller"|"node", config path) -> argv
CommandFactory = Callable[[str, str, Path], list[str]]


def broker_command(python: str = sys.executable) -> CommandFactory:
    """`python -m broker ROLE --config F` (the broker itself makes its outgoing connections leave from
    its configured host, which the partition rules match on)."""
    def command(node: str, role: str, config: Path) -> list[str]:
        return [python, "-m", "broker", role, "--config", str(config)]
    return command


class LocalCluster(Cluster, Killable, Stoppable, Pausable, Partitionable, Degradable, EventLogs, Corruptible,
                   local_disks.TmpfsDiskFill):
    backend_name = "local"

    def __init__(self, spec: ClusterSpec, *, registry: Registry | None = None,
                 command: CommandFactory | None = None, python: str = sys.executable,
                 firewall_tool: str | None = None, timeouts: NodeTimeouts = NodeTimeouts()):
        if spec.brokers < 1:
            raise ClusterError(f"a local cluster needs at least one broker, got brokers={spec.brokers}")
        self.spec = spec
        self.registry = registry or Registry()
        self.python = python
        self.command = command or broker_command(python)
        self.firewall_tool = firewall_tool
        self.timeouts = timeouts
        self._alloc: Allocation | None = None
        self._procs: dict[str, NodeProcess] = {}
        self._firewall: Firewall | None = None
        self._degradation: Degradation | None = None
        self._disks: local_disks.NodeDisks | None = None   # with a disk-full fault: each broker's tmpfs
        self._lock = threading.RLock()
        self.last_stop_report: list[str] = []

    # --- preflight -----------------------------------------------------------------------------------
    def check_faults(self, faults: list[str]) -> None:
        """Raise ClusterError if an enabled fault cannot be injected here (partitions need root and
        iptables or nft). Call before start()."""
        if any(f.startswith("partition") for f in faults):
            self.firewall_tool = self.firewall_tool or available_tool()
        if any(f.startswith("degrade") for f in faults):
            local_netem.available()
        if any(f.startswith("disk-full") for f in faults):
            local_disks.available()
            self._disks = local_disks.NodeDisks(short_id(self.spec.run_id))

    # --- layout --------------------------------------------------------------------------------------
    def _names(self) -> list[str]:
        return [CONTROLLER] + [f"n{i}" for i in range(1, self.spec.brokers + 1)]

    def _address(self, node: str) -> NodeAddress:
        if self._alloc is None:
            raise ClusterError(f"{node}: the cluster has no addresses yet (start() not called)")
        names = self._names()
        if node not in names:
            raise ClusterError(f"unknown node {node!r} (this cluster has {', '.join(names)})")
        i = names.index(node)
        return NodeAddress(node, self._alloc.host(i), self._alloc.port(i))

    def controller(self) -> NodeAddress:
        return self._address(CONTROLLER)

    def brokers(self) -> dict[str, NodeAddress]:
        return {n: self._address(n) for n in self._names()[1:]}

    def node_dir(self, node: str) -> Path:
        return Path(self.spec.run_dir).resolve() / "nodes" / node

    def layout(self) -> dict:
        """For test.json: {"backend": "local", "nodes": {"c0": {"host": ..., "port": ...}, ...}}."""
        return {"backend": "local", "prefix": self._alloc.prefix if self._alloc else None,
                "nodes": {n: {"host": a.host, "port": a.port}
                          for n, a in ({CONTROLLER: self.controller()} | self.brokers()).items()}}

    # --- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            if self._alloc is not None:
                raise ClusterError(f"cluster {self.spec.run_id} was already started")
            self._alloc = allocate(self.registry, self.spec.run_id, self.spec.brokers + 1,
                                   run_dir=str(Path(self.spec.run_dir).resolve()))
            try:
                env = dict(os.environ)
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
                env["PYTHONUNBUFFERED"] = "1"
                env["PYTHONFAULTHANDLER"] = "1"   # SIGABRT of a hung node dumps its stacks (processes.py)
                for node in self._names():
                    self._procs[node] = self._make_process(node, env)
                self._spawn(CONTROLLER)
                self._procs[CONTROLLER].wait_ready(self.timeouts.ready_s)
                for node in self._names()[1:]:
                    self._spawn(node)
                deadline = time.monotonic() + self.timeouts.ready_s
                for node in self._names()[1:]:
                    self._procs[node].wait_ready(max(0.5, deadline - time.monotonic()))
            except BaseException:
                self.teardown()
                raise

    def _make_process(self, node: str, env: dict[str, str]) -> NodeProcess:
        addr = self._address(node)
        d = self.node_dir(node)
        (d / "data").mkdir(parents=True, exist_ok=True)
        if self._disks is not None and node != CONTROLLER:
            self._disks.mount(node, d / "data")
        base = {"host": addr.host, "port": addr.port, "data_dir": str(d / "data"),
                "log_file": str(d / "broker.log")}
        if node == CONTROLLER:
            role, config_name, config = "controller", "controller.json", {**base, **self.spec.controller_settings}
        else:
            c = self.controller()
            role, config_name = "node", "broker.json"
            config = {"node_id": int(node[1:]), **base, "controller_host": c.host, "controller_port": c.port,
                      **self.spec.broker_settings}
        path = d / config_name
        path.write_text(json.dumps(config, indent=2) + "\n")
        return NodeProcess(addr, self.command(node, role, path), d / "stdout.log", d, env)

    def _spawn(self, node: str) -> NodeProcess:
        p = self._procs[node]
        p.spawn()
        self.registry.add_process(self.spec.run_id, ProcessRecord(node, p.pid, p.start_time, p.argv))
        return p

    def _proc(self, node: str) -> NodeProcess:
        self._address(node)  # validates the name
        if node not in self._procs:
            raise ClusterError(f"{node}: no process (cluster not started)")
        return self._procs[node]

    def stop_all(self) -> None:
        with self._lock:
            report = []
            for group in (self._names()[1:], [CONTROLLER]):
                procs = [self._procs[n] for n in group if n in self._procs]
                for p in procs:
                    p.request_stop()
                deadline = time.monotonic() + self.timeouts.stop_grace_s
                for p in procs:
                    pid = p.pid
                    report.append(p.finish_stop(deadline))
                    if pid is not None:
                        self.registry.drop_process(self.spec.run_id, pid)
            self.last_stop_report = report

    def teardown(self) -> None:
        with self._lock:
            errors = []
            try:
                self.stop_all()
            except Exception as exc:  # keep going: the firewall and registry must still be cleaned
                errors.append(f"stop: {exc}")
                for p in self._procs.values():
                    if p.alive():
                        try:
                            p.kill()
                        except Exception as kill_exc:
                            errors.append(f"kill {p.node}: {kill_exc}")
            if self._disks is not None:           # after the processes: they hold files in the mounts
                errors += [f"disk {e}" for e in self._disks.unmount_all()]
            for attr, label in (("_firewall", "firewall"), ("_degradation", "degradation")):
                installed = getattr(self, attr)
                if installed is not None:
                    try:
                        installed.remove()
                        setattr(self, attr, None)
                    except Exception as exc:
                        errors.append(f"{label}: {exc}")
            if not errors and self._alloc is not None:
                self.registry.remove(self.spec.run_id)  # kept on errors, so `highwater cleanup` finds it
            if errors:
                raise ClusterError(f"teardown of {self.spec.run_id} incomplete: {'; '.join(errors)}")

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    # --- process faults --------------------------------------------------------------------------------
    def kill(self, node: str) -> str:
        with self._lock:
            p = self._proc(node)
            pid = p.kill()
            self.registry.drop_process(self.spec.run_id, pid)
            return f"SIGKILL {node} pid {pid}"

    def restart(self, node: str) -> str:
        with self._lock:
            p = self._proc(node)
            if p.alive():
                return f"{node} already running (pid {p.pid})"
            self._spawn(node)
            p.wait_ready(self.timeouts.ready_s)
            return f"restarted {node} as pid {p.pid}"

    def stop(self, node: str) -> str:
        """SIGTERM (and SIGCONT, so a paused node can act on it); SIGKILL after `timeouts.stop_grace_s`."""
        with self._lock:
            p = self._proc(node)
            if not p.alive():
                return f"{node}: not running"
            pid = p.pid
            p.request_stop()
            what = p.finish_stop(time.monotonic() + self.timeouts.stop_grace_s)
            self.registry.drop_process(self.spec.run_id, pid)
            if p.proc.returncode == 0:
                return f"SIGTERM {node} pid {pid} (clean shutdown)"
            return f"SIGTERM {node} pid {pid}: {what.removeprefix(f'{node} pid {pid} ')}"

    def pause(self, node: str) -> str:
        with self._lock:
            p = self._proc(node)
            p.signal(signal.SIGSTOP)
            self._wait_state(p, lambda s: s == "T", "stopped")
            return f"SIGSTOP {node} pid {p.pid}"

    def resume(self, node: str) -> str:
        with self._lock:
            p = self._proc(node)
            p.signal(signal.SIGCONT)
            self._wait_state(p, lambda s: s != "T", "running")
            return f"SIGCONT {node} pid {p.pid}"

    @staticmethod
    def _wait_state(p: NodeProcess, ok, what: str, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = p.state()
            if state is None or ok(state):
                return
            time.sleep(0.01)
        raise ClusterError(f"{p.node} (pid {p.pid}) did not become {what} within {timeout_s:.0f}s")

    def is_running(self, node: str) -> bool:
        return self._proc(node).alive()

    def pid(self, node: str) -> int | None:
        p = self._proc(node)
        return p.pid if p.alive() else None

    def process_state(self, node: str) -> str | None:
        """Kernel state letter of the node's process (T = paused), None when not running."""
        return self._proc(node).state()

    # --- network faults --------------------------------------------------------------------------------
    def drop(self, pairs: list[tuple[str, str]]) -> str:
        with self._lock:
            resolved = [(self._address(s).host, self._address(d).host) for s, d in pairs]
            if self._firewall is None:
                fw = make_firewall(self.spec.run_id, self.firewall_tool)
                self.registry.update(self.spec.run_id, lambda e: setattr(e, "firewall", fw.describe()))
                fw.install()
                self._firewall = fw
            self._firewall.drop(resolved)
            return "dropping " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to drop"

    def heal(self, pairs: list[tuple[str, str]] | None = None) -> str:
        """Remove every drop rule (pairs None), or only the one-way drops src -> dst named (partial heal)."""
        with self._lock:
            if pairs is not None:
                resolved = [(self._address(s).host, self._address(d).host) for s, d in pairs]
                if self._firewall is not None:
                    self._firewall.heal(resolved)
                return "healed " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to heal"
            if self._firewall is None:
                return "no drop rules installed"
            self._firewall.heal()
            return "healed (all drop rules removed)"

    # --- storage faults ---------------------------------------------------------------------------------
    def corrupt(self, node: str, how: str, *, partition: int | None = None, seed: int = 0) -> StorageFault:
        """Damage broker `node`'s data files in nodes/<node>/data (clusters/storage_faults.py); it must be down."""
        with self._lock:
            if node == CONTROLLER:
                raise ClusterError(f"{node}: corrupt applies to brokers, not the controller")
            self._address(node)  # validates the name
            if self.is_running(node):
                raise ClusterError(f"{node}: cannot corrupt its data files while it runs (kill or stop it first)")
            try:
                fault = corrupt_data_dir(self.node_dir(node) / "data", how, partition=partition, seed=seed)
            except ValueError as exc:
                raise ClusterError(f"{node}: {exc}") from None
            return fault.labelled(node)

    # --- disk-full (clusters/local_disks.py) ---------------------------------------------------------
    def _check_broker(self, node: str) -> None:
        self._address(node)  # validates the name
        if node == CONTROLLER:
            raise ClusterError(f"{node}: disk-full applies to brokers, not the controller")

    # --- event logs -------------------------------------------------------------------------------------
    def events(self, node: str) -> list[dict]:
        """The node's event log so far: nodes/<node>/broker.log in the run directory, parsed."""
        self._address(node)  # validates the name
        try:
            data = (self.node_dir(node) / "broker.log").read_bytes()
        except FileNotFoundError:
            return []
        return parse_event_log(data)

    def firewall(self) -> Firewall | None:
        return self._firewall

    def degrade(self, pairs: list[tuple[str, str]], *, delay_ms: float, jitter_ms: float = 0.0,
                loss_pct: float = 0.0) -> str:
        """Delay/loss on the one-way links src -> dst (clusters/local_netem.py: the run's mangle chain and a
        delayer process, recorded in the registry, per delay setting)."""
        with self._lock:
            resolved = [(self._address(s).host, self._address(d).host) for s, d in pairs]
            if self._degradation is None:
                env = dict(os.environ)
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
                run_id = self.spec.run_id
                self._degradation = Degradation(
                    run_id, python=self.python, env=env,
                    on_spawn=lambda d: self.registry.add_process(
                        run_id, ProcessRecord(f"delay-{d.queue}", d.proc.pid, d.start_time, d.argv)),
                    on_exit=lambda d: self.registry.drop_process(run_id, d.proc.pid))
            self._degradation.degrade(resolved, delay_ms=delay_ms, jitter_ms=jitter_ms, loss_pct=loss_pct,
                                      seed=int(short_id(self.spec.run_id), 16))
            what = f"{delay_ms:g}ms+-{jitter_ms:g}ms loss {loss_pct:g}%"
            return (f"degrading {', '.join(f'{s}->{d}' for s, d in pairs)}: {what}" if pairs
                    else "nothing to degrade")

    def restore(self, pairs: list[tuple[str, str]] | None = None) -> str:
        with self._lock:
            resolved = None if pairs is None else [(self._address(s).host, self._address(d).host) for s, d in pairs]
            if self._degradation is None:
                return "no degradation installed" if pairs is None else \
                    "restored " + ", ".join(f"{s}->{d}" for s, d in pairs)
            self._degradation.restore(resolved)
            if pairs is None:
                return "restored (all degradation removed)"
            return "restored " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to restore"

    def degradation(self) -> Degradation | None:
        return self._degradation

    # --- ground truth ----------------------------------------------------------------------------------
    def collect(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        with self._lock:
            running = [n for n in self._names()[1:] if n in self._procs and self._procs[n].alive()]
            if running:
                raise ClusterError(f"collect needs stopped brokers; still running: {', '.join(running)}")
            failures = []
            for node in self._names():
                src, dst = self.node_dir(node), run_dir / "nodes" / node
                if src.resolve() != dst.resolve():
                    dst.mkdir(parents=True, exist_ok=True)
                    for name in ("broker.log", "stdout.log"):
                        if (src / name).exists():
                            shutil.copy2(src / name, dst / name)
            for node in self._names()[1:]:
                out = run_dir / "replicas" / node
                out.mkdir(parents=True, exist_ok=True)
                argv = [self.python, "-m", "broker", "dump", str(self.node_dir(node) / "data"),
                        "--out", str(out), "--node", node]
                env = dict(os.environ)
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
                r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
                if r.returncode != 0:
                    failures.append(f"{node}: dump exited {r.returncode}: "
                                    f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
            if failures:
                raise ClusterError("collect: " + "; ".join(failures))
