"""End to end on a real one-broker cluster: the scenario actions stop (SIGTERM: a clean shutdown flushes),
power-loss (SIGKILL of a broker with flush=never in the power-loss emulation: the unflushed tail is
gone), restart, pause and resume really act on the process, and the checker sees exactly the loss."""
from __future__ import annotations

import pytest

from rundir import formats as runformat
from e2e_helpers import (N1_LEADS_THEN_TWO_SENDS, ONE_BROKER_SCENARIO, found_kinds,
                         load_json, run_dir_from_stdout, run_highwater)

SCENARIO = '\nname = "actions"\n' + ONE_BROKER_SCENARIO + """flush = "never"
power_loss = true
[client]
acks = 1
[checker]
engine = "reference"
[expect]
leader-epoch = ["lost-write"]

""" + N1_LEADS_THEN_TWO_SENDS + """note = "values 0, 1"
[[step]]
do = "stop"
node = "n1"
note = "clean shutdown flushes them"
[[step]]
do = "restart"
node = "n1"
[[step]]
do = "wait"
leader = "n1"
hw = 2
[[step]]
do = "produce"
count = 2
note = "values 2, 3: never flushed"
[[step]]
do = "wait"
node = "n1"
leo = 4
[[step]]
do = "power-loss"
node = "n1"
[[step]]
do = "restart"
node = "n1"
[[step]]
do = "pause"
node = "n1"
[[step]]
do = "resume"
node = "n1"
[[step]]
do = "wait"
leader = "n1"
node = "n1"
leo = 2
"""


@pytest.mark.slow
def test_stop_power_loss_pause_on_real_processes(tmp_path):
    f = tmp_path / "actions.toml"
    f.write_text(SCENARIO)
    r = run_highwater("scenario", str(f), "--results-dir", str(tmp_path / "res"), timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    timeline = load_json(run_dir / "scenario.json")
    assert timeline["failed"] is None, r.stderr
    details = {s["do"]: s["detail"] for s in timeline["steps"]}
    assert details["stop"].startswith("SIGTERM n1") and "clean shutdown" in details["stop"]
    assert details["power-loss"].startswith("SIGKILL n1")
    assert details["pause"].startswith("SIGSTOP n1") and details["resume"].startswith("SIGCONT n1")
    assert r.returncode == 1, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert found_kinds(results) == ["lost-write"]
    assert results["anomalies"]["lost-write"]["count"] == 2
    lost = sorted(e["value"] for e in results["anomalies"]["lost-write"]["examples"])
    assert lost == [2, 3]
    dump = [line.obj for line in runformat.iter_jsonl(run_dir / "replicas" / "n1" / "p0.jsonl")]
    assert [d["value"] for d in dump if d["kind"] == "record"] == [0, 1]
    nemesis = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.NEMESIS) if line.obj["type"] == "info"]
    assert [(o["f"], o["value"]["fault"], o["value"]["phase"]) for o in nemesis] == [
        ("stop", "kill", "start"), ("restart", "kill", "stop"),
        ("power-loss", "power-loss", "start"), ("restart", "power-loss", "stop"),
        ("pause", "pause", "start"), ("resume", "pause", "stop")]
