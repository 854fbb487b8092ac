"""The external backend: a Kafka-compatible cluster someone else runs, reached at its bootstrap servers.

    highwater run --cluster external --bootstrap host:port[,host:port] --nemesis none

It provisions nothing and starts nothing. `prepare()` (called while the harness provisions, so a
failure is a set-up error; `start()` does it otherwise) asks the cluster's Metadata (any bootstrap server),
learns its brokers (node "n<id>" for Kafka node id <id>, at the address the broker advertises) and
creates the test topic with CreateTopics unless it exists; an existing topic of another shape is an
error naming both shapes. The workload, the final reads and the health checks go through Kafka clients
only (`KafkaReached`: the harness asks `metadata()` instead of the native admin, and the Kafka client
is forced by harness/config.py). `stop_all`, `teardown` and `collect` leave the cluster alone: there
is no access to the brokers' disks, so no replica is dumped, and test.json's layout says so
(`no_replica_dumps`), which the checker reports as "not checked" (checkers/ingest.py), never as clean.

Faults: without hosts, none. This class has no fault capability (clusters/base.py), so a run asking for
a fault is refused before anything starts (harness/backends.check_faults). With a nodes file listing
the brokers' SSH hosts, the harness builds an `ExternalHostsCluster` instead (clusters/external_hosts.py):
kill, restart, pause and resume of the brokers' processes; with `--docker-containers`, an
`ExternalDockerCluster` (clusters/external_docker.py): docker kill/start/pause/unpause (harness/backends.py
picks the class from the cluster's `ExternalAccess`; both offer `FAULTS`).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from clusters.base import Cluster, ClusterError, ClusterSpec, NodeAddress

log = logging.getLogger("clusters.external")

# test.json's cluster.no_replica_dumps: why the run directory has no replicas/ (the checker's reason)
NO_REPLICA_DUMPS = "the external backend has no access to the brokers' disks"
# why it has no nodes/<node>/broker.log (a third-party broker writes none of ours anyway)
NO_EVENT_LOGS = "the external backend has no access to the brokers' event logs"
# the faults the external backend injects when it reaches the brokers' hosts (a nodes file) or containers
FAULTS = ("kill", "kill-leader", "pause", "pause-leader")


def parse_bootstrap(raw: str) -> list[tuple[str, int]]:
    """"host:port[,host:port]" (an IPv6 host in brackets: "[::1]:9092") -> [(host, port)]."""
    if not isinstance(raw, str) or not raw.strip():
        raise ClusterError("must be host:port[,host:port], got nothing")
    out = []
    for entry in (e.strip() for e in raw.split(",")):
        host, sep, port = entry.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ClusterError(f"entry {entry!r} must be host:port with a port 1..65535")
        out.append((host, int(port)))
    return out


@dataclass(frozen=True)
class ExternalAccess:
    """How the harness reaches an external cluster (the [cluster] settings bootstrap, nodes_file,
    ssh_accept_unknown_hosts, docker_containers): its bootstrap servers "host:port[,host:port]", and, to
    inject faults, the brokers' SSH hosts (a nodes file; `accept_unknown_hosts` trusts a host key not in
    its known_hosts) or their Docker containers ("name[=node id],...")."""
    bootstrap: str = ""
    nodes_file: str | Path | None = None
    accept_unknown_hosts: bool = False
    docker_containers: str | None = None


@runtime_checkable
class KafkaReached(Protocol):
    """A cluster the harness reaches only as a Kafka client: no controller and no native admin; its
    health is what Kafka Metadata says (clusters/kafka_metadata.py)."""

    def bootstrap_servers(self) -> str:
        """"host:port,host:port" for a Kafka client's bootstrap.servers."""

    def metadata(self, *, timeout_s: float):
        """A KafkaMetadata client (describe(topic), brokers(), close())."""

    def prepare(self) -> None:
        """Part of provisioning (so a failure is a set-up error): reach the cluster, learn its brokers and
        make sure the test topic exists with the run's shape. start() does it when it was not done."""


class ExternalCluster(Cluster, KafkaReached):
    backend_name = "external"

    def __init__(self, spec: ClusterSpec, access: ExternalAccess = ExternalAccess(), *,
                 ready_timeout_s: float = 30.0, timeout_s: float = 5.0):
        if type(self) is ExternalCluster and (access.nodes_file or access.docker_containers):
            # the hosts' or containers' class does faults; this one would silently inject none
            which, given = (("ExternalHostsCluster", "a nodes file") if access.nodes_file
                            else ("ExternalDockerCluster", "Docker containers"))
            raise ClusterError(f"the external backend with {given} "
                               f"is {which} (harness/backends.external_class picks it), not ExternalCluster")
        self.spec = spec
        self.access = access
        self.bootstrap = parse_bootstrap(access.bootstrap)
        self.ready_timeout_s = ready_timeout_s
        self.timeout_s = timeout_s
        self._brokers: dict[str, NodeAddress] = {}
        self._node_ids: dict[str, int] = {}
        self._started = False
        self.topic_note: str | None = None

    # --- addresses -------------------------------------------------------------------------------
    def bootstrap_servers(self) -> str:
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.bootstrap)

    def metadata(self, *, timeout_s: float | None = None):
        from clusters.kafka_metadata import KafkaMetadata
        return KafkaMetadata(self.bootstrap_servers(), timeout_s=timeout_s or self.timeout_s)

    def controller(self) -> NodeAddress:
        raise ClusterError("the external backend has no controller node: the cluster is reached through "
                           f"Kafka clients at {self.bootstrap_servers()}")

    def brokers(self) -> dict[str, NodeAddress]:
        if not self._started:
            raise ClusterError("external cluster: its brokers are not known yet (start() not called)")
        return dict(self._brokers)

    def nodes(self) -> list[str]:
        return list(self.brokers())

    def layout(self) -> dict:
        return {"backend": self.backend_name, "bootstrap": self.bootstrap_servers(),
                "nodes": {n: {"host": a.host, "port": a.port, "node_id": self._node_ids[n]}
                          for n, a in self._brokers.items()},
                "no_replica_dumps": NO_REPLICA_DUMPS}

    def evidence(self):
        """History only: the brokers' disks and logs are out of reach, so replica dumps and event logs
        are out of scope (the checker names the families they feed as not applicable)."""
        from rundir import evidence as ev
        return ev.declare(None, {ev.REPLICA_DUMPS: NO_REPLICA_DUMPS, ev.EVENT_LOGS: NO_EVENT_LOGS})

    def _listing(self) -> str:
        return ", ".join(f"{n} at {a.host}:{a.port}" for n, a in sorted(self._brokers.items())) or "no brokers"

    def _check_every_broker_bound(self, bound: dict, where: str, handle: str) -> None:
        """A fault backend reaches each broker through a handle of its own (a container, a host): every
        broker needs one, and the nemesis names brokers n1..nN (nemesis/driver.py), so their Kafka node
        ids must be 1..N."""
        unlisted = sorted(set(self._brokers) - set(bound))
        if unlisted:
            raise ClusterError(f"{where}: no {handle} for {', '.join(unlisted)} ({self._listing()}): "
                               f"faults need every broker's {handle.split()[-1]}")
        expected = {f"n{i}" for i in range(1, self.spec.brokers + 1)}
        if set(self._brokers) != expected:
            raise ClusterError(f"external cluster {self.bootstrap_servers()}: faults need Kafka node ids 1.."
                               f"{self.spec.brokers} (--nodes {self.spec.brokers}), the cluster has {self._listing()}")

    # --- lifecycle -------------------------------------------------------------------------------
    def check_faults(self, faults: list[str]) -> None:
        if faults:
            raise ClusterError(f"the external backend cannot inject faults ({', '.join(faults)}): it has no "
                               "access to the brokers")

    @staticmethod
    def _offered_only(faults: list[str], how: str, offers: str = "") -> None:
        """ClusterError naming the faults beyond `FAULTS` (for a subclass with hosts to act on `how`)."""
        bad = [f for f in faults if f not in FAULTS]
        if bad:
            raise ClusterError(f"the external backend with {how} cannot inject {', '.join(bad)} (it offers "
                               f"{', '.join(FAULTS)}{offers})")

    def start(self) -> None:
        """Nothing to start: prepare() unless it was done (the harness does it while provisioning)."""
        if not self._started:
            self.prepare()

    def prepare(self) -> None:
        """Find the cluster's brokers and make sure the test topic exists with the run's shape."""
        if self._started:
            raise ClusterError(f"external cluster {self.bootstrap_servers()} was already prepared")
        md = self.metadata()
        try:
            deadline = time.monotonic() + self.ready_timeout_s
            while True:
                try:
                    found = md.brokers()
                    if found:
                        break
                    last = "Metadata lists no brokers"
                except ClusterError as exc:
                    last = str(exc)
                if time.monotonic() >= deadline:
                    raise ClusterError(f"external cluster at {self.bootstrap_servers()}: no answer within "
                                       f"{self.ready_timeout_s:.0f}s ({last})")
                time.sleep(0.2)
            for b in found:
                name = f"n{b.node_id}"
                self._brokers[name] = NodeAddress(name, b.host, b.port)
                self._node_ids[name] = b.node_id
            self._started = True
            for t in self.spec.controller_settings.get("topics") or []:
                self.topic_note = md.ensure_topic(t["name"], int(t["partitions"]), int(t["replication_factor"]),
                                                  t.get("configs"))
                log.info("external cluster %s: %s", self.bootstrap_servers(), self.topic_note)
        finally:
            md.close()

    def stop_all(self) -> None:
        """Nothing: the cluster is not ours to stop."""

    def teardown(self) -> None:
        """Nothing was provisioned; the test topic and its records stay on the cluster."""

    def is_running(self, node: str) -> bool:
        """Whether the cluster's Metadata lists the broker now (Kafka lists the live brokers)."""
        if node not in self.brokers():
            raise ClusterError(f"unknown node {node!r} (the external cluster has {', '.join(self._brokers)})")
        md = self.metadata()
        try:
            return any(f"n{b.node_id}" == node for b in md.brokers())
        except ClusterError:
            return False
        finally:
            md.close()

    def collect(self, run_dir: Path) -> None:
        """No logs and no replica dumps: the brokers' files are out of reach (layout's no_replica_dumps)."""
        log.info("external cluster %s: no node logs or replica dumps collected (%s)", self.bootstrap_servers(),
                 NO_REPLICA_DUMPS)
