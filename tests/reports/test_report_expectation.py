"""A scenario's or suite entry's expectation in the report and the index (rundir/expectation.py): the
report opens with "INVALID — as expected in hw mode" (or NOT as expected, or not judged) and lists the
scenario's steps with outcome, times and a link into the history; the index tells an expected outcome
apart from a real failure; a scenario's configuration shows only the tiles that apply."""
from __future__ import annotations

import json
import re

from report_fixtures import make_run

from reports import write_index, write_report
from reports.config_summary import summary


def _set_test(run, **fields):
    test = json.loads((run / "test.json").read_text())
    test.update(fields)
    (run / "test.json").write_text(json.dumps(test))


def _steps(run, failed=None):
    steps = [
        {"step": 1, "do": "produce", "args": {"count": 2, "acks": 1}, "note": "two acked writes", "outcome": "ok",
         "detail": "sent 2 with acks=1: ['ok', 'ok']", "start_ns": 100_000_000, "end_ns": 180_000_000,
         "first_index": 0, "end_index": 4},
        {"step": 2, "do": "wait", "args": {"leader": "n2"}, "note": "", "outcome": "failed",
         "detail": "StepFailed: assertion failed after 5s", "expected": "leader n2", "seen": "leader n1",
         "start_ns": 200_000_000, "end_ns": 5_200_000_000, "first_index": 4, "end_index": 4},
        {"step": 3, "do": "kill", "args": {"node": "n1"}, "note": "", "outcome": "skipped",
         "detail": "plays only in hw mode, this run is leader-epoch", "start_ns": 5_200_000_000,
         "end_ns": 5_200_000_000, "first_index": 4},
    ]
    (run / "scenario.json").write_text(json.dumps({"scenario": "x.toml", "name": "x", "truncation": "hw",
                                                  "steps": steps, "failed": failed}))


def _expectation(html):
    m = re.search(r'<p class="expectation x-([\w-]+)" id="expectation" data-state="([\w-]+)">(.*?)</p>', html, re.S)
    return m and (m.group(1), re.sub(r"<[^>]+>", "", m.group(3)).strip())


def test_an_expected_anomaly_opens_the_report_as_expected_with_the_steps(tmp_path):
    run = make_run(tmp_path / "results", "invalid")
    _set_test(run, kind="scenario", expect={"by": "scenario", "kinds": ["lost-write"], "mode": "hw"})
    _steps(run)
    html = write_report(run).read_text()
    assert _expectation(html) == ("as-expected", "INVALID — as expected in hw mode (the scenario expects "
                                                 "lost-write in hw mode)")
    assert 'class="verdict v-invalid as-expected"' in html
    steps = html[html.index('<section id="steps">'):html.index("</section>", html.index('<section id="steps">'))]
    rows = re.findall(r'<tr class="step o-(\w+)" data-outcome="(\w+)">(.*?)</tr>', steps, re.S)
    assert [(o, re.search(r"<b class=\"mono\">(\w+)</b>", body).group(1)) for o, _d, body in rows] == [
        ("ok", "produce"), ("failed", "wait"), ("skipped", "kill")]
    assert "0.10–0.18 s" in rows[0][2] and 'href="#h-0">#0</a>–3' in rows[0][2]
    assert "expected leader n2; saw leader n1" in rows[1][2] and "–</span>" in rows[1][2]   # wrote nothing
    assert 'id="h-0"' in html                       # the step's first history entry is in the excerpt
    assert '<a href="#steps">Steps</a>' in html


def test_expectations_broken_or_not_judged_say_so(tmp_path):
    valid = make_run(tmp_path / "results", "valid")
    _set_test(valid, kind="scenario", expect={"by": "scenario", "kinds": ["lost-write"], "mode": "hw"})
    html = write_report(valid).read_text()
    assert _expectation(html) == ("unexpected", "VALID — NOT as expected in hw mode (expected lost-write; found "
                                                "none) (the scenario expects lost-write in hw mode)")
    played_badly = make_run(tmp_path / "results", "invalid", name="bad", timestamp="20261121T230000Z")
    _set_test(played_badly, kind="scenario", expect={"by": "scenario", "kinds": ["lost-write"], "mode": "hw"})
    _steps(played_badly, failed="x.toml:7: step 2 (wait) did not play out")
    html = write_report(played_badly).read_text()
    assert _expectation(html)[0] == "not-judged"
    assert "expectation (lost-write in hw mode) not judged: a step did not play out" in _expectation(html)[1]
    assert "x.toml:7: step 2 (wait) did not play out" in html
    plain = make_run(tmp_path / "results", "invalid", name="plain", timestamp="20261121T231000Z")
    html = write_report(plain).read_text()
    assert _expectation(html) is None and '<section id="steps">' not in html


def test_the_index_tells_expected_outcomes_from_real_failures(tmp_path):
    root = tmp_path / "results"
    expected = make_run(root, "invalid", name="expected", timestamp="20261121T220000Z")
    _set_test(expected, kind="scenario", expect={"by": "scenario", "kinds": ["lost-write"], "mode": "hw"})
    broken = make_run(root, "valid", name="broken", timestamp="20261121T221000Z")
    _set_test(broken, expect={"by": "suite", "kinds": ["lost-write"], "mode": "hw"})
    make_run(root, "invalid", name="plain", timestamp="20261121T222000Z")
    make_run(root, "valid", name="fine", timestamp="20261121T223000Z")
    html = write_index(root).read_text()
    rows = dict((test, (attrs, cell)) for test, attrs, cell in re.findall(
        r'<tr class="run [^"]*" data-verdict="\w+" data-test="([^"]*)"([^>]*)>\s*<td[^>]*>(.*?)</td>', html, re.S))
    assert 'data-expect="as-expected" data-failure="0"' in rows["expected"][0]
    assert "as expected</span>" in rows["expected"][1]
    assert 'data-expect="unexpected" data-failure="1"' in rows["broken"][0]
    assert "NOT as expected" in rows["broken"][1]
    assert 'data-expect="" data-failure="1"' in rows["plain"][0]       # invalid and expecting nothing
    assert 'data-expect="" data-failure="0"' in rows["fine"][0]
    assert 'data-count="expected" title="runs whose outcome their scenario or suite expected">1 as expected' in html
    assert ">2 real failures</span>" in html


def test_a_scenario_shows_only_the_settings_that_apply():
    config = {"broker": {"truncation": "hw", "acks": 1}, "nemesis": {"faults": []},
              "workload": {"time_limit": 1.0, "concurrency": 4}}
    assert summary(config, kind="scenario") == [("truncation", "hw"), ("acks", "1")]
    assert summary(config) == [("truncation", "hw"), ("acks", "1"), ("faults", "none"), ("time limit", "1.0"),
                               ("concurrency", "4")]


def test_no_latency_legend_without_a_latency_chart(tmp_path):
    from simulated_runs import RunBuilder
    b = RunBuilder()
    b.send(1, 0, 1, offset=0)
    b.send(1, 0, 2, offset=1)
    b.final(0, [1, 2])
    run = b.write(tmp_path / "run")
    html = write_report(run).read_text()
    assert 'class="plot latency"' not in html and "sw line p50" not in html
    assert "Too few operations of any kind for a latency chart" in html
