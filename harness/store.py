"""The results store: `results/<test-name>/<timestamp>/` run directories, test.json and `latest` links.

Layout and file names are those of docs/formats.md (harness/runformat.py spells them). A run directory is
created before the cluster starts, so that even a run that fails at provisioning keeps its test.json and
history. `latest` links are relative symlinks, replaced atomically (temp link + rename).
"""
from __future__ import annotations

import os
import platform
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from harness import runformat

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


def cluster_layout(cluster: Any, backend: str) -> dict[str, Any]:
    """test.json's "cluster": backend name and every node's address."""
    nodes = {}
    try:
        ctl = cluster.controller()
        nodes[ctl.name] = {"host": ctl.host, "port": ctl.port, "role": "controller"}
        for name, addr in cluster.brokers().items():
            nodes[name] = {"host": addr.host, "port": addr.port, "role": "broker"}
    except Exception as exc:  # a cluster that never started has no addresses; say so, do not fail
        return {"backend": backend, "nodes": nodes, "error": f"{type(exc).__name__}: {exc}"}
    return {"backend": backend, "nodes": nodes}
