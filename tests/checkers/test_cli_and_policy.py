"""`highwater check`: exit codes, the one-line verdict and errors; which kinds fail a run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rundir import formats as rf
from checkers.check import CheckOptions, check_run
from checkers.policy import ConfigError, failing_kinds
from simulated_runs import RunBuilder

import checker_scenarios as sc

HIGHWATER = [str(Path(sys.executable).with_name("highwater"))]


def _run(tmp_path, *scenarios, config=None):
    b = RunBuilder(config=config)
    for p, s in enumerate(scenarios):
        s(b, p)
    return b.write(tmp_path)


def _check(*args):
    return subprocess.run(HIGHWATER + ["check", *map(str, args)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))


NO_LOGS = "not checked (the run directory holds no event logs): 20 of 21 protocol rules (all but read-uncommitted)"


@pytest.mark.parametrize("scenario,code,head", [
    (sc.clean, 0, f"highwater: VALID (exit 0): no anomalies · {NO_LOGS} · 1 partition · checked by reference in "),
    (sc.lost_write, 1, "highwater: INVALID (exit 1): lost-write=1 inconsistent-offset=1 realtime-order=1 · "
                       f"{NO_LOGS} · 1 partition · checked by reference in "),
    (sc.unrecovered, 2, "highwater: UNKNOWN (exit 2): no anomalies · 1 unknown reason: partition 0: not recovered: "
                        f"2 acknowledged sends not checked · {NO_LOGS} · 1 partition · checked by reference in ")])
def test_exit_codes_and_verdict_line(tmp_path, scenario, code, head):
    run = _run(tmp_path, scenario)
    r = _check(run, "--engine", "reference")
    assert r.returncode == code, r.stderr
    assert r.stdout.startswith(head), r.stdout
    assert json.loads((run / rf.RESULTS_JSON).read_text())["valid"] == {0: True, 1: False, 2: "unknown"}[code]


def test_bad_input_is_one_line_exit_254(tmp_path):
    run = _run(tmp_path, sc.clean)
    lines = (run / rf.HISTORY).read_text().splitlines(keepends=True)
    assert '"type": "ok"' in lines[5]
    lines[5] = lines[5].replace('"type": "ok"', '"type": "okay"')
    (run / rf.HISTORY).write_text("".join(lines))
    r = _check(run, "--engine", "reference")
    assert r.returncode == 254
    assert r.stderr == (f"highwater check: {run / rf.HISTORY}:6: field 'type' must be one of invoke, ok, fail, "
                        f"info, got 'okay'\n")
    r = _check(run, "--engine", "reference", "--lenient")     # skipped input: unknown, and says where
    assert r.returncode == 2, r.stderr
    assert r.stdout.startswith("highwater: UNKNOWN (exit 2): no anomalies · 1 unknown reason: history.jsonl:6: "
                               "malformed line skipped: field 'type' must be one of invoke, ok, fail, info, got "
                               f"'okay' · {NO_LOGS} · 1 partition · 1 malformed line skipped · checked by reference in "), r.stdout
    assert r.stdout.endswith(" s\n"), r.stdout


def test_unknown_kind_is_a_usage_error(tmp_path):
    r = _check(_run(tmp_path, sc.clean), "--engine", "reference", "--allow", "lost-writes")
    assert r.returncode == 254
    assert r.stderr.startswith("highwater check: --allow: unknown anomaly kind 'lost-writes'")


def test_allow_and_fail_on(tmp_path):
    run = _run(tmp_path, sc.duplicate)
    assert check_run(run, CheckOptions(engine="reference"))["valid"] is True
    res = check_run(run, CheckOptions(engine="reference", fail_on=["duplicate"]))
    assert res["valid"] is False and res["failed_kinds"] == ["duplicate"]
    run2 = _run(tmp_path / "b", sc.lost_write)
    res = check_run(run2, CheckOptions(engine="reference",
                                       allow=["lost-write", "inconsistent-offset", "realtime-order"]))
    assert res["valid"] is True and res["anomalies"]["lost-write"]["count"] == 1
    assert res["anomalies"]["lost-write"]["fails_run"] is False


def test_config_checker_allow_and_idempotence(tmp_path):
    run = _run(tmp_path, sc.duplicate, config={"producer": {"idempotent": True}})
    assert check_run(run, CheckOptions(engine="reference"))["valid"] is False
    run = _run(tmp_path / "b", sc.lost_write,
               config={"checker": {"allow": ["lost-write", "inconsistent-offset", "realtime-order"]}})
    assert check_run(run, CheckOptions(engine="reference"))["valid"] is True


def test_failing_kinds_defaults():
    kinds = failing_kinds({})
    assert "duplicate" not in kinds and "hw-regression-cross-epoch" not in kinds
    assert "group-reread" not in kinds          # at-least-once: a re-read is counted only
    assert set(kinds) == set(rf.ANOMALY_KINDS) - {"duplicate", "hw-regression-cross-epoch", "group-reread"}
    assert "duplicate" in failing_kinds({"idempotent": True})
    assert "duplicate" in failing_kinds({"client": {"idempotence": True, "kind": "kafka"}})   # as the harness records it
    assert "duplicate" not in failing_kinds({"client": {"idempotence": False}})
    with pytest.raises(ConfigError, match="config.checker.allow: unknown anomaly kind 'nope'"):
        failing_kinds({"checker": {"allow": ["nope"]}})


@pytest.mark.parametrize("config,fails", [
    ({}, True),                                             # not recorded: the harness's default, all
    ({"client": {"acks": "all"}}, True),                    # as the harness writes test.json
    ({"client": {"acks": 1}}, False), ({"client": {"acks": 0}}, False),
    ({"client": {"acks": "1"}}, False),
    ({"producer": {"acks": -1}}, True), ({"producer": {"acks": "-1"}}, True), ({"producer": {"acks": "ALL"}}, True),
    ({"producer": {"acks": "1"}}, False),
    ({"client": {"acks": "all"}, "producer": {"acks": 1}}, True),   # the harness's own record wins
    ({"client": {"acks": 1}, "checker": {"fail_on": ["realtime-order"]}}, True),
    ({"client": {"acks": "all"}, "checker": {"allow": ["realtime-order"]}}, False)])
def test_realtime_order_fails_with_acks_all_only(config, fails):
    assert ("realtime-order" in failing_kinds(config)) == fails
    # key-reorder follows the same acks, unless the configuration names it itself
    named = "realtime-order" in str(config.get("checker"))
    assert named or ("key-reorder" in failing_kinds(config)) == fails
    assert failing_kinds(config, fail_on=["realtime-order"]).count("realtime-order") == 1
    assert "realtime-order" not in failing_kinds(config, allow=["realtime-order"])


@pytest.mark.parametrize("acks,valid", [("all", False), (-1, False), (1, True), (0, True)])
def test_realtime_order_verdict_follows_acks(tmp_path, acks, valid):
    """The same history: with acks=all a send ordered after an acknowledged one at a lower offset fails the
    run; with acks=0 or 1 it is counted but the run is valid."""
    res = check_run(_run(tmp_path, sc.realtime_order, config={"client": {"acks": acks}}),
                    CheckOptions(engine="reference"))
    assert res["anomalies"]["realtime-order"]["count"] == 1
    assert res["anomalies"]["realtime-order"]["fails_run"] is (not valid)
    assert res["valid"] is valid


def test_statistics_and_availability(tmp_path):
    b = RunBuilder()
    b.send(1, 0, 1, offset=0)                          # outside
    fid = b.fault("start")
    b.send(1, 0, 2, outcome="fail")                    # inside
    b.send(1, 0, 3, offset=1)                          # inside
    b.fault("stop", fid)
    b.send(1, 0, 4, outcome="info")                    # outside
    b.poll(2, 0, 0, [(0, 1), (1, 3)], hw=2)            # outside
    b.final(0, [1, 3])
    res = check_run(b.write(tmp_path), CheckOptions(engine="reference"))
    assert res["stats"]["ops"] == {"final-read": {"ok": 1, "fail": 0, "info": 0},
                                   "poll": {"ok": 1, "fail": 0, "info": 0},
                                   "send": {"ok": 2, "fail": 1, "info": 1}}
    assert res["stats"]["availability"]["in_fault"] == 0.5
    assert res["stats"]["availability"]["outside_fault"] == round(2 / 3, 6)
    assert res["stats"]["availability"]["fault_windows"] == 1
    assert res["partitions"] == [{"partition": 0, "recovered": True, "reason": None, "hw": 2, "leader": "n1",
                                  "epoch": 1, "acked": 2, "committed": 2, "lost": 0}]


@pytest.mark.spark
def test_highwater_check_with_spark_end_to_end(tmp_path):
    run = _run(tmp_path, sc.clean, sc.lost_write, sc.poll_skip)
    r = _check(run, "--examples", "3")
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("highwater: INVALID (exit 1): lost-write=1 inconsistent-offset=1 poll-skip=2 "
                               f"realtime-order=1 · {NO_LOGS} · 3 partitions · checked by spark in "), r.stdout
    doc = json.loads((run / rf.RESULTS_JSON).read_text())
    assert doc["checker"]["engine"] == "spark" and doc["checker"]["master"].startswith("local[2] (shared driver sc://127.0.0.1:")
    assert doc["anomalies"]["lost-write"]["examples"][0]["value"] == 2


def test_unreachable_spark_connect_server_is_a_clear_error(tmp_path):
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _check(_run(tmp_path, sc.clean), "--spark-master", f"sc://127.0.0.1:{port}")
    assert r.returncode == 254, r.stderr
    *progress, last = r.stderr.splitlines()       # the steps that ended before it, then the one-line error
    assert last == (f"highwater check: --spark-master sc://127.0.0.1:{port}: no Spark Connect server answers "
                    f"at 127.0.0.1:{port} (Connection refused)")
    assert all(line.startswith("highwater: checking: reading input ") for line in progress), r.stderr
