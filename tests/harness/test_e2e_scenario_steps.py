"""End to end on real processes: the issue-18 scenario steps. One two-broker cluster plays flush, a partial
heal, degrade/restore, corrupt (a torn tail on a killed broker, cut by its recovery), elect, asserts on event logs, a step
skipped by `mode`, and an assertion that does not hold (exit 2, one line naming file:line, step, expected and seen; never "as expected"); the nemesis
history stays paired across the partial heal. The shipped scenarios/kafka-7415.toml plays in both modes."""
from __future__ import annotations

import pytest

from rundir import formats as runformat
from e2e_helpers import REPO, load_json, run_dir_from_stdout, run_highwater

STEPS = """name = "steps"
final_wait = 20
[cluster]
nodes = 2
[topic]
partitions = 1
replication_factor = 2
[broker]
min_insync_replicas = 1
flush = "never"
replica_lag_time_max_ms = 60000
[client]
acks = "all"
timeout = 3.0
[checker]
engine = "reference"
[expect]
leader-epoch = []

[[step]]
do = "wait"
leader = "n1"
isr = ["n1", "n2"]
[[step]]
do = "produce"
count = 2
[[step]]
do = "flush"
node = "n1"
partition = 0
[[step]]
do = "partition"
isolate = "n2"
from = ["n1"]
[[step]]
do = "heal"
drop = [["n1", "n2"]]
note = "partial: n2 -> n1 stays dropped"
[[step]]
do = "degrade"
drop = [["n1", "n2"]]
delay_ms = 20
[[step]]
do = "restore"
[[step]]
do = "heal"
[[step]]
do = "kill"
node = "n2"
[[step]]
do = "corrupt"
node = "n2"
how = "truncate"
partition = 0
seed = 1
[[step]]
do = "restart"
node = "n2"
[[step]]
do = "wait"
leader = "n1"
isr = ["n1", "n2"]
timeout = 20
[[step]]
do = "assert"
node = "n2"
event = "truncate"
match = {partition = 0, why = "recovery"}
count = 1
since = 11
[[step]]
do = "elect"
node = "n2"
[[step]]
do = "wait"
leader = "n2"
isr = ["n1", "n2"]
timeout = 20
[[step]]
do = "assert"
node = "n1"
event = "role"
match = {role = "follower"}
count = 1
since = 14
[[step]]
do = "assert"
node = "n1"
event = "truncate"
count = 7
mode = "hw"
note = "skipped: this run is leader-epoch"
[[step]]
do = "assert"
node = "n2"
event = "truncate"
count = 0
since = 14
[[step]]
do = "assert"
node = "n1"
event = "truncate"
match = {why = "hw"}
timeout = 1
note = "does not hold in leader-epoch mode"
[[step]]
do = "produce"
note = "never played"
"""


@pytest.mark.slow
def test_new_steps_on_real_processes(tmp_path):
    f = tmp_path / "steps.toml"
    f.write_text(STEPS)
    r = run_highwater("scenario", str(f), "--results-dir", str(tmp_path / "res"), "--plain", timeout=300)
    assert r.returncode == 2, r.stderr
    run_dir = run_dir_from_stdout(r.stdout)
    timeline = load_json(run_dir / "scenario.json")
    steps = {s["step"]: s for s in timeline["steps"]}
    assert [steps[n]["outcome"] for n in range(1, 20)] == ["ok"] * 16 + ["skipped", "ok", "failed"]
    assert 20 not in steps
    assert steps[3]["detail"].startswith("broker 1 flushed hw/0 to offset 2 (was 0)"), steps[3]
    assert steps[5]["detail"] == "healed n1->n2; still in force: n2->n1 (rest of window 1)"
    assert steps[10]["detail"].startswith("n2: "), steps[10]
    assert "1 matching of 1 'truncate' event ({partition=0, topic='hw', from=None, to=1, why='recovery'" \
        in steps[13]["detail"], steps[13]
    assert steps[14]["detail"].startswith("broker 2 leads hw/0 at epoch "), steps[14]
    assert "1 matching of 1 'role' event ({partition=0, role='follower', epoch=" in steps[16]["detail"], steps[16]
    assert steps[17]["detail"] == "plays only in hw mode, this run is leader-epoch"
    assert steps[18]["detail"].endswith(": 0 matching of 0 'truncate' events")
    line = [n for n, text in enumerate(STEPS.splitlines(), start=1) if text == "[[step]]"][18]
    failed = (f"{f}:{line}: step 19 (assert: node=n1, event=truncate, match={{'why': 'hw'}}, timeout=1) "
              f"did not play out: assertion failed after 1s: expected at least one 'truncate' event on n1 "
              f"with why='hw'; saw 0 matching of ")
    assert steps[19]["expected"] == "at least one 'truncate' event on n1 with why='hw'"
    assert steps[19]["seen"].startswith("0 matching of ")
    assert timeline["failed"].startswith(failed), timeline["failed"]
    assert line == 99
    assert "as expected" not in r.stderr
    assert "not judged: a step did not play out" in r.stderr
    assert r.stderr.splitlines()[-1].startswith("highwater: UNKNOWN (exit 2)")
    # the nemesis history: paired windows, the partial heal splits window 1 (its rest is window 2)
    ops = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.NEMESIS) if line.obj["type"] == "info"]
    got = [(o["f"], o["value"]["fault"], o["value"]["phase"], o["value"]["id"],
            o["value"].get("drop") or o["value"].get("links") or o["value"].get("healed") or o["value"].get("restored"))
           for o in ops]
    assert got == [("partition", "partition", "start", 1, [["n2", "n1"], ["n1", "n2"]]),
                   ("heal", "partition", "stop", 1, [["n1", "n2"]]),
                   ("heal", "partition", "start", 2, [["n2", "n1"]]),
                   ("degrade", "degrade", "start", 3, [["n1", "n2"]]),
                   ("restore", "degrade", "stop", 3, None),
                   ("heal", "partition", "stop", 2, None),
                   ("kill", "kill", "start", 4, None),
                   ("corrupt", "corrupt", "start", 5, None),
                   ("corrupt", "corrupt", "stop", 5, None),
                   ("restart", "kill", "stop", 4, None)]
    assert ops[7]["value"]["how"] == "truncate" and ops[7]["value"]["targets"] == ["n2"]
    assert ops[2]["value"]["rest_of"] == 1 and ops[3]["value"]["delay_ms"] == 20
    assert (run_dir / "report.html").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("mode, why", [pytest.param("hw", "hw", marks=pytest.mark.nightly),   # nightly replays it too
                                       ("leader-epoch", "leader-epoch")])
def test_kafka_7415_scenario_asserts_the_truncation_reason(tmp_path, mode, why):
    r = run_highwater("scenario", str(REPO / "scenarios" / "kafka-7415.toml"), "--truncation", mode,
                      "--results-dir", str(tmp_path / "res"), "--plain", timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"scenario expects no anomalies in {mode} mode; found none: as expected" in r.stderr
    timeline = load_json(run_dir_from_stdout(r.stdout) / "scenario.json")
    outcome = {s["step"]: s["outcome"] for s in timeline["steps"]}
    skipped = sorted(n for n, o in outcome.items() if o == "skipped")
    assert skipped == ([12, 13, 14] if mode == "hw" else [10])
    assert set(outcome.values()) == {"ok", "skipped"} and len(outcome) == 18
    details = {s["step"]: s["detail"] for s in timeline["steps"]}
    assert details[9].endswith("epochs [[0, 0], [1, 1]]")
    assert details[15].endswith(f"1 matching of 1 'truncate' event ({{partition=0, from=2, to=1, why={why!r}, "
                                f"flushed=1, log_start=0}})")


BACKGROUND = """name = "background-produce"
final_wait = 20
[cluster]
nodes = 2
[topic]
partitions = 1
replication_factor = 2
[broker]
min_insync_replicas = 2
replica_lag_time_max_ms = 60000
[client]
acks = "all"
timeout = 3.0
[checker]
engine = "reference"
[expect]
hw = []
leader-epoch = []

[[step]]
do = "wait"
leader = "n1"
isr = ["n1", "n2"]
[[step]]
do = "partition"
isolate = "n2"
from = ["n1"]
note = "n2 cannot fetch: the HW cannot pass the write"
[[step]]
do = "produce"
wait = false
timeout = 30
expect = "ok"
[[step]]
do = "sleep"
seconds = 2
[[step]]
do = "heal"
[[step]]
do = "await"
timeout = 20
"""


@pytest.mark.slow
def test_produce_without_waiting_returns_at_once_and_completes_after_the_heal(tmp_path):
    f = tmp_path / "background.toml"
    f.write_text(BACKGROUND)
    r = run_highwater("scenario", str(f), "--results-dir", str(tmp_path / "res"), "--plain", timeout=300)
    assert r.returncode == 0, r.stderr
    run_dir = run_dir_from_stdout(r.stdout)
    steps = {s["step"]: s for s in load_json(run_dir / "scenario.json")["steps"]}
    assert [steps[n]["outcome"] for n in range(1, 7)] == ["ok"] * 6 and None not in steps
    produce, heal, awaited = steps[3], steps[5], steps[6]
    assert produce["detail"] == "started 1 with acks=all in the background (timeout 30s)"
    assert produce["end_ns"] - produce["start_ns"] < 0.5e9          # returned at once, the write still waits
    assert awaited["detail"] == "step 3: ['ok']"
    # the history: the send's invoke during the produce step, its ok only after the heal
    sends = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.HISTORY) if line.obj["f"] == "send"]
    assert [o["type"] for o in sends] == ["invoke", "ok"]
    assert produce["start_ns"] <= sends[0]["time"] <= produce["end_ns"]
    assert sends[1]["time"] >= heal["start_ns"]
    assert sends[1]["value"]["offset"] == 0
