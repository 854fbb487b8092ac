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


def make_cluster(name: str, spec: ClusterSpec, cluster_cfg=None) -> Cluster:
    return backend_class(name)(spec, **backend_options(name, cluster_cfg))
