"""`highwater suite` end to end on real local clusters: a trimmed copy of suites/smoke.toml (one safe
configuration under SIGKILLs, one that must lose writes to a power loss of every broker with
flush=never), run as a subprocess; the JUnit XML, the suite page and the expectations are checked."""
from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TRIMMED = f"""\
name = "smoke-trimmed"
[defaults]
time_limit = 8
checker = "reference"
final_wait = 45

[[test]]
name = "safe"
truncation = "leader-epoch"
acks = "all"
min_insync_replicas = 2
unclean_election = false
nemesis = "kill"
nemesis_interval = 3
safe = true

[[test]]
name = "flush-never-power-loss-all"
truncation = "leader-epoch"
acks = "all"
min_insync_replicas = 2
flush = "never"
power_loss = true
nemesis = "none"
nemesis_schedule = "{REPO / 'suites' / 'schedules' / 'power-loss-all.toml'}"
time_limit = 10
finds = ["lost-write"]
"""


@pytest.mark.slow
def test_smoke_suite_end_to_end(tmp_path):
    suite_file = tmp_path / "smoke-trimmed.toml"
    suite_file.write_text(TRIMMED)
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "suite", str(suite_file), "--results-dir", str(results)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    suite_dir = Path(proc.stdout.strip().splitlines()[-1]).parent
    assert suite_dir.parent == results / "suites" / "smoke-trimmed"
    assert (results / "suites" / "smoke-trimmed" / "latest").resolve() == suite_dir.resolve()

    doc = json.loads((suite_dir / "suite.json").read_text())
    assert doc["status"] == "done" and doc["exit_code"] == 0
    by_name = {c["name"]: c for c in doc["configs"]}
    assert by_name["safe"]["status"] == "passed" and by_name["safe"]["repeats"][0]["valid"] is True
    lossy = by_name["flush-never-power-loss-all"]
    assert lossy["status"] == "passed" and lossy["repeats"][0]["counts"]["lost-write"] > 0
    for c in doc["configs"]:
        report = suite_dir / c["repeats"][0]["report"]
        assert report.is_file() and report.name == "report.html"
        assert (report.parent / "results.json").is_file() and (report.parent / "history.jsonl").is_file()

    root = ET.parse(suite_dir / "junit.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("2", "0", "0", "0")
    assert [c.get("name") for c in root.iter("testcase")] == ["safe", "flush-never-power-loss-all"]

    page = (suite_dir / "suite.html").read_text()
    assert 'data-config="safe" data-status="passed"' in page
    assert 'data-config="flush-never-power-loss-all" data-status="passed"' in page
    assert f'lost {lossy["repeats"][0]["counts"]["lost-write"]} · div' in page
