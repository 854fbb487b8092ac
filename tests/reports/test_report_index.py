"""results/index.html: every run newest first, verdict colours, counts, filters, links, escaping."""
from __future__ import annotations

import os
import re

from report_fixtures import XSS, make_run

from reports import write_index, write_report
from reports.index import find_runs


def build_results(root):
    runs = {
        "invalid": make_run(root, "invalid", timestamp="20261121T224501Z", start_offset_s=0),
        "valid": make_run(root, "valid", timestamp="20261121T230000Z", start_offset_s=900),
        "unknown": make_run(root, "unknown", name="chaos", timestamp="20261121T231000Z", start_offset_s=1500),
        "unchecked": make_run(root, "unchecked", name="chaos", timestamp="20261121T232000Z", start_offset_s=2100,
                              test_name=f"chaos {XSS}"),
    }
    for kind in ("invalid", "valid", "unknown"):
        write_report(runs[kind])
    os.symlink("20261121T232000Z", root / "chaos" / "latest")
    os.symlink("chaos/20261121T232000Z", root / "latest")
    return runs


def rows_of(html):
    body = html[html.index("<tbody>"):html.index("</tbody>")]
    return re.findall(r'<tr class="run row-(\w+)" data-verdict="(\w+)" data-test="([^"]*)">(.*?)</tr>', body, re.S)


def test_index_lists_every_run_newest_first(tmp_path):
    root = tmp_path / "results"
    build_results(root)
    assert len(find_runs(root)) == 4  # the `latest` symlinks are not runs of their own
    html = write_index(root).read_text()
    rows = rows_of(html)
    assert [(cls, verdict, test) for cls, verdict, test, _ in rows] == [
        ("unknown", "unknown", f"chaos {XSS}".replace("<", "&lt;").replace(">", "&gt;")),
        ("unknown", "unknown", "chaos"),
        ("valid", "valid", "leader-epoch"),
        ("invalid", "invalid", "hw-truncation"),
    ]
    unchecked, unknown, valid, invalid = (r[3] for r in rows)
    assert "not checked" in unchecked and "no report" in unchecked
    assert 'href="chaos/20261121T232000Z/"' in unchecked
    assert 'href="hw-truncation/20261121T224501Z/report.html"' in invalid
    assert "<b>2</b> lost-write" in invalid and "<b>2</b> divergence" in invalid
    assert '<span class="pill invalid">invalid</span>' in invalid
    assert "<b>truncation</b> hw" in invalid and "<b>acks</b> 1" in invalid
    assert "<b>truncation</b> leader-epoch" in valid and "<b>acks</b> all" in valid
    assert "2025-11-21 22:45:01 UTC" in invalid and "2025-11-21 23:00:01 UTC" in valid
    assert ">none<" in valid


def test_index_tally_filters_and_escaping(tmp_path):
    root = tmp_path / "results"
    build_results(root)
    html = write_index(root).read_text()
    assert '<span class="pill valid" data-count="valid">1 valid</span>' in html
    assert '<span class="pill invalid" data-count="invalid">1 invalid</span>' in html
    assert '<span class="pill unknown" data-count="unknown">2 unknown</span>' in html
    options = re.findall(r'<option value="([^"]*)">', html[html.index('id="filter-test"'):])
    assert options == ["", "chaos", "chaos &lt;script&gt;alert(1)&lt;/script&gt;", "hw-truncation", "leader-epoch"]
    assert XSS not in html and html.count("<script>") == 1
    assert "<title>highwater results · 4 runs</title>" in html


def test_report_link_back_to_index_resolves(tmp_path):
    root = tmp_path / "results"
    runs = build_results(root)
    write_index(root)
    html = (runs["valid"] / "report.html").read_text()
    assert 'href="../../index.html"' in html
    assert (runs["valid"] / "../../index.html").resolve() == (root / "index.html").resolve()


def test_runs_nested_deeper_by_suites_are_listed(tmp_path):
    root = tmp_path / "results"
    build_results(root)
    suite_run = make_run(root / "suites" / "safety" / "20261121T233000Z", "valid", name="acks-all",
                         timestamp="20261121T233001Z", start_offset_s=3000)
    write_report(suite_run)
    html = write_index(root).read_text()
    rows = rows_of(html)
    assert len(rows) == 5 and rows[0][2] == "acks-all"
    assert 'href="suites/safety/20261121T233000Z/acks-all/20261121T233001Z/report.html"' in rows[0][3]
    # the suite's own index lists just its runs
    suite_index = write_index(root / "suites" / "safety" / "20261121T233000Z").read_text()
    assert [r[2] for r in rows_of(suite_index)] == ["acks-all"]


def test_unreadable_run_gets_a_row_saying_why(tmp_path):
    root = tmp_path / "results"
    run = make_run(root, "valid")
    (run / "results.json").write_text("{broken")
    html = write_index(root).read_text()
    (row,) = rows_of(html)
    assert row[1] == "unknown"
    assert "results.json:1: not valid JSON" in row[3]


def test_allowed_anomalies_are_muted_in_the_index(tmp_path):
    import json

    root = tmp_path / "results"
    run = make_run(root, "valid")
    results = json.loads((run / "results.json").read_text())
    results["anomalies"]["duplicate"] = {"count": 4, "fails_run": False, "examples": []}
    (run / "results.json").write_text(json.dumps(results))
    (row,) = rows_of(write_index(root).read_text())
    assert row[1] == "valid"
    assert '<span class="acount soft" title="counted, does not fail the run"><b>4</b> duplicate</span>' in row[3]


def test_empty_results_directory(tmp_path):
    html = write_index(tmp_path / "results").read_text()
    assert "No runs yet" in html and "0 valid" in html
