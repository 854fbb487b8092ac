"""Containers as hosts: one Docker network and one sshd container per node, with keys known in advance.

`DockerHosts` creates, for a run, a network `hw-<8 hex>` on a free /24 of 10.213.0.0/16 (the engine
refuses overlapping pools, so concurrent runs cannot collide; a clash just moves on to another /24) and
one container per node `hw-<8 hex>-<node>` at a fixed address (.2 for the first node, then .3, ...),
with NET_ADMIN (iptables inside), an init process (reaps orphaned daemons), sshd as the command and the
host directories of `binds` mounted into it. The network is `internal`: containers reach each other and
the host, nothing else.

Before a container starts, a per-run client key pair and a per-node ed25519 host key (generated here)
are copied into it, so `run_dir/ssh/known_hosts` holds every node's host key before the first connection
and host-key checking stays on. Everything carries the labels `highwater.run` (run id),
`highwater.owner` (boot id, pid and start time of the harness process; `highwater cleanup` removes
what belongs to a dead owner) and `highwater.node`.
"""
from __future__ import annotations

import io
import ipaddress
import os
import random
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from clusters.base import ClusterError
from clusters.local_firewall import short_id
from clusters.run_registry import this_process_identity

POOL = ipaddress.ip_network("10.213.0.0/16")
LABEL_RUN = "highwater.run"
LABEL_OWNER = "highwater.owner"
LABEL_NODE = "highwater.node"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"
SSHD_COMMAND = ["/usr/sbin/sshd", "-D", "-e", "-h", HOST_KEY]


def engine(timeout_s: float = 30.0):
    """A Docker SDK client for a live engine, or ClusterError with a one-line reason."""
    try:
        import docker
    except ImportError as exc:
        raise ClusterError(f"the docker backend needs the Docker SDK for Python (pip package 'docker'): {exc}") from None
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 - any failure here means "no engine"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ClusterError(f"the docker backend needs a running Docker engine and none answers "
                           f"(DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unix:///var/run/docker.sock')}): "
                           f"{reason[:200]}") from None


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def owner_label() -> str:
    pid, start = this_process_identity()
    return f"{boot_id()}:{pid}:{start}"


def new_ed25519() -> tuple[bytes, str]:
    """(OpenSSH private key PEM, 'ssh-ed25519 AAAA...' public key)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return private, public


def _tar(files: list[tuple[str, bytes | None, int]]) -> bytes:
    """A tar of (path, content or None for a directory, mode), owned by root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, content, mode in files:
            info = tarfile.TarInfo(path)
            info.mode, info.uid, info.gid, info.mtime = mode, 0, 0, int(time.time())
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


@dataclass
class DockerHosts:
    client: object
    run_id: str
    names: list[str]
    image: str
    ssh_dir: Path                      # where the client key and known_hosts are written
    network_name: str = ""
    subnet: str = ""
    binds: dict[str, dict[str, str]] = field(default_factory=dict)   # node -> {host dir: container dir}
    addresses: dict[str, str] = field(default_factory=dict)
    containers: dict[str, object] = field(default_factory=dict)
    network: object = None

    def __post_init__(self) -> None:
        self.short = short_id(self.run_id)
        self.network_name = self.network_name or f"hw-{self.short}"
        self.labels = {LABEL_RUN: self.run_id, LABEL_OWNER: owner_label()}

    @property
    def key_file(self) -> Path:
        return self.ssh_dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.ssh_dir / "known_hosts"

    def container_name(self, node: str) -> str:
        return f"hw-{self.short}-{node}"

    # --- creation --------------------------------------------------------------------------------------
    def create(self) -> dict[str, str]:
        """Network and containers, started; returns node -> address."""
        if len(self.names) > 250:
            raise ClusterError(f"at most 250 nodes fit a /24, asked for {len(self.names)}")
        self._create_network()
        self.ssh_dir.mkdir(parents=True, exist_ok=True)
        private, public = new_ed25519()
        self.key_file.write_bytes(private)
        os.chmod(self.key_file, 0o600)
        (self.ssh_dir / "id_ed25519.pub").write_text(public + "\n")
        net = ipaddress.ip_network(self.subnet)
        hosts = list(net.hosts())
        host_keys: dict[str, tuple[bytes, str]] = {}
        for i, node in enumerate(self.names):
            self.addresses[node] = str(hosts[i + 1])          # .1 is the gateway (the host side)
            host_keys[node] = new_ed25519()
        self.known_hosts.write_text("".join(f"{self.addresses[n]} {host_keys[n][1]}\n" for n in self.names))
        from clusters.ssh_cluster import parallel
        parallel(lambda n: self._create_container(n, host_keys[n], public), self.names,
                 what="creating containers")
        return dict(self.addresses)

    def _create_network(self) -> None:
        import docker.errors
        import docker.types
        blocks = list(POOL.subnets(new_prefix=24))
        taken = set()
        for net in self.client.networks.list():
            for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []:
                if cfg.get("Subnet"):
                    try:
                        taken.add(ipaddress.ip_network(cfg["Subnet"], strict=False))
                    except ValueError:
                        pass
        free = [b for b in blocks if not any(b.overlaps(t) for t in taken)]
        random.SystemRandom().shuffle(free)
        last = "no free /24 in 10.213.0.0/16"
        for block in free[:50]:
            gateway = str(next(block.hosts()))
            ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=str(block), gateway=gateway)])
            try:
                self.network = self.client.networks.create(self.network_name, driver="bridge", ipam=ipam,
                                                           internal=True, labels=dict(self.labels))
                self.subnet = str(block)
                return
            except docker.errors.APIError as exc:
                last = str(exc.explanation or exc)
                if "overlap" in last.lower():
                    continue
                raise ClusterError(f"creating Docker network {self.network_name} on {block} failed: {last}") from None
        raise ClusterError(f"could not create Docker network {self.network_name}: {last}")

    def _create_container(self, node: str, host_key: tuple[bytes, str], client_public: str) -> None:
        api = self.client.api
        labels = {**self.labels, LABEL_NODE: node}
        binds = {src: {"bind": dst, "mode": "rw"} for src, dst in self.binds.get(node, {}).items()}
        host_config = api.create_host_config(cap_add=["NET_ADMIN"], init=True, binds=binds or None)
        networking = api.create_networking_config(
            {self.network_name: api.create_endpoint_config(ipv4_address=self.addresses[node])})
        created = api.create_container(self.image, command=SSHD_COMMAND, name=self.container_name(node),
                                       hostname=node, labels=labels, host_config=host_config,
                                       networking_config=networking, detach=True)
        container = self.client.containers.get(created["Id"])
        self.containers[node] = container
        files = [("root", None, 0o700), ("root/.ssh", None, 0o700),
                 ("root/.ssh/authorized_keys", (client_public + "\n").encode(), 0o600),
                 ("run", None, 0o755), ("run/sshd", None, 0o755),
                 (HOST_KEY.lstrip("/"), host_key[0], 0o600),
                 (HOST_KEY.lstrip("/") + ".pub", (host_key[1] + "\n").encode(), 0o644)]
        if not container.put_archive("/", _tar(files)):
            raise ClusterError(f"{node}: copying keys into container {self.container_name(node)} failed")
        container.start()

    # --- node state ---------------------------------------------------------------------------------------
    def status(self, node: str) -> str:
        """created | running | paused | exited | ... (fresh from the engine)."""
        c = self.containers[node]
        c.reload()
        return c.status

    def kill(self, node: str) -> None:
        """`docker kill`, returning once the engine reports the container stopped (the kill request
        itself returns before that, and a `docker start` in between would be a no-op)."""
        c = self.containers[node]
        c.kill()
        c.wait(timeout=30, condition="not-running")

    def start(self, node: str) -> None:
        self.containers[node].start()

    def pause(self, node: str) -> None:
        self.containers[node].pause()

    def unpause(self, node: str) -> None:
        self.containers[node].unpause()

    # --- removal ------------------------------------------------------------------------------------------
    def remove(self, errors: list[str]) -> None:
        """Remove the containers and the network (whatever of them exists). Problems go to errors."""
        import docker.errors
        from concurrent.futures import ThreadPoolExecutor

        def rm(item):
            node, c = item
            try:
                c.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                errors.append(f"container {self.container_name(node)}: {exc.explanation or exc}")
        # containers created but not yet recorded (a failure mid-create) are found by label
        known = {getattr(c, "id", None) for c in self.containers.values()}
        extra = [c for c in self.client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={self.run_id}"})
                 if c.id not in known]
        items = list(self.containers.items()) + [(c.labels.get(LABEL_NODE, c.name), c) for c in extra]
        if items:
            with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
                list(pool.map(rm, items))
        self.containers.clear()
        for net in self.client.networks.list(filters={"label": f"{LABEL_RUN}={self.run_id}"}):
            try:
                net.remove()
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                errors.append(f"network {net.name}: {exc.explanation or exc}")
        self.network = None
