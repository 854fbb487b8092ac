"""The results store: `results/<test-name>/<timestamp>/` run directories, test.json and `latest` links.

Layout and file names are those of docs/formats.md (rundir/formats.py spells them). A run directory is
created before the cluster starts, so that even a run that fails at provisioning keeps its test.json and
history. `latest` links are relative symlinks, replaced atomically (temp link + rename). test.json records
how to reproduce the run: the configuration, seed, command line and code version.
"""
from __future__ import annotations

import os
import platform
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from rundir import formats as runformat

LATEST = "latest"


@dataclass
class RunDir:
    """One run's directory and identity."""
    root: Path            # the results directory (results/)
    name: str             # test name
    timestamp: str        # e.g. 20261121T224501Z (a -2, -3 suffix when two runs start in one second)
    path: Path            # root/name/timestamp
    run_id: str           # name-timestamp-xxxx, also used to name the cluster's resources

    @property
    def history_path(self) -> Path:
        return self.path / runformat.HISTORY

    @property
    def nemesis_path(self) -> Path:
        return self.path / runformat.NEMESIS

    @property
    def test_json(self) -> Path:
        return self.path / runformat.TEST_JSON

    @property
    def report_path(self) -> Path:
        return self.path / runformat.REPORT_HTML


def utc_timestamp(now: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def create_run_dir(results_root: Path | str, name: str, *, now: float | None = None) -> RunDir:
    """Make results_root/name/<timestamp>/ (never reusing an existing directory)."""
    root = Path(results_root)
    base = utc_timestamp(now)
    test_dir = root / name
    test_dir.mkdir(parents=True, exist_ok=True)
    stamp, n = base, 1
    while True:
        path = test_dir / stamp
        try:
            path.mkdir()
            break
        except FileExistsError:
            n += 1
            stamp = f"{base}-{n}"
    run_id = f"{name}-{stamp}-{secrets.token_hex(2)}"
    return RunDir(root=root, name=name, timestamp=stamp, path=path, run_id=run_id)


# the command line of this process as `highwater` saw it (harness/cli.py sets it); None: not from the CLI
_COMMAND_LINE: list[str] | None = None
_CODE: dict[str, Any] | None = None
CODE_ROOT = Path(__file__).resolve().parent.parent   # the checkout (or site-packages) holding harness/


def set_command_line(argv: list[str]) -> None:
    global _COMMAND_LINE
    _COMMAND_LINE = list(argv)


def command_line() -> list[str]:
    """test.json's "argv": the `highwater ...` command line, else this process's own argv."""
    return list(_COMMAND_LINE) if _COMMAND_LINE is not None else list(sys.argv)


def code_version(root: Path | None = None) -> dict[str, Any]:
    """test.json's "code": {"source": "git", "commit", "dirty", "version"} when the code is a git
    checkout (dirty: tracked files differ from the commit), else {"source": "package", "version"}."""
    global _CODE
    if root is None and _CODE is not None:
        return dict(_CODE)
    base = Path(root) if root is not None else CODE_ROOT
    try:
        version = metadata.version("highwater")
    except metadata.PackageNotFoundError:
        version = None
    out: dict[str, Any] = {"source": "package", "version": version}
    if (base / ".git").exists():
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(base), *args], capture_output=True, text=True, timeout=20,
                                  check=True).stdout.strip()
        try:
            commit = git("rev-parse", "HEAD")
            dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
            out = {"source": "git", "commit": commit, "dirty": dirty, "version": version}
        except (OSError, subprocess.SubprocessError):
            pass
    if root is None:
        _CODE = dict(out)
    return out


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist, key in (("highwater", "highwater"), ("pyspark", "pyspark")):
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = "not installed"
    return out


def test_record(run: RunDir, config: dict[str, Any], *, seed: int | None, start_wall_ns: int,
                cluster: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    record = {
        "name": run.name,
        "run_id": run.run_id,
        "timestamp": run.timestamp,
        "start_wall_ns": start_wall_ns,
        "seed": seed,
        "config": config,
        "versions": versions(),
        "argv": command_line(),
        "code": code_version(),
        "cluster": cluster or {},
    }
    if extra:
        record.update(extra)
    return record


def write_test_json(run: RunDir, record: dict[str, Any]) -> Path:
    runformat.write_json(run.test_json, record)
    return run.test_json


def _point(link: Path, target: str) -> None:
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    os.symlink(target, tmp)
    os.replace(tmp, link)


def update_latest(run: RunDir) -> None:
    """Point results/<name>/latest at this run and results/latest at <name>/<timestamp>."""
    _point(run.root / run.name / LATEST, run.timestamp)
    _point(run.root / LATEST, f"{run.name}/{run.timestamp}")
