"""The Docker backend: each node a container on the run's own network, driven over SSH like the SSH backend.

    cluster = DockerCluster(ClusterSpec(run_id, run_dir, brokers=3, broker_settings={...}))
    cluster.start()        # image (built if missing), network, containers, sshd, daemons READY
    ...
    cluster.stop_all(); cluster.collect(run_dir); cluster.teardown()

Constructing the cluster fails at once with a one-line ClusterError when no Docker engine answers.
The image is `highwater/node:<code hash>` (clusters/docker_image.py), built when missing unless `image`
names one; `ImageBuild.base_image` names an existing base image instead of the debootstrap one. Hosts,
addresses and keys: clusters/docker_hosts.py. The controller c0 listens on <prefix>.2:9000, broker nK on
<prefix>.(K+2):9092, reachable from the host.

Faults (through clusters/ssh_cluster.py, the SSH backend's code path, except where noted):
- kill: SIGKILL of the broker process (default), or, with `kill_mode="node"`, a whole-node crash:
  `docker kill` of the container; restart then does `docker start` and starts the daemon again.
  `crash(node)` does the node crash whatever the mode.
- stop: SIGTERM of the broker process, SIGKILL after the stop grace (a paused container is unpaused first).
- pause / resume: `docker pause` / `docker unpause` (the whole node freezes, sshd included).
- partitions: iptables DROP rules inside the receiving container (NET_ADMIN).
- degradation (delay, jitter, loss): the receiving container's mangle chain queues the source's packets to
  a delayer daemon in that container (clusters/ssh_control.RemoteDegradation). A crashed container loses
  its rules and delayers with its network namespace and processes; its degraded links are remembered
  (as are degrade/restore steps made while it is down) and installed again when it starts, as drops are.
- power-loss: SIGKILL of a broker running with `power_loss = true`, as on the local backend.
- corrupt (Corruptible): with the broker down (its process killed, or its container crashed), the node's
  data directory is copied out with the engine's archive API (get_archive works on a stopped container),
  damaged here by clusters/storage_faults.py and the changed files put back (put_archive); a deleted
  file is removed with `docker exec rm` (a running container, kill mode "process") and refused on a
  stopped container, which cannot run a command.
- disk-full (DiskFillable): when the run's faults include it (`check_faults`), each broker's data
  directory is a tmpfs of its own mounted on this host at `disks/<node>` of the run directory and
  bind-mounted into the container (clusters/local_disks.py); the fault fills and frees it from the host,
  so it works whatever the container's state, and the data outlives a container crash as a disk would.
  It needs root here and the engine on this machine (its unix socket): a bind mount names a path on the
  engine's host. Teardown unmounts it once the containers are gone (the replica dumps are collected
  before).

Teardown removes exactly the run's containers and network (images are a cache and stay); the same
labels let `highwater cleanup` remove what a killed harness left (clusters/docker_leftovers.py).
"""
from __future__ import annotations

import os
import posixpath
import shlex
import signal
import subprocess
import time
from pathlib import Path

from clusters import local_disks
from clusters.base import ClusterError, ClusterSpec, Corruptible, NodeAddress, NodeTimeouts
from clusters.docker_hosts import DockerHosts, engine
from clusters.docker_image import CODE_DIR, ImageBuild, ensure_node_image
from clusters.local_firewall import short_id
from clusters.ssh_cluster import BROKER_PORT, CONTROLLER, CONTROLLER_PORT, RemoteCluster
from clusters.run_registry import proc_state as _state
from clusters.ssh_control import RemoteResult, SshNode, SshTarget
from clusters.storage_faults import STORAGE_FAULTS, StorageFault, corrupt_data_dir

WORKDIR = "/var/lib/highwater"
KILL_MODES = ("process", "node")



class DockerCluster(RemoteCluster, Corruptible, local_disks.TmpfsDiskFill):
    backend_name = "docker"

    def __init__(self, spec: ClusterSpec, *, image: str | None = None, build: ImageBuild = ImageBuild(),
                 kill_mode: str = "process", client=None, timeouts: NodeTimeouts = NodeTimeouts()):
        super().__init__(spec, timeouts=timeouts)
        if kill_mode not in KILL_MODES:
            raise ClusterError(f"docker backend: kill mode (cluster.docker_kill) must be one of "
                               f"{', '.join(KILL_MODES)}, got {kill_mode!r}")
        self.client = client or engine()
        self.image = image
        self.build = build
        self.kill_mode = kill_mode
        self.hosts: DockerHosts | None = None
        self.timings: dict[str, float] = {}
        self._disks: local_disks.NodeDisks | None = None   # with a disk-full fault: each broker's tmpfs

    # --- RemoteCluster hooks ---------------------------------------------------------------------------
    def workdir(self, node: str) -> str:
        return WORKDIR

    def code_dir(self, node: str) -> str:
        return CODE_DIR

    def _provision(self) -> None:
        t0 = time.monotonic()
        if self.image is None:
            self.image = ensure_node_image(self.client, base_image=self.build.base_image,
                                           log=self.build.log or (lambda msg: None))
        t1 = time.monotonic()
        self.hosts = DockerHosts(self.client, self.spec.run_id, self._names(), self.image,
                                 Path(self.spec.run_dir).resolve() / "ssh", binds=self._mount_disks())
        addresses = self.hosts.create()
        t2 = time.monotonic()
        for node, host in addresses.items():
            port = CONTROLLER_PORT if node == CONTROLLER else BROKER_PORT
            self._addresses[node] = NodeAddress(node, host, port)
            self._ssh[node] = SshNode(SshTarget(node, host, 22, "root", str(self.hosts.key_file), agent=False),
                                      known_hosts=self.hosts.known_hosts)
        from clusters.ssh_cluster import parallel
        parallel(lambda n: self._ssh[n].connect(), self._names(), what="connecting over SSH")
        if self._disks is not None:
            parallel(self._check_disk_seen, list(self._disks.mounted), what="checking the data filesystems")
        self.timings.update(image_s=t1 - t0, containers_s=t2 - t1, ssh_s=time.monotonic() - t2)

    def _data_dir(self, node: str) -> str:
        return posixpath.join(self.remote_dir(node), "data")

    def _mount_disks(self) -> dict[str, dict[str, str]]:
        """With the disk-full fault, a tmpfs per broker on this host: node -> {host dir: its data dir}."""
        if self._disks is None:
            return {}
        binds = {}
        for node in self._names()[1:]:
            host_dir = Path(self.spec.run_dir).resolve() / "disks" / node
            self._disks.mount(node, host_dir)
            binds[node] = {str(host_dir): self._data_dir(node)}
        return binds

    def _check_disk_seen(self, node: str) -> None:
        """The container sees the tmpfs mounted here (an engine in another mount namespace, or on another
        machine behind a forwarded socket, would bind an empty directory of its own)."""
        marker = posixpath.join(self._data_dir(node), local_disks.MARKER)
        if self._ssh[node].run(f"test -f {shlex.quote(marker)}", check=False).exit_status != 0:
            raise ClusterError(f"{node}: the Docker engine did not bind this host's {self._disks.mounted[node]} "
                               f"into container {self.hosts.container_name(node)} (is the engine on this "
                               "machine, in its mount namespace?); the disk-full fault needs that")

    def _deprovision(self, errors: list[str]) -> None:
        for ssh in self._ssh.values():
            ssh.close()
        hosts = self.hosts or DockerHosts(self.client, self.spec.run_id, self._names(), self.image or "",
                                          Path(self.spec.run_dir).resolve() / "ssh")
        before = len(errors)
        try:
            hosts.remove(errors)
        except Exception as exc:  # noqa: BLE001 - reported, teardown goes on
            errors.append(f"removing containers/network: {type(exc).__name__}: {exc}")
        self._firewalls.clear()
        self._degradations.clear()
        if self._disks is not None:       # only now: the containers held the mounts
            errors += [f"disk {e}" for e in self._disks.unmount_all(keep=False)]
            try:
                (Path(self.spec.run_dir).resolve() / "disks").rmdir()
            except OSError:
                pass                      # not made, or a mount point not removed (its error is above)
        if len(errors) == before:
            hosts.key_file.unlink(missing_ok=True)   # the run's client key opens nothing any more

    def _reachable(self, node: str) -> None:
        if self.hosts is None or node not in self.hosts.containers:
            return
        status = self.hosts.status(node)
        if status == "paused":
            self.hosts.unpause(node)
        elif status != "running":
            self._ssh[node].close()
            self.hosts.start(node)
            self._ssh[node].connect()
            # a restarted container has a fresh network namespace: put back the drops still in force
            old = self._firewalls.pop(node, None)
            if old is not None and old.sources:
                self._firewall(node).drop_from(old.sources)
            # and the degraded links (their rules and delayers died with it): installed again, per setting
            links = self._degradations.pop(node, None)
            settings: dict[tuple[float, float, float], list[str]] = {}
            for src, link in (links.links if links is not None else {}).items():
                settings.setdefault(link[:3], []).append(src)
            seed = int(short_id(self.spec.run_id), 16)
            for (delay, jitter, loss), sources in settings.items():
                self._degradation(node).degrade(sources, delay, jitter, loss, seed)

    def _firewall_shell(self, node: str) -> "ContainerNetShell":
        return ContainerNetShell(self._ssh[node], self.hosts, node)

    def layout(self) -> dict:
        out = super().layout()
        if self.hosts is not None:
            out.update(network=self.hosts.network_name, subnet=self.hosts.subnet, image=self.image,
                       containers={n: self.hosts.container_name(n) for n in self._names()})
        return out

    def teardown(self) -> None:
        with self._lock:
            if self.hosts is not None:
                for node in list(self.hosts.containers):
                    try:
                        if self.hosts.status(node) == "paused":
                            self.hosts.unpause(node)
                    except Exception:  # noqa: BLE001 - removal below forces it anyway
                        pass
            super().teardown()

    # --- faults ---------------------------------------------------------------------------------------------
    def kill(self, node: str) -> str:
        if self.kill_mode == "node":
            return self.crash(node)
        with self._lock:
            self._check(node)
            if self.hosts.status(node) == "paused":
                return self._kill_frozen(node)
            return super().kill(node)

    def _kill_frozen(self, node: str) -> str:
        """SIGKILL a daemon whose container is paused: signal its host pid while frozen, then thaw. The
        kill is taken before the process runs again, as SIGKILL of a SIGSTOPped process is."""
        container = self.hosts.containers[node]
        top = container.top(ps_args="-eo pid,args")
        rows = [dict(zip(top["Titles"], row)) for row in top.get("Processes") or []]
        targets = [int(r["PID"]) for r in rows if " -m broker " in f" {r.get('COMMAND', r.get('ARGS', ''))} "]
        for pid in targets:
            os.kill(pid, signal.SIGKILL)
        self.hosts.unpause(node)
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() and _state(pid) not in (None, "Z") for pid in targets):
            if time.monotonic() > deadline:
                raise ClusterError(f"{node}: daemon (host pids {targets}) survived SIGKILL for 10s")
            time.sleep(0.02)
        if not targets:
            return f"{node} was paused with no daemon running; unpaused"
        return f"SIGKILL {node} (paused container, host pid {', '.join(map(str, targets))}), unpaused"

    def _read_event_log(self, node: str) -> bytes:
        """The event log through the engine's archive API (docker cp), which also reads a paused
        container (sshd frozen) or a crashed one."""
        import io
        import tarfile
        self._check(node)
        if self.hosts is None or node not in self.hosts.containers:
            raise ClusterError(f"{node}: no container (cluster not started)")
        import docker.errors
        remote = f"{self.remote_dir(node)}/broker.log"
        try:
            stream, _stat = self.hosts.containers[node].get_archive(remote)
            archive = io.BytesIO(b"".join(stream))
        except docker.errors.NotFound:
            return b""              # not written yet
        except docker.errors.APIError as exc:
            raise ClusterError(f"{node}: cannot read its event log from container "
                               f"{self.hosts.container_name(node)}: {exc}") from None
        with tarfile.open(fileobj=archive) as tar:
            member = tar.next()
            fh = tar.extractfile(member) if member is not None else None
            return fh.read() if fh is not None else b""

    def corrupt(self, node: str, how: str, *, partition: int | None = None, seed: int = 0) -> StorageFault:
        """A storage fault on the down broker's data directory (module docstring)."""
        import io
        import tarfile
        import tempfile
        import docker.errors
        with self._lock:
            self._check(node)
            if node == CONTROLLER:
                raise ClusterError(f"{node}: corrupt applies to brokers, not the controller")
            if self.is_running(node):
                raise ClusterError(f"{node}: cannot corrupt its data files while it runs (kill or stop it first)")
            container = self.hosts.containers[node]
            remote = posixpath.join(self.remote_dir(node), "data")
            try:
                stream, _stat = container.get_archive(remote)
                archive = io.BytesIO(b"".join(stream))
            except docker.errors.APIError as exc:
                raise ClusterError(f"{node}: cannot read {remote} from container "
                                   f"{self.hosts.container_name(node)}: {exc}") from None
            with tempfile.TemporaryDirectory(prefix="hw-corrupt-") as tmp:
                with tarfile.open(fileobj=archive) as tar:
                    members = {m.name: m for m in tar.getmembers()}
                    tar.extractall(tmp, filter="data")
                try:
                    fault = corrupt_data_dir(Path(tmp) / "data", how, partition=partition, seed=seed)
                except ValueError as exc:
                    raise ClusterError(f"{node}: {exc}") from None
                for rel in fault.written:
                    name = posixpath.join("data", rel.as_posix())
                    info = members[name]
                    data = (Path(tmp) / name).read_bytes()
                    info.size = len(data)
                    info.name = rel.name
                    buf = io.BytesIO()
                    with tarfile.open(fileobj=buf, mode="w") as out:
                        out.addfile(info, io.BytesIO(data))
                    target = posixpath.join(remote, rel.parent.as_posix())
                    if not container.put_archive(target, buf.getvalue()):
                        raise ClusterError(f"{node}: could not write {name} back into container "
                                           f"{self.hosts.container_name(node)}")
                for rel in fault.removed:
                    path = posixpath.join(remote, rel.as_posix())
                    if self.hosts.status(node) != "running":
                        raise ClusterError(f"{node}: cannot delete {path} in a stopped container "
                                           f"(use docker kill mode 'process')")
                    code, out = container.exec_run(["rm", "-f", path])
                    if code != 0:
                        raise ClusterError(f"{node}: rm {path} exited {code}: {out.decode(errors='replace')[:200]}")
            return fault.labelled(node)

    def midrun_storage_faults(self) -> tuple[str, ...]:
        """The storage faults `corrupt` can apply after this backend's kill: with kill mode "node" the
        container is stopped, and a file cannot be deleted from a stopped container, so only the garbling
        ones (the nemesis chooses among these; a scenario naming a delete variant is refused at the step)."""
        if self.kill_mode == "node":
            return tuple(h for h in STORAGE_FAULTS if not h.endswith("-delete"))
        return STORAGE_FAULTS

    def crash(self, node: str) -> str:
        """Whole-node crash: `docker kill` of the node's container (every process in it dies at once)."""
        with self._lock:
            self._check(node)
            self.hosts.kill(node)
            self._ssh[node].close()
            return f"docker kill {self.hosts.container_name(node)} ({node})"

    def restart(self, node: str) -> str:
        with self._lock:
            self._check(node)
            started = self.hosts.status(node) not in ("running", "paused")
            what = super().restart(node)
            return f"docker start {self.hosts.container_name(node)}; {what}" if started else what

    def pause(self, node: str) -> str:
        with self._lock:
            self._check(node)
            self.hosts.pause(node)
            return f"docker pause {self.hosts.container_name(node)} ({node})"

    def resume(self, node: str) -> str:
        with self._lock:
            self._check(node)
            if self.hosts.status(node) != "paused":
                return f"{node} not paused"
            self.hosts.unpause(node)
            return f"docker unpause {self.hosts.container_name(node)} ({node})"

    def is_running(self, node: str) -> bool:
        """True when the node's daemon runs (a paused container counts: its daemon is alive, frozen)."""
        self._check(node)
        status = self.hosts.status(node)
        if status == "paused":
            return True
        if status != "running":
            return False
        return super().is_running(node)

    def _down(self, node: str) -> bool:
        return self.hosts.status(node) not in ("running", "paused")

    def drop(self, pairs: list[tuple[str, str]]) -> str:
        """As on every backend; a drop into a crashed (not running) node is remembered and installed
        when its container starts again (its network namespace does not exist meanwhile)."""
        with self._lock:
            for s, d in pairs:
                self._check(s)
                self._check(d)
            live = [(s, d) for s, d in pairs if not self._down(d)]
            for s, d in pairs:
                if (s, d) not in live:
                    self._firewall(d).sources.append(self._addresses[s].host)
            if live:
                super().drop(live)
            return "dropping " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to drop"

    def heal(self, pairs: list[tuple[str, str]] | None = None) -> str:
        """As on every backend; the drops into a crashed node are only forgotten (their rules died with
        its network namespace; the ones not healed come back when it starts again)."""
        with self._lock:
            if pairs is None:
                for node, fw in self._firewalls.items():
                    if self._down(node):         # its rules died with the container's network namespace
                        fw.sources, fw.installed = [], False
                return super().heal()
            for s, d in pairs:
                self._check(s)
                self._check(d)
            down = [(s, d) for s, d in pairs if self._down(d)]
            for s, d in down:
                if d in self._firewalls:
                    fw = self._firewalls[d]
                    fw.sources = [a for a in fw.sources if a != self._addresses[s].host]
            live = [p for p in pairs if p not in down]
            if live:
                super().heal(live)
            return "healed " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to heal"

    def _forget_degradation(self, node: str) -> None:
        """A down node's degradation: its rules and delayers died with the container, nothing to remove."""
        deg = self._degradations.get(node)
        if deg is not None:
            deg.installed, deg.delayers = False, {}

    def degrade(self, pairs: list[tuple[str, str]], *, delay_ms: float, jitter_ms: float = 0.0,
                loss_pct: float = 0.0) -> str:
        """As on every backend; a link into a crashed (not running) node is remembered and installed when
        its container starts again (as a drop is)."""
        if delay_ms < 0 or jitter_ms < 0 or not 0 <= loss_pct <= 100:
            raise ClusterError(f"degrade: delay_ms and jitter_ms must be >= 0 and loss_pct in 0..100, got "
                               f"delay_ms={delay_ms}, jitter_ms={jitter_ms}, loss_pct={loss_pct}")
        with self._lock:
            by_dst = self._by_dst(pairs)
            down = [(s, d) for s, d in pairs if self._down(d)]
            live = [p for p in pairs if p not in down]
            if live:
                super().degrade(live, delay_ms=delay_ms, jitter_ms=jitter_ms, loss_pct=loss_pct)
            for d in {d for _, d in down}:
                self._forget_degradation(d)
                deg = self._degradation(d)
                for src in by_dst[d]:
                    deg.links[src] = (float(delay_ms), float(jitter_ms), float(loss_pct), -1)   # no rules yet
            what = f"{delay_ms:g}ms+-{jitter_ms:g}ms loss {loss_pct:g}%"
            return (f"degrading {', '.join(f'{s}->{d}' for s, d in pairs)}: {what}" if pairs
                    else "nothing to degrade")

    def restore(self, pairs: list[tuple[str, str]] | None = None) -> str:
        """As on every backend; the links into a crashed node are only forgotten (their rules and delayers
        died with it; the ones not restored come back when it starts again)."""
        with self._lock:
            if pairs is None:
                for node in [n for n in self._degradations if self._down(n)]:
                    self._forget_degradation(node)
                    self._degradations[node].links.clear()
                return super().restore(None)
            by_dst = self._by_dst(pairs)
            down = [(s, d) for s, d in pairs if self._down(d)]
            for d in {d for _, d in down}:
                if d in self._degradations:
                    for src in by_dst[d]:
                        self._degradations[d].links.pop(src, None)
            live = [p for p in pairs if p not in down]
            if live:
                super().restore(live)
            return "restored " + ", ".join(f"{s}->{d}" for s, d in pairs) if pairs else "nothing to restore"

    def container_status(self, node: str) -> str:
        self._check(node)
        return self.hosts.status(node)

    def check_faults(self, faults: list[str]) -> None:
        """Every fault but disk-full works in containers with nothing of the host (NET_ADMIN gives
        iptables). disk-full needs root here (mount) and the engine on this machine; call before start(),
        which then mounts each broker's tmpfs."""
        if any(f.startswith("disk-full") for f in faults):
            local_disks.available()
            url = str(getattr(getattr(self.client, "api", None), "base_url", ""))
            if url != "http+docker://localhost":
                raise ClusterError("the disk-full fault on the docker backend needs the Docker engine on this "
                                   "machine, reached through its unix socket: it bind-mounts a tmpfs of this "
                                   f"host into each container (the engine is at {url or 'an unknown address'}; "
                                   f"DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unset')})")
            self._disks = local_disks.NodeDisks(short_id(self.spec.run_id))

    # --- disk-full (clusters/local_disks.py) ---------------------------------------------------------
    def _check_broker(self, node: str) -> None:
        self._check(node)
        if node == CONTROLLER:
            raise ClusterError(f"{node}: disk-full applies to brokers, not the controller")


class ContainerNetShell:
    """Runs a node's firewall commands: over SSH normally, but inside a PAUSED container (where sshd is
    frozen) with `nsenter` from the host into the container's network namespace, so partitions can be
    installed and healed on a frozen node."""

    def __init__(self, ssh: SshNode, hosts, node: str):
        self.ssh, self.hosts, self.node = ssh, hosts, node
        self.target = ssh.target

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True, stdin=None) -> RemoteResult:
        status = self.hosts.status(self.node)
        if status == "running":
            return self.ssh.run(command, timeout_s=timeout_s, check=check, stdin=stdin)
        if status != "paused":
            raise ClusterError(f"{self.target.where()}: `{command}`: container {status}, not running")
        pid = self.hosts.containers[self.node].attrs["State"]["Pid"]
        argv = ["nsenter", "-t", str(pid), "-n", "sh", "-c", command]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s or 60)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{self.target.where()} (paused; via nsenter): `{command}`: timed out") from None
        result = RemoteResult(command, r.returncode, r.stdout, r.stderr)
        if check and r.returncode != 0:
            detail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise ClusterError(f"{self.target.where()} (paused; via nsenter): `{command}` exited {r.returncode}: {detail[0]}")
        return result
