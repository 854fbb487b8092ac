"""Each broker's data directory on a filesystem of its own, so the `disk-full` fault can fill it.

A local run whose faults include `disk-full` mounts a tmpfs over every broker's `nodes/<node>/data`
before the broker first starts (`NodeDisks.mount`). The fault writes one filler file into it
(`FILLER`) that leaves `leave_bytes` free, so the broker's next appends, flushes and checkpoints fail
with ENOSPC as on a full disk, and deletes it again at the window's stop. The host's own disk is never
filled. At teardown the data is copied back onto the real directory under the mount and the tmpfs is
unmounted, so the run directory keeps the brokers' files as with any other run.

Ownership: the tmpfs's source name is `highwater-<short run id>-<node>`, so `highwater cleanup` finds the
mounts a killed harness left (`find_leftovers`, in /proc/self/mountinfo) and unmounts those of runs
whose owner is gone. Needs root (mount).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from clusters.base import ClusterError

SOURCE_PREFIX = "highwater-"
FILLER = ".highwater-disk-full"       # the broker ignores files that are no partition directory
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
    return f"{SOURCE_PREFIX}{short_id}-{node}"


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

    def unmount_all(self) -> list[str]:
        """Copy each node's data back onto the directory under its mount and unmount; the errors."""
        errors = []
        for node, d in list(self.mounted.items()):
            try:
                (d / FILLER).unlink(missing_ok=True)
                keep = d.parent / f".{d.name}.tmpfs-copy"
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(d, keep, symlinks=True)
                r = _run(["umount", str(d)])
                if r.returncode != 0:
                    r = _run(["umount", "-l", str(d)])
                if r.returncode != 0:
                    raise ClusterError(f"umount {d}: {r.stderr.strip() or r.returncode}")
                for entry in keep.iterdir():
                    shutil.move(str(entry), str(d / entry.name))
                keep.rmdir()
                del self.mounted[node]
            except (OSError, ClusterError, shutil.Error) as exc:
                errors.append(f"{node}: {exc}")
        return errors


# --- leftovers (highwater cleanup) -----------------------------------------------------------------

def find_leftovers() -> list[dict]:
    """Every highwater tmpfs still mounted: [{"kind": "mount", "path": ..., "source": ..., "short_id": ...}]."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        # fields: id parent major:minor root mount-point options ... - fstype source super-options
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(parts) < 5 or len(rparts) < 2 or rparts[0] != "tmpfs" or not rparts[1].startswith(SOURCE_PREFIX):
            continue
        short = rparts[1][len(SOURCE_PREFIX):].rsplit("-", 1)[0]
        path = parts[4].encode().decode("unicode_escape")      # mountinfo escapes spaces as \040
        found.append({"kind": "mount", "path": path, "source": rparts[1], "short_id": short})
    return found


def remove_mount(obj: dict) -> None:
    if not obj.get("source", "").startswith(SOURCE_PREFIX):
        raise ValueError(f"refusing to unmount non-highwater filesystem {obj!r}")
    r = _run(["umount", "-l", obj["path"]])
    if r.returncode != 0:
        raise ClusterError(f"umount {obj['path']}: {r.stderr.strip() or r.returncode}")
