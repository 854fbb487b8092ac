"""`highwater explore` (harness/explore_command.py): option errors, the progress line, and real short
explorations of simulator/ (hw with acks=1 must find; leader-epoch with the safe settings must not)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.explore_command import ExploreProgress
from harness.exploration import ExploreOptions, parse_options
from rundir.settings import SettingError


def run_cli(capsys, *args: str) -> tuple[int, list[str], list[str]]:
    code = main(["explore", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


@pytest.mark.parametrize("args, message", [
    (["--acks", "2"], "highwater: --acks must be 0, 1 or \"all\", got '2'"),
    (["--truncation", "kip"], "highwater: --truncation must be one of hw, leader-epoch, got 'kip'"),
    (["--budget", "0"], "highwater: --budget must be a number of seconds above 0, got '0'"),
    (["--schedules", "x"], "highwater: --schedules must be an integer of at least 1, got 'x'"),
    (["--schedules", "0"], "highwater: --schedules must be an integer of at least 1, got '0'"),
    (["--replicas", "3", "--min-insync-replicas", "4"],
     "highwater: --min-insync-replicas must be at most the number of replicas (3), got 4"),
    (["--replicas", "12"], "highwater: --replicas must be at most 9, got 12"),
    (["--flush", "interval"], "highwater: --flush must be one of always, never, got 'interval'"),
    (["--workers", "0"], "highwater: --workers must be at least 1, got 0"),
    (["--seed", "1.5"], "highwater: --seed must be an integer, got '1.5'"),
    (["--name", "../up"], "highwater: --name must be letters, digits, '.', '_' or '-', got '../up'"),
])
def test_bad_options_are_one_line_naming_the_flag_exit_254_and_leave_nothing(tmp_path, capsys, args, message):
    out_dir = tmp_path / "results"
    code, out, err = run_cli(capsys, *args, "--out", str(out_dir))
    assert code == 254
    assert err == [message]
    assert out == []
    assert not out_dir.exists()


def test_options_defaults_and_conversions():
    assert parse_options({}) == ExploreOptions()
    o = parse_options({"acks": "all", "truncation": "hw", "min_insync_replicas": "1", "budget": "2.5",
                       "seed": "7", "unclean_election": "true"}, text=True)
    assert (o.acks, o.truncation, o.min_insync_replicas, o.budget, o.seed, o.unclean_election) == \
        ("all", "hw", 1, 2.5, 7, True)
    assert parse_options({"acks": 1}).acks == 1
    assert ExploreOptions().budget_s == 30.0                     # neither bound given: the default budget
    assert ExploreOptions(schedules=10).budget_s is None          # a schedule count alone bounds the search
    with pytest.raises(SettingError) as exc:
        parse_options({"ack": 1})
    assert exc.value.key == "ack" and "did you mean 'acks'" in exc.value.problem


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Stream:
    def __init__(self):
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.extend(line for line in text.splitlines() if line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_progress_off_a_terminal_is_plain_lines_every_interval():
    clock, stream = Clock(), Stream()
    p = ExploreProgress(ExploreOptions(budget=20.0), stream=stream, clock=clock, interval_s=5.0)
    assert p.plain
    clock.now += 2.0
    p(400, 20000, 0)
    assert stream.lines == []                                   # before the first interval: nothing
    clock.now += 3.0
    p(1000, 50000, [type("F", (), {"invariant": "no-acked-loss"})()])
    assert stream.lines == ["highwater explore: 1,000 schedules (200/s) · 50,000 events · "
                            "failing schedules 1 (no-acked-loss 1) · 15 s left"]
    clock.now += 1.0
    p({"schedules": 1100, "events": 55000, "findings": 2})
    assert len(stream.lines) == 1
    p.close()
    p.close()                                                   # closing twice prints once
    assert stream.lines[1:] == ["highwater explore: 1,100 schedules (183/s) · 55,000 events · failing schedules 2 · 14 s left"]


# --- real explorations (simulator/) ------------------------------------------------------------------

UNSAFE = ["--truncation", "hw", "--acks", "1", "--min-insync-replicas", "1"]
SAFE = ["--truncation", "leader-epoch", "--acks", "all", "--min-insync-replicas", "2", "--no-unclean-election"]


def test_hw_acks1_finds_lost_write_prints_the_story_and_writes_the_scenario(tmp_path, capsys):
    out_dir = tmp_path / "results"
    code, out, err = run_cli(capsys, *UNSAFE, "--seed", "1", "--budget", "8", "--shrink-budget", "10",
                             "--out", str(out_dir), "--plain")
    assert code == 1, err
    page = Path(out[-1])                    # the exploration's page last (reports/explore_page.py)
    assert page.name == "explore.html" and page.parent.parent == out_dir / "explore"
    path = page.with_name("explore.json")
    assert (out_dir / "explore" / "latest").resolve() == path.parent.resolve()
    doc = json.loads(path.read_text())
    assert doc["kind"] == "explore" and doc["seed"] == 1 and doc["exit_code"] == 1
    assert doc["options"]["truncation"] == "hw" and doc["settings"]["acks"] == 1
    assert "no-acked-loss" not in doc["promises"]
    assert doc["schedules"] >= 1 and doc["events"] >= doc["schedules"]
    assert doc["findings_total"] == sum(doc["findings_by_invariant"].values()) >= 1
    found = {f["invariant"]: f for f in doc["findings"]}
    assert "no-acked-loss" in found
    f = found["no-acked-loss"]
    assert f["expected"] is True
    assert 1 <= f["shrunk_length"] <= f["original_length"]
    told = [line for line in f["story"] if ". (settle) " not in line]
    assert len(told) == f["shrunk_length"] and f["story"][0].startswith("1")
    assert len(f["story"]) > len(told)                      # the settle steps where the write is cut
    assert f["shrunk_for"] in ("faithful replay, leader-epoch holds it", "faithful replay", "leader-epoch holds it",
                               "same invariant only")
    scenario = path.parent / f["scenario"]
    assert scenario.exists() and scenario.read_text().strip()
    from harness import scenario as scenario_mod          # a file `highwater scenario` accepts
    sc = scenario_mod.load(scenario, truncation="hw")
    assert sc.config.broker.truncation == "hw" and "lost-write" in sc.expect["hw"]
    # the command prints each finding's story and scenario path, then the verdict; its page last
    text = "\n".join(err)
    assert "finding" in text and "no-acked-loss (expected: this configuration does not promise it)" in text
    assert f"scenario file: {scenario}" in text
    for line in f["story"]:
        assert f"highwater:     {line}" in err
    assert err[-1].startswith("highwater: FOUND ") and err[-1].endswith("(seed 1, exit 1)")


def test_same_seed_same_schedules_and_findings(tmp_path, capsys):
    docs = []
    for k in range(2):
        code, out, err = run_cli(capsys, *UNSAFE, "--seed", "5", "--schedules", "300", "--shrink-budget", "5",
                                 "--out", str(tmp_path / f"r{k}"), "--plain")
        assert code in (0, 1), err
        docs.append(json.loads(Path(out[-1]).with_name("explore.json").read_text()))
    a, b = docs
    assert (a["schedules"], a["events"], a["findings_by_invariant"]) == (b["schedules"], b["events"],
                                                                      b["findings_by_invariant"])
    assert a["schedules"] == 300
    assert [(f["index"], f["story"]) for f in a["findings"]] == [(f["index"], f["story"]) for f in b["findings"]]


def test_leader_epoch_safe_finds_nothing_within_the_budget(tmp_path, capsys):
    code, out, err = run_cli(capsys, *SAFE, "--seed", "3", "--budget", "4", "--out", str(tmp_path), "--plain")
    assert code == 0, err
    doc = json.loads(Path(out[-1]).with_name("explore.json").read_text())
    assert doc["findings"] == [] and doc["findings_total"] == 0 and doc["exit_code"] == 0
    assert "no-acked-loss" in doc["promises"]
    assert doc["schedules"] > 0
    assert err[-1].startswith("highwater: NOTHING FOUND in ")


def test_an_error_in_the_search_leaves_no_run_directory(tmp_path, capsys, monkeypatch):
    import simulator.explore as sim_explore

    def boom(*_a, **_k):
        raise RuntimeError("the search broke")

    monkeypatch.setattr(sim_explore, "explore", boom)
    code, out, err = run_cli(capsys, "--budget", "1", "--out", str(tmp_path), "--plain")
    assert code == 255
    assert err[-1] == "highwater: internal error: RuntimeError: the search broke"
    assert out == [] and list((tmp_path / "explore").iterdir()) == []


# --- which finding is shrunk, and for what (issue 19) -------------------------------------------------

def _history(settings, steps):
    from simulator.world import World
    world = World(settings)
    for a in steps:
        world.apply(a)
    return world.history


def test_shrink_conditions_only_ask_what_the_found_schedule_meets():
    from simulator.actions import Action
    from simulator.explore import replay
    from simulator.world import SimSettings
    from harness.exploration import shrink_conditions
    hw = SimSettings(truncation="hw", acks=1, min_insync_replicas=1)
    # a write at a stale leader: a replay gap, and leader-epoch loses it as well
    stale = replay(hw, _history(hw, [Action("elect", "n2", arg=0), Action("produce", "n1")]), seed=1, index=0)
    also, shrunk_for, missing = shrink_conditions(hw, stale)
    assert (also, shrunk_for, missing) == (None, "same invariant only", ["faithful replay", "leader-epoch holds it"])
    # write, then elect n2: faithful, but every mode loses it
    trivial = _history(hw, [Action("produce", "n1"), Action("elect", "n2", arg=0)])
    also, shrunk_for, missing = shrink_conditions(hw, replay(hw, trivial, seed=1, index=0))
    assert (shrunk_for, missing) == ("faithful replay", ["leader-epoch holds it"])
    # write, elect n2, kill n2: n1 comes back as leader; hw truncation had already cut v1, leader-epoch keeps it
    hw_only = _history(hw, [Action("produce", "n1"), Action("elect", "n2", arg=0), Action("crash", "n2")])
    also, shrunk_for, missing = shrink_conditions(hw, replay(hw, hw_only, seed=1, index=0))
    assert (shrunk_for, missing) == ("faithful replay, leader-epoch holds it", [])
    assert also(list(hw_only)) is True and also(list(trivial)) is False
    # leader-epoch mode: only the faithfulness condition exists
    le = SimSettings(truncation="leader-epoch", acks=1, min_insync_replicas=1)
    le_trivial = _history(le, [Action("produce", "n1"), Action("elect", "n2", arg=0)])
    assert shrink_conditions(le, replay(le, le_trivial, seed=1, index=0))[1:] == ("faithful replay", [])


def test_hw_finding_is_shrunk_to_a_faithful_hw_only_story(tmp_path, capsys):
    code, out, err = run_cli(capsys, *UNSAFE, "--seed", "3", "--schedules", "300", "--shrink-budget", "10",
                             "--out", str(tmp_path), "--plain")
    assert code == 1, err
    doc = json.loads(Path(out[-1]).with_name("explore.json").read_text())
    f = doc["findings"][0]
    assert (f["invariant"], f["first_index"], f["index"]) == ("no-acked-loss", 1, 5)
    assert f["shrunk_for"] == "faithful replay, leader-epoch holds it"
    assert f["story"] == [
        "1. n1 appends v1 (acks=1): acknowledged at offset 0",
        "2. admin election: n3 leads epoch 1, ISR {n1,n2,n3}",
        "3. n3 is killed (SIGKILL): its log stays as it is",
        "4. (settle) deliver #1: metadata v5 (leader n3, epoch 1, ISR {n1,n2,n3}) reaches n1: n1 is follower of "
        "epoch 1 (n1 LEO 1->0)",
        "5. (settle) deliver #4: n3's registration reaches the controller: broker epoch 4; leader n1, epoch 2, "
        "ISR {n1,n2}"]
    text = (Path(out[-1]).parent / f["scenario"]).read_text()
    assert "NOT FAITHFUL" not in text and 'leader-epoch = []' in text and 'hw = ["lost-write"]' in text
    assert ("highwater: finding 1: no-acked-loss in schedule 5 (50 events; the first of "
            f"{doc['findings_by_invariant']['no-acked-loss']} that meets faithful replay, leader-epoch holds it); "
            "shrinking (up to 10 s)") in err
    assert "highwater:   schedule 5 of seed 3, 50 events, shrunk to 3 (kept: faithful replay, leader-epoch holds it):" in err


def test_a_finding_no_condition_can_keep_is_still_shrunk_and_says_so(tmp_path, capsys, monkeypatch):
    import harness.exploration as exploration
    monkeypatch.setattr(exploration, "PICK_LIMIT", 1)      # only the first finding (schedule 0 of seed 1)
    code, out, err = run_cli(capsys, *UNSAFE, "--seed", "1", "--schedules", "20", "--shrink-budget", "5",
                             "--out", str(tmp_path), "--plain")
    assert code == 1, err
    doc = json.loads(Path(out[-1]).with_name("explore.json").read_text())
    f = doc["findings"][0]
    assert (f["index"], f["first_index"], f["shrunk_for"]) == (0, 0, "same invariant only")
    assert f["shrunk_length"] == 6 and f["story"][4:6] == [
        "5. n1 appends v1 (acks=1): acknowledged at offset 0",
        "6. the controller fences n1, n3 (no heartbeat for over 3000 ms); leader n2, epoch 1, ISR {n2}"]
    assert ("highwater: finding 1: the found schedule does not meet faithful replay / leader-epoch holds it (so the "
            "shrink cannot keep it): shrunk for same invariant only") in err


def test_a_broken_promise_is_shrunk_before_expected_findings_and_labelled(monkeypatch):
    from simulator.explore import Finding
    from harness import exploration

    monkeypatch.setattr(exploration, "shrink_conditions", lambda settings, f: (None, "same invariant only", []))
    found = [Finding("no-acked-loss", "lost", 1, i, expected=True) for i in range(3)]
    found.append(Finding("no-acked-loss", "lost", 1, 90, expected=False))
    [(picked, _cond)] = exploration.pick_findings(None, found)
    assert (picked.index, picked.expected) == (90, False)
    doc = {"schedules": 100, "events": 5000, "explore_s": 1.0, "findings_by_invariant": {"no-acked-loss": 4},
           "unexpected_by_invariant": {"no-acked-loss": 1}, "findings": []}
    assert exploration.summary_line(doc).startswith("FOUND no-acked-loss (4 schedules, 1 not expected) in 100")
    doc["unexpected_by_invariant"] = {}
    assert exploration.summary_line(doc).startswith("FOUND no-acked-loss (4 schedules, expected) in 100")


def test_an_exploration_that_searched_nothing_is_unknown_not_valid():
    from harness.exploration import summary_line
    from harness.suite_expect import repeat_from_explore

    doc = {"schedules": 0, "events": 0, "explore_s": 0.2, "findings_by_invariant": {}, "findings": []}
    assert summary_line(doc).startswith("NOTHING SEARCHED (unknown) in 0 schedules")
    r = repeat_from_explore(1, 2, doc)
    assert r.valid is None and not r.checked
