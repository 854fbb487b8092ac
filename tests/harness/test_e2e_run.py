"""End to end on real processes: `highwater run` with kill and partition faults.

- a 16 s run of the keyed workload in leader-epoch mode with the safe configuration (acks=all,
  min.insync.replicas=2, no unclean election) is valid, its keys' order checked, and every partition
  recovers in the final phase;
- a run interrupted by SIGINT or SIGTERM heals and stops everything it started (no processes, no
  firewall chain left) and keeps a parseable history whose operations all completed.
"""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from rundir import formats as runformat
from e2e_helpers import (REPO, sigterm_when_checking, env, firewall_leftovers, found_kinds, highwater_argv, load_json,
                                       processes_mentioning, run_dir_from_stdout, run_highwater)


def check_history(path: Path) -> list[dict]:
    ops = [line.obj for line in runformat.iter_jsonl(path)]
    for i, op in enumerate(ops):
        runformat.validate_op(op, path, i + 1)
        assert op["index"] == i
    open_ops = {}
    for op in ops:
        if op["process"] in (runformat.HARNESS_PROCESS,):
            continue
        key = op["process"]
        if op["type"] == "invoke":
            assert key not in open_ops, f"process {key} has two operations in flight"
            open_ops[key] = op
        else:
            if key == runformat.NEMESIS_PROCESS:
                open_ops.pop(key, None)
                continue
            assert key in open_ops and open_ops.pop(key)["f"] == op["f"]
    assert [k for k in open_ops if k != runformat.NEMESIS_PROCESS] == []
    return ops


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.spark
def test_safe_leader_epoch_chaos_run_is_valid(tmp_path):
    # seed 11 draws a partition at 4 s and kills at 8 and 12 s (the 30 s it ran before added four kills)
    r = run_highwater("run", "--time-limit", "16", "--workload", "keyed", "--keys", "12",
                      "--nemesis", "kill,partition", "--nemesis-interval", "4",
                      "--truncation", "leader-epoch", "--acks", "all", "--min-insync-replicas", "2",
                      "--no-unclean-election", "--seed", "11", "--results-dir", str(tmp_path), "--plain",
                      timeout=600)
    run_dir = run_dir_from_stdout(r.stdout)
    assert r.returncode == 0, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert results["valid"] is True and found_kinds(results) == []
    final = load_json(run_dir / runformat.FINAL_JSON)
    assert final["timed_out"] is False
    assert [p["recovered"] for p in final["partitions"]] == [True, True, True]
    ops = check_history(run_dir / runformat.HISTORY)
    sends_ok = [o for o in ops if o["f"] == "send" and o["type"] == "ok"]
    assert len(sends_ok) > 500
    # the keyed workload: each send's key, always to the same partition, and the order of the keys checked
    assert {o["value"]["key"] for o in sends_ok} == set(range(12))
    assert all(o["value"]["partition"] == o["value"]["key"] % 3 for o in ops if o["f"] == "send")
    assert results["anomalies"]["key-reorder"]["status"] == "checked"
    faults = {o["value"]["fault"] for o in ops if o["process"] == "nemesis"}
    assert faults == {"kill", "partition"}, faults
    test = load_json(run_dir / runformat.TEST_JSON)
    assert test["seed"] == 11 and test["config"]["broker"]["truncation"] == "leader-epoch"
    # the sizes of the files collected, recorded once collection succeeded: 4 event logs, 9 dumps
    collected = test["evidence"]["collected"]
    assert collected == {str(f.relative_to(run_dir)): f.stat().st_size
                         for f in [*run_dir.glob("nodes/*/broker.log"), *run_dir.glob("replicas/*/p*.jsonl")]}
    assert len([f for f in collected if f.endswith("broker.log")]) == 4 and len(collected) == 13
    assert (tmp_path / "latest").resolve() == run_dir.resolve()
    assert processes_mentioning(str(run_dir)) == []
    assert firewall_leftovers(test["run_id"]) == []


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_run_leaves_nothing_behind(tmp_path, sig):
    proc = subprocess.Popen(highwater_argv("run", "--time-limit", "120", "--nemesis", "partition,kill",
                                           "--nemesis-interval", "1.5", "--results-dir", str(tmp_path),
                                           "--checker", "reference", "--plain"),
                            cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        history = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:           # until the run is well under way, with a fault
            found = list(tmp_path.glob("chaos/*/nemesis.jsonl"))
            if found and found[0].stat().st_size > 0:
                history = found[0].parent / runformat.HISTORY
                break
            time.sleep(0.2)
        assert history is not None, "the run never injected a fault"
        time.sleep(1.0)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, stderr
    assert f"{signal.Signals(sig).name}: stopping the run" in stderr
    run_dir = run_dir_from_stdout(stdout)
    assert run_dir.resolve() == history.parent.resolve()
    ops = check_history(history)
    assert any(o["f"] == "send" and o["type"] == "ok" for o in ops)
    nemesis = [o for o in ops if o["process"] == "nemesis" and o["type"] == "info"]
    starts = {o["value"]["id"] for o in nemesis if o["value"]["phase"] == "start"}
    stops = {o["value"]["id"] for o in nemesis if o["value"]["phase"] == "stop"}
    assert starts == stops, "a fault was left without its stop"
    test = load_json(run_dir / runformat.TEST_JSON)
    assert processes_mentioning(str(run_dir)) == []
    assert firewall_leftovers(test["run_id"]) == []


@pytest.mark.slow
def test_sigterm_during_the_check_exits_2(tmp_path):
    code, stdout, stderr = sigterm_when_checking("run", "--time-limit", "3", "--nemesis", "none", "--results-dir",
                                                 str(tmp_path), "--checker", "reference", "--plain", timeout=120)
    assert "SIGTERM: stopping the run" in stderr
    assert code == 2, stderr
    verdict = [line for line in stderr.splitlines() if line.startswith("highwater: ") and "(exit " in line]
    assert verdict and verdict[-1].startswith("highwater: UNKNOWN (exit 2): ") and "interrupted" in verdict[-1]
    run_dir = Path(stdout.strip().splitlines()[-1]).parent
    assert processes_mentioning(str(run_dir)) == []
