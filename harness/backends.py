"""Cluster backends by name: "local" (processes on loopback addresses), "docker", "ssh".

A small registry mapping a backend name to the class that implements clusters/base.py's `Cluster`,
imported lazily so that a run on the local backend never imports the Docker SDK. A backend whose module
is not there (yet) or cannot be imported gives a `BackendUnavailable` naming the backend and why.
"""
from __future__ import annotations

import importlib

from clusters.base import Cluster, ClusterSpec

BACKENDS: dict[str, str] = {
    "local": "clusters.local:LocalCluster",
    "docker": "clusters.docker:DockerCluster",
    "ssh": "clusters.ssh:SshCluster",
}


class BackendUnavailable(RuntimeError):
    pass


def backend_class(name: str) -> type[Cluster]:
    target = BACKENDS.get(name)
    if target is None:
        raise BackendUnavailable(f"unknown cluster backend {name!r} (known: {', '.join(BACKENDS)})")
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise BackendUnavailable(f"cluster backend {name!r} is not available: module {module_name} "
                                     "is not installed in this checkout") from None
        raise BackendUnavailable(f"cluster backend {name!r} is not available: {exc}") from None
    except ImportError as exc:
        raise BackendUnavailable(f"cluster backend {name!r} is not available: {exc}") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise BackendUnavailable(f"cluster backend {name!r} is not available: {module_name} has no {attr}")
    return cls


def backend_options(name: str, cluster_cfg) -> dict:
    """Constructor options of a backend from the [cluster] config section (harness/config.py)."""
    if cluster_cfg is None:
        return {}
    if name == "ssh":
        return {"nodes_file": cluster_cfg.nodes_file or None,
                "accept_unknown_hosts": bool(cluster_cfg.ssh_accept_unknown_hosts)}
    if name == "docker":
        return {"base_image": cluster_cfg.base_image or None, "kill_mode": cluster_cfg.docker_kill}
    return {}


def check_backend(name: str, cluster_cfg=None, *, brokers: int = 1) -> None:
    """Everything about a backend choice that can be checked before a run directory exists (no cluster
    is built, nothing is contacted): the backend loads, and its options are usable: the ssh backend's
    nodes file parses and lists at least `brokers` brokers, the docker kill mode is known. Raises
    BackendUnavailable, or the backend's own one-line error (clusters/ssh.py's NodesFileError)."""
    backend_class(name)
    if name == "ssh":
        import os

        from clusters.ssh import NodesFileError, load_nodes_file
        nodes_file = (cluster_cfg.nodes_file if cluster_cfg is not None else "") or os.environ.get("HIGHWATER_NODES_FILE")
        if not nodes_file:
            raise BackendUnavailable("the ssh backend needs a nodes file (--nodes-file FILE)")
        inventory = load_nodes_file(nodes_file)
        if brokers > len(inventory.brokers):
            raise NodesFileError(f"nodes file {inventory.path}: lists {len(inventory.brokers)} brokers "
                                 f"but the test needs {brokers}")
    if name == "docker" and cluster_cfg is not None:
        from clusters.docker import KILL_MODES
        if cluster_cfg.docker_kill not in KILL_MODES:
            raise BackendUnavailable(f"docker backend: kill mode (cluster.docker_kill) must be one of "
                                     f"{', '.join(KILL_MODES)}, got {cluster_cfg.docker_kill!r}")


def check_faults(name: str, faults: list[str]) -> None:
    """Faults the backend cannot inject on this machine, found without building a cluster: the local
    backend's partitions need root and iptables or nft (the same check LocalCluster.check_faults makes).
    The docker and ssh backends check their nodes once those exist."""
    if name == "local" and any(f.startswith("partition") for f in faults):
        from clusters.local_firewall import available_tool
        available_tool()


def make_cluster(name: str, spec: ClusterSpec, cluster_cfg=None) -> Cluster:
    return backend_class(name)(spec, **backend_options(name, cluster_cfg))
