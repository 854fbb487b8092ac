"""The results index (results/index.html): every run under a results directory, newest first.

A run is a directory with a history.jsonl or test.json, usually <root>/<test>/<timestamp>/ and deeper
for suites (symlinks such as `latest` are skipped, so no run is listed twice). Each row shows the test,
start time, a configuration summary, the verdict in colour, the anomaly counts and a link to the run's
report. One unreadable run does not break the index: its row says what is wrong with it.
"""
from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import runformat
from harness.runformat import FormatError
from reports.config_summary import summary
from reports.load import verdict_of
from reports.render import asset, environment

INDEX_HTML = "index.html"


@dataclass
class RunRow:
    test: str
    timestamp: str
    started: str
    sort_key: float
    run_href: str
    report_href: str | None
    verdict: str
    checked: bool
    anomalies: list[tuple[str, int, bool]] = field(default_factory=list)  # kind, count, fails the run
    config: list[tuple[str, str]] = field(default_factory=list)
    problem: str = ""


MAX_DEPTH = 6


def find_runs(root: Path) -> list[Path]:
    """Every run directory under root, at any depth up to MAX_DEPTH (suites nest theirs deeper):
    a directory holding history.jsonl or test.json. Symlinks and hidden directories are not followed."""
    root = Path(root)
    runs: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        try:
            children = sorted(d.iterdir())
        except OSError:
            return
        for c in children:
            if c.is_symlink() or not c.is_dir() or c.name.startswith(".") or c.name == runformat.COLUMNAR_DIR:
                continue
            if (c / runformat.HISTORY).exists() or (c / runformat.TEST_JSON).exists():
                runs.append(c)
            elif depth < MAX_DEPTH:
                walk(c, depth + 1)

    if root.is_dir():
        walk(root, 1)
    return runs


def _when(test: dict[str, Any], run_dir: Path) -> tuple[float, str]:
    ns = test.get("start_wall_ns")
    if isinstance(ns, int) and not isinstance(ns, bool):
        t = ns / 1e9
    else:
        stamp = str(test.get("timestamp") or run_dir.name)
        try:
            t = _dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=_dt.timezone.utc).timestamp()
        except ValueError:
            t = run_dir.stat().st_mtime
    return t, _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def read_row(root: Path, run_dir: Path) -> RunRow:
    rel = run_dir.relative_to(root).as_posix()
    problem = ""
    test: dict[str, Any] = {}
    results = None
    try:
        obj = runformat.load_json(run_dir / runformat.TEST_JSON) if (run_dir / runformat.TEST_JSON).exists() else {}
        test = obj if isinstance(obj, dict) else {}
        if (run_dir / runformat.RESULTS_JSON).exists():
            results = runformat.load_json(run_dir / runformat.RESULTS_JSON)
            if not isinstance(results, dict):
                raise FormatError(run_dir / runformat.RESULTS_JSON, None, "expected a JSON object")
    except FormatError as exc:
        problem = str(exc)
        results = None
    sort_key, started = _when(test, run_dir)
    anomalies = []
    for kind, body in ((results or {}).get("anomalies") or {}).items():
        if isinstance(body, dict) and isinstance(body.get("count"), int) and body["count"] > 0:
            anomalies.append((str(kind), body["count"], bool(body.get("fails_run", True))))
    anomalies.sort(key=lambda a: (not a[2], a[0]))
    report = run_dir / runformat.REPORT_HTML
    return RunRow(test=str(test.get("name") or run_dir.parent.name), timestamp=str(test.get("timestamp") or run_dir.name),
                  started=started, sort_key=sort_key, run_href=rel + "/",
                  report_href=f"{rel}/{runformat.REPORT_HTML}" if report.exists() else None,
                  verdict=verdict_of(results), checked=results is not None, anomalies=anomalies,
                  config=summary(test.get("config") or {}, limit=8), problem=problem)


def render_index(root: Path) -> str:
    root = Path(root)
    rows = sorted((read_row(root, d) for d in find_runs(root)), key=lambda r: (r.sort_key, r.timestamp, r.test),
                  reverse=True)
    tally = {v: sum(1 for r in rows if r.verdict == v) for v in ("valid", "invalid", "unknown")}
    tests = sorted({r.test for r in rows})
    generated = _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return environment().get_template("index.html.j2").render(
        rows=rows, tally=tally, tests=tests, generated=generated, root_name=root.resolve().name,
        css=asset("report.css"), js=asset("index.js"))


def write_index(results_root: Path) -> Path:
    """Write RESULTS_ROOT/index.html listing every run under it; return its path."""
    root = Path(results_root)
    root.mkdir(parents=True, exist_ok=True)
    out = root / INDEX_HTML
    tmp = root / f".{INDEX_HTML}.{os.getpid()}.tmp"  # runs finishing together each write their own
    tmp.write_text(render_index(root), encoding="utf-8")
    tmp.replace(out)
    return out
