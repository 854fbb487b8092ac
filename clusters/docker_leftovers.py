"""Docker leftovers of dead runs, for `highwater cleanup`: containers, networks and images by label.

Everything the Docker backend creates carries `highwater.run=<run id>` and `highwater.owner=<boot id>:
<pid>:<start time>` (clusters/docker_hosts.py). A run is dead when that owner is gone: another boot, or
no process with that pid and start time. Its containers (force-removed), networks and any image labelled
with its run id are removed; objects of live runs, and the shared image cache (labelled only
`highwater.kind`), are never touched. When no engine answers there is nothing to do.
"""
from __future__ import annotations

from dataclasses import dataclass

from clusters.docker_hosts import LABEL_OWNER, LABEL_RUN, boot_id
from clusters.run_registry import same_process


def owner_alive(owner: str | None) -> bool:
    """True if the label names a process alive on this boot (unparseable labels count as alive: never
    remove what we cannot attribute)."""
    if not owner:
        return True
    try:
        boot, pid, start = owner.rsplit(":", 2)
        pid_i, start_i = int(pid), int(start)
    except ValueError:
        return True
    if boot != boot_id():
        return False
    return same_process(pid_i, start_i)


@dataclass
class DockerLeftover:
    what: str            # "container hw-1234abcd-n1 (run X)"
    kind: str            # "container" | "network" | "image"
    obj: object


def find(client) -> list[DockerLeftover]:
    out: list[DockerLeftover] = []
    owners: dict[str, str | None] = {}
    containers = client.containers.list(all=True, filters={"label": LABEL_RUN})
    networks = client.networks.list(filters={"label": LABEL_RUN})
    images = client.images.list(filters={"label": LABEL_RUN})
    for obj in (*containers, *networks, *images):
        labels = (obj.labels if hasattr(obj, "labels") else None) or obj.attrs.get("Labels") or {}
        run = labels.get(LABEL_RUN)
        if run is not None and (run not in owners or owners[run] is None):
            owners[run] = labels.get(LABEL_OWNER)
    dead = {run for run, owner in owners.items() if not owner_alive(owner)}
    for c in containers:
        if c.labels.get(LABEL_RUN) in dead:
            out.append(DockerLeftover(f"container {c.name} (run {c.labels[LABEL_RUN]})", "container", c))
    for n in networks:
        run = (n.attrs.get("Labels") or {}).get(LABEL_RUN)
        if run in dead:
            out.append(DockerLeftover(f"network {n.name} (run {run})", "network", n))
    for img in images:
        run = img.labels.get(LABEL_RUN)
        if run in dead:
            out.append(DockerLeftover(f"image {', '.join(img.tags) or img.short_id} (run {run})", "image", img))
    return out


def clean(client, *, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """(removed lines, failed lines). Containers first, then networks, then images."""
    import docker.errors
    removed, failed = [], []
    order = {"container": 0, "network": 1, "image": 2}
    for item in sorted(find(client), key=lambda i: order[i.kind]):
        if dry_run:
            removed.append(f"would remove {item.what}")
            continue
        try:
            if item.kind == "container":
                item.obj.remove(force=True, v=True)
            elif item.kind == "network":
                item.obj.remove()
            else:
                client.images.remove(item.obj.id, force=True)
            removed.append(f"removed {item.what}")
        except docker.errors.NotFound:
            removed.append(f"removed {item.what} (already gone)")
        except docker.errors.APIError as exc:
            failed.append(f"{item.what}: {exc.explanation or exc}")
    return removed, failed


def clean_if_engine(*, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """clean() against the local engine; nothing when the SDK is missing or no engine answers."""
    try:
        from clusters.docker_hosts import engine
        client = engine(timeout_s=10)
    except Exception:  # noqa: BLE001 - no engine: no Docker leftovers to remove
        return [], []
    try:
        return clean(client, dry_run=dry_run)
    finally:
        client.close()
