"""report.html from hand-built runs: verdict, anomalies with history links, plots, escaping, self-containment."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_fixtures import XSS, make_run

from rundir.formats import FormatError
from reports import write_report

ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


class Page(HTMLParser):
    """The parts of a page the tests look at: ids, links, resource attributes, tags, text by id."""

    def __init__(self, text: str):
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.resource_attrs: list[tuple[str, str, str]] = []
        self.tags: dict[str, int] = {}
        self.attrs_by_id: dict[str, dict[str, str]] = {}
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
            self.attrs_by_id[a["id"]] = a
        if "href" in a and tag == "a":
            self.hrefs.append(a["href"])
        for name in ("src", "srcset", "data", "poster", "action", "formaction", "background"):
            if name in a:
                self.resource_attrs.append((tag, name, a[name]))
        if tag == "link":
            self.resource_attrs.append((tag, "href", a.get("href", "")))


def section(html: str, ident: str) -> str:
    start = html.index(f'id="{ident}"')
    end = html.find("<section", start)
    return html[start:end if end > 0 else len(html)]


def ack_index(run: Path, value: int) -> int:
    for line in (run / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op["f"] == "send" and op["type"] == "ok" and op["value"]["value"] == value:
            return op["index"]
    raise AssertionError(value)


@pytest.fixture
def invalid_report(tmp_path):
    run = make_run(tmp_path / "results", "invalid", test_name=f"hw {XSS}")
    out = write_report(run)
    return run, out.read_text()


def test_invalid_run_verdict_and_counts(invalid_report):
    run, html = invalid_report
    page = Page(html)
    assert page.attrs_by_id["verdict"]["data-verdict"] == "invalid"
    banner = section(html, "verdict")
    assert ">INVALID<" in banner
    assert "4 anomalies of 2 kinds that fail the run." in banner
    assert re.search(r'href="#kind-lost-write"><b>2</b> lost-write', banner)
    assert re.search(r'href="#kind-divergence"><b>2</b> divergence', banner)
    assert ">42<" in banner  # the seed
    assert "hw-truncation-20261121T224501Z-ab12" in html  # run id
    assert "<title>INVALID · hw " + ESCAPED in html


def test_each_anomaly_kind_explained_with_examples_linked_to_history(invalid_report):
    run, html = invalid_report
    page = Page(html)
    for kind in ("lost-write", "divergence"):
        assert f"kind-{kind}" in page.ids
    lost = section(html, "anomalies")
    assert "high-watermark truncation" in lost  # the explanation paragraph
    i7, i8 = ack_index(run, 7), ack_index(run, 8)
    assert f'href="#h-{i7}"' in lost and f'href="#h-{i8}"' in lost
    # the anchors exist in the excerpt and hold the acknowledged sends
    for i, v in ((i7, 7), (i8, 8)):
        assert f"h-{i}" in page.ids
        row = html[html.index(f'id="h-{i}"'):]
        row = row[:row.index("</tr>")]
        assert f'&#34;value&#34;:{v},&#34;offset&#34;:{v}' in row
    assert f"h-{i7 - 1}" in page.ids  # the invoke of value 7 comes along
    # extra example fields are rendered generically, escaped
    assert '<th title="results.json field: note">note</th>' in lost and '">epoch</th>' in lost
    assert '<th title="results.json field: replicas">replicas</th>' in section(html, "anomalies")
    assert '<summary>JSON</summary>' in lost                  # the checker's own example, one click away
    # the example's offset links to its row in the replica logs
    assert 'href="#p0-o7"' in lost and "p0-o7" in page.ids
    # anomaly kinds with no examples are listed as such
    assert 'class="zk"' in lost and ">dirty-read<" in lost


def test_every_in_page_link_has_a_target_and_every_file_link_a_file(invalid_report):
    run, html = invalid_report
    page = Page(html)
    internal = [h[1:] for h in page.hrefs if h.startswith("#")]
    assert internal, "the report links within itself"
    missing = sorted({i for i in internal if i not in page.ids})
    assert missing == []
    files = [h for h in page.hrefs if not h.startswith("#")]
    for needed in ("history.jsonl", "results.json", "test.json", "nodes/n1/broker.log", "nodes/n2/stdout.log",
                   "replicas/n3/p0.jsonl", "../../index.html"):
        assert needed in files
    head = html[:html.index('id="verdict"')]  # the main files are linked right under the title
    assert re.findall(r'<a href="([^"#]+)" class="mono">', head) == [
        "history.jsonl", "results.json", "test.json", "nemesis.jsonl", "final.json", "nodes/controller/broker.log",
        "nodes/n1/broker.log", "nodes/n2/broker.log", "nodes/n3/broker.log"]
    for h in files:
        if h == "../../index.html":
            continue  # written by write_index, tested there
        assert (run / h).exists(), h


def test_files_grouped_and_deep_directories_summarised(tmp_path):
    run = make_run(tmp_path / "results", "valid")
    data = run / "nodes" / "n1" / "data" / "hw-0"
    data.mkdir(parents=True)
    for k in range(3):
        (data / f"{k:020d}.log").write_bytes(b"x" * 1024)
    html = write_report(run).read_text()
    files = section(html, "files")
    assert [g for g in re.findall(r"<h3>(\w+)</h3>", files)] == ["run", "nodes", "replicas"]
    assert '<a href="nodes/n1/data/" class="mono">nodes/n1/data/</a> <span class="quiet">3 files, 3.0 KB</span>' in files
    assert "00000000000000000000.log" not in files
    assert '<a href="replicas/n3/p1.jsonl" class="mono">' in files


def test_plots_present_with_fault_bands(invalid_report):
    _run, html = invalid_report
    page = Page(html)
    assert "in faults 70.0%, outside faults 100.0%." in html
    assert re.search(r'<td class="mono">poll</td><td class="r">7</td>', html)  # every kind in the totals table
    assert "plot-latency-poll" not in page.ids  # 7 polls: too few for a chart, the table has them
    assert "plot-latency-final-read" not in page.ids
    for ident in ("plot-timeline", "plot-throughput", "plot-latency-send", "plot-state-0", "plot-state-1"):
        assert ident in page.ids
        fig = html[html.index(f'id="{ident}"'):]
        fig = fig[:fig.index("</figure>")]
        assert "<svg" in fig and 'class="band f-kill"' in fig and 'class="band f-partition"' in fig
    timeline = html[html.index('id="plot-timeline"'):]
    timeline = timeline[:timeline.index("</figure>")]
    assert ">kill n1<" in timeline and ">partition n3<" in timeline
    assert timeline.count('class="pt fail"') == 1 and timeline.count('class="pt info"') == 1
    assert timeline.count('class="marker"') == 2  # the two lost-write examples
    state = html[html.index('id="plot-state-0"'):]
    state = state[:state.index("</figure>")]
    assert ">n1 e0<" in state and ">n2 e1<" in state  # leaders with epochs
    assert state.count('class="trunc"') == 2
    assert state.count('class="life start"') == 2  # n1's process starting, twice


def test_element_ids_are_unique(invalid_report):
    _run, html = invalid_report
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    assert len([i for i in ids if i.startswith("clip")]) == html.count("<svg ")


def test_replica_logs_side_by_side(invalid_report):
    _run, html = invalid_report
    logs = section(html, "partitions")
    assert "2 divergent" in logs and "2 lost" in logs and "replicas agree" in logs
    row7 = logs[logs.index('id="p0-o7"'):]
    row7 = row7[:row7.index("</tr>")]
    assert 'class="div"' in logs[logs.index('id="p0-o7"') - 30:logs.index('id="p0-o7"')]
    assert row7.count('<span class="v">10</span>') == 2 and '<span class="v">7</span>' in row7
    assert "cell e0 uncommitted lost m-hw" in row7


def test_values_from_the_run_are_escaped(invalid_report):
    _run, html = invalid_report
    assert XSS not in html
    assert "<script>" not in html.replace("<script>/* highwater report", "", 1)
    assert html.count("<script>") == 1  # ours, inline
    # payload sites: test name (title, h1, crumbs), config, error, nemesis detail, broker event, example, replica value
    assert html.count(ESCAPED) >= 9
    assert f"NOT_LEADER {ESCAPED}" in html
    assert f"why=<b>{ESCAPED}</b>" in html
    assert f'<span class="v">{ESCAPED}</span>' in html


def test_report_is_self_contained(invalid_report):
    _run, html = invalid_report
    page = Page(html)
    assert page.resource_attrs == [("link", "href", "data:,")]
    assert "@import" not in html
    assert re.findall(r"url\((?!#)", html) == []  # only in-document references such as clip-path: url(#clip)
    external = set(re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+", html))
    assert external <= {"http://www.w3.org"}  # the SVG namespace name, never fetched
    assert "default-src 'none'" in html  # and a CSP that forbids fetching anyway


def test_valid_run(tmp_path):
    run = make_run(tmp_path / "results", "valid")
    html = write_report(run).read_text()
    assert Page(html).attrs_by_id["verdict"]["data-verdict"] == "valid"
    assert ">VALID<" in html and "No anomalies found: no acknowledged write was lost and the replicas agree." in html
    assert "All 11 anomaly kinds checked: 0." in html
    assert 'class="anomaly' not in html
    assert "divergent</span>" not in html and html.count('<span class="badge good">replicas agree</span>') == 2


def test_valid_run_with_allowed_anomalies_says_so(tmp_path):
    run = make_run(tmp_path / "results", "valid")
    results = json.loads((run / "results.json").read_text())
    results["anomalies"]["duplicate"] = {"count": 3, "fails_run": False, "examples": [{"partition": 0, "value": 5}]}
    (run / "results.json").write_text(json.dumps(results))
    html = write_report(run).read_text()
    assert ">VALID<" in html and "No anomalies that fail the run; counted but allowed: duplicate 3." in html
    assert 'class="chip soft"' in html and 'id="kind-duplicate"' in html and "does not fail the run" in html


def test_unknown_and_unchecked_runs(tmp_path):
    html = write_report(make_run(tmp_path / "r", "unknown")).read_text()
    assert ">UNKNOWN<" in html and "3 acknowledged write(s) could not be checked (partition 0 did not recover)" in html
    html = write_report(make_run(tmp_path / "r", "unchecked", timestamp="20261121T235959Z")).read_text()
    assert ">UNKNOWN<" in html and "Not checked: there is no results.json" in html
    assert "results.json is missing" in html


def test_crashed_run_with_only_a_history(tmp_path):
    run = tmp_path / "crashed"
    run.mkdir()
    (run / "history.jsonl").write_text(
        '{"index":0,"time":1000,"process":0,"type":"invoke","f":"send","value":{"partition":0,"value":1}}\n'
        '{"index":1,"time":2000,"process":0,"type":"ok","f":"send","value":{"partition":0,"value":1,"offset":0,"epoch":0}}\n'
        '{"index":2,"time":3000,"pro')
    html = write_report(run).read_text()
    assert ">UNKNOWN<" in html and "No replica dumps in this run." in html
    assert "ends in a torn line (line 3)" in html


def test_huge_values_are_cut_in_the_excerpt_and_examples(tmp_path):
    run = tmp_path / "big"
    run.mkdir()
    records = [[o, o] for o in range(5000)]
    ops = [{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "poll", "value": {"partition": 0, "offset": 0}},
           {"index": 1, "time": 2, "process": 0, "type": "ok", "f": "poll",
            "value": {"partition": 0, "offset": 0, "records": records, "hw": 5000, "epoch": 0}}]
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    (run / "results.json").write_text(json.dumps({"valid": False, "anomalies": {"poll-skip": {
        "count": 1, "fails_run": True, "examples": [{"partition": 0, "index": 1, "offsets": list(range(5000)),
                                                     "reads": [{"index": 1, "offset": o} for o in range(100)]}]}}}))
    html = write_report(run).read_text()
    assert len(html) < 150_000
    row = html[html.index('id="h-1"'):]
    row = row[:row.index("</tr>")]
    assert "more characters)" in row and len(row) < 1500
    art = html[html.index('id="kind-poll-skip"'):]
    art = art[:art.index("</article>")]
    assert ", … 4960 more]" in art and "… 88 more" in art


def test_many_partitions_healthy_ones_collapsed_with_chips(tmp_path):
    run = tmp_path / "six"
    run.mkdir()
    (run / "history.jsonl").write_text("")
    for p in range(6):
        for node in ("n1", "n2"):
            d = run / "replicas" / node
            d.mkdir(parents=True, exist_ok=True)
            values = [0, 1, 2] if not (p == 4 and node == "n2") else [0, 9, 2]
            lines = [json.dumps({"kind": "meta", "node": node, "partition": p, "log_start": 0, "leo": 3, "hw": 3,
                                 "epochs": [[0, 0]]})]
            lines += [json.dumps({"kind": "record", "offset": o, "epoch": 0, "value": v}) for o, v in enumerate(values)]
            (d / f"p{p}.jsonl").write_text("\n".join(lines) + "\n")
    html = write_report(run).read_text()
    assert re.findall(r'<a class="pchip (\w+)" href="#p-(\d)"', html) == [
        ("good", "0"), ("good", "1"), ("good", "2"), ("good", "3"), ("bad", "4"), ("good", "5")]
    assert html.count('<details class="pbody">') == 5 and html.count('<details class="pbody" open>') == 1
    art = html[html.index('id="p-4"'):]
    assert art.index('<details class="pbody" open>') < art.index("</article>")


def test_empty_history(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    (run / "history.jsonl").write_text("")
    html = write_report(run).read_text()
    assert ">UNKNOWN<" in html and 'id="plot-timeline"' in html and 'id="plot-throughput"' in html
    assert "0 lines" in html
    assert sorted(p.name for p in run.iterdir()) == ["history.jsonl", "report.html"]  # no temp file left behind


def test_bad_input_is_named(tmp_path):
    run = make_run(tmp_path / "r", "invalid")
    results = json.loads((run / "results.json").read_text())
    results["valid"] = "yes"
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(FormatError, match=r"results.json: field 'valid' must be true, false or \"unknown\", got 'yes'"):
        write_report(run)
    results["valid"] = False
    results["anomalies"]["lost-write"]["count"] = "two"
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(FormatError, match=r"field 'anomalies.lost-write.count' must be an integer"):
        write_report(run)
    (run / "results.json").write_text("{not json")
    with pytest.raises(FormatError, match=r"results.json:1: not valid JSON"):
        write_report(run)
    (run / "history.jsonl").unlink()
    with pytest.raises(FormatError, match=r"history.jsonl: file is missing"):
        write_report(run)
    with pytest.raises(FormatError, match=r"not a run directory"):
        write_report(tmp_path / "nope")


def test_unknown_anomaly_kind_and_extra_fields_render_generically(tmp_path):
    run = make_run(tmp_path / "r", "invalid")
    results = json.loads((run / "results.json").read_text())
    results["anomalies"]["split-brain"] = {"count": 1, "fails_run": False, "examples": [
        {"partition": 1, "leaders": ["n1", "n2"], "read_index": 3, "indices": [4, 5], "detail": {"a": XSS},
         "observations": [{"source": "poll", "index": 6, "time": 1_000_000}, {"source": "send", "index": 7}]}]}
    (run / "results.json").write_text(json.dumps(results))
    html = write_report(run).read_text()
    art = html[html.index('id="kind-split-brain"'):]
    art = art[:art.index("</article>")]
    assert "does not fail the run" in art
    for col, shown in (("partition", "partition"), ("leaders", "leaders"), ("read_index", "read (history #)"),
                       ("indices", "indices"), ("detail", "detail")):
        assert f'<th title="results.json field: {col}">{shown}</th>' in art
    assert 'href="#h-3"' in art and 'href="#h-4"' in art and 'href="#h-5"' in art
    assert "h-3" in Page(html).ids
    # nested history indexes are links too, and their entries are in the excerpt
    assert 'history # </span><a class="hlink" href="#h-6">#6</a>' in art and 'href="#h-7"' in art
    assert {"h-6", "h-7"} <= Page(html).ids
    assert '<span class="k">time </span>0.001 s' in art
    assert ESCAPED.replace("&lt;", "&lt;") in art and XSS not in art


def test_a_kind_the_workload_does_not_exercise_is_not_counted_as_checked(tmp_path):
    """results.json's `not-exercised` (key-reorder without the keyed workload): the page names it with its
    reason among the kinds with nothing found, and does not count it among the kinds checked."""
    run = make_run(tmp_path / "results", "valid")
    res = json.loads((run / "results.json").read_text())
    res["anomalies"]["key-reorder"] = {"count": 0, "examples": [], "status": "not-exercised",
                                       "status_reason": "the workload sends no keys"}
    (run / "results.json").write_text(json.dumps(res))
    html = write_report(run).read_text()
    assert "All 11 anomaly kinds checked: 0." in html
    assert "key-reorder (not exercised: the workload sends no keys)" in html
