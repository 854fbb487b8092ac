"""What a killed harness left behind on this machine, and its removal (the logic of `highwater cleanup`).

A run is dead when its registry entry's owner process is gone (pid absent, or the pid now belongs to a
process with another start time). For a dead run we stop its recorded processes (only if pid AND start
time still match, so a reused pid is never hit), plus any process whose command line names a config file
under the run's `nodes/` directory (the degradation delayers of clusters/local_netem.py are recorded
processes too); remove its firewall chain or table and its degradation chain (mangle `HWN-<8 hex>`); and
delete its registry entry.
Highwater firewall chains/tables that no live run owns are removed too, as are the tmpfs data directories
of a disk-full run, local or Docker (clusters/local_disks.py), and unreadable registry files;
a chain is live when a live run of this registry or the default one owns it, or when the process its jump
rule's comment names as owner (pid and start time) is still running, whatever registry holds that run. A
tmpfs is live while the process its source name names as owner runs.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from clusters import local_disks, local_firewall
from clusters.base import ClusterError
from clusters.run_registry import Registry, RunEntry, proc_start_time, proc_state, same_process


@dataclass
class Leftover:
    what: str                       # one line for the report, e.g. "process n1 pid 42 (run X)"
    kind: str                       # "process" | "mount" | "firewall" | "registry" | "file"
    pid: int | None = None
    start_time: int | None = None
    firewall: dict | None = None
    run_id: str | None = None
    path: Path | None = None
    mount: dict | None = None       # local_disks.find_leftovers() entry


@dataclass
class CleanupReport:
    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def _stray_processes(entry: RunEntry, known: set[int]) -> list[tuple[int, int, str]]:
    """(pid, start time, cmdline) of processes naming a config under the run's nodes/ dir."""
    if not entry.run_dir:
        return []
    marker = str(Path(entry.run_dir) / "nodes") + "/"
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in known or int(d.name) == os.getpid():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if "--config" in args:
            i = args.index("--config")
            if i + 1 < len(args) and args[i + 1].startswith(marker):
                start = proc_start_time(int(d.name))
                if start is not None:
                    found.append((int(d.name), start, " ".join(args)))
    return found


def find(registry: Registry) -> list[Leftover]:
    """Everything to remove. Call under `registry.locked()` if you are going to remove it."""
    out: list[Leftover] = []
    entries = registry.entries()
    live_firewalls = set()
    for e in entries:
        if e.owner_alive():
            live_firewalls.add(local_firewall.short_id(e.run_id))
            continue
        known = set()
        for p in e.processes:
            known.add(p.pid)
            if same_process(p.pid, p.start_time):
                out.append(Leftover(f"process {p.node} pid {p.pid} (run {e.run_id})", "process",
                                    pid=p.pid, start_time=p.start_time, run_id=e.run_id))
        for pid, start, cmd in _stray_processes(e, known):
            out.append(Leftover(f"process pid {pid} `{cmd[:120]}` (run {e.run_id})", "process",
                                pid=pid, start_time=start, run_id=e.run_id))
        out.append(Leftover(f"registry entry {e.run_id} (owner pid {e.owner_pid} is gone; "
                            f"addresses {e.prefix}.x)", "registry", run_id=e.run_id))
    # a firewall object of a live run registered elsewhere (the default registry, when cleaning another
    # one) is not a leftover either
    default = Registry()
    if default.dir.resolve() != registry.dir.resolve():
        live_firewalls.update(local_firewall.short_id(e.run_id) for e in default.entries() if e.owner_alive())
    for obj in local_firewall.find_leftovers():
        name = obj.get("chain") or obj.get("table")
        if name.split("-")[-1].split("_")[-1] in live_firewalls:
            continue
        if obj.get("owner") and same_process(*obj["owner"]):  # a live run in a registry we cannot see
            continue
        label = (f"iptables chain {name}" + (f" (table {obj['table']})" if obj.get("table") else "")
                 if obj["kind"] == "iptables" else f"nft table {obj.get('family')} {name}")
        out.append(Leftover(label, "firewall", firewall=obj))
    for obj in local_disks.find_leftovers():     # a disk-full run's tmpfs data directories (local or Docker)
        alive = same_process(*obj["owner"]) if obj["owner"] else obj["short_id"] in live_firewalls
        if not alive:
            out.append(Leftover(f"tmpfs {obj['path']} ({obj['source']})", "mount", mount=obj))
    for path in registry.unreadable():
        out.append(Leftover(f"unreadable registry file {path}", "file", path=path))
    return out


def _stop_process(pid: int, start_time: int, grace_s: float) -> str:
    if not same_process(pid, start_time):
        return "already gone"
    try:
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        return "already gone"
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not same_process(pid, start_time):
            return "stopped by SIGTERM"
        time.sleep(0.05)
    if same_process(pid, start_time):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return "stopped by SIGTERM"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and proc_state(pid) not in (None, "Z"):
            time.sleep(0.02)
        return "killed by SIGKILL"
    return "stopped by SIGTERM"


def clean(registry: Registry, *, dry_run: bool = False, grace_s: float = 3.0) -> CleanupReport:
    report = CleanupReport()
    with registry.locked():
        items = find(registry)
        # processes first (they hold files in the mounts), then mounts and firewall objects, then the
        # registry entries that described them
        order = {"process": 0, "mount": 1, "firewall": 2, "file": 3, "registry": 4}
        for item in sorted(items, key=lambda i: order[i.kind]):
            if dry_run:
                report.removed.append(f"would remove {item.what}")
                continue
            try:
                if item.kind == "process":
                    how = _stop_process(item.pid, item.start_time, grace_s)
                    report.removed.append(f"{item.what}: {how}")
                    continue
                if item.kind == "firewall":
                    local_firewall.remove_object(item.firewall)
                elif item.kind == "mount":
                    local_disks.remove_mount(item.mount)
                elif item.kind == "registry":
                    registry.remove(item.run_id)
                elif item.kind == "file":
                    item.path.unlink(missing_ok=True)
                report.removed.append(f"removed {item.what}")
            except (OSError, ValueError, RuntimeError, ClusterError) as exc:
                report.failed.append(f"{item.what}: {exc}")
    return report
