"""harness/junit.py: the JUnit XML of a suite summary, parsed back."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from harness import junit


def config(name, status, message, expect, repeats, elapsed=12.5):
    return {"name": name, "row": name, "column": "kill", "expect": expect, "settings": {"acks": 1},
            "status": status, "message": message, "elapsed_s": elapsed, "repeats_planned": len(repeats) or 1,
            "repeats": repeats}


def repeat(i, valid, counts, report):
    return {"index": i, "exit_code": 0 if valid else 1, "valid": valid, "counts": counts, "seed": 40 + i,
            "elapsed_s": 33.0, "report": report, "run_dir": report.rsplit("/", 1)[0], "problems": []}


SUMMARY = {
    "suite": "nightly", "file": "suites/nightly.toml", "timestamp": "20261122T010000Z",
    "started_iso": "2026-11-22T01:00:00Z", "elapsed_s": 321.25, "budget_s": 600.0, "results_dir": "results",
    "configs": [
        config("hw-kill", "passed", "repeat 1 of 1 found lost-write (3)", {"finds": ["lost-write"]},
               [repeat(1, False, {"lost-write": 3}, "hw-kill/a/report.html")]),
        config("safe-kill", "failed", "expected safe, but 1 of 2 repeats found anomalies: repeat 2 found "
               "lost-write (1) <&>", {"safe": True},
               [repeat(1, True, {}, "safe-kill/a/report.html"), repeat(2, False, {"lost-write": 1}, "safe-kill/b/report.html")]),
        config("safe-pause", "error", "expected safe, not shown: repeat 1 not checked (exit 255)", {"safe": True},
               [{"index": 1, "exit_code": 255, "valid": None, "counts": {}, "seed": 3, "elapsed_s": 2.0,
                 "report": None, "run_dir": "safe-pause/c", "problems": ["boom"]}]),
        config("unclean", "skipped", "not run: needs about 90s (1 x 60s runs), 20s of the 600s budget left",
               {"finds": ["lost-write"]}, [], elapsed=0.0),
    ],
}


def test_junit_round_trip(tmp_path):
    path = junit.write(SUMMARY, tmp_path / "junit.xml")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("4", "1", "1", "1")
    suite = root.find("testsuite")
    assert suite.get("name") == "nightly" and suite.get("timestamp") == "2026-11-22T01:00:00Z"
    assert suite.get("time") == "321.250"
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["file"] == "suites/nightly.toml" and props["budget_s"] == "600.0"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["hw-kill", "safe-kill", "safe-pause", "unclean"]
    assert all(c.get("classname") == "highwater.nightly" for c in cases.values())
    # passed: no failure, error or skipped child
    assert [ch.tag for ch in cases["hw-kill"]] == ["system-out"]
    assert cases["hw-kill"].get("time") == "12.500"
    failure = cases["safe-kill"].find("failure")
    assert failure.get("type") == "expectation"
    assert failure.get("message") == ("expected safe, but 1 of 2 repeats found anomalies: repeat 2 found "
                                      "lost-write (1) <&>")
    assert "repeat 2: valid=False exit=1 seed=42 lost-write=1 (33.0s) safe-kill/b/report.html" in failure.text
    error = cases["safe-pause"].find("error")
    assert error.get("type") == "inconclusive" and error.get("message").startswith("expected safe, not shown")
    skipped = cases["unclean"].find("skipped")
    assert skipped.get("message").startswith("not run: needs about 90s")
    out = cases["hw-kill"].find("system-out").text
    assert out.splitlines()[:3] == ["expectation: finds lost-write", "result: passed: repeat 1 of 1 found lost-write (3)",
                                    "settings: acks=1"]


def test_pending_configurations_of_a_suite_cut_short_are_skipped_not_passed(tmp_path):
    summary = {**SUMMARY, "configs": [config("later", "pending", "not run yet", {"safe": True}, [])]}
    root = ET.parse(junit.write(summary, tmp_path / "j.xml")).getroot()
    assert root.get("skipped") == "1" and root.get("failures") == "0"
    assert root.find("./testsuite/testcase/skipped").get("message") == "not run yet"
