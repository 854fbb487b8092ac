"""Process faults on an external cluster whose brokers run in existing Docker containers:
`--cluster external --docker-containers NAME[=ID],...`.

The containers are someone else's (a docker compose of Kafka or Redpanda, say); the harness creates,
removes and changes none of them beyond these faults, through the Docker engine (the Docker SDK):
kill = `docker kill` (SIGKILL of the container's main process, the broker), restart = `docker start`
then a wait until the broker's advertised port accepts connections, pause/resume = `docker pause` /
`docker unpause` (the cgroup freezer). Each container is one broker: `NAME=ID` names its Kafka node id;
a bare NAME is matched with the broker whose advertised host is the container's address on one of its
networks, its hostname or its name. Faults: kill, kill-leader, pause, pause-leader.
"""
from __future__ import annotations

import socket
import threading
import time

from clusters.base import ClusterError, ClusterSpec, Killable, Pausable
from clusters.external import ExternalAccess, ExternalCluster


def parse_containers(raw: str) -> list[tuple[str, int | None]]:
    """"name[=node id],..." -> [(name, node id or None)]."""
    out = []
    for entry in (e.strip() for e in (raw or "").split(",")):
        name, sep, nid = entry.partition("=")
        if not name or (sep and not nid.isdigit()):
            raise ClusterError(f"entry {entry!r} must be a container name, or name=node id")
        out.append((name, int(nid) if sep else None))
    return out


class ExternalDockerCluster(ExternalCluster, Killable, Pausable):
    """An external cluster whose brokers are existing containers of the local Docker engine."""

    def __init__(self, spec: ClusterSpec, access: ExternalAccess = ExternalAccess(), *,
                 ready_timeout_s: float = 30.0, timeout_s: float = 5.0):
        super().__init__(spec, access, ready_timeout_s=ready_timeout_s, timeout_s=timeout_s)
        self.wanted = parse_containers(access.docker_containers)
        self._containers: dict[str, object] = {}       # broker name -> docker Container
        self._lock = threading.RLock()

    def check_faults(self, faults: list[str]) -> None:
        self._offered_only(faults, "Docker containers")

    def prepare(self) -> None:
        super().prepare()
        from clusters.docker_hosts import engine
        client = engine()
        by_id = {nid: name for name, nid in self._node_ids.items()}
        for cname, nid in self.wanted:
            try:
                container = client.containers.get(cname)
            except Exception as exc:  # noqa: BLE001 - docker.errors.NotFound and friends
                raise ClusterError(f"--docker-containers: no container {cname!r}: {exc}") from None
            if nid is not None:
                name = by_id.get(nid)
            else:
                nets = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
                names = {cname, container.attrs.get("Config", {}).get("Hostname", "")}
                names |= {n.get("IPAddress") for n in nets.values()} - {None, ""}
                names |= {a for n in nets.values() for a in (n.get("Aliases") or [])}
                found = [n for n, a in self._brokers.items() if a.host in names]
                name = found[0] if len(found) == 1 else None
            if name is None:
                raise ClusterError(f"--docker-containers: container {cname!r} is no broker of the cluster "
                                   f"({self._listing()}); name its node id: {cname}=ID")
            if name in self._containers:
                raise ClusterError(f"--docker-containers: broker {name} is given twice")
            self._containers[name] = container
        self._check_every_broker_bound(self._containers, "--docker-containers", "container")

    def layout(self) -> dict:
        out = super().layout()
        for name, c in self._containers.items():
            out["nodes"][name]["container"] = c.name
        return out

    def _container(self, node: str):
        if node not in self._containers:
            raise ClusterError(f"unknown node {node!r} (containers: {', '.join(self._containers) or 'none'})")
        c = self._containers[node]
        c.reload()
        return c

    def _docker(self, node: str, what: str, action) -> None:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - docker.errors.APIError: one line naming the node
            raise ClusterError(f"{node} (container {self._containers[node].name}): docker {what}: "
                               f"{str(exc).splitlines()[0][:200]}") from None

    def _signal(self, node: str, verb: str) -> str:
        """`docker kill` or `docker pause` one broker's container."""
        with self._lock:
            c = self._container(node)
            self._docker(node, verb, getattr(c, verb))
            return f"docker {verb} {node} (container {c.name})"

    def kill(self, node: str) -> str:
        return self._signal(node, "kill")

    def restart(self, node: str) -> str:
        with self._lock:
            c = self._container(node)
            if c.status in ("running", "paused"):
                return f"{node} already running (container {c.name} {c.status})"
            self._docker(node, "start", c.start)
            addr = self._brokers[node]
            deadline = time.monotonic() + self.ready_timeout_s
            while True:
                try:
                    socket.create_connection((addr.host, addr.port), timeout=1.0).close()
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        raise ClusterError(f"{node} (container {c.name}): {addr.host}:{addr.port} refuses "
                                           f"connections {self.ready_timeout_s:.0f}s after docker start: "
                                           f"{exc}") from None
                    time.sleep(0.1)
            return f"docker start {node} (container {c.name})"

    def pause(self, node: str) -> str:
        return self._signal(node, "pause")

    def resume(self, node: str) -> str:
        with self._lock:
            c = self._container(node)
            if c.status != "paused":
                return f"{node} not paused (container {c.name} {c.status})"
            return self._signal(node, "unpause")

    def is_running(self, node: str) -> bool:
        """Whether the container runs (a paused one counts)."""
        return self._container(node).status in ("running", "paused")
