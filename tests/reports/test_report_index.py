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
    runs = html[html.index('<table class="grid-table runs">'):]   # the suites table comes first when there is one
    body = runs[runs.index("<tbody>"):runs.index("</tbody>")]
    return re.findall(r'<tr class="run row-(\w+)[^"]*" data-verdict="(\w+)" data-test="([^"]*)"[^>]*>(.*?)</tr>', body, re.S)


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


# --- seed, duration, anomaly count, suites ------------------------------------------------------------------

def cells_of(row_html):
    return re.findall(r"<td[^>]*>(.*?)</td>", row_html, re.S)


HEAD = ["verdict", "test", "started", "seed", "duration", "configuration", "anomalies", "by kind", "report"]


def test_index_columns_seed_duration_and_anomaly_count(tmp_path):
    import json

    root = tmp_path / "results"
    runs = build_results(root)
    # the valid run's checker saw operations until 125 s (results.json time_axis wins over the history)
    results = json.loads((runs["valid"] / "results.json").read_text())
    results["time_axis"]["end_s"] = 125.0
    results["anomalies"]["duplicate"] = {"count": 3, "fails_run": False, "examples": []}
    (runs["valid"] / "results.json").write_text(json.dumps(results))
    # the unchecked run has no results.json: its history's last line (8.1 s), past a torn line
    with (runs["unchecked"] / "history.jsonl").open("a") as fh:
        fh.write('{"index":68,"ti')
    test = json.loads((runs["invalid"] / "test.json").read_text())
    test["seed"] = 977
    (runs["invalid"] / "test.json").write_text(json.dumps(test))
    html = write_index(root).read_text()
    head = re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", html[html.index('<table class="grid-table runs">'):])
    assert head == HEAD
    by_test = {}
    for _cls, _verdict, name, body in rows_of(html):
        cells = cells_of(body)
        assert len(cells) == len(HEAD)
        by_test.setdefault(name, []).append(dict(zip(HEAD, cells)))
    invalid, = by_test["hw-truncation"]
    valid, = by_test["leader-epoch"]
    unknown, = by_test["chaos"]
    unchecked, = by_test["chaos &lt;script&gt;alert(1)&lt;/script&gt;"]
    assert (invalid["seed"], valid["seed"], unchecked["seed"]) == ("977", "42", "42")
    assert (invalid["duration"], valid["duration"], unchecked["duration"]) == ("8.1 s", "2 min 05 s", "8.1 s")
    assert invalid["anomalies"] == "<b>4</b>"                      # 2 lost-write + 2 divergence
    assert valid["anomalies"].startswith("<b>0</b>") and "+3 allowed" in valid["anomalies"]
    assert unknown["anomalies"] == "<b>0</b>"
    assert 'class="quiet">–<' in unchecked["anomalies"]           # not checked: no count at all
    assert "suite" not in invalid["test"]


def test_duration_formats():
    from reports.index import format_duration
    assert [format_duration(x) for x in (None, -1, 0, 8.14, 59.96, 60, 125, 3599, 3600, 7322)] == [
        "", "", "0.0 s", "8.1 s", "60.0 s", "1 min 00 s", "2 min 05 s", "59 min 59 s", "1 h 00 min", "2 h 02 min"]


def test_index_links_suite_pages(tmp_path):
    import json

    root = tmp_path / "results"
    build_results(root)
    suite_dir = root / "suites" / "safety" / "20261121T233000Z"
    suite_run = make_run(suite_dir, "valid", name="acks-all", timestamp="20261121T233001Z", start_offset_s=3000)
    (suite_dir / "suite.html").write_text("<html>suite</html>")
    (suite_dir / "suite.json").write_text(json.dumps({
        "suite": "safety", "timestamp": "20261121T233000Z", "status": "done",
        "counts": {"passed": 2, "failed": 1, "error": 0, "skipped": 0, "pending": 0}}))
    older = root / "suites" / "safety" / "20261120T100000Z"
    older.mkdir(parents=True)
    (older / "suite.html").write_text("<html>older suite</html>")   # no suite.json: still listed
    os.symlink("20261121T233000Z", root / "suites" / "safety" / "latest")
    html = write_index(root).read_text()
    rows = rows_of(html)
    suite_row = next(body for _c, _v, name, body in rows if name == "acks-all")
    assert ('suite <a class="suite-link" href="suites/safety/20261121T233000Z/suite.html">safety</a>'
            in suite_row)
    assert sum('class="suite-link"' in body for *_x, body in rows) == 1
    section = html[html.index('<section id="suites">'):html.index('<section id="runs">')]
    listed = re.findall(r'<tr class="suite-run" data-suite="([^"]*)">(.*?)</tr>', section, re.S)
    assert [(name, re.search(r'href="([^"]+)"', body).group(1)) for name, body in listed] == [
        ("safety", "suites/safety/20261121T233000Z/suite.html"),      # newest first, `latest` not repeated
        ("safety", "suites/safety/20261120T100000Z/suite.html")]
    assert "<b>2</b> passed" in listed[0][1] and "<b>1</b> failed" in listed[0][1]
    assert (root / "suites/safety/20261121T233000Z/suite.html").exists()
    # within the suite's own index the link is relative to the suite directory
    own = write_index(suite_dir).read_text()
    assert 'href="suite.html">safety</a>' in own
    assert suite_run.exists()


def test_index_without_suites_has_no_suite_section(tmp_path):
    root = tmp_path / "results"
    build_results(root)
    assert '<section id="suites">' not in write_index(root).read_text()


def test_rerun_is_marked(tmp_path):
    import json

    root = tmp_path / "results"
    runs = build_results(root)
    test = json.loads((runs["valid"] / "test.json").read_text())
    test["rerun_of"] = {"run_dir": "/x/hw-truncation/20261121T224501Z", "timestamp": "20261121T224501Z", "seed": 42}
    (runs["valid"] / "test.json").write_text(json.dumps(test))
    rows = rows_of(write_index(root).read_text())
    valid = next(body for _c, _v, name, body in rows if name == "leader-epoch")
    assert 'rerun of <span class="mono">20261121T224501Z</span>' in valid
    assert sum("rerun of" in body for *_x, body in rows) == 1
