"""The report's numbers are the checker's totals, not counts of its examples (issue 15).

Known answers from the "lossy2" fixture (tests/reports/report_fixtures.py): partition 0 lost 2 of 12
acknowledged writes (acknowledged at 2.553 and 2.653 s), partition 1 lost 3 of 6 (6.706, 6.906, 7.106 s)
while its replicas agree; the checker lists one lost-write example per partition.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_fixtures import START_WALL_NS, S, make_run

from reports import write_report
from reports.broker_events import MAX_TABLE_ROWS, read_broker_events
from reports.totals import kind_bands, partition_totals


def article(html: str, ident: str, tag: str = "article") -> str:
    start = html.index(f'id="{ident}"')
    return html[start:html.index(f"</{tag}>", start)]


def heading(html: str, partition: int) -> str:
    art = article(html, f"p-{partition}")
    return art[:art.index("</h3>")]


def agreement_badges(html: str) -> list[tuple[int, str]]:
    """(partition, text) of every badge in a partition heading that says the replicas agree."""
    out = []
    for m in re.finditer(r'<article class="partition" id="p-(\d+)">', html):
        h = heading(html, int(m.group(1)))
        for text in re.findall(r'<span class="badge[^"]*">([^<]*)</span>', h):
            if "agree" in text:
                out.append((int(m.group(1)), text))
    return out


@pytest.fixture(scope="module")
def lossy2(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("totals") / "results", "lossy2")
    return run, write_report(run).read_text()


def test_each_partition_shows_the_checkers_totals(lossy2):
    _run, html = lossy2
    assert '<span class="ptotal bad-t" data-partition="0">2 lost of 12 acknowledged</span>' in heading(html, 0)
    assert '<span class="ptotal bad-t" data-partition="1">3 lost of 6 acknowledged</span>' in heading(html, 1)
    # one example per partition is listed: counting examples would have said 1 for each
    assert "1 lost" not in heading(html, 0) + heading(html, 1)
    by = article(html, "kind-lost-write")
    by = by[by.index('>', by.index('class="by-partition"')) + 1:]
    by = re.sub(r"<[^>]+>", "", by[:by.index("</p>")])
    assert " ".join(by.split()) == ('By partition: partition 0: 2 lost of 12 acknowledged (acknowledged 2.55–2.65 s); '
                                    'partition 1: 3 lost of 6 acknowledged (acknowledged 6.71–7.11 s)')
    # the final-state table has the lost column, from the same totals
    table = html[html.index('<table class="grid-table final">'):]
    table = table[:table.index("</table>")]
    lost_cells = re.findall(r'<td class="r">(?:<span class="bad-t">)?(\d+)(?:</span>)?</td><td class="r">\d+</td></tr>',
                            table)
    assert lost_cells == ["2", "3"]
    # other kinds per partition, from by_partition
    assert '<a class="badge bad kcount" href="#kind-divergence">2 divergence</a>' in heading(html, 0)
    assert "kcount" not in heading(html, 1)


def test_no_agreement_badge_without_its_loss_count(lossy2):
    _run, html = lossy2
    assert agreement_badges(html) == [(1, "replicas agree · 3 acknowledged writes lost")]
    # the partition's lost-write table says how many more there are than the checker listed
    art = article(html, "p-1")
    assert "2 more lost writes in this partition, not among the checker's examples" in art


def test_agreement_badge_on_a_clean_partition_stays_plain(tmp_path):
    html = write_report(make_run(tmp_path / "r", "invalid")).read_text()
    assert agreement_badges(html) == [(1, "replicas agree")]
    assert '<span class="ptotal ok-t" data-partition="1">0 lost of 6 acknowledged</span>' in heading(html, 1)
    assert '<span class="ptotal bad-t" data-partition="0">2 lost of 12 acknowledged</span>' in heading(html, 0)


def test_timeline_band_per_kind_from_the_histograms(lossy2):
    _run, html = lossy2
    fig = article(html, "plot-timeline", "figure")
    rows = re.findall(r'<g class="krow fails" data-kind="([^"]+)"><a href="#kind-[^"]+"><text class="kind-label"[^>]*>'
                      r'([^<]*)</text>', fig)
    assert rows == [("lost-write", "lost-write: 5, acknowledged 2.55–7.11 s"),
                    ("divergence", "divergence: 2, 2 with no time")]
    lost_row = fig[fig.index('data-kind="lost-write"'):]
    lost_row = lost_row[:lost_row.index("</g>")]
    assert re.findall(r"<title>([^<]*)</title>", lost_row) == [
        "lost-write: 1 in 2.5–2.6 s", "lost-write: 1 in 2.6–2.7 s", "lost-write: 1 in 6.7–6.8 s",
        "lost-write: 1 in 6.9–7.0 s", "lost-write: 1 in 7.1–7.2 s"]
    # the existing example ticks stay: one per listed example
    assert fig.count('class="marker"') == 2


def test_band_shows_the_whole_distribution_not_only_the_examples(tmp_path):
    """Like issue 15's run: 503 lost writes acknowledged between 5.9 and 21 s, examples all near 6 s."""
    run = make_run(tmp_path / "r", "lossy2")
    results = json.loads((run / "results.json").read_text())
    axis = {"start_s": 0.0, "end_s": 22.0, "bucket_s": 0.5, "buckets": 44}
    counts = [0] * 44
    for i in range(11, 43):  # 5.5-21.5 s
        counts[i] = 15
    counts[11], counts[42] = 50, 3
    assert sum(counts) == 503
    lw = results["anomalies"]["lost-write"]
    lw.update(count=503, histogram={"counts": counts, "untimed": 0}, by_partition={"0": 340, "1": 163},
              ack_times={"0": {"first_s": 5.9, "last_s": 21.0}, "1": {"first_s": 6.0, "last_s": 20.5}})
    results["anomalies"]["divergence"]["histogram"] = {"counts": [0] * 44, "untimed": 2}
    results["time_axis"] = axis
    for item in results["partitions"]:
        item["acked"], item["lost"] = {0: (2000, 340), 1: (1500, 163)}[item["partition"]]
    (run / "results.json").write_text(json.dumps(results))
    html = write_report(run).read_text()
    fig = article(html, "plot-timeline", "figure")
    assert ">lost-write: 503, acknowledged 5.9–21 s<" in fig
    lost_row = fig[fig.index('data-kind="lost-write"'):]
    lost_row = lost_row[:lost_row.index("</g>")]
    cells = re.findall(r'<rect class="kcell" x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="\d+" '
                       r'fill-opacity="([\d.]+)"><title>([^<]*)</title>', lost_row)
    assert len(cells) == 32
    assert cells[0][3] == "lost-write: 50 in 5.5–6.0 s" and cells[-1][3] == "lost-write: 3 in 21.0–21.5 s"
    assert cells[0][2] == "1.00" and cells[-1][2] == "0.34" and cells[1][2] == "0.51"  # shaded by count
    # on the chart's x axis, the band runs from 5.5 s to 21.5 s of the history's length
    h_end = 8.1  # the history's last operation; the chart's axis is the history's
    x0, x1 = float(cells[0][0]), float(cells[-1][0]) + float(cells[-1][1])
    assert x0 == pytest.approx(64 + 1020 * 5.5 / h_end, abs=0.1)
    assert x1 <= 1084  # clamped to the plot: this history is shorter than the checker's axis
    assert agreement_badges(html) == [(1, "replicas agree · 163 acknowledged writes lost")]
    assert "340 lost of 2,000 acknowledged" in heading(html, 0) and "163 lost of 1,500 acknowledged" in heading(html, 1)


def test_old_results_json_still_renders_and_says_counts_are_from_examples(tmp_path):
    run = make_run(tmp_path / "r", "lossy2", old_format=True)
    results = json.loads((run / "results.json").read_text())
    assert "time_axis" not in results and "by_partition" not in results["anomalies"]["lost-write"]
    assert all("lost" not in p for p in results["partitions"])
    html = write_report(run).read_text()
    assert ">INVALID<" in html
    assert "at least 1 lost of 12 acknowledged (counted from examples)" in heading(html, 0)
    assert "at least 1 lost of 6 acknowledged (counted from examples)" in heading(html, 1)
    assert agreement_badges(html) == [(1, "replicas agree · 1+ acknowledged write lost")]
    art = article(html, "kind-lost-write")
    assert "predates per-partition totals" in art and "at least </b>" not in art
    assert re.search(r"partition 1</a>: <b>at least 1</b> lost of 6 acknowledged \(counted from examples\)", art)
    fig = article(html, "plot-timeline", "figure")
    assert 'class="kinds"' not in fig and fig.count('class="marker"') == 2
    assert "only the checker's listed examples are marked" in html
    # the divergence counts per partition are also from examples, and say so
    assert '<a class="badge bad kcount" href="#kind-divergence">≥ 2 divergence</a>' in heading(html, 0)


def test_fault_and_leader_anchors(lossy2):
    _run, html = lossy2
    ids = re.findall(r' id="([^"]+)"', html)
    assert [i for i in ids if i.startswith("fault-")] == ["fault-1", "fault-2", "fault-3"]
    for fid, fault in ((1, "kill"), (2, "partition"), (3, "pause")):
        row = html[html.index(f'<tr id="fault-{fid}">'):]
        row = row[:row.index("</tr>")]
        assert f'<td class="mono">{fid}</td>' in row and f"f-{fault}" in row
    fig = article(html, "plot-timeline", "figure")
    assert re.findall(r'<a href="#(fault-\d+)"><text class="band-label', fig) == ["fault-1", "fault-2", "fault-3"]
    leaders = [i for i in ids if i.startswith("leader-")]
    assert leaders == ["leader-p0-e0", "leader-p1-e0", "leader-p0-e1"]
    for ident, node, leader, epoch in (("leader-p0-e0", "controller", "n1", 0), ("leader-p0-e1", "controller", "n2", 1)):
        row = html[html.index(f'id="{ident}"'):]
        row = row[:row.index("</tr>")]
        assert f'<td class="mono">{node}</td><td>leader-change</td>' in row
        assert f"leader=<b>{leader}</b>" in row and f"epoch=<b>{epoch}</b>" in row


def test_last_fault_label_ends_inside_the_chart(lossy2):
    _run, html = lossy2
    fig = article(html, "plot-timeline", "figure")
    labels = re.findall(r'<text class="band-label f-(\w+)" x="([\d.]+)" y="[\d.]+"( text-anchor="end")?>([^<]*)<', fig)
    assert labels[-1] == ("pause", "1098", ' text-anchor="end"', "pause n1,n2,n3")
    assert labels[0] == ("kill", "443", "", "kill n1")  # room to its right: starts at its window


def test_leader_changes_beyond_the_table_limit_keep_their_rows(tmp_path):
    d = tmp_path / "nodes" / "controller"
    d.mkdir(parents=True)
    lines = [{"ts": START_WALL_NS + k * 1000, "node": "controller", "event": "isr-change", "partition": 0,
              "isr": [1, 2], "version": k} for k in range(MAX_TABLE_ROWS + 50)]
    lines.append({"ts": START_WALL_NS + 5 * S, "node": "controller", "event": "leader-change", "partition": 0,
                  "leader": 2, "epoch": 7, "isr": [2]})
    lines.append({"ts": START_WALL_NS + 6 * S, "node": "controller", "event": "leader-change", "partition": 0,
                  "leader": 2, "epoch": 7, "isr": [2]})  # the same election logged twice: one anchor
    (d / "broker.log").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ev = read_broker_events(tmp_path, START_WALL_NS, 10.0)
    assert ev.table_total == MAX_TABLE_ROWS + 52
    assert len(ev.table) == MAX_TABLE_ROWS + 1
    assert ev.table[-1]["anchor"] == "leader-p0-e7" and ev.table[-1]["t"] == 5.0
    assert sum(1 for r in ev.table if r["anchor"]) == 1


def test_partition_totals_read_defensively():
    assert partition_totals(None) == {}
    new = {"partitions": [{"partition": 0, "acked": 10, "lost": 4}, {"partition": 1, "acked": 5, "lost": 0}],
           "anomalies": {"lost-write": {"count": 4, "by_partition": {"0": 4}, "examples": [{"partition": 0}],
                                        "ack_times": {"0": {"first_s": 1.5, "last_s": 2.25}}},
                         "duplicate": {"count": 3, "by_partition": {"1": 3}, "examples": []}}}
    t = partition_totals(new)
    assert [(p.partition, p.acked, p.lost, p.lost_from_examples, p.first_ack_s, p.last_ack_s, p.kinds)
            for p in t.values()] == [(0, 10, 4, False, 1.5, 2.25, {}), (1, 5, 0, False, None, None, {"duplicate": 3})]
    assert t[0].lost_text == "4 lost of 10 acknowledged" and t[1].bad
    # a by_partition that is not {partition: int} is not trusted: the examples are counted, and flagged
    odd = {"anomalies": {"lost-write": {"count": 2, "by_partition": {"zero": "two"},
                                        "examples": [{"partition": 0}, {"partition": 0}]}}}
    t = partition_totals(odd)
    assert (t[0].lost, t[0].lost_from_examples, t[0].acked) == (2, True, None)
    assert t[0].lost_text == "at least 2 lost acknowledged writes (counted from examples)"
    # a histogram of the wrong length, or no time axis: no band
    bad = {"time_axis": {"end_s": 3.0, "bucket_s": 0.1, "buckets": 30},
           "anomalies": {"lost-write": {"count": 1, "histogram": {"counts": [1], "untimed": 0}},
                         "duplicate": {"count": 1, "histogram": {"counts": [0] * 29 + [1], "untimed": 0}}}}
    axis, bands = kind_bands(bad)
    assert axis.buckets == 30 and [(b.kind, b.first_s, b.last_s) for b in bands] == [
        ("duplicate", pytest.approx(2.9), 3.0)]
    assert kind_bands({"anomalies": bad["anomalies"]}) == (None, [])


def test_fixture_totals_follow_the_documented_rules(lossy2):
    run, _html = lossy2
    r = json.loads((Path(run) / "results.json").read_text())
    assert r["time_axis"] == {"start_s": 0.0, "end_s": 8.1, "bucket_s": 0.1, "buckets": 81}
    lw = r["anomalies"]["lost-write"]
    assert lw["count"] == 5 and len(lw["examples"]) == 2 and lw["by_partition"] == {"0": 2, "1": 3}
    assert [i for i, c in enumerate(lw["histogram"]["counts"]) for _ in range(c)] == [25, 26, 67, 69, 71]
    assert lw["ack_times"] == {"0": {"first_s": 2.553, "last_s": 2.653}, "1": {"first_s": 6.706, "last_s": 7.106}}
    assert [(p["partition"], p["acked"], p["lost"]) for p in r["partitions"]] == [(0, 12, 2), (1, 6, 3)]
    assert r["anomalies"]["divergence"]["histogram"]["untimed"] == 2


@pytest.mark.parametrize("kind", ["invalid", "lossy2", "valid", "unknown", "unchecked"])
def test_every_in_page_link_has_its_target(tmp_path, kind):
    """No link on the page points at an anchor the page lacks (a lost write's offset outside the rows
    shown used to link to a missing #p<P>-o<offset>)."""
    html = write_report(make_run(tmp_path / "r", kind)).read_text()
    targets = set(re.findall(r'href="#([^"]+)"', html))
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    assert targets and sorted(targets - ids) == []


def test_an_unknown_verdict_says_what_could_not_be_checked(tmp_path):
    """The page names the checker's unknown reasons, not just "unknown"."""
    html = write_report(make_run(tmp_path / "r", "unknown")).read_text()
    assert ("What could not be checked: partition 0: no replica recovered; 3 acknowledged writes could not be "
            "checked; history.jsonl:7: torn line skipped (--lenient).") in html


def _shape(**classes: tuple[int, int]) -> dict:
    return {c: dict(zip(("writes", "runs"), classes.get(c, (0, 0)))) for c in ("prefix", "middle", "suffix", "all")}


def explain_text(html: str) -> str:
    art = article(html, "kind-lost-write")
    p = art[art.index('<p class="explain">') + len('<p class="explain">'):]
    return p[:p.index("</p>")]


def test_loss_shape_per_partition_after_the_lost_write_explanation(tmp_path):
    """results.json's loss_shape (docs/formats.md) as one line per partition where lost writes are
    explained: partition 0 lost 2 writes in the middle in two runs, partition 1 the last 3 in one."""
    run = make_run(tmp_path / "r", "lossy2")
    results = json.loads((run / "results.json").read_text())
    results["anomalies"]["lost-write"]["loss_shape"] = {
        "by_partition": {"0": _shape(middle=(2, 2)), "1": _shape(suffix=(3, 1))},
        "total": _shape(middle=(2, 2), suffix=(3, 1))}
    (run / "results.json").write_text(json.dumps(results))
    text = explain_text(write_report(run).read_text())
    assert text.endswith(" Where they sit among the acknowledged writes of their partition, in offset order (a "
                         "stretch is a run of consecutive acknowledged writes that were all lost): "
                         "partition 0: 2 in the middle (in 2 stretches); "
                         "partition 1: 3 at the end (in 1 stretch).")
    totals = partition_totals(results)
    assert totals[0].shape == {"prefix": (0, 0), "middle": (2, 2), "suffix": (0, 0), "all": (0, 0)}


def test_loss_shape_of_a_partition_that_lost_everything_and_of_large_counts(tmp_path):
    run = make_run(tmp_path / "r", "lossy2")
    results = json.loads((run / "results.json").read_text())
    results["anomalies"]["lost-write"]["loss_shape"] = {
        "by_partition": {"0": _shape(prefix=(1200, 1), middle=(3, 1), suffix=(12, 2)), "1": _shape(all=(6, 1))},
        "total": _shape(prefix=(1200, 1), middle=(3, 1), suffix=(12, 2), all=(6, 1))}
    (run / "results.json").write_text(json.dumps(results))
    text = explain_text(write_report(run).read_text())
    assert text.endswith("partition 0: 1,200 at the start (in 1 stretch), 3 in the middle (in 1 stretch), 12 at "
                         "the end (in 2 stretches); partition 1: every one of its 6 acknowledged writes.")


def test_no_loss_shape_line_without_the_field(lossy2):
    """The fixture's results.json predates loss_shape (as older files do): the explanation stays as it was."""
    run, html = lossy2
    assert "loss_shape" not in json.loads((run / "results.json").read_text())["anomalies"]["lost-write"]
    assert "Where they sit" not in explain_text(html)
    assert all(t.shape is None and t.shape_text is None for t in partition_totals(
        json.loads((run / "results.json").read_text())).values())


def test_loss_shape_from_the_reference_checker(tmp_path):
    """End to end: a hand-built history whose partition 0 loses its first acknowledged write (the final
    log holds an unacknowledged value there) and its last two (acknowledged beyond the HW)."""
    from simulated_runs import RunBuilder
    from checkers.check import CheckOptions, check_run

    b = RunBuilder()
    for o in range(5):
        b.send(1, 0, o, offset=o)
    b.send(2, 0, 99, outcome="info")
    b.final(0, [99, 1, 2])
    run = b.write(tmp_path / "run")
    results = check_run(run, CheckOptions(engine="reference"))
    assert results["anomalies"]["lost-write"]["loss_shape"]["by_partition"] == {
        "0": _shape(prefix=(1, 1), suffix=(2, 1))}
    assert explain_text(write_report(run).read_text()).endswith(
        "were all lost): partition 0: 1 at the start (in 1 stretch), 2 at the end (in 1 stretch).")
