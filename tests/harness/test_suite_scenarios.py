"""Suite entries that replay a scenario file (`scenario = ...`): parsing, errors, and dispatch to the
scenario runner (a stand-in here; the real replay runs in the shipped suites and test_e2e_scenarios.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.lifecycle import RunOutcome
from harness.suite import EntryRunners, SuiteRun
from harness.suite_file import ConfigError, load_suite

ROOT = Path(__file__).resolve().parents[2]


def _suite(tmp_path: Path, body: str) -> Path:
    (tmp_path / "s.toml").write_text('name = "sc"\n[defaults]\nchecker = "reference"\n' + body)
    return tmp_path / "s.toml"


def _hw_replay(name: str, case: str, kind: str) -> str:
    """A suite entry replaying the shipped scenarios/<case>.toml with truncation = "hw", expected to find `kind`."""
    return (f'\n[[test]]\nname = "{name}"\nscenario = "{ROOT / "scenarios" / (case + ".toml")}"\n'
            f'truncation = "hw"\nfinds = ["{kind}"]\n')


def test_scenario_entries_parse_with_their_truncation_and_column(tmp_path):
    path = _suite(tmp_path, _hw_replay("div-hw", "seed-divergence", "divergence"))
    (c,) = load_suite(path).configs
    assert c.scenario == ROOT / "scenarios/seed-divergence.toml"
    assert c.cfg.broker.truncation == "hw"
    assert c.column == "scenario:seed-divergence"
    assert c.expect.finds == ("divergence",)


def test_a_scenario_that_does_not_load_is_a_one_line_error(tmp_path):
    (tmp_path / "bad.toml").write_text("[[step]]\ndo = 'no-such-step'\n")
    path = _suite(tmp_path, '''
[[test]]
name = "x"
scenario = "bad.toml"
safe = true
''')
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:") and "key 'scenario' does not load" in msg and "bad.toml" in msg


def test_shipped_nightly_replays_both_seed_cases_in_both_modes():
    configs = {c.name: c for c in load_suite(ROOT / "suites/nightly.toml").configs}
    for case, kind in (("seed-data-loss", "lost-write"), ("seed-divergence", "divergence")):
        hw, le = configs[f"{case}-hw"], configs[f"{case}-leader-epoch"]
        assert hw.scenario == le.scenario == (ROOT / "suites" / f"../scenarios/{case}.toml")
        assert (hw.cfg.broker.truncation, hw.expect.finds) == ("hw", (kind,))
        assert (le.cfg.broker.truncation, le.expect.safe) == ("leader-epoch", True)


def test_scenario_configurations_go_to_the_scenario_runner(tmp_path):
    path = _suite(tmp_path, _hw_replay("loss-hw", "seed-data-loss", "lost-write") + '''
[[test]]
name = "random"
nemesis = "kill"
time_limit = 5
safe = true
''')
    replayed, random_runs = [], []

    def outcome(cfg, lost):
        run_dir = Path(cfg.results_dir) / cfg.name
        run_dir.mkdir(parents=True)
        results = {"valid": lost == 0, "unseen": {"count": 0},
                   "anomalies": {"lost-write": {"count": lost}, "divergence": {"count": 0}}}
        return RunOutcome(run_dir, 1 if lost else 0, results, run_dir / "report.html", [], False, None)

    def scenario_fn(scenario_path, cfg, session_hook=None, extra_record=None):
        replayed.append((scenario_path.name, cfg.broker.truncation, cfg.name, extra_record))
        return outcome(cfg, 1)

    def run_fn(cfg, session_hook=None, extra_record=None):
        random_runs.append((cfg.name, extra_record))
        return outcome(cfg, 0)

    run = SuiteRun(load_suite(path), tmp_path / "results", runners=EntryRunners(run=run_fn, scenario=scenario_fn))
    assert run.run() == 0
    # each run is told the suite's expectation, for its test.json (its report and the index judge it)
    assert replayed == [("seed-data-loss.toml", "hw", "loss-hw",
                         {"expect": {"by": "suite", "kinds": ["lost-write"], "mode": "hw"}})]
    assert random_runs == [("random", {"expect": {"by": "suite", "kinds": [], "mode": "leader-epoch"}})]
    assert [o.status for o in run.outcomes] == ["passed", "passed"]
