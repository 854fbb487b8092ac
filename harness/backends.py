"""Cluster backends by name: "local" (processes on loopback addresses), "docker", "ssh", and "external"
(a Kafka-compatible cluster someone else runs, reached at its bootstrap servers).

A small registry mapping a backend name to a function that imports and returns the class implementing
clusters/base.py's `Cluster`. The imports are plain, inside those functions, so that a run on the local
backend never imports the Docker SDK or paramiko. A backend that cannot be imported (a dependency
missing or broken) gives a `ConfigError` naming the backend and why.
"""
from __future__ import annotations

from typing import Callable

from clusters.base import Cluster, ClusterSpec
from broker.errors import ConfigError


def _local() -> type[Cluster]:
    from clusters.local import LocalCluster
    return LocalCluster


def _docker() -> type[Cluster]:
    from clusters.docker import DockerCluster
    return DockerCluster


def _ssh() -> type[Cluster]:
    from clusters.ssh import SshCluster
    return SshCluster


def _external() -> type[Cluster]:
    from clusters.external import ExternalCluster
    return ExternalCluster


BACKENDS: dict[str, Callable[[], type[Cluster]]] = {"local": _local, "docker": _docker, "ssh": _ssh,
                                                    "external": _external}
# a missing module of one of these is a bug or a broken checkout (exit 255), never "not available"
PROJECT_PACKAGES = frozenset({"broker", "simulator", "rundir", "clusters", "nemesis", "workloads", "checkers", "reports",
                              "harness"})


def backend_class(name: str) -> type[Cluster]:
    load = BACKENDS.get(name)
    if load is None:
        raise ConfigError(f"unknown cluster backend {name!r} (known: {', '.join(BACKENDS)})")
    try:
        return load()
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in PROJECT_PACKAGES:
            raise                        # our own module missing: a broken checkout or a bug, not the user's
        missing = (f"module {exc.name} is not installed" if isinstance(exc, ModuleNotFoundError) and exc.name
                   else str(exc))
        raise ConfigError(f"cluster backend {name!r} is not available: {missing}") from None


def backend_options(name: str, cluster_cfg) -> dict:
    """Constructor options of a backend from the [cluster] config section (harness/config.py)."""
    if cluster_cfg is None:
        return {}
    if name == "ssh":
        return {"nodes_file": cluster_cfg.nodes_file or None,
                "accept_unknown_hosts": bool(cluster_cfg.ssh_accept_unknown_hosts)}
    if name == "docker":
        from clusters.docker_image import ImageBuild
        return {"build": ImageBuild(base_image=cluster_cfg.base_image or None), "kill_mode": cluster_cfg.docker_kill}
    if name == "external":
        from clusters.external import ExternalAccess
        return {"access": ExternalAccess(bootstrap=cluster_cfg.bootstrap, nodes_file=cluster_cfg.nodes_file or None,
                                         accept_unknown_hosts=bool(cluster_cfg.ssh_accept_unknown_hosts),
                                         docker_containers=cluster_cfg.docker_containers or None)}
    return {}


def kafka_reached(cluster) -> bool:
    """Whether the harness reaches this cluster only through Kafka clients (clusters/external.py
    `KafkaReached`): then its health comes from Kafka Metadata (`cluster.metadata`), not the native admin."""
    from clusters.external import KafkaReached
    return isinstance(cluster, KafkaReached)


def check_backend(name: str, cluster_cfg=None, *, brokers: int = 1) -> None:
    """Everything about a backend choice that can be checked before a run directory exists (no cluster
    is built, nothing is contacted): the backend loads, and its options are usable: the ssh backend's
    nodes file parses and lists at least `brokers` brokers, the docker kill mode is known. Raises
    ConfigError, or the backend's own one-line error (clusters/ssh.py's ClusterError)."""
    backend_class(name)
    if name == "ssh":
        import os

        from clusters.ssh import ClusterError, load_nodes_file
        nodes_file = (cluster_cfg.nodes_file if cluster_cfg is not None else "") or os.environ.get("HIGHWATER_NODES_FILE")
        if not nodes_file:
            raise ConfigError("the ssh backend needs a nodes file (--nodes-file FILE)")
        inventory = load_nodes_file(nodes_file)
        if brokers > len(inventory.brokers):
            raise ClusterError(f"nodes file {inventory.path}: lists {len(inventory.brokers)} brokers "
                                 f"but the test needs {brokers}")
    if name == "external" and cluster_cfg is not None and cluster_cfg.nodes_file:
        from clusters.external_hosts import load_hosts_file
        load_hosts_file(cluster_cfg.nodes_file)        # ClusterError naming the file, entry and field
    if name == "docker" and cluster_cfg is not None:
        from clusters.docker import KILL_MODES
        if cluster_cfg.docker_kill not in KILL_MODES:
            raise ConfigError(f"docker backend: kill mode (cluster.docker_kill) must be one of "
                                     f"{', '.join(KILL_MODES)}, got {cluster_cfg.docker_kill!r}")


def reach(name: str, cluster_cfg=None, *, brokers: int = 1, timeout_s: float | None = None) -> str:
    """Contact what the backend will use, briefly (clusters/reach.py), before a run creates anything: the
    docker backend's engine; the ssh backend's hosts (SSH port of the controller and the first `brokers`
    brokers of its nodes file); the external backend's Kafka Metadata, and the engine or the SSH hosts it
    injects faults through. The local backend has nothing to reach. Returns a one-line description, or
    raises ClusterError (exit 254) naming the backend and what did not answer."""
    import os

    from clusters import reach as probe
    from clusters.base import ClusterError
    kw = {} if timeout_s is None else {"timeout_s": timeout_s}
    try:
        if name == "docker":
            return probe.docker_engine(**kw)
        if name == "ssh":
            from clusters.ssh import load_nodes_file
            nodes = load_nodes_file((cluster_cfg.nodes_file if cluster_cfg is not None else "")
                                    or os.environ.get("HIGHWATER_NODES_FILE"))
            return probe.tcp([(e.target.where(), e.target.host, e.target.port)
                              for e in [nodes.controller, *nodes.brokers[:brokers]]], **kw)
        if name == "external" and cluster_cfg is not None:
            said = [probe.kafka(cluster_cfg.bootstrap, **kw)]
            if cluster_cfg.docker_containers:
                said.append(probe.docker_engine(**kw))
            if cluster_cfg.nodes_file:
                from clusters.external_hosts import load_hosts_file
                hosts = load_hosts_file(cluster_cfg.nodes_file)
                said.append(probe.tcp([(e.target.where(), e.target.host, e.target.port) for e in hosts.brokers],
                                      **kw))
            return "; ".join(said)
    except ClusterError as exc:
        raise ClusterError(f"the {name} backend's cluster cannot be reached: {exc}") from None
    return "nothing to reach"


def check_faults(name: str, faults: list[str], cluster_cfg=None) -> None:
    """Faults the backend cannot inject on this machine, found without building a cluster: the local
    backend's partitions need root and iptables or nft, its degradation root and iptables (the same
    checks LocalCluster.check_faults makes), its and the docker backend's disk-full root and mount; the
    external backend, without hosts to act on, none at all, and with a nodes file or containers only
    process faults (clusters/external.py FAULTS). The docker and ssh backends check the rest once their
    nodes exist."""
    if name == "external" and faults:
        if cluster_cfg is None or not (cluster_cfg.nodes_file or cluster_cfg.docker_containers):
            raise ConfigError(f"the external backend cannot inject {', '.join(faults)}: it has no access "
                                     "to the brokers' hosts (give them in --nodes-file or --docker-containers, or "
                                     "run it workload-only: --nemesis none)")
        from clusters.external import FAULTS
        bad = [f for f in faults if f not in FAULTS]
        if bad:
            how = "a nodes file" if cluster_cfg.nodes_file else "Docker containers"
            raise ConfigError(f"the external backend cannot inject {', '.join(bad)} (with {how} it "
                                     f"offers {', '.join(FAULTS)})")
    if name in ("local", "docker") and any(f.startswith("disk-full") for f in faults):
        from clusters.local_disks import available as disks_available
        disks_available()                  # both mount a tmpfs per broker on this host
    if name != "local":
        return
    if any(f.startswith("partition") for f in faults):
        from clusters.local_firewall import available_tool
        available_tool()
    if any(f.startswith("degrade") for f in faults):
        from clusters.local_netem import available
        available()


def external_class(access=None) -> type[Cluster]:
    """The external backend's class for its `ExternalAccess` (clusters/external.py): with a nodes file the
    brokers' hosts are reached over SSH (clusters/external_hosts.py), with Docker containers they are
    containers of the local engine (clusters/external_docker.py); else (or with no access given) the
    cluster is reached through Kafka clients only."""
    if access is not None and access.nodes_file:
        from clusters.external_hosts import ExternalHostsCluster
        return ExternalHostsCluster
    if access is not None and access.docker_containers:
        from clusters.external_docker import ExternalDockerCluster
        return ExternalDockerCluster
    return backend_class("external")


def make_cluster(name: str, spec: ClusterSpec, cluster_cfg=None) -> Cluster:
    options = backend_options(name, cluster_cfg)
    cls = external_class(options.get("access")) if name == "external" else backend_class(name)
    return cls(spec, **options)
