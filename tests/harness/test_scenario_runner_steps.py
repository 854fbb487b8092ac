"""Unit tests for harness/scenario_runner.py's issue-18 logic, each with a real-process counterpart in
tests/harness/test_e2e_scenario_steps.py: how an event-log assert judges (match, count, since), how a
partial heal splits the nemesis windows, the epoch-cache judgement, and the capability check before start."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from clusters.base import ClusterError
from harness import scenario_runner as R


def events():
    return [{"ts": 10, "node": "n1", "event": "truncate", "partition": 0, "from": 3, "to": 2, "why": "hw"},
            {"ts": 20, "node": "n1", "event": "role", "partition": 0, "role": "follower", "epoch": 1},
            {"ts": 30, "node": "n1", "event": "truncate", "partition": 0, "from": 2, "to": 1, "why": "leader-epoch"},
            {"ts": 40, "node": "n1", "event": "truncate", "partition": 1, "from": 5, "to": 1, "why": "hw"}]


@pytest.mark.parametrize("args, since, ok, seen", [
    ({"event": "truncate", "match": {"why": "hw"}}, None, True, "2 matching of 3 'truncate' events"),
    ({"event": "truncate", "match": {"why": "hw"}, "count": 2}, None, True, "2 matching of 3 'truncate' events"),
    ({"event": "truncate", "match": {"why": "hw"}, "count": 1}, None, False, "2 matching of 3 'truncate' events"),
    ({"event": "truncate", "match": {"why": "hw"}}, 25, True, "1 matching of 2 'truncate' events"),
    ({"event": "truncate", "match": {"why": "hw", "partition": 0}}, 25, False, "0 matching of 2 'truncate' events"),
    ({"event": "truncate", "match": {"why": "hw"}, "count": 0}, 45, True, "0 matching of 0 'truncate' events"),
    ({"event": "truncate", "match": {"bytes_cut": None}}, None, False, "0 matching of 3 'truncate' events"),
    ({"event": "role", "match": {"epoch": 1}, "count": 1}, None, True, "1 matching of 1 'role' event"),
])
def test_event_assert_judgement(args, since, ok, seen):
    a = {"node": "n1", **args}
    got_ok, expected, got_seen = R._judge_events(events(), a, since)
    assert got_ok is ok
    assert got_seen.startswith(seen), got_seen


def test_event_assert_says_what_it_expected_and_lists_the_last_events():
    a = {"node": "n1", "event": "truncate", "match": {"why": "hw", "to": 1}, "count": 0, "since": 3}
    ok, expected, seen = R._judge_events(events(), a, 0)
    assert not ok
    assert expected == "no 'truncate' events on n1 with why='hw', to=1 since step 3 started"
    assert seen == "1 matching of 3 'truncate' events ({partition=1, from=5, to=1, why='hw'})"
    a = {"node": "n1", "event": "truncate", "match": {}, "count": 2}
    assert R._judge_events(events(), a, None)[2] == (
        "3 matching of 3 'truncate' events ({partition=0, from=3, to=2, why='hw'}; "
        "{partition=0, from=2, to=1, why='leader-epoch'}; {partition=1, from=5, to=1, why='hw'})")
    more = events() + [{"ts": 50, "event": "truncate", "partition": 2, "to": 0}]
    assert R._judge_events(more, {"node": "n1", "event": "truncate", "match": {"why": "x"}}, None)[2] == (
        "0 matching of 4 'truncate' events (last {partition=0, from=2, to=1, why='leader-epoch'}; "
        "{partition=1, from=5, to=1, why='hw'}; {partition=2, to=0})")
    assert R._expected({"node": "n1", "event": "truncate", "match": {}, "count": 2}) == \
        "exactly 2 'truncate' events on n1"


def test_epochs_judgement():
    a = {"node": "n2", "epochs": [[0, 0], [1, 1]], "partition": 0}
    assert R._judge_epochs({("hw", 0): {"epochs": [[0, 0], [1, 1]]}}, "hw", a) == (
        True, "n2's epoch cache for partition 0 = [[0, 0], [1, 1]]", "epochs [[0, 0], [1, 1]]")
    assert R._judge_epochs({("hw", 0): {"epochs": [[0, 0]]}}, "hw", a)[::2] == (False, "epochs [[0, 0]]")
    assert R._judge_epochs({("hw", 0): {"leo": 1}}, "hw", a)[2] == (
        "n2's DESCRIBE_REPLICAS answer has no 'epochs' (this broker does not report its epoch cache)")
    assert R._judge_epochs(None, "hw", a)[2] == "n2 did not answer DESCRIBE_REPLICAS"
    assert R._judge_epochs({}, "hw", a)[2] == "n2 holds no replica of hw/0"


class Recorder:
    """The runner's history (invoke/complete) and cluster (heal/restore), recorded."""

    def __init__(self):
        self.ops, self.calls = [], []

    def new_process(self):
        return 1

    def invoke(self, process, f, value):
        pass

    def complete(self, process, typ, f, value, error=None):
        self.ops.append((f, value["fault"], value["phase"], value["id"],
                         {k: v for k, v in value.items() if k not in ("fault", "phase", "id", "targets", "detail")}))

    def heal(self, pairs=None):
        self.calls.append(("heal", pairs))
        return "healed"

    def drop(self, pairs):
        self.calls.append(("drop", pairs))
        return "dropping"


def runner(rec):
    session = SimpleNamespace(cluster=rec, history=rec)
    scenario = SimpleNamespace(config=SimpleNamespace(topic=SimpleNamespace(name="hw")))
    return R.ScenarioRunner(session, scenario)


def test_a_partial_heal_splits_the_windows_it_touches():
    rec = Recorder()
    r = runner(rec)
    r.do_step(SimpleNamespace(do="partition", args={"drop": [("n1", "n2"), ("n2", "n1")]}))
    r.do_step(SimpleNamespace(do="partition", args={"drop": [("n1", "n2"), ("n3", "n1")]}))
    assert r.do_step(SimpleNamespace(do="heal", args={"drop": [("n3", "n2")]})) == "healed"   # no window had it
    assert len(rec.ops) == 2
    detail = r.do_step(SimpleNamespace(do="heal", args={"drop": [("n1", "n2")]}))
    assert detail == ("healed; still in force: n2->n1 (rest of window 1); still in force: n3->n1 "
                      "(rest of window 2)")
    assert rec.ops[2:] == [("heal", "partition", "stop", 1, {"healed": [["n1", "n2"]]}),
                           ("heal", "partition", "stop", 2, {"healed": [["n1", "n2"]]}),
                           ("heal", "partition", "start", 3, {"drop": [["n2", "n1"]], "rest_of": 1}),
                           ("heal", "partition", "start", 4, {"drop": [["n3", "n1"]], "rest_of": 2})]
    assert r.faults.pairs_of("partition") == [(3, [("n2", "n1")]), (4, [("n3", "n1")])]
    r.do_step(SimpleNamespace(do="heal", args={"drop": [("n3", "n1")]}))
    assert rec.ops[-1] == ("heal", "partition", "stop", 4, {"healed": [["n3", "n1"]]})
    r.do_step(SimpleNamespace(do="heal", args={}))
    assert rec.ops[-1] == ("heal", "partition", "stop", 3, {})
    assert r.faults.pairs_of("partition") == []
    # every start has exactly one stop; the cluster was asked once per heal step
    starts = sorted(o[3] for o in rec.ops if o[2] == "start")
    assert starts == sorted(o[3] for o in rec.ops if o[2] == "stop") == [1, 2, 3, 4]
    assert [c for c in rec.calls if c[0] == "heal"] == [("heal", [("n3", "n2")]), ("heal", [("n1", "n2")]),
                                                        ("heal", [("n3", "n1")]), ("heal", None)]


class EventLess:
    """A backend with the core interface only (nothing to assert on, nothing to corrupt)."""
    backend_name = "bare"


def test_capabilities_are_checked_before_start_and_skipped_steps_are_not():
    steps = [SimpleNamespace(do="assert", args={"node": "n1", "epochs": [[0, 0]]}, plays_in=lambda m: True),
             SimpleNamespace(do="assert", args={"node": "n1", "event": "truncate"}, plays_in=lambda m: m == "hw")]
    config = SimpleNamespace(broker=SimpleNamespace(truncation="leader-epoch"))
    R.ScenarioSteps(SimpleNamespace(steps=steps, config=config)).set_up(SimpleNamespace(cluster=EventLess()))
    config.broker.truncation = "hw"
    with pytest.raises(ClusterError) as err:
        R.ScenarioSteps(SimpleNamespace(steps=steps, config=config)).set_up(SimpleNamespace(cluster=EventLess()))
    assert str(err.value) == "the bare backend cannot inject fault 'assert': it is not EventLogs (it has no events)"
    corrupt = [SimpleNamespace(do="corrupt", args={"node": "n1", "how": "bitflip", "seed": 0}, plays_in=lambda m: True)]
    with pytest.raises(ClusterError, match="cannot inject fault 'corrupt': it is not Corruptible"):
        R.ScenarioSteps(SimpleNamespace(steps=corrupt, config=config)).set_up(SimpleNamespace(cluster=EventLess()))


class FailingNet(Recorder):
    """drop and degrade put some rules in, then fail (as a backend failing partway does); heal/restore work."""
    backend_name = "failing"

    def drop(self, pairs):
        self.calls.append(("drop", pairs))
        raise ClusterError("drop: iptables failed on the second rule")

    def degrade(self, pairs, *, delay_ms, jitter_ms=0.0, loss_pct=0.0):
        self.calls.append(("degrade", pairs))
        raise ClusterError("degrade: iptables failed on the second rule")

    def restore(self, pairs=None):
        self.calls.append(("restore", pairs))
        return "restored"


@pytest.mark.parametrize("do, fault, stop", [("partition", "partition", "heal"), ("degrade", "degrade", "restore")])
def test_a_window_whose_start_failed_partway_is_still_closed_and_its_rules_removed(do, fault, stop):
    rec = FailingNet()
    r = runner(rec)
    r.session.problem = lambda what, exc: rec.calls.append(("problem", what))
    args = {"drop": [("n1", "n2"), ("n2", "n1")], "delay_ms": 50, "jitter_ms": 0, "loss_pct": 0}
    with pytest.raises(ClusterError):
        r.do_step(SimpleNamespace(do=do, args=args))
    assert rec.ops[0][:4] == (do, fault, "start", 1)           # recorded as started (failed)
    r.close_faults()
    assert rec.ops[1][:4] == (stop, fault, "stop", 1)          # and stopped by close_faults
    assert rec.calls == [("drop" if do == "partition" else do, [("n1", "n2"), ("n2", "n1")]), (stop, None)]
    # a degradation whose window was closed already is still removed at the end (restore(None))
    rec2 = FailingNet()
    r2 = runner(rec2)
    r2.faults.installed.add(fault)
    r2.close_faults()
    assert rec2.calls == [(stop, None)] and rec2.ops == []
