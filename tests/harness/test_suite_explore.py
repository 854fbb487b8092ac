"""The suite's `explore` entry kind: parse errors with line numbers, and real short explorations of
simulator/ judged against expect = "found" / "none" (met and not met), in suite.json, junit.xml and on
the suite page with their shrunk stories."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.suite import EntryRunners, SuiteDisplay, SuiteOptions, SuiteRun
from harness.suite_command import validate_configs
from harness.suite_expect import RepeatResult, evaluate
from harness.suite_file import Expectation, ConfigError, load_suite

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "explore.toml"
    p.write_text(text)
    return p


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as exc:
        load_suite(write(tmp_path, text))
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_an_explore_entry_parses_to_one_configuration(tmp_path):
    path = write(tmp_path, """\
name = "x"
repeats = 2
[defaults]
time_limit = 20

[[test]]
name = "hw-acks1"
description = "must find"
explore = { truncation = "hw", acks = 1, min_insync_replicas = 1, budget = 5, seed = 9 }
expect = "found"
invariant = "no-acked-loss"

[[test]]
name = "safe"
expect = "none"
repeats = 1
[test.explore]
acks = "all"
schedules = 100
""")
    suite = load_suite(path)
    hw, safe = suite.configs
    assert (hw.name, hw.row, hw.column, hw.repeats, hw.description) == ("hw-acks1", "hw-acks1", "explore", 2,
                                                                        "must find")
    assert hw.explore.truncation == "hw" and hw.explore.acks == 1 and hw.explore.min_insync_replicas == 1
    assert (hw.explore.budget, hw.explore.seed, hw.explore.length) == (5.0, 9, 50)
    assert hw.expect == Expectation(explore="found", invariant="no-acked-loss")
    assert hw.expect.describe() == "explore finds no-acked-loss"
    assert hw.expect.to_json() == {"explore": "found", "invariant": "no-acked-loss", "finds": ["no-acked-loss"]}
    assert hw.settings == {"explore.truncation": "hw", "explore.acks": 1, "explore.min_insync_replicas": 1,
                           "explore.budget": 5, "explore.seed": 9}
    assert hw.where == f"{path}:6"
    assert safe.explore.acks == "all" and safe.explore.schedules == 100 and safe.explore.budget_s is None
    assert safe.repeats == 1 and safe.expect.describe() == "explore finds nothing"
    assert safe.expect.to_json() == {"explore": "none", "safe": True}
    assert validate_configs(suite.configs, path) is None     # nothing to preflight: no cluster


@pytest.mark.parametrize("entry, message", [
    ('explore = { acks = 2 }\nexpect = "found"',
     ":3: [[test]] #1 'e': key 'explore.acks' must be 0, 1 or \"all\", got 2"),
    ('expect = "found"\n[test.explore]\ntruncation = "hw"\nbudgett = 3',
     ":6: [[test]] #1 'e': key 'explore.budgett' is not an explore option (known: "),
    ('explore = { budget = 0 }\nexpect = "none"',
     ":3: [[test]] #1 'e': key 'explore.budget' must be a number of seconds above 0, got 0"),
    ('explore = { replicas = 2, min_insync_replicas = 3 }\nexpect = "none"',
     ":3: [[test]] #1 'e': key 'explore.min_insync_replicas' must be at most the number of replicas (2), got 3"),
    ('explore = { budget = 1 }',
     ":1: [[test]] #1 'e' has no expectation: give expect = \"found\" or expect = \"none\""),
    ('explore = { budget = 1 }\nexpect = "maybe"',
     ":4: [[test]] #1 'e': key 'expect' must be \"found\" or \"none\", got 'maybe'"),
    ('explore = { budget = 1 }\nexpect = "none"\ninvariant = "no-acked-loss"',
     ":5: [[test]] #1 'e': key 'invariant' goes with expect = \"found\" only"),
    ('explore = { budget = 1 }\nexpect = "found"\ninvariant = "no-loss"',
     ":5: [[test]] #1 'e': key 'invariant' names unknown invariant 'no-loss' (known: "),
    ('explore = { budget = 1 }\nexpect = "found"\nsafe = true',
     ":5: [[test]] #1 'e': key 'safe' is not a key of an explore entry (known: "),
    ('explore = { budget = 1 }\nexpect = "found"\nacks = 1',
     ":5: [[test]] #1 'e': key 'acks' is not a key of an explore entry (put it inside explore = {...})"),
    ('explore = 3\nexpect = "found"',
     ":3: [[test]] #1 'e': key 'explore' must be a table of explore options, got 3"),
    ('safe = true\nexpect = "none"',
     ":4: [[test]] #1 'e': key 'expect' belongs to explore entries"),
])
def test_explore_entry_errors_name_file_line_entry_and_key(tmp_path, entry, message):
    msg = error_of(tmp_path, f'[[test]]\nname = "e"\n{entry}\n')
    assert msg.startswith(str(tmp_path / "explore.toml") + message), msg


def test_evaluate_explore_expectations():
    found = RepeatResult(index=1, exit_code=1, valid=False, counts={"no-acked-loss": 1}, seed=4,
                         explored={"schedules": 120, "events": 6000})
    clean = RepeatResult(index=2, exit_code=0, valid=True, seed=5, explored={"schedules": 3000, "events": 150000})
    broken = RepeatResult(index=3, exit_code=255, valid=None, problems=["internal error: boom"])
    want = Expectation(explore="found")
    assert evaluate(want, [clean, found]) == ("passed", "repeat 1 of 2 found no-acked-loss (1)")
    assert evaluate(Expectation(explore="found", invariant="hw-within-leo"), [found]) == (
        "failed", "expected to find hw-within-leo, but no repeat did: repeat 1 found no-acked-loss (1) in "
                  "120 schedules, 6,000 events")
    assert evaluate(want, [clean, broken])[0] == "error"
    none = Expectation(explore="none")
    assert evaluate(none, [clean]) == ("passed", "no finding in repeat 2: 3,000 schedules, 150,000 events")
    assert evaluate(none, [clean, found]) == (
        "failed", "expected no finding, but 1 of 2 repeats found one: repeat 1 (seed 4) found no-acked-loss (1)")
    assert evaluate(none, [clean, broken]) == (
        "error", "expected no finding, not shown: repeat 3 not checked (exit 255: internal error: boom)")


# --- real explorations -------------------------------------------------------------------------------

SUITE = """\
name = "explore-unit"

[[test]]
name = "hw-acks1-found"
explore = { truncation = "hw", acks = 1, min_insync_replicas = 1, budget = 4, seed = 1, shrink_budget = 5 }
expect = "found"
invariant = "no-acked-loss"

[[test]]
name = "safe-none"
explore = { truncation = "leader-epoch", acks = "all", min_insync_replicas = 2, budget = 2, seed = 1 }
expect = "none"

[[test]]
name = "safe-found"
explore = { truncation = "leader-epoch", acks = "all", min_insync_replicas = 2, budget = 2, seed = 1 }
expect = "found"

[[test]]
name = "hw-acks1-none"
explore = { truncation = "hw", acks = 1, min_insync_replicas = 1, budget = 4, seed = 1, shrink_budget = 5 }
expect = "none"
"""


def test_real_explorations_met_and_not_met_in_suite_json_junit_and_page(tmp_path):
    suite = load_suite(write(tmp_path, SUITE))
    lines: list[str] = []
    runner = SuiteRun(suite, tmp_path / "results", display=SuiteDisplay(say=lines.append))
    code = runner.run()
    assert code == 1                                       # two expectations are broken
    doc = json.loads((runner.path / "suite.json").read_text())
    status = {c["name"]: c["status"] for c in doc["configs"]}
    assert status == {"hw-acks1-found": "passed", "safe-none": "passed", "safe-found": "failed",
                      "hw-acks1-none": "failed"}
    by = {c["name"]: c for c in doc["configs"]}
    hw = by["hw-acks1-found"]
    assert hw["kind"] == "explore" and hw["explore"]["truncation"] == "hw" and hw["column"] == "explore"
    (rep,) = hw["repeats"]
    assert rep["seed"] == 1 and rep["valid"] is False and rep["counts"]["no-acked-loss"] >= 1
    f = next(f for f in rep["findings"] if f["invariant"] == "no-acked-loss")
    assert f["expected"] is True and f["story"] and f["shrunk_length"] <= f["original_length"]
    assert (runner.path / rep["run_dir"] / "explore.json").exists()
    assert (runner.path / rep["run_dir"] / f["scenario"]).exists()
    assert rep["report"] == rep["run_dir"] + "/explore.html"         # its page (reports/explore_page.py)
    assert by["safe-found"]["message"].startswith("expected to find a violation, but no repeat did: repeat 1 found "
                                                  "nothing in ")
    assert by["hw-acks1-none"]["message"].startswith("expected no finding, but 1 of 1 repeats found one: repeat 1 "
                                                     "(seed 1) found ")
    # JUnit: one testcase per configuration, failures for the broken ones
    root = ET.parse(runner.path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["safe-found"].find("failure") is not None and cases["hw-acks1-none"].find("failure") is not None
    assert cases["hw-acks1-found"].find("failure") is None and cases["safe-none"].find("failure") is None
    assert "expectation: finds no-acked-loss" in cases["hw-acks1-found"].find("system-out").text
    assert "expectation: safe" in cases["safe-none"].find("system-out").text
    # the suite page: the explore cells count findings; the stories are shown with their scenario links
    page = (runner.path / "suite.html").read_text()
    assert 'id="explorations"' in page and "explore finds no-acked-loss" in page
    assert "nothing found" in page
    for line in f["story"]:
        assert line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;") \
            .replace("'", "&#39;") in page
    assert f'href="{rep["run_dir"]}/{f["scenario"]}"' in page
    assert any("hw-acks1-found: PASSED" in line for line in lines)


def test_nightly_explore_entries(tmp_path):
    suite = load_suite(REPO / "suites" / "nightly.toml")
    explore = {c.name: c for c in suite.configs if c.explore is not None}
    unsafe, safe = explore["explore-hw-acks1"], explore["explore-leader-epoch-safe"]
    assert (unsafe.explore.truncation, unsafe.explore.acks, unsafe.explore.min_insync_replicas) == ("hw", 1, 1)
    assert unsafe.expect == Expectation(explore="found", invariant="no-acked-loss")
    assert (safe.explore.truncation, safe.explore.acks, safe.explore.min_insync_replicas) == ("leader-epoch", "all", 2)
    assert safe.expect == Expectation(explore="none")
    assert unsafe.explore.budget == safe.explore.budget == 60


class FakeExplore:
    """Plays run_exploration for the budget arithmetic: a fake clock moves by the search's budget."""

    def __init__(self):
        self.now = 0.0
        self.calls: list[tuple[str, int | None]] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, opts, *, results_root, name):
        from harness.exploration import ExploreRun
        self.calls.append((name, opts.seed))
        self.now += opts.budget_s
        run_dir = Path(results_root) / name / f"r{len(self.calls)}"
        run_dir.mkdir(parents=True)
        doc = {"seed": opts.seed, "schedules": 10, "events": 500, "explore_s": opts.budget_s,
               "findings_by_invariant": {}, "findings": []}
        (run_dir / "explore.json").write_text(json.dumps(doc))
        return ExploreRun(run_dir=run_dir, path=run_dir / "explore.json", doc=doc, exit_code=0)


def test_budget_skips_an_exploration_that_would_not_fit_and_repeats_step_the_seed(tmp_path):
    suite = load_suite(write(tmp_path, """\
[[test]]
name = "a"
repeats = 2
explore = { budget = 10, seed = 40, shrink_budget = 5 }
expect = "none"

[[test]]
name = "b"
explore = { budget = 31, shrink_budget = 5 }
expect = "none"
"""))
    fake = FakeExplore()
    runner = SuiteRun(suite, tmp_path / "results", SuiteOptions(budget_s=60), runners=EntryRunners(explore=fake),
                      clock=fake.clock)
    assert runner.estimate_run_s(suite.configs[0]) == 20.0      # budget + shrink budget + 5 s
    assert runner.run() == 2                                    # b was skipped: nothing broken, not all run
    assert fake.calls == [("a", 40), ("a", 41)]
    doc = json.loads((runner.path / "suite.json").read_text())
    a, b = doc["configs"]
    assert a["status"] == "passed" and [r["seed"] for r in a["repeats"]] == [40, 41]
    assert b["status"] == "skipped" and b["message"].startswith("not run: needs about 41s")
