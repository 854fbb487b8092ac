"""Packages against real brokers (a controller and three `python -m broker` processes, real iptables and
signals, the real admin client): the state each waits for really comes before its next step (the
controller's event log shows the ISR shrink before the leader is fenced for its death), and stop() in the
middle of one undoes it all."""
from __future__ import annotations

import json
import subprocess
import threading

import pytest

from broker.client import Admin, ClientError, Producer
from clusters.base import ClusterSpec, NodeTimeouts
from clusters.local import LocalCluster
from clusters.run_registry import Registry, proc_state
from nemesis import Aim, FaultPlan, Nemesis
from polling import wait_until
from rundir.history import History

pytestmark = [pytest.mark.slow, pytest.mark.root]


@pytest.fixture
def cluster(tmp_path):
    spec = ClusterSpec(f"pkgreal-{tmp_path.name}", tmp_path / "run", brokers=3,
                       broker_settings={"min_insync_replicas": 2, "replica_lag_time_max_ms": 1000,
                                        "power_loss": True},
                       controller_settings={"broker_session_timeout_ms": 1500,
                                            "topics": [{"name": "hw", "partitions": 1, "replication_factor": 3}]})
    c = LocalCluster(spec, registry=Registry(tmp_path / "registry"), timeouts=NodeTimeouts(ready_s=30))
    c.check_faults(["partition"])
    c.start()
    pids = [c.pid(n) for n in c.nodes()]
    yield c
    c.teardown()
    assert all(proc_state(p) is None for p in pids if p)


def _admin(c):
    return Admin(controller=(c.controller().host, c.controller().port), timeout_s=1.0)


def _full_isr(c):
    admin = _admin(c)
    try:
        return wait_until(lambda: (lambda p: p if p.leader is not None and len(p.isr) == 3 else None)(
            admin.describe("hw")[0]), timeout=20, what="a leader with the full ISR")
    finally:
        admin.close()


class Writes:
    """A producer appending to partition 0 all along (acks=all: refused or timed out while the ISR is short):
    an idle partition's followers count as caught up, so its ISR never shrinks."""
    def __init__(self, c):
        self.producer = Producer((c.controller().host, c.controller().port), acks="all", timeout_s=0.5)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        n = 0
        while not self.done.is_set():
            n += 1
            try:
                self.producer.send("hw", 0, [str(n).encode()])
            except ClientError:
                self.done.wait(0.05)

    def stop(self):
        self.done.set()
        self.thread.join(10)
        self.producer.close()


def _ops(tmp_path):
    ops = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    starts = [o["value"]["id"] for o in ops if o["type"] == "info" and o["value"]["phase"] == "start"]
    stops = [o["value"]["id"] for o in ops if o["type"] == "info" and o["value"]["phase"] == "stop"]
    assert sorted(starts) == sorted(stops)
    return [o for o in ops if o["type"] == "info"]


def _rules(c):
    prefix = c.brokers()["n1"].host.rsplit(".", 1)[0] + "."
    out = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if ln.startswith("-A HW-") and prefix in ln]


def _schedule(tmp_path, **step):
    p = tmp_path / "schedule.toml"
    p.write_text("[[step]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in step.items()))
    return p


def _play_one(cluster, tmp_path, fault, what, **step):
    """Play a one-step schedule of `fault` (at 0.3 s, duration 1 s, `step`'s other keys) until its one
    window has stopped and nothing is active; the nemesis, for its stats."""
    history = History(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, history,
                  FaultPlan(schedule=_schedule(tmp_path, at=0.3, fault=fault, duration=1.0, **step)),
                  aim=Aim(topic="hw"), admin_factory=lambda: _admin(cluster))
    try:
        nem.start()
        wait_until(lambda: nem.stats.stopped == 1 and not nem.active(), timeout=30, what=what)
    finally:
        nem.stop()
        history.close()
    return nem


def test_isolate_then_kill_leader_kills_the_leader_only_after_its_isr_shrank_to_it(cluster, tmp_path):
    leader = f"n{_full_isr(cluster).leader}"
    history = History(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, history,
                  FaultPlan(schedule=_schedule(tmp_path, at=0.3, fault="isolate-then-kill-leader", partition=0,
                                               duration=1.0)),
                  aim=Aim(topic="hw"), admin_factory=lambda: _admin(cluster))
    writes = Writes(cluster)
    try:
        nem.start()
        # the package ends after the heal and the restart, once the cluster is whole again
        wait_until(lambda: nem.stats.stopped == 2 and not nem.active(), timeout=30, what="the package's end")
    finally:
        nem.stop()
        writes.stop()
        history.close()
    ops = _ops(tmp_path)
    assert [(o["f"], o["value"]["step"], o["value"]["targets"]) for o in ops] == [
        ("partition", "isolate-followers", [leader]), ("kill", "kill-leader", [leader]),
        ("heal", "isolate-followers", [leader]), ("restart", "kill-leader", [leader])]
    kill = ops[1]["value"]
    assert kill["state"]["isr"] == [leader] and kill["state"]["leader"] == leader
    assert nem.stats.skipped == [] and nem.stats.errors == []
    # the controller's own log: the ISR shrank to the leader, and only then was it fenced (its death)
    events = cluster.events("c0")
    lid = int(leader[1:])
    shrunk = [i for i, e in enumerate(events) if e["event"] == "isr-change" and e["isr"] == [lid]]
    fenced = [i for i, e in enumerate(events) if e["event"] == "fenced" and e["broker"] == lid]
    assert shrunk and fenced and shrunk[0] < fenced[0], events
    # and the leader's own log says it shrank the ISR before its restart
    own = [e["event"] for e in cluster.events(leader) if e["event"] in ("isr-change", "start")]
    assert own.index("start", 1) > own.index("isr-change"), own
    # whole again: everyone up, no drop rule left, the full ISR back
    assert _rules(cluster) == [] and all(cluster.is_running(n) for n in cluster.nodes())
    _full_isr(cluster)


def test_stop_in_the_middle_of_a_power_cut_package_heals_and_restarts_everything(cluster, tmp_path):
    leader = f"n{_full_isr(cluster).leader}"
    history = History(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, history,
                  FaultPlan(schedule=_schedule(tmp_path, at=0.3, fault="isolate-then-power-loss-leader", duration=600)),
                  aim=Aim(topic="hw"), admin_factory=lambda: _admin(cluster))
    writes = Writes(cluster)
    try:
        nem.start()
        wait_until(lambda: not cluster.is_running(leader), timeout=20, what="the power cut of the leader")
        assert len(nem.active()) == 2
    finally:
        nem.stop()
        writes.stop()
        history.close()
    assert nem.active() == [] and _rules(cluster) == []
    assert all(cluster.is_running(n) and cluster.process_state(n) in ("S", "R") for n in cluster.nodes())
    ops = _ops(tmp_path)
    assert [(o["f"], o["value"]["fault"]) for o in ops] == [
        ("partition", "partition"), ("power-loss", "power-loss"), ("restart", "power-loss"), ("heal", "partition")]
    assert ops[1]["value"]["state"]["isr"] == [leader]
    _full_isr(cluster)


def test_pause_leader_until_fenced_resumes_it_right_after_the_controller_fenced_it(cluster, tmp_path):
    leader = f"n{_full_isr(cluster).leader}"
    _play_one(cluster, tmp_path, "pause-leader-until-fenced", "the resume", partition=0)
    pause, resume = _ops(tmp_path)
    assert (pause["f"], resume["f"], pause["value"]["targets"]) == ("pause", "resume", [leader])
    assert resume["value"]["detail"].startswith("fenced after "), resume
    lid = int(leader[1:])
    assert any(e["event"] == "fenced" and e["broker"] == lid for e in cluster.events("c0"))
    after = _full_isr(cluster)
    assert after.epoch > pause["value"]["state"]["epoch"]
    assert cluster.process_state(leader) in ("S", "R")


def test_isolate_leader_until_replaced_heals_once_another_broker_leads(cluster, tmp_path):
    first = _full_isr(cluster)
    leader = f"n{first.leader}"
    _play_one(cluster, tmp_path, "isolate-leader-until-replaced", "the heal")
    cut, heal = _ops(tmp_path)
    assert (cut["f"], heal["f"], cut["value"]["targets"], cut["value"]["shape"]) == ("partition", "heal", [leader],
                                                                                      "leader")
    assert sorted(map(tuple, cut["value"]["drops"])) == sorted(
        [(leader, n) for n in cluster.nodes() if n != leader] + [(n, leader) for n in cluster.nodes() if n != leader])
    assert heal["value"]["detail"].startswith("replaced after "), heal
    # the controller elected another leader while the old one was cut off, before the heal
    events = cluster.events("c0")
    moved = [e for e in events if e["event"] == "leader-change" and e["partition"] == 0
             and e["leader"] not in (None, first.leader)]
    assert moved and moved[0]["epoch"] > first.epoch
    assert _rules(cluster) == [] and _full_isr(cluster).epoch > first.epoch


def test_bounce_leader_restarts_the_leader_before_the_controller_missed_a_heartbeat(cluster, tmp_path):
    first = _full_isr(cluster)
    leader = f"n{first.leader}"
    _play_one(cluster, tmp_path, "bounce-leader", "the restart")
    kill, restart = _ops(tmp_path)
    assert (kill["f"], restart["f"], kill["value"]["targets"]) == ("kill", "restart", [leader])
    assert kill["value"]["step"] == "bounce-leader" and kill["value"]["state"]["leader"] == leader
    assert restart["time"] - kill["time"] < 1_500_000_000   # ns: well inside the 1.5-s session timeout
    # the controller learnt of the restart from the new registration, not from missed heartbeats
    lid = int(leader[1:])
    fenced = [e for e in cluster.events("c0") if e["event"] == "fenced" and e["broker"] == lid]
    assert fenced and fenced[0]["why"] == "re-registered", fenced
    assert _full_isr(cluster).epoch > first.epoch


def test_move_leader_hands_the_leadership_to_another_isr_member_through_the_controller(cluster, tmp_path):
    first = _full_isr(cluster)
    leader = f"n{first.leader}"
    nem = _play_one(cluster, tmp_path, "move-leader", "the move")
    elect, elected = _ops(tmp_path)
    assert (elect["f"], elected["f"], elect["value"]["fault"]) == ("elect", "elected", "elect")
    new = elect["value"]["targets"][0]
    assert new != leader and elect["value"]["from"] == leader and new in [f"n{b}" for b in first.isr]
    assert "error" not in elect and elected["value"]["detail"].startswith("moved after "), (elect, elected)
    moved = [e for e in cluster.events("c0") if e["event"] == "leader-change" and e["partition"] == 0
             and e["epoch"] > first.epoch]
    assert moved and moved[0]["leader"] == int(new[1:]), moved
    assert nem.stats.errors == [] and nem.stats.skipped == []
