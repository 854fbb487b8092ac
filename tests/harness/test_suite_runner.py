"""harness/suite.py with a stand-in for run_test (the real one runs in test_suite_e2e.py): order, repeats,
--only, the time budget (skipped, never passed), interrupts, suite.json, junit.xml, suite.html, latest."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.lifecycle import RunOutcome
from harness.suite import EntryRunners, SuiteDisplay, SuiteOptions, SuiteRun, select
from harness.suite_file import load_suite

SUITE = """\
name = "unit"
[defaults]
time_limit = 10
checker = "reference"

[[test]]
name = "hw"
truncation = "hw"
acks = 1
min_insync_replicas = 1
nemesis = "kill"
repeats = 2
finds = ["lost-write"]

[[test]]
name = "safe"
safe = true
[test.matrix]
nemesis = ["kill", "pause"]
"""


class FakeRuns:
    """Plays run_test: makes the run directory, advances a fake clock by time limit + 5 s, and reports
    `lost` lost writes for the configurations named in `losing` (by repeat number)."""

    def __init__(self, losing: dict[str, set[int]]):
        self.now = 1000.0
        self.losing = losing
        self.calls: list[tuple[str, float, str, int | None]] = []
        self.count: dict[str, int] = {}

    def clock(self) -> float:
        return self.now

    def __call__(self, cfg, session_hook=None, extra_record=None):
        k = self.count[cfg.name] = self.count.get(cfg.name, 0) + 1
        self.calls.append((cfg.name, cfg.time_limit, cfg.results_dir, cfg.seed))
        run_dir = Path(cfg.results_dir) / cfg.name / f"run{k}"
        run_dir.mkdir(parents=True)
        (run_dir / "report.html").write_text("<html></html>")
        lost = 3 if k in self.losing.get(cfg.name, set()) else 0
        results = {"valid": lost == 0, "unseen": {"count": 0},
                   "anomalies": {"lost-write": {"count": lost}, "divergence": {"count": 1 if lost else 0}}}
        self.now += cfg.time_limit + 5.0
        return RunOutcome(run_dir, 0 if lost == 0 else 1, results, run_dir / "report.html", [], False, None)


def make(tmp_path, losing, **options):
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "unit.toml"
    p.write_text(SUITE)
    fake = FakeRuns(losing)
    runner = SuiteRun(load_suite(p), tmp_path / "results", SuiteOptions(**options), runners=EntryRunners(run=fake),
                      clock=fake.clock)
    return runner, fake


def test_runs_every_configuration_and_writes_the_artifacts(tmp_path):
    runner, fake = make(tmp_path, {"hw": {2}})
    path = runner.start()
    assert path.parent == tmp_path / "results" / "suites" / "unit"
    assert runner.run() == 0
    assert [c[0] for c in fake.calls] == ["hw", "hw", "safe-kill", "safe-pause"]
    assert all(c[2] == str(path) and c[1] == 10.0 for c in fake.calls)
    doc = json.loads((path / "suite.json").read_text())
    assert doc["status"] == "done" and doc["exit_code"] == 0
    assert doc["counts"] == {"passed": 3, "failed": 0, "error": 0, "skipped": 0, "pending": 0}
    hw = doc["configs"][0]
    assert hw["status"] == "passed" and hw["message"] == "repeat 2 of 2 found lost-write (3)"
    assert [r["report"] for r in hw["repeats"]] == ["hw/run1/report.html", "hw/run2/report.html"]
    assert hw["row"] == "hw" and hw["column"] == "kill" and hw["expect"] == {"finds": ["lost-write"]}
    assert os.readlink(tmp_path / "results" / "suites" / "unit" / "latest") == path.name
    cases = ET.parse(path / "junit.xml").getroot().findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == ["hw", "safe-kill", "safe-pause"]
    assert 'data-config="safe-pause" data-status="passed"' in (path / "suite.html").read_text()


def test_a_broken_expectation_fails_the_suite(tmp_path):
    runner, _fake = make(tmp_path, {"safe-pause": {1}})
    runner.start()
    assert runner.run() == 1
    by_name = {o.config.name: o for o in runner.outcomes}
    assert by_name["safe-pause"].status == "failed"
    assert by_name["safe-pause"].message == ("expected safe, but 1 of 1 repeats found anomalies: "
                                             "repeat 1 found divergence (1), lost-write (3)")
    assert by_name["hw"].status == "failed"   # found nothing in 2 repeats


def test_repeat_override_seeds_and_only(tmp_path):
    runner, fake = make(tmp_path, {"safe-kill": set()}, repeat=3, only="safe-k*")
    runner.start()
    assert runner.run() == 0
    assert [c[0] for c in fake.calls] == ["safe-kill"] * 3
    assert [o.config.name for o in runner.outcomes] == ["safe-kill"]
    configs = load_suite_configs(tmp_path)
    assert [c.name for c in select(configs, "pause")] == ["safe-pause"]
    assert [c.name for c in select(configs, "hw,safe-kill")] == ["hw", "safe-kill"]
    assert select(configs, "nothing-like-this") == []


def load_suite_configs(tmp_path):
    return load_suite(tmp_path / "unit.toml").configs


def test_budget_skips_what_does_not_fit_and_skipped_is_not_passed(tmp_path):
    # a run costs 15 s on the fake clock. Before any run the reference checker's overhead is guessed at
    # 20 s: hw needs 2 x (10 + 20) = 60 s > 50 s and is skipped; safe-kill needs 30 s and runs; then the
    # overhead measured is 5 s: safe-pause needs 15 s of the 35 s left and runs.
    runner, fake = make(tmp_path, {"hw": {1}}, budget_s=50)
    runner.start()
    code = runner.run()
    statuses = {o.config.name: o.status for o in runner.outcomes}
    assert statuses == {"hw": "skipped", "safe-kill": "passed", "safe-pause": "passed"}
    assert code == 2
    assert [c[0] for c in fake.calls] == ["safe-kill", "safe-pause"]
    hw = runner.outcomes[0]
    assert hw.message == "not run: needs about 60s (2 x 10s runs), 50s of the 50s budget left"
    doc = json.loads((runner.path / "suite.json").read_text())
    assert doc["counts"]["skipped"] == 1 and doc["exit_code"] == 2
    case = ET.parse(runner.path / "junit.xml").getroot().find("./testsuite/testcase[@name='hw']")
    assert case.find("skipped").get("message") == hw.message


def test_budget_uses_the_overhead_measured_so_far(tmp_path):
    runner, fake = make(tmp_path, {"hw": {1}}, budget_s=75)
    runner.start()
    runner.run()
    # hw: guessed 2 x 30 = 60 <= 75, runs (30 s on the clock); measured overhead 5 s -> 15 s per run;
    # safe-kill needs 15 <= 45, runs; safe-pause needs 15 <= 30, runs
    assert [o.status for o in runner.outcomes] == ["passed", "passed", "passed"]
    runner2, _ = make(tmp_path / "b", {"hw": {1}}, budget_s=40)
    runner2.start()
    runner2.run()
    assert [o.status for o in runner2.outcomes] == ["skipped", "passed", "passed"]


def test_interrupt_skips_the_rest(tmp_path):
    runner, fake = make(tmp_path, {"hw": {1}})
    original = fake.__call__

    def interrupting(cfg, session_hook=None, extra_record=None):
        out = original(cfg, session_hook)
        runner.request_interrupt("SIGINT")
        return out

    runner.run_fn = interrupting
    runner.start()
    assert runner.run() == 2
    assert [(o.config.name, o.status) for o in runner.outcomes] == [
        ("hw", "passed"), ("safe-kill", "skipped"), ("safe-pause", "skipped")]
    assert runner.outcomes[1].message == "not run: the suite was interrupted"
    assert json.loads((runner.path / "suite.json").read_text())["status"] == "interrupted"


def test_each_repeat_says_its_verdict_in_the_one_verdict_format(tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "unit.toml"
    p.write_text(SUITE)
    fake = FakeRuns({"hw": {2}})
    said: list[str] = []
    runner = SuiteRun(load_suite(p), tmp_path / "results", SuiteOptions(only="hw"), runners=EntryRunners(run=fake),
                      display=SuiteDisplay(say=said.append), clock=fake.clock)
    runner.start()
    runner.run()
    repeats = [m for m in said if ": repeat " in m and "(exit" in m]
    assert repeats == ["[1/1] hw: repeat 1: VALID (exit 0): no anomalies · 15 s in all",
                       "[1/1] hw: repeat 2: INVALID (exit 1): lost-write=3 divergence=1 · 15 s in all"]
