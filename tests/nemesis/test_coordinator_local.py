"""The coordinator faults against real brokers (a controller and three `python -m broker` processes, the
real admin client): a confluent-kafka consumer with a group id makes the group's coordinator exist, and
kill-coordinator kills exactly the broker that the controller's metadata names leader of the group's
partition of `__consumer_offsets`, then restarts it at the fault's stop; isolate-coordinator-until-replaced
(real iptables, root) cuts that broker off until another one leads the partition. The target choice itself
is tested against hand-made views in tests/nemesis/test_coordinator.py."""
from __future__ import annotations

import json
import time

import pytest

from broker.client import Admin
from broker.groups.offsets import OFFSETS_TOPIC, partition_for
from clusters.base import ClusterSpec, NodeTimeouts
from clusters.local import LocalCluster
from clusters.run_registry import Registry, proc_state
from nemesis import Aim, FaultPlan, Nemesis
from polling import eventually, wait_until
from rundir.history import History

GROUP = "highwater-group"


@pytest.fixture
def cluster(tmp_path):
    spec = ClusterSpec(f"coord-{tmp_path.name}", tmp_path / "run", brokers=3,
                       broker_settings={"min_insync_replicas": 2, "replica_lag_time_max_ms": 1000},
                       controller_settings={"broker_session_timeout_ms": 1500,
                                            "topics": [{"name": "hw", "partitions": 1, "replication_factor": 3}]})
    c = LocalCluster(spec, registry=Registry(tmp_path / "registry"), timeouts=NodeTimeouts(ready_s=30))
    c.start()
    pids = [c.pid(n) for n in c.nodes()]
    yield c
    c.teardown()
    assert all(proc_state(p) is None for p in pids if p)


def _admin(c):
    return Admin(controller=(c.controller().host, c.controller().port), timeout_s=1.0)


def _look_the_coordinator_up(c) -> None:
    """A real group consumer subscribes and polls until the group has its assignment: its FindCoordinator
    creates the offsets topic, and the group lives on its coordinator."""
    from confluent_kafka import Consumer
    bootstrap = ",".join(f"{a.host}:{a.port}" for a in c.brokers().values())
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    try:
        consumer.subscribe(["hw"])
        deadline = time.monotonic() + 15
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the group consumer was never given the partition"
    finally:
        consumer.close()


def _coordinator(c) -> tuple[int, str]:
    """(the group's offsets partition, its leader) as the controller's metadata says, once every partition
    of __consumer_offsets is led."""
    admin = _admin(c)
    try:
        offsets = wait_until(lambda: (lambda ps: ps if ps and all(p.leader is not None for p in ps) else None)(
            admin.describe(OFFSETS_TOPIC)), timeout=15, what="__consumer_offsets led")
    finally:
        admin.close()
    part = partition_for(GROUP, len(offsets))
    return part, f"n{next(p.leader for p in offsets if p.partition == part)}"


def _ops(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]


def test_kill_coordinator_kills_the_leader_of_the_groups_offsets_partition_and_restarts_it(cluster, tmp_path):
    _look_the_coordinator_up(cluster)
    part, coordinator = _coordinator(cluster)
    others = [n for n in cluster.brokers() if n != coordinator]
    pids = {n: cluster.pid(n) for n in cluster.nodes()}

    sched = tmp_path / "schedule.toml"
    sched.write_text('[[step]]\nat = 0.1\nfault = "kill-coordinator"\nduration = 1.5\n')
    history = History(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched), aim=Aim(topic="hw", group=GROUP),
                  admin_factory=lambda: _admin(cluster))
    try:
        nem.start()
        assert eventually(lambda: not cluster.is_running(coordinator), 10, interval=0.02)
        assert all(cluster.is_running(n) and cluster.pid(n) == pids[n] for n in others)
        assert eventually(lambda: nem.stats.stopped == 1, 10, interval=0.05)
    finally:
        nem.stop()
        history.close()
    assert cluster.is_running(coordinator) and cluster.pid(coordinator) != pids[coordinator]
    assert all(cluster.pid(n) == pids[n] for n in cluster.nodes() if n != coordinator)
    assert nem.stats.skipped == [] and nem.stats.errors == [] and nem.error is None
    done = [o for o in _ops(tmp_path) if o["type"] == "info"]
    assert [(o["f"], o["value"]["phase"], o["value"]["targets"]) for o in done] == [
        ("kill", "start", [coordinator]), ("restart", "stop", [coordinator])]
    start = done[0]["value"]
    assert (start["name"], start["group"], start["offsets_partition"]) == ("kill-coordinator", GROUP, part)
    assert start["state"]["leader"] == coordinator
    assert start["detail"].startswith(f"coordinator of group {GROUP!r}: {OFFSETS_TOPIC}/{part}: leader {coordinator}")


@pytest.mark.root
def test_isolate_coordinator_until_replaced_cuts_it_off_until_another_broker_leads_its_partition(cluster, tmp_path):
    cluster.check_faults(["partition"])
    _look_the_coordinator_up(cluster)
    part, coordinator = _coordinator(cluster)
    sched = tmp_path / "schedule.toml"
    sched.write_text('[[step]]\nat = 0.1\nfault = "isolate-coordinator-until-replaced"\nduration = 1.0\n')
    history = History(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched), aim=Aim(topic="hw", group=GROUP),
                  admin_factory=lambda: _admin(cluster))
    try:
        nem.start()
        assert eventually(lambda: nem.stats.stopped == 1, 20, interval=0.1)
    finally:
        nem.stop()
        history.close()
    assert nem.stats.skipped == [] and nem.stats.errors == [] and nem.error is None
    done = [o for o in _ops(tmp_path) if o["type"] == "info"]
    assert [(o["f"], o["value"]["step"], o["value"]["targets"]) for o in done] == [
        ("partition", "isolate-coordinator", [coordinator]), ("heal", "isolate-coordinator", [coordinator])]
    start, stop = done[0]["value"], done[1]["value"]
    assert (start["shape"], start["group"], start["offsets_partition"]) == ("coordinator", GROUP, part)
    assert stop["detail"].startswith("replaced after ")
    assert f"{OFFSETS_TOPIC}/{part}: leader n" in stop["detail"]
    assert f"{OFFSETS_TOPIC}/{part}: leader {coordinator}," not in stop["detail"]
