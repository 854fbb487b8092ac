"""reports/suite_page.py: safety-matrix cells (counts over repeats, colour against the expectation,
links), the trend over earlier runs of the same suite, and the rendered page."""
from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from reports.suite_page import safety_matrix, trend, write_suite_page


def rep(i, counts, valid, report=True):
    return {"index": i, "exit_code": 0 if valid else 1, "valid": valid, "counts": counts, "seed": i,
            "elapsed_s": 30.0, "run_dir": f"x/r{i}", "report": f"x/r{i}/report.html" if report else None,
            "problems": []}


def conf(name, row, column, status, expect, repeats, planned=None):
    return {"name": name, "row": row, "column": column, "status": status, "message": f"{name} {status}",
            "expect": expect, "settings": {"nemesis": column}, "elapsed_s": 60.0,
            "repeats_planned": planned if planned is not None else len(repeats), "repeats": repeats}


def summary(ts, configs, exit_code=1):
    statuses = [c["status"] for c in configs]
    return {"format": 1, "suite": "nightly", "file": "suites/nightly.toml", "timestamp": ts, "description": "",
            "started_iso": "2026-11-22T00:00:00Z", "finished_iso": None, "elapsed_s": 100.0, "budget_s": None,
            "status": "done", "exit_code": exit_code, "problems": [],
            "counts": {s: statuses.count(s) for s in ("passed", "failed", "error", "skipped", "pending")},
            "configs": configs}


CURRENT = [
    conf("hw-kill", "hw", "kill", "passed", {"finds": ["lost-write"]},
         [rep(1, {"lost-write": 3, "divergence": 1}, False), rep(2, {"lost-write": 2, "duplicate": 4}, False)]),
    conf("hw-pause", "hw", "pause", "failed", {"finds": ["lost-write"]},
         [{**rep(1, {"hw-regression-cross-epoch": 6}, True), "allowed": ["hw-regression-cross-epoch"]}]),
    conf("safe-kill", "safe", "kill", "failed", {"safe": True}, [rep(1, {}, True), rep(2, {"divergence": 2}, False)]),
    conf("safe-partition", "safe", "partition", "skipped", {"safe": True}, [], planned=2),
    conf("safe-pause", "safe", "pause", "error", {"safe": True}, [rep(1, {}, "unknown", report=False)]),
]


def test_matrix_rows_columns_and_cells():
    m = safety_matrix(summary("t2", CURRENT))
    assert m.rows == ["hw", "safe"]
    assert m.columns == ["kill", "pause", "partition"]
    hw_kill = m.cell("hw", "kill")
    assert (hw_kill.lost, hw_kill.divergent, hw_kill.others) == (5, 1, [("duplicate", 4)])
    assert (hw_kill.css, hw_kill.word, hw_kill.ran, hw_kill.planned) == ("as-expected", "as expected", 2, 2)
    assert hw_kill.expect == "finds lost-write"
    assert hw_kill.links == [("r1", "x/r1/report.html"), ("r2", "x/r2/report.html")]
    # a finds configuration that found nothing is red although nothing was lost
    assert (m.cell("hw", "pause").css, m.cell("hw", "pause").lost) == ("broken", 0)
    assert m.cell("hw", "pause").others == []   # a kind the policy allows is not listed
    safe_kill = m.cell("safe", "kill")
    assert (safe_kill.css, safe_kill.lost, safe_kill.divergent, safe_kill.expect) == ("broken", 0, 2, "safe")
    skipped = m.cell("safe", "partition")
    assert (skipped.css, skipped.word, skipped.ran, skipped.planned, skipped.links) == ("not-run", "not run", 0, 2, [])
    assert m.cell("safe", "pause").css == "inconclusive"
    assert m.cell("safe", "pause").links == [("r1", "x/r1/")]  # no report: the run directory
    assert m.cell("hw", "partition") is None


class Cells(HTMLParser):
    """Collects the text of each matrix cell by its data-config."""

    def __init__(self):
        super().__init__()
        self.cells: dict[str, dict] = {}
        self._cur: str | None = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "data-config" in a:
            self._cur, self._depth = a["data-config"], 0
            self.cells[self._cur] = {"class": a.get("class"), "text": ""}
        elif self._cur and tag == "td":
            self._depth += 1

    def handle_endtag(self, tag):
        if self._cur and tag == "td":
            if self._depth == 0:
                self._cur = None
            else:
                self._depth -= 1

    def handle_data(self, data):
        if self._cur:
            self.cells[self._cur]["text"] += data


def write_run(base: Path, ts: str, doc: dict) -> Path:
    d = base / ts
    d.mkdir(parents=True)
    (d / "suite.json").write_text(json.dumps(doc))
    return d


def test_trend_and_rendered_page(tmp_path):
    base = tmp_path / "results" / "suites" / "nightly"
    old1 = [conf("hw-kill", "hw", "kill", "passed", {"finds": ["lost-write"]}, [rep(1, {"lost-write": 7}, False)]),
            conf("gone", "gone", "kill", "passed", {"safe": True}, [rep(1, {}, True)])]
    old2 = [conf("hw-kill", "hw", "kill", "failed", {"finds": ["lost-write"]}, [rep(1, {}, True)])]
    write_run(base, "20261120T010000Z", summary("20261120T010000Z", old1, exit_code=0))
    write_run(base, "20261121T010000Z", summary("20261121T010000Z", old2))
    other = summary("20261121T020000Z", old1)
    other["suite"] = "smoke"   # a stray run of another suite in the same folder is not part of the trend
    write_run(base, "20261121T020000Z", other)
    current = write_run(base, "20261122T010000Z", summary("20261122T010000Z", CURRENT))
    write_run(base, "20261123T010000Z", summary("20261123T010000Z", old2))   # newer: not "earlier"

    t = trend(current, json.loads((current / "suite.json").read_text()))
    assert [r.timestamp for r in t.runs] == ["20261120T010000Z", "20261121T010000Z", "20261122T010000Z"]
    assert [r.current for r in t.runs] == [False, False, True]
    assert t.runs[0].href == "../20261120T010000Z/suite.html" and t.runs[2].href is None
    rows = dict(t.rows)
    assert [(p.status, p.lost) for p in rows["hw-kill"]] == [("passed", 7), ("failed", 0), ("passed", 5)]
    assert rows["gone"][0].status == "passed" and rows["gone"][1] is None and rows["gone"][2] is None
    assert list(rows)[:5] == ["hw-kill", "hw-pause", "safe-kill", "safe-partition", "safe-pause"]

    t3 = trend(current, json.loads((current / "suite.json").read_text()), last=2)
    assert [r.timestamp for r in t3.runs] == ["20261121T010000Z", "20261122T010000Z"]

    page = write_suite_page(current)
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "BROKEN" in html
    assert "http://" not in html and "https://" not in html   # self-contained
    p = Cells()
    p.feed(html)
    assert set(p.cells) == {"hw-kill", "hw-pause", "safe-kill", "safe-partition", "safe-pause"}
    assert p.cells["hw-kill"]["class"] == "cell as-expected"
    assert "lost 5 · div 1" in p.cells["hw-kill"]["text"] and "2/2 runs" in p.cells["hw-kill"]["text"]
    assert p.cells["safe-kill"]["class"] == "cell broken" and "lost 0 · div 2" in p.cells["safe-kill"]["text"]
    assert p.cells["safe-partition"]["class"] == "cell not-run" and "0/2 runs" in p.cells["safe-partition"]["text"]
    assert p.cells["safe-pause"]["class"] == "cell inconclusive"
    assert '<a href="x/r2/report.html">r2</a>' in html
    assert '<a href="../20261120T010000Z/suite.html">20261120T010000Z</a>' in html
