"""reports/explore_page.py: an exploration's page and its row in the results index, from a written
explore.json (known answers), and from a real short `highwater explore` (the command writes both)."""
from __future__ import annotations

import json
import re
import sys
import subprocess

from reports import write_index
from reports.explore_page import headline, judged, verdict, write_explore_page


def _doc(**over):
    doc = {"format": 1, "kind": "explore", "name": "explore", "timestamp": "20261128T100000Z",
           "argv": ["highwater", "explore", "--truncation", "hw", "--budget", "5"],
           "options": {"truncation": "hw", "budget": 5.0}, "settings": {"truncation": "hw", "acks": 1},
           "promises": ["hw-within-leo"], "seed": 42, "schedules": 4322, "events": 216100,
           "findings_total": 1204, "findings_by_invariant": {"no-acked-loss": 1204},
           "unexpected_by_invariant": {}, "stopped": "budget", "explore_s": 30.0, "elapsed_s": 31.0,
           "findings": [{"invariant": "no-acked-loss", "text": "1 of 1 acknowledged writes missing", "seed": 42,
                         "index": 159, "first_index": 159, "expected": True, "original_length": 50,
                         "shrunk_length": 3, "shrunk_for": "faithful replay", "shrink_s": 0.2,
                         "story": ["1. n1 appends v1", "2. n3 is killed"], "actions": ["append n1", "kill n3", "elect"],
                         "scenario": "finding-1-no-acked-loss.toml"}],
           "exit_code": 1}
    doc.update(over)
    return doc


def _write(tmp_path, doc, name="explore", ts="20261128T100000Z"):
    d = tmp_path / "results" / name / ts
    d.mkdir(parents=True)
    (d / "explore.json").write_text(json.dumps(doc))
    return d


def test_the_verdict_and_expectation_of_an_exploration():
    assert (verdict(_doc()), judged(_doc())[0]) == ("invalid", "as-expected")
    broke = _doc(unexpected_by_invariant={"no-acked-loss": 7})
    assert judged(broke) == ("unexpected", "a promised invariant broke: no-acked-loss (7 schedules)")
    clean = _doc(findings=[], findings_total=0, findings_by_invariant={})
    assert (verdict(clean), judged(clean)[0], headline(clean)) == (
        "valid", "as-expected", "NOTHING FOUND in 4,322 schedules, 216,100 events, 30.0 s")
    none = _doc(findings=[], findings_total=0, findings_by_invariant={}, schedules=0, events=0)
    assert (verdict(none), judged(none)[0]) == ("unknown", "not-judged")
    assert headline(_doc()) == "FOUND no-acked-loss (1,204 schedules) in 4,322 schedules, 216,100 events, 30.0 s"


def test_the_page_tells_each_finding_with_its_replay(tmp_path):
    d = _write(tmp_path, _doc())
    html = write_explore_page(d).read_text()
    assert 'data-verdict="invalid"' in html and 'data-state="as-expected"' in html
    assert "FOUND no-acked-loss (1,204 schedules)" in html
    assert "<div>1. n1 appends v1</div><div>2. n3 is killed</div>" in html
    assert f"highwater scenario {d / 'finding-1-no-acked-loss.toml'} --truncation hw" in html
    assert "highwater explore --truncation hw --budget 5 --seed 42" in html       # the seed added to replay it
    assert 'href="finding-1-no-acked-loss.toml"' in html


def test_the_index_lists_explorations_beside_runs(tmp_path):
    d = _write(tmp_path, _doc(unexpected_by_invariant={"no-acked-loss": 3}))
    write_explore_page(d)
    html = write_index(tmp_path / "results").read_text()
    (row,) = re.findall(r'<tr class="run ([^"]*)" data-verdict="(\w+)" data-test="explore"([^>]*)>(.*?)</tr>', html, re.S)
    assert row[1] == "invalid" and 'data-expect="unexpected" data-failure="1"' in row[2]
    assert 'href="explore/20261128T100000Z/explore.html">report</a>' in row[3]
    assert "<b>1204</b> no-acked-loss" in row[3] and ">42<" in row[3]


def test_a_real_exploration_writes_its_page_and_the_index(tmp_path):
    r = subprocess.run([sys.executable, "-m", "harness.cli", "explore", "--truncation", "hw", "--acks", "1",
                        "--min-insync-replicas", "1", "--seed", "1", "--schedules", "200", "--shrink-budget", "2",
                        "--out", str(tmp_path / "results"), "--plain"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    page = r.stdout.strip().splitlines()[-1]
    assert page.endswith("/explore.html")
    assert 'data-state="as-expected"' in open(page).read()
    index = (tmp_path / "results" / "index.html").read_text()
    assert 'data-test="explore"' in index and "explore.html" in index
