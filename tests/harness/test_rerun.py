"""Reproducible runs (harness/reproduce.py, rundir/store.py): test.json records the command line and the
code version; `highwater rerun` repeats a run with the same configuration and seed; `highwater run
--test-count N` runs N times and exits with the worst verdict."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import config as config_mod
from harness import reproduce, run_command
from rundir import store
from harness.cli import main
from rundir.exits import EXIT_USAGE
from e2e_helpers import TWO_SENDS_SCENARIO

REPO = Path(__file__).resolve().parents[2]
SHORT = ["--time-limit", "1", "--checker", "reference", "--nemesis", "kill", "--nemesis-interval", "1", "--plain"]


def highwater(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})


def runs_under(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/test.json") if not p.parent.is_symlink())


# --- worst verdict ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("codes, worst", [
    ([0], 0), ([0, 0], 0), ([0, 2], 2), ([2, 1, 0], 1), ([1, 254], 254), ([254, 255, 1], 255),
    ([0, 130], 130), ([], 2),
])
def test_worst_exit(codes, worst):
    assert run_command.worst_exit(codes) == worst


def _fake_execute(codes):
    """Stands in for run_command.execute in the unit tests below (the slow test runs the real one)."""
    calls = []

    def execute(cfg, *, plain, extra_record, state):
        calls.append((cfg.seed, dict(extra_record)))
        return codes[len(calls) - 1]
    return execute, calls


def test_test_count_seeds_follow_the_given_seed(capsys):
    cfg = config_mod.build(None, {"seed": 100})
    execute, calls = _fake_execute([0, 1, 2])
    assert run_command.run_many(cfg, 3, run_one=execute) == 1
    assert calls == [(100, {"test_count": {"index": 1, "count": 3}}),
                     (101, {"test_count": {"index": 2, "count": 3}}),
                     (102, {"test_count": {"index": 3, "count": 3}})]
    err = capsys.readouterr().err.splitlines()
    assert "highwater: test 2/3: seed 101: invalid (exit 1)" in err
    assert err[-1] == "highwater: 3 runs: 1 valid, 1 invalid, 1 unknown; worst: invalid (exit 1)"
    assert cfg.seed == 100            # the caller's configuration is not changed


def test_test_count_without_seed_draws_fresh_seeds(capsys):
    cfg = config_mod.build(None, {})
    execute, calls = _fake_execute([0, 0])
    assert run_command.run_many(cfg, 2, run_one=execute) == 0
    assert [seed for seed, _ in calls] == [None, None]     # each RunSession draws and records its own
    assert capsys.readouterr().err.splitlines()[-1] == "highwater: 2 runs: 2 valid, 0 invalid, 0 unknown; worst: valid (exit 0)"


# --- test.json records how to reproduce ------------------------------------------------------------------

def test_code_version_in_a_git_checkout_and_outside(tmp_path):
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    code = store.code_version(REPO)
    assert code["source"] == "git" and code["commit"] == head and isinstance(code["dirty"], bool)
    outside = store.code_version(tmp_path)
    assert outside["source"] == "package" and "commit" not in outside
    assert outside["version"] == code["version"]


def test_code_version_sees_a_dirty_tree(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("1\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    assert store.code_version(repo)["dirty"] is False
    (repo / "untracked.txt").write_text("x\n")
    assert store.code_version(repo)["dirty"] is False       # untracked files do not count
    (repo / "a.txt").write_text("2\n")
    assert store.code_version(repo)["dirty"] is True


# --- rerun errors ------------------------------------------------------------------------------------------

def _bad_run(tmp_path, test_json: str | None) -> Path:
    run = tmp_path / "res" / "chaos" / "20260101T000000Z"
    run.mkdir(parents=True)
    if test_json is not None:
        (run / "test.json").write_text(test_json)
    return run


@pytest.mark.parametrize("test_json, message", [
    (None, "{run}/test.json: file is missing (a run directory without a usable test.json cannot be rerun)"),
    ('{"seed": 3}', "{run}/test.json: field 'config' is missing or not an object; cannot rerun"),
    ('{"seed": null, "config": {}}', "{run}/test.json: field 'seed' must be the integer seed the run used, got None"),
    ('{"seed": 3, "config": {"broker": {"truncation": "hw", "colour": 1}}}',
     "{run}/test.json: field 'config': unknown key 'broker.colour'"),
    ('{"seed": 3, "config": {"cluster": {"backend": "k8s"}}}',
     "{run}/test.json: key 'cluster.backend' must be one of local, docker, ssh, external, got 'k8s'"),
])
def test_rerun_refuses_an_unusable_run_dir(tmp_path, capsys, test_json, message):
    run = _bad_run(tmp_path, test_json)
    before = sorted(p.as_posix() for p in (tmp_path / "res").rglob("*"))
    capsys.readouterr()
    assert main(["rerun", str(run)]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == "highwater: " + message.format(run=run)
    assert sorted(p.as_posix() for p in (tmp_path / "res").rglob("*")) == before


def test_rerun_results_dir_of_a_suite_run_is_results(tmp_path):
    suite_ts = tmp_path / "results" / "suites" / "s" / "20260101T000000Z"
    run = suite_ts / "cfg" / "20260101T000001Z"
    run.mkdir(parents=True)
    (suite_ts / "suite.json").write_text("{}")
    cfg = config_mod.TestConfig(seed=5, results_dir=str(suite_ts))
    (run / "test.json").write_text(json.dumps({"seed": 5, "config": cfg.to_dict()}))
    _test, again = reproduce.load_run(run)
    assert Path(again.results_dir) == (tmp_path / "results").resolve()
    assert again.seed == 5


# --- real runs ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_rerun_repeats_configuration_and_seed(tmp_path):
    root = tmp_path / "res"
    first = highwater("run", *SHORT, "--results-dir", str(root))
    assert first.returncode in (0, 1, 2), first.stderr
    [original] = runs_under(root)
    a = json.loads((original / "test.json").read_text())
    assert a["argv"] == ["highwater", "run", *SHORT, "--results-dir", str(root)]
    assert a["code"]["source"] == "git" and len(a["code"]["commit"]) == 40
    assert isinstance(a["seed"], int)                       # no --seed: a fresh one, recorded

    second = highwater("rerun", str(original), "--plain")
    assert second.returncode in (0, 1, 2), second.stderr
    rerun_dir = [r for r in runs_under(root) if r != original]
    assert len(rerun_dir) == 1
    b = json.loads((rerun_dir[0] / "test.json").read_text())
    assert b["seed"] == a["seed"]
    assert b["config"] == a["config"]
    assert b["kind"] == "run"
    assert b["rerun_of"] == {"run_dir": str(original.resolve()), "run_id": a["run_id"],
                             "timestamp": a["timestamp"], "seed": a["seed"]}
    assert b["argv"] == ["highwater", "rerun", str(original), "--plain"]
    assert os.readlink(root / "latest") == f"chaos/{rerun_dir[0].name}"


@pytest.mark.slow
def test_rerun_of_a_scenario_replays_the_scenario(tmp_path):
    """A one-broker scenario of two sends (a few seconds; the shipped staged cases are replayed by
    tests/harness/test_e2e_scenarios.py and the nightly suite)."""
    root = tmp_path / "res"
    f = tmp_path / "two-sends.toml"
    f.write_text(TWO_SENDS_SCENARIO)
    first = highwater("scenario", str(f), "--results-dir", str(root), "--plain")
    assert first.returncode == 0, first.stderr
    [original] = runs_under(root)
    second = highwater("rerun", str(original), "--plain")
    assert second.returncode == 0, second.stderr
    assert "scenario expects no anomalies in leader-epoch mode; found none: as expected" in second.stderr
    [again] = [r for r in runs_under(root) if r != original]
    a, b = (json.loads((d / "test.json").read_text()) for d in (original, again))
    assert b["kind"] == "scenario" and b["scenario"] == a["scenario"]
    assert (b["seed"], b["config"]) == (a["seed"], a["config"])
    assert b["rerun_of"]["run_dir"] == str(original.resolve())


@pytest.mark.slow
def test_test_count_runs_n_times_with_consecutive_seeds(tmp_path):
    root = tmp_path / "res"
    r = highwater("run", *SHORT, "--seed", "40", "--test-count", "2", "--results-dir", str(root))
    runs = runs_under(root)
    assert len(runs) == 2, r.stderr
    tests = [json.loads((d / "test.json").read_text()) for d in runs]
    assert [t["seed"] for t in tests] == [40, 41]
    assert [t["test_count"] for t in tests] == [{"index": 1, "count": 2}, {"index": 2, "count": 2}]
    codes = []
    for k, (d, t) in enumerate(zip(runs, tests), start=1):
        line = next(x for x in r.stderr.splitlines() if x.startswith(f"highwater: test {k}/2: seed {t['seed']}: "))
        assert line.endswith(f"; {d}")
        codes.append(int(line.split("(exit ")[1].split(")")[0]))
    assert r.returncode == run_command.worst_exit(codes)
    assert r.stderr.splitlines()[-1].startswith("highwater: 2 runs: ")
