"""The results index (results/index.html): every run under a results directory, newest first.

A run is a directory with a history.jsonl or test.json (or an exploration's explore.json: its row links its
explore.html, reports/explore_page.py), usually <root>/<test>/<timestamp>/ and deeper
for suites (symlinks such as `latest` are skipped, so no run is listed twice). Each row shows the test,
start time, seed, duration, a configuration summary, the verdict in colour, the number of anomalies and
their counts by kind, and links to the run's report and, for a suite's run, to its suite page. Suite runs
(<root>/suites/<suite>/<timestamp>/ with suite.html) are listed above the runs. One unreadable run does
not break the index: its row says what is wrong with it.

Duration is the time from the run's start to its last operation: results.json's `time_axis.end_s`, or
for results written before that field existed (or no results), the time of history.jsonl's last line.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rundir import formats as runformat
from rundir.formats import FormatError
from reports import explore_page
from reports.config_summary import summary
from rundir.expectation import AS_EXPECTED, UNEXPECTED, judge
from reports.load import verdict_of
from reports.render import asset, environment

INDEX_HTML = "index.html"
SUITE_HTML = "suite.html"   # a suite run's page (written by the suite runner; reports/suite_page.py)


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
    seed: str = ""
    duration: str = ""
    anomaly_total: int | None = None      # findings that fail the run; None when not checked
    allowed_total: int = 0                 # findings of allowed kinds (counted, do not fail the run)
    suite_href: str | None = None          # the suite page this run belongs to
    suite_name: str = ""
    rerun_of: str = ""                     # timestamp of the run this one repeats
    expect_state: str = ""                 # rundir/expectation.py: as-expected | unexpected | not-judged | ""
    expect_phrase: str = ""

    @property
    def failure(self) -> bool:
        """A real failure: an expectation broken, or an invalid run that expected nothing."""
        return self.expect_state == UNEXPECTED or (self.verdict == "invalid" and self.expect_state != AS_EXPECTED)


@dataclass
class SuiteRow:
    name: str
    timestamp: str
    href: str
    status: str
    counts: dict[str, int] = field(default_factory=dict)


MAX_DEPTH = 6


def _is_run(d: Path) -> bool:
    return ((d / runformat.HISTORY).exists() or (d / runformat.TEST_JSON).exists()
            or (d / runformat.EXPLORE_JSON).exists())


def _store_dirs(root: Path):
    """(directory, depth, is_run) for the store under root, depth first in name order, up to MAX_DEPTH;
    run directories are not entered, and symlinks, hidden directories and columnar/ are not followed."""
    def walk(d: Path, depth: int):
        try:
            children = sorted(d.iterdir())
        except OSError:
            return
        for c in children:
            if c.is_symlink() or not c.is_dir() or c.name.startswith(".") or c.name == runformat.COLUMNAR_DIR:
                continue
            run = _is_run(c)
            yield c, depth, run
            if not run and depth < MAX_DEPTH:
                yield from walk(c, depth + 1)

    if root.is_dir():
        yield root, 0, False
        yield from walk(root, 1)


def find_runs(root: Path) -> list[Path]:
    """Every run directory under root, at any depth up to MAX_DEPTH (suites nest theirs deeper):
    a directory holding history.jsonl or test.json. Symlinks and hidden directories are not followed."""
    return [d for d, _depth, run in _store_dirs(Path(root)) if run]


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


def format_duration(seconds: float | None) -> str:
    if seconds is None or not isinstance(seconds, (int, float)) or seconds != seconds or seconds < 0:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _last_op_time_s(history: Path) -> float | None:
    """The `time` of history.jsonl's last complete line, in seconds (read from the file's end only)."""
    try:
        with history.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            tail = fh.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            op = json.loads(line)
        except ValueError:
            continue   # a torn last line, or the cut-off first line of the tail
        t = op.get("time") if isinstance(op, dict) else None
        if isinstance(t, int) and not isinstance(t, bool):
            return t / 1e9
    return None


def run_duration_s(run_dir: Path, results: dict[str, Any] | None) -> float | None:
    axis = (results or {}).get("time_axis")
    if isinstance(axis, dict) and isinstance(axis.get("end_s"), (int, float)) and not isinstance(axis["end_s"], bool):
        return float(axis["end_s"])
    history = run_dir / runformat.HISTORY
    return _last_op_time_s(history) if history.exists() else None


def _suite_of(root: Path, run_dir: Path) -> tuple[str | None, str]:
    """(href of the suite page holding this run, suite name), or (None, "") for a run outside suites."""
    root = root.resolve()
    d = run_dir.resolve().parent
    while d == root or root in d.parents:
        if (d / SUITE_HTML).exists():
            rel = d.relative_to(root).as_posix()
            return (SUITE_HTML if rel == "." else f"{rel}/{SUITE_HTML}"), d.parent.name
        if d == root:
            break
        d = d.parent
    return None, ""


def find_suites(root: Path) -> list[SuiteRow]:
    """Every suite run under root (a directory holding suite.html), newest first."""
    root = Path(root)
    pages = [d for d, _depth, run in _store_dirs(root) if not run and (d / SUITE_HTML).is_file()]
    out: list[SuiteRow] = []
    for d in pages:
        rel = d.relative_to(root)
        doc: dict[str, Any] = {}
        try:
            obj = runformat.load_json(d / "suite.json")
            doc = obj if isinstance(obj, dict) else {}
        except FormatError:
            pass
        counts = doc.get("counts") if isinstance(doc.get("counts"), dict) else {}
        out.append(SuiteRow(name=str(doc.get("suite") or d.parent.name), timestamp=str(doc.get("timestamp") or d.name),
                            href=SUITE_HTML if not rel.parts else f"{rel.as_posix()}/{SUITE_HTML}", status=str(doc.get("status") or "unknown"),
                            counts={k: v for k, v in counts.items() if isinstance(v, int) and v}))
    out.sort(key=lambda r: (r.timestamp, r.name), reverse=True)
    return out


def explore_row(root: Path, run_dir: Path) -> RunRow:
    """An exploration's row (reports/explore_page.py): its findings per invariant as the anomalies, a
    promised invariant broken as the failing ones, its page as the report."""
    rel = run_dir.relative_to(root).as_posix()
    try:
        doc = runformat.load_json(run_dir / runformat.EXPLORE_JSON)
        doc = doc if isinstance(doc, dict) else {}
        problem = "" if doc else f"{run_dir / runformat.EXPLORE_JSON}: expected a JSON object"
    except FormatError as exc:
        doc, problem = {}, str(exc)
    sort_key, started = _when({}, run_dir)
    unexpected = doc.get("unexpected_by_invariant") or {}
    anomalies = sorted(((str(k), int(n), bool(unexpected.get(k))) for k, n in
                        (doc.get("findings_by_invariant") or {}).items() if isinstance(n, int) and n > 0),
                       key=lambda a: (not a[2], a[0]))
    state, phrase = explore_page.judged(doc) if doc else ("", "")
    page = run_dir / runformat.EXPLORE_HTML
    settings = doc.get("settings") if isinstance(doc.get("settings"), dict) else {}
    seed = doc.get("seed")
    return RunRow(test=str(doc.get("name") or run_dir.parent.name), timestamp=str(doc.get("timestamp") or run_dir.name),
                  started=started, sort_key=sort_key, run_href=rel + "/",
                  report_href=f"{rel}/{runformat.EXPLORE_HTML}" if page.exists() else None,
                  verdict=explore_page.verdict(doc) if doc else "unknown", checked=bool(doc), anomalies=anomalies,
                  config=[("explore", "simulation")] + summary(settings, limit=6), problem=problem,
                  seed=str(seed) if isinstance(seed, int) and not isinstance(seed, bool) else "",
                  duration=format_duration(doc.get("explore_s") if isinstance(doc.get("explore_s"), (int, float)) else None),
                  anomaly_total=sum(n for _k, n, fails in anomalies if fails) if doc else None,
                  allowed_total=sum(n for _k, n, fails in anomalies if not fails),
                  expect_state=state, expect_phrase=phrase)


def read_row(root: Path, run_dir: Path) -> RunRow:
    if (run_dir / runformat.EXPLORE_JSON).exists() and not (run_dir / runformat.TEST_JSON).exists():
        return explore_row(root, run_dir)
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
    seed = test.get("seed")
    rerun = test.get("rerun_of")
    suite_href, suite_name = _suite_of(root, run_dir)
    scenario_failed = _scenario_failed(run_dir)
    judged = judge(test.get("expect"), results, not_played="a step did not play out" if scenario_failed else None)
    return RunRow(expect_state=judged.state if judged else "", expect_phrase=judged.phrase() if judged else "",
                  seed=str(seed) if isinstance(seed, int) and not isinstance(seed, bool) else "",
                  duration=format_duration(run_duration_s(run_dir, results)),
                  anomaly_total=sum(c for _k, c, fails in anomalies if fails) if results is not None else None,
                  allowed_total=sum(c for _k, c, fails in anomalies if not fails),
                  suite_href=suite_href, suite_name=suite_name,
                  rerun_of=str(rerun.get("timestamp") or "") if isinstance(rerun, dict) else "",
                  test=str(test.get("name") or run_dir.parent.name), timestamp=str(test.get("timestamp") or run_dir.name),
                  started=started, sort_key=sort_key, run_href=rel + "/",
                  report_href=f"{rel}/{runformat.REPORT_HTML}" if report.exists() else None,
                  verdict=verdict_of(results), checked=results is not None, anomalies=anomalies,
                  config=summary(test.get("config") or {}, limit=8, kind=str(test.get("kind") or "run")), problem=problem)


def _scenario_failed(run_dir: Path) -> bool:
    """A scenario run whose steps did not all play out (scenario.json "failed")."""
    path = run_dir / runformat.SCENARIO_JSON
    if not path.exists():
        return False
    try:
        doc = runformat.load_json(path)
    except FormatError:
        return False
    return isinstance(doc, dict) and bool(doc.get("failed"))


def render_index(root: Path) -> str:
    root = Path(root)
    rows = sorted((read_row(root, d) for d in find_runs(root)), key=lambda r: (r.sort_key, r.timestamp, r.test),
                  reverse=True)
    tally = {v: sum(1 for r in rows if r.verdict == v) for v in ("valid", "invalid", "unknown")}
    tally["expected"] = sum(1 for r in rows if r.expect_state == AS_EXPECTED)
    tally["failures"] = sum(1 for r in rows if r.failure)
    tests = sorted({r.test for r in rows})
    generated = _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return environment().get_template("index.html.j2").render(
        rows=rows, suites=find_suites(root), tally=tally, tests=tests, generated=generated,
        root_name=root.resolve().name,
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
