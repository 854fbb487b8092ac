"""The one run lifecycle (harness/lifecycle.py) with a stand-in cluster, checker and final phase: the
order of the phases and the middle's hooks, teardown whatever happens, and the exit code of each way a
run can end. (The real lifecycle runs in the e2e tests of run, scenario and suite.)"""
from __future__ import annotations

import pytest

from harness import config as config_mod
from harness import lifecycle
from rundir.exits import EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID


class FakeCluster:
    def __init__(self, calls):
        self.calls = calls

    def check_faults(self, faults):
        self.calls.append(("check_faults", list(faults)))

    def start(self):
        self.calls.append("start")

    def layout(self):
        return {"backend": "local", "nodes": {}}

    def evidence(self):
        from rundir.evidence import declare
        return declare({"ack"})

    def stop_all(self):
        self.calls.append("stop_all")

    def collect(self, run_dir):
        self.calls.append("collect")

    def teardown(self):
        self.calls.append("teardown")


class Middle(lifecycle.Middle):
    what, failure = "probe", "probe failed"

    def __init__(self, calls, *, set_up_error=None, play_error=None, unfinished=None, interrupt=False):
        self.calls, self.set_up_error, self.play_error = calls, set_up_error, play_error
        self._unfinished, self.interrupt = unfinished, interrupt

    def faults(self, session):
        return ["kill"]

    def set_up(self, session):
        self.calls.append("set_up")
        if self.set_up_error:
            raise self.set_up_error

    def play(self, session):
        self.calls.append("play")
        if self.interrupt:
            session.request_interrupt("SIGINT")
        if self.play_error:
            raise self.play_error

    def wind_down(self, session):
        self.calls.append("wind_down")

    def unfinished(self):
        return self._unfinished


@pytest.fixture
def world(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(lifecycle.verdict, "prepare_checker", lambda **_kw: None)
    monkeypatch.setattr(lifecycle.backends, "make_cluster", lambda *_a, **_kw: FakeCluster(calls))
    monkeypatch.setattr(lifecycle.RunSession, "wait_topic_ready", lambda self, _t: calls.append("ready"))

    def final(session, *, reads):
        calls.append(("final", reads))
        session.final = {"partitions": []}
        return session.final
    monkeypatch.setattr(lifecycle.final_phase, "run", final)

    def check(run_dir, **_kw):
        calls.append("check")
        return {"valid": world_state["valid"]}, None
    world_state = {"valid": True}
    monkeypatch.setattr(lifecycle.verdict, "run_checker", check)
    monkeypatch.setattr(lifecycle.verdict, "write_reports", lambda *_a: calls.append("report") or [])
    cfg = config_mod.TestConfig(results_dir=str(tmp_path / "results"))
    return cfg, calls, world_state


def test_the_phases_in_order_and_the_checker_verdict(world):
    cfg, calls, state = world
    outcome = lifecycle.run(cfg, Middle(calls))
    assert calls == [("check_faults", ["kill"]), "set_up", "start", "ready", "play", "wind_down",
                     ("final", True), "stop_all", "collect", "teardown", "check", "report"]
    assert outcome.exit_code == EXIT_VALID and outcome.problems == [] and not outcome.interrupted
    assert (outcome.run_dir / "test.json").exists() and (outcome.run_dir / "harness.log").exists()
    import json
    assert json.loads((outcome.run_dir / "test.json").read_text())["evidence"]["event_types"] == ["ack"]
    calls.clear()
    state["valid"] = False
    assert lifecycle.run(cfg, Middle(calls)).exit_code == EXIT_INVALID


def test_a_setup_error_tears_down_and_is_a_usage_error(world):
    cfg, calls, _ = world
    outcome = lifecycle.run(cfg, Middle(calls, set_up_error=ValueError("no schedule")))
    assert outcome.exit_code == EXIT_USAGE
    assert outcome.problems == ["cannot set up the probe: no schedule"]
    assert calls[-3:] == ["stop_all", "collect", "teardown"] and "play" not in calls


def test_an_error_in_the_middle_still_heals_and_tears_down_but_is_not_checked(world):
    cfg, calls, _ = world
    outcome = lifecycle.run(cfg, Middle(calls, play_error=RuntimeError("boom")))
    assert outcome.exit_code == EXIT_INTERNAL
    assert outcome.problems == ["probe failed: RuntimeError: boom"]
    assert calls[-7:] == ["play", "wind_down", ("final", False), "stop_all", "collect", "teardown", "report"]


def test_an_unfinished_middle_is_unknown_with_its_reason_first(world):
    cfg, calls, _ = world
    outcome = lifecycle.run(cfg, Middle(calls, unfinished="step 3 did not play out"))
    assert outcome.exit_code == EXIT_UNKNOWN and outcome.problems[0] == "step 3 did not play out"
    assert "check" in calls


def test_an_interrupt_skips_the_check_and_is_unknown(world):
    cfg, calls, _ = world
    outcome = lifecycle.run(cfg, Middle(calls, interrupt=True))
    assert outcome.exit_code == EXIT_UNKNOWN and outcome.interrupted
    assert "check" not in calls and calls[-4:] == ["stop_all", "collect", "teardown", "report"]
