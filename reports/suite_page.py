"""The suite page (suite.html): a safety matrix, the configurations and a trend over earlier suite runs.

Read from a suite directory's suite.json (harness/suite.py writes it; docs/suites.md describes it):

- Safety matrix: one row per configuration without its fault set (the [[test]] plus its non-nemesis matrix
  values), one column per fault set. A cell sums its repeats' lost-write and divergence counts and is
  coloured against its expectation: green as expected, red broken, amber inconclusive, grey not run.
  It links to each repeat's report.
- Configurations: expectation, outcome message, settings, one line per repeat.
- Explorations: for each explore configuration (a seeded search in simulation, harness/explore_command.py)
  the findings of every repeat, each with its invariant, its shrunk story and its scenario file; its
  matrix cell counts findings per invariant instead of lost writes.
- Trend: the same suite's earlier runs found next to this one (results/suites/<suite>/*/suite.json):
  per configuration, outcome and lost-write count over the last runs.

Self-contained like the run report: reports' stylesheet inline, autoescaped template, no fetches.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rundir.kinds import DIVERGENCE, LOST_WRITE
from reports.render import asset, environment

SUMMARY_JSON = "suite.json"
SUITE_HTML = "suite.html"
TREND_RUNS = 10
STATUS_CLASS = {"passed": "as-expected", "failed": "broken", "error": "inconclusive", "skipped": "not-run",
                "pending": "not-run"}
STATUS_WORD = {"passed": "as expected", "failed": "broken", "error": "inconclusive", "skipped": "not run",
               "pending": "pending"}


@dataclass
class Cell:
    name: str
    status: str
    css: str
    expect: str
    lost: int
    divergent: int
    others: list[tuple[str, int]]
    ran: int
    planned: int
    message: str
    links: list[tuple[str, str]] = field(default_factory=list)   # (label, href) per repeat
    found: dict[str, int] | None = None     # explore configurations: findings per invariant (else None)

    @property
    def word(self) -> str:
        return STATUS_WORD.get(self.status, self.status)

    @property
    def counts_text(self) -> str:
        if self.found is None:
            return f"lost {self.lost} · div {self.divergent}"
        if not self.found:
            return "nothing found"
        return "found " + ", ".join(f"{k} {n}" for k, n in self.found.items())


@dataclass
class Matrix:
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Cell]

    def cell(self, row: str, column: str) -> Cell | None:
        return self.cells.get((row, column))


def expect_text(expect: dict[str, Any]) -> str:
    if expect.get("explore") == "none":
        return "explore finds nothing"
    if expect.get("explore") == "found":
        return f"explore finds {expect.get('invariant') or 'a violation'}"
    return "safe" if expect.get("safe") else "finds " + ", ".join(expect.get("finds") or [])


def _sum(repeats: list[dict[str, Any]], kind: str) -> int:
    return sum(int((r.get("counts") or {}).get(kind, 0)) for r in repeats)


def make_cell(c: dict[str, Any]) -> Cell:
    repeats = c.get("repeats") or []
    others: dict[str, int] = {}
    for r in repeats:
        allowed = set(r.get("allowed") or [])   # counted by the checker but not failing a run: not shown
        for k, v in (r.get("counts") or {}).items():
            if k not in (LOST_WRITE.name, DIVERGENCE.name) and k not in allowed and v:
                others[k] = others.get(k, 0) + int(v)
    links = []
    for r in repeats:
        href = r.get("report") or (r.get("run_dir") + "/" if r.get("run_dir") else None)
        if href:
            links.append((f"r{r.get('index')}", href))
    status = str(c.get("status") or "pending")
    found = None
    if c.get("kind") == "explore":
        found = {}
        for r in repeats:
            for k, v in (r.get("counts") or {}).items():
                found[k] = found.get(k, 0) + int(v)
        others = {}
    return Cell(name=str(c.get("name")), status=status, css=STATUS_CLASS.get(status, "not-run"),
                expect=expect_text(c.get("expect") or {}), lost=_sum(repeats, LOST_WRITE.name),
                divergent=_sum(repeats, DIVERGENCE.name), others=sorted(others.items()), ran=len(repeats),
                planned=int(c.get("repeats_planned") or len(repeats)), message=str(c.get("message") or ""),
                links=links, found=found)


# --- explorations ----------------------------------------------------------------------------------

@dataclass
class ExploreFinding:
    repeat: int
    invariant: str
    text: str
    expected: bool
    seed: Any
    index: Any
    original_length: Any
    shrunk_length: Any
    story: list[str]
    scenario: str | None      # href of the scenario file, relative to the suite directory


@dataclass
class Exploration:
    name: str
    status: str
    css: str
    expect: str
    message: str
    options: dict[str, Any]
    explored: list[str]                     # one line per repeat: seed, schedules, events, seconds
    findings: list[ExploreFinding]


def explorations(summary: dict[str, Any]) -> list[Exploration]:
    """The explore configurations of a suite summary with their repeats' findings."""
    out = []
    for c in summary.get("configs") or []:
        if c.get("kind") != "explore":
            continue
        status = str(c.get("status") or "pending")
        lines, findings = [], []
        for r in c.get("repeats") or []:
            e = r.get("explored") or {}
            rate = f", {float(e['schedules_per_s']):,.0f}/s" if e.get("schedules_per_s") else ""
            lines.append(f"r{r.get('index')}: seed {r.get('seed')}, {int(e.get('schedules') or 0):,} schedules, "
                         f"{int(e.get('events') or 0):,} events in {float(e.get('explore_s') or 0):.1f} s{rate}")
            base = r.get("run_dir")
            for f in r.get("findings") or []:
                findings.append(ExploreFinding(
                    repeat=int(r.get("index") or 0), invariant=str(f.get("invariant")), text=str(f.get("text") or ""),
                    expected=bool(f.get("expected")), seed=f.get("seed"), index=f.get("index"),
                    original_length=f.get("original_length"), shrunk_length=f.get("shrunk_length"),
                    story=[str(x) for x in f.get("story") or []],
                    scenario=f"{base}/{f['scenario']}" if base and f.get("scenario") else None))
        out.append(Exploration(name=str(c.get("name")), status=status, css=STATUS_CLASS.get(status, "not-run"),
                               expect=expect_text(c.get("expect") or {}), message=str(c.get("message") or ""),
                               options=dict(c.get("explore") or {}), explored=lines, findings=findings))
    return out


def safety_matrix(summary: dict[str, Any]) -> Matrix:
    rows: list[str] = []
    columns: list[str] = []
    cells: dict[tuple[str, str], Cell] = {}
    for c in summary.get("configs") or []:
        row, col = str(c.get("row") or c.get("name")), str(c.get("column") or "none")
        if row not in rows:
            rows.append(row)
        if col not in columns:
            columns.append(col)
        cells[(row, col)] = make_cell(c)
    return Matrix(rows=rows, columns=columns, cells=cells)


# --- trend ---------------------------------------------------------------------------------------

@dataclass
class TrendRun:
    timestamp: str
    href: str | None        # relative link to that run's suite page
    exit_code: Any
    current: bool


@dataclass
class TrendPoint:
    status: str
    css: str
    lost: int
    divergent: int


@dataclass
class Trend:
    runs: list[TrendRun]
    rows: list[tuple[str, list[TrendPoint | None]]]   # configuration -> one point per run (None: not in it)


def _load(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def trend(suite_dir: Path, summary: dict[str, Any], last: int = TREND_RUNS) -> Trend:
    """This suite run and up to `last - 1` earlier ones of the same suite in the same results directory."""
    suite_dir = Path(suite_dir)
    siblings = [d for d in suite_dir.parent.iterdir()
                if d.is_dir() and not d.is_symlink() and (d / SUMMARY_JSON).exists()] if suite_dir.parent.is_dir() else []
    docs: list[tuple[Path, dict[str, Any]]] = []
    for d in sorted((d for d in siblings if d.name < suite_dir.name), key=lambda d: d.name):
        doc = _load(d / SUMMARY_JSON)
        if doc is not None and doc.get("suite") == summary.get("suite"):
            docs.append((d, doc))
    docs = docs[-(last - 1):] if last > 1 else []
    docs.append((suite_dir, summary))
    runs = [TrendRun(timestamp=str(doc.get("timestamp") or d.name),
                     href=None if d == suite_dir else f"../{d.name}/{SUITE_HTML}",
                     exit_code=doc.get("exit_code"), current=d == suite_dir) for d, doc in docs]
    names: list[str] = [str(c.get("name")) for c in summary.get("configs") or []]
    for _d, doc in docs:
        for c in doc.get("configs") or []:
            if str(c.get("name")) not in names:
                names.append(str(c.get("name")))
    rows = []
    for name in names:
        points: list[TrendPoint | None] = []
        for _d, doc in docs:
            found = next((c for c in doc.get("configs") or [] if str(c.get("name")) == name), None)
            if found is None:
                points.append(None)
                continue
            status = str(found.get("status") or "pending")
            reps = found.get("repeats") or []
            points.append(TrendPoint(status=status, css=STATUS_CLASS.get(status, "not-run"),
                                     lost=_sum(reps, LOST_WRITE.name), divergent=_sum(reps, DIVERGENCE.name)))
        rows.append((name, points))
    return Trend(runs=runs, rows=rows)


# --- page ----------------------------------------------------------------------------------------

def render_suite_page(suite_dir: Path) -> str:
    suite_dir = Path(suite_dir)
    summary = _load(suite_dir / SUMMARY_JSON)
    if summary is None:
        raise ValueError(f"{suite_dir / SUMMARY_JSON}: missing or not a JSON object")
    configs = summary.get("configs") or []
    cells = {str(c.get("name")): make_cell(c) for c in configs}
    generated = _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return environment().get_template("suite.html.j2").render(
        s=summary, configs=configs, cells=cells, matrix=safety_matrix(summary), trend=trend(suite_dir, summary),
        explorations=explorations(summary),
        expect_text=expect_text, status_word=STATUS_WORD, status_class=STATUS_CLASS,
        index_href="index.html" if (suite_dir / "index.html").exists() else None,
        generated=generated, css=asset("report.css"))


def write_suite_page(suite_dir: Path) -> Path:
    """Write SUITE_DIR/suite.html from SUITE_DIR/suite.json and return its path."""
    suite_dir = Path(suite_dir)
    out = suite_dir / SUITE_HTML
    tmp = suite_dir / (SUITE_HTML + ".tmp")
    tmp.write_text(render_suite_page(suite_dir), encoding="utf-8")
    tmp.replace(out)
    return out
