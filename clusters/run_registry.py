"""The run registry: which local runs exist on this machine, what they allocated and what they started.

One JSON file per run under the registry directory (`/run/highwater` when root, else
`/tmp/highwater-<uid>`; `HIGHWATER_REGISTRY_DIR` overrides), changed only under an exclusive `flock` on
`registry.lock`. A run records its owner (the harness process: pid and kernel start time, so a reused pid
is not mistaken for it), its loopback prefix and port block, its firewall object, and every process it
started (pid, start time, node). `highwater cleanup` reads it to find what a killed harness left behind.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator


def machine_dir(env_var: str, as_root: str, as_user: Path) -> Path:
    """A directory of highwater's on this machine: `env_var` when set, else `as_root` for root and
    `as_user` for anyone else."""
    override = os.environ.get(env_var)
    if override:
        return Path(override)
    return Path(as_root) if os.geteuid() == 0 else as_user


def registry_dir() -> Path:
    return machine_dir("HIGHWATER_REGISTRY_DIR", "/run/highwater", Path(f"/tmp/highwater-{os.getuid()}"))


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def proc_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name (field 2) is in parentheses and may contain spaces: split after the last ')'
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[19])


def proc_state(pid: int) -> str | None:
    """The one-letter process state (R, S, D, T stopped, Z zombie, ...), None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rindex(")") + 2:].split()[0]


def same_process(pid: int, start_time: int) -> bool:
    """True if `pid` is alive and is the very process that had `start_time` (not a reused pid)."""
    current = proc_start_time(pid)
    return current is not None and current == start_time and proc_state(pid) != "Z"


@dataclass
class ProcessRecord:
    node: str
    pid: int
    start_time: int
    argv: list[str]


@dataclass
class RunEntry:
    run_id: str
    owner_pid: int
    owner_start_time: int
    prefix: str                         # "127.A.B"
    ports: list[int]                    # [controller port, n1 port, ...]
    firewall: dict | None = None        # {"kind": "iptables", "chain": "HW-..."} or {"kind": "nft", "table": ...}
    processes: list[ProcessRecord] = field(default_factory=list)
    created_wall: float = 0.0
    run_dir: str | None = None          # node configs live in <run_dir>/nodes/<node>/
    boot_id: str | None = None          # /proc/sys/kernel/random/boot_id when the run started

    def owner_alive(self) -> bool:
        if self.boot_id is not None and self.boot_id != boot_id():
            return False  # the machine rebooted since: pid and start time mean nothing any more
        return same_process(self.owner_pid, self.owner_start_time)

    @staticmethod
    def from_json(obj: dict) -> "RunEntry":
        procs = [ProcessRecord(**p) for p in obj.get("processes", [])]
        return RunEntry(run_id=obj["run_id"], owner_pid=obj["owner_pid"],
                        owner_start_time=obj["owner_start_time"], prefix=obj["prefix"],
                        ports=list(obj["ports"]), firewall=obj.get("firewall"), processes=procs,
                        created_wall=obj.get("created_wall", 0.0), run_dir=obj.get("run_dir"),
                        boot_id=obj.get("boot_id"))


class Registry:
    """Access to the registry directory. Every read-modify-write happens inside `locked()`."""

    def __init__(self, directory: Path | None = None):
        self.dir = Path(directory) if directory else registry_dir()

    @contextlib.contextmanager
    def locked(self) -> Iterator["Registry"]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "registry.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _path(self, run_id: str) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run_id)
        return self.dir / f"run-{safe}.json"

    def entries(self) -> list[RunEntry]:
        out = []
        if not self.dir.is_dir():
            return out
        for path in sorted(self.dir.glob("run-*.json")):
            try:
                out.append(RunEntry.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a torn or foreign file: ignored (cleanup reports it)
        return out

    def unreadable(self) -> list[Path]:
        bad = []
        for path in sorted(self.dir.glob("run-*.json")) if self.dir.is_dir() else []:
            try:
                RunEntry.from_json(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError):
                bad.append(path)
        return bad

    def get(self, run_id: str) -> RunEntry | None:
        path = self._path(run_id)
        try:
            return RunEntry.from_json(json.loads(path.read_text()))
        except FileNotFoundError:
            return None

    def put(self, entry: RunEntry) -> None:
        path = self._path(entry.run_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(entry), indent=1))
        os.replace(tmp, path)

    def remove(self, run_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(run_id).unlink()

    # --- convenience wrappers that lock -------------------------------------------------------------
    def update(self, run_id: str, change) -> None:
        """Apply `change(entry)` to the run's entry under the lock (no-op if the entry is gone)."""
        with self.locked():
            entry = self.get(run_id)
            if entry is not None:
                change(entry)
                self.put(entry)

    def add_process(self, run_id: str, record: ProcessRecord) -> None:
        self.update(run_id, lambda e: e.processes.append(record))

    def drop_process(self, run_id: str, pid: int) -> None:
        self.update(run_id, lambda e: setattr(e, "processes", [p for p in e.processes if p.pid != pid]))


def this_process_identity() -> tuple[int, int]:
    pid = os.getpid()
    start = proc_start_time(pid)
    assert start is not None
    return pid, start


def now_wall() -> float:
    return time.time()
