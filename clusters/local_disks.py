"""Each broker's data directory on a filesystem of its own, so the `disk-full` fault can fill it.

A run whose faults include `disk-full` mounts a tmpfs per broker before the broker first starts
(`NodeDisks.mount`): the local backend over `nodes/<node>/data` itself, the Docker backend on
`disks/<node>` of the run directory, which it bind-mounts into the node's container as the broker's data
directory (clusters/docker.py). The fault writes one filler file into it (`FILLER`) that leaves
`leave_bytes` free, so the broker's next appends, flushes and checkpoints fail with ENOSPC as on a full
disk, and deletes it again at the window's stop. The host's own disk is never filled. At teardown the
local backend copies the data back onto the real directory under the mount before unmounting
(`unmount_all(keep=True)`), so the run directory keeps the brokers' files as with any other run; the
Docker backend has collected its replica dumps by then and only unmounts.

Ownership: the tmpfs's source name is `highwater-<short run id>-<node>@<pid>.<start time>`, naming the
harness process that mounted it, so `highwater cleanup` finds the mounts a killed harness left
(`find_leftovers`, in /proc/self/mountinfo) and unmounts those whose owner is gone, whichever backend
made them. Needs root (mount).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from clusters.base import ClusterError, DiskFillable
from clusters.run_registry import this_process_identity

SOURCE_PREFIX = "highwater-"
FILLER = ".highwater-disk-full"       # the broker ignores files that are no partition directory
MARKER = ".highwater-disk"            # written at mount: shows a container sees this very filesystem
DEFAULT_SIZE_MB = 256                 # each broker's filesystem: far above what a test run writes
DEFAULT_LEAVE_BYTES = 16 * 1024       # free space the fault leaves: less than one produce's records


def available() -> None:
    """ClusterError unless this process can mount a tmpfs (root, and a mount command)."""
    if os.geteuid() != 0:
        raise ClusterError("the disk-full fault needs root: each broker's data directory is mounted as a "
                           "tmpfs of its own so that filling it never fills the host's disk")
    for tool in ("mount", "umount"):
        if shutil.which(tool) is None:
            raise ClusterError(f"the disk-full fault needs the {tool!r} command (Debian package 'mount')")


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def source_name(short_id: str, node: str) -> str:
    """The tmpfs's source name: the run, the node and the harness process that owns the mount."""
    pid, start = this_process_identity()
    return f"{SOURCE_PREFIX}{short_id}-{node}@{pid}.{start}"


def parse_source(source: str) -> tuple[str, tuple[int, int] | None] | None:
    """(short run id, (owner pid, owner start time) or None) of a highwater tmpfs source name, None for
    any other name. Mounts named before the owner was part of the name have no owner."""
    if not source.startswith(SOURCE_PREFIX):
        return None
    body, _, owner = source[len(SOURCE_PREFIX):].partition("@")
    short = body.rsplit("-", 1)[0]
    try:
        pid, start = (int(x) for x in owner.split("."))
        return short, (pid, start)
    except ValueError:
        return short, None


class TmpfsDiskFill(DiskFillable):
    """DiskFillable for a backend whose brokers' data filesystems are `NodeDisks` of this host: it sets
    `_disks` (None unless the run's faults include disk-full), `_lock`, and `_check_broker(node)`."""

    _disks: "NodeDisks | None"

    def _check_broker(self, node: str) -> None:
        raise NotImplementedError

    def _node_disks(self, node: str) -> "NodeDisks":
        self._check_broker(node)
        if self._disks is None:
            raise ClusterError("disk-full: the cluster was started without it (check_faults(['disk-full']) "
                               "before start() gives each broker's data directory a filesystem of its own)")
        return self._disks

    def fill_disk(self, node: str) -> str:
        with self._lock:
            return self._node_disks(node).fill(node)

    def free_disk(self, node: str) -> str:
        with self._lock:
            return self._node_disks(node).free(node)


class NodeDisks:
    """The tmpfs of each broker of one run: mounted, filled, freed, and unmounted with the data kept."""

    def __init__(self, short_id: str, size_mb: int = DEFAULT_SIZE_MB):
        self.short_id = short_id
        self.size_mb = size_mb
        self.mounted: dict[str, Path] = {}

    def mount(self, node: str, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        r = _run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755",
                  source_name(self.short_id, node), str(data_dir)])
        if r.returncode != 0:
            raise ClusterError(f"{node}: cannot mount a tmpfs on {data_dir} for the disk-full fault: "
                               f"{r.stderr.strip() or r.returncode}")
        self.mounted[node] = data_dir
        (data_dir / MARKER).write_text(source_name(self.short_id, node) + "\n")

    def _dir(self, node: str) -> Path:
        if node not in self.mounted:
            raise ClusterError(f"{node}: its data directory is no filesystem of its own (the run's faults "
                               "did not include disk-full when it started)")
        return self.mounted[node]

    def fill(self, node: str, leave_bytes: int = DEFAULT_LEAVE_BYTES) -> str:
        """Fill the node's filesystem up to `leave_bytes` free (a filler file; more if one is there)."""
        d = self._dir(node)
        st = os.statvfs(d)
        free = st.f_bavail * st.f_frsize
        want = max(0, free - leave_bytes)
        with open(d / FILLER, "ab") as f:
            block = b"\0" * (1 << 20)
            left = want
            try:
                while left > 0:
                    left -= f.write(block[:min(left, len(block))])
            except OSError:
                pass                       # full already: as good
        st = os.statvfs(d)
        return f"filled {node}'s data filesystem: {st.f_bavail * st.f_frsize} bytes free of {self.size_mb} MiB"

    def free(self, node: str) -> str:
        d = self._dir(node)
        try:
            (d / FILLER).unlink()
        except FileNotFoundError:
            return f"{node}'s data filesystem was not filled"
        st = os.statvfs(d)
        return f"freed {node}'s data filesystem: {st.f_bavail * st.f_frsize // (1 << 20)} MiB free"

    def unmount_all(self, *, keep: bool = True) -> list[str]:
        """Unmount every node's tmpfs; the errors. With `keep`, each node's data is first copied aside and
        then moved onto the directory under its mount; without, the data goes and the (then empty) mount
        point is removed."""
        errors = []
        for node, d in list(self.mounted.items()):
            try:
                for name in (FILLER, MARKER):
                    (d / name).unlink(missing_ok=True)
                copy = d.parent / f".{d.name}.tmpfs-copy"
                if keep:
                    shutil.rmtree(copy, ignore_errors=True)
                    shutil.copytree(d, copy, symlinks=True)
                r = _run(["umount", str(d)])
                if r.returncode != 0:
                    r = _run(["umount", "-l", str(d)])
                if r.returncode != 0:
                    raise ClusterError(f"umount {d}: {r.stderr.strip() or r.returncode}")
                if keep:
                    for entry in copy.iterdir():
                        shutil.move(str(entry), str(d / entry.name))
                    copy.rmdir()
                else:
                    d.rmdir()
                del self.mounted[node]
            except (OSError, ClusterError, shutil.Error) as exc:
                errors.append(f"{node}: {exc}")
        return errors


# --- leftovers (highwater cleanup) -----------------------------------------------------------------

def find_leftovers() -> list[dict]:
    """Every highwater tmpfs still mounted: [{"kind": "mount", "path": ..., "source": ..., "short_id": ...,
    "owner": (pid, start time) or None}]."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        # fields: id parent major:minor root mount-point options ... - fstype source super-options
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        named = parse_source(rparts[1]) if len(parts) >= 5 and len(rparts) >= 2 and rparts[0] == "tmpfs" else None
        if named is None:
            continue
        path = parts[4].encode().decode("unicode_escape")      # mountinfo escapes spaces as \040
        found.append({"kind": "mount", "path": path, "source": rparts[1], "short_id": named[0],
                      "owner": named[1]})
    return found


def remove_mount(obj: dict) -> None:
    if not obj.get("source", "").startswith(SOURCE_PREFIX):
        raise ValueError(f"refusing to unmount non-highwater filesystem {obj!r}")
    r = _run(["umount", "-l", obj["path"]])
    if r.returncode != 0:
        raise ClusterError(f"umount {obj['path']}: {r.stderr.strip() or r.returncode}")
