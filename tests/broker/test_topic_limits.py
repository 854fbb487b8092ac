"""Issue 16, items 1 and 2: topic names follow Kafka's rule wherever they enter (controller, controller.json,
the harness's `[topic] name`), CREATE_TOPICS refuses more replicas than a broker's fd budget, and a broker
skips a partition it cannot create instead of exiting (real controller and broker processes on loopback)."""
from __future__ import annotations

import json
import time

import pytest

from broker.client import Consumer, Producer
from broker.client.errors import ClientError
from broker.controller import messages as m
from broker.controller.client import ControllerSyncClient
from broker.controller.config import ConfigError, parse_controller_config
from broker.controller.state import ControllerState
from broker.limits import MAX_TOPIC_NAME, replica_budget, topic_name_problem
from clusters.bare import BareCluster, wait_until
from harness import config as hconfig


# --- the name rule -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, problem", [
    (".", "a topic name cannot be '.'"),
    ("..", "a topic name cannot be '..'"),
    ("a" * 250, "a topic name has at most 249 characters, got 250"),
    ("a/b", "a topic name has only letters, digits, '.', '_' and '-', got 'a/b'"),
    ("", "a topic name must be a non-empty string"),
    ("é", "a topic name has only letters, digits, '.', '_' and '-', got 'é'"),
])
def test_bad_topic_names_are_refused_with_their_reason(name, problem):
    assert topic_name_problem(name) == problem


@pytest.mark.parametrize("name", ["ok.name-1_x", "a" * MAX_TOPIC_NAME, "...", "_", "-", "hw"])
def test_good_topic_names_pass(name):
    assert topic_name_problem(name) is None


def test_controller_state_refuses_bad_names_and_keeps_the_good_one():
    s = ControllerState()
    s.register_broker(1, "h", 1, 0)
    s.register_broker(2, "h", 2, 0)
    results, _ = s.create_topics([m.TopicSpec("..", 1, 2), m.TopicSpec("a/b", 1, 1), m.TopicSpec("fine", 1, 2)])
    assert results == [("..", m.INVALID_TOPIC_EXCEPTION, "a topic name cannot be '..'"),
                       ("a/b", m.INVALID_TOPIC_EXCEPTION,
                        "a topic name has only letters, digits, '.', '_' and '-', got 'a/b'"),
                       ("fine", m.NONE, "")]
    assert sorted(s.topics) == ["fine"]


def test_controller_config_and_harness_config_use_the_same_rule():
    raw = {"host": "127.0.0.1", "port": 0, "data_dir": "d", "log_file": "l",
           "topics": [{"name": "..", "partitions": 1, "replication_factor": 1}]}
    with pytest.raises(ConfigError, match=r"^c\.json: key 'topics\[0\]\.name': a topic name cannot be '\.\.'$"):
        parse_controller_config(raw, "c.json")
    cfg = hconfig.TestConfig()
    cfg.topic.name = ".."
    assert ("topic.name", "a topic name cannot be '..' (got '..')") in hconfig.validate(cfg)
    cfg.topic.name = "ok.name-1_x"
    assert not [p for p in hconfig.validate(cfg) if p[0] == "topic.name"]


# --- the fd budget -------------------------------------------------------------------------------------
def test_replica_budget_is_a_share_of_the_fd_limit():
    assert replica_budget(20_000) == 2_500      # the limit the brokers had
    assert replica_budget(1024) == 128
    assert replica_budget(3) == 1
    raw = {"host": "127.0.0.1", "port": 0, "data_dir": "d", "log_file": "l"}
    assert parse_controller_config(raw, "c.json").replica_budget == replica_budget()   # this process's limit
    assert parse_controller_config({**raw, "max_replicas_per_broker": 7}, "c.json").replica_budget == 7


def test_create_topics_counts_existing_replicas_against_the_budget():
    s = ControllerState(max_replicas_per_broker=10)
    for b in (1, 2, 3):
        s.register_broker(b, "h", b, 0)
    assert s.create_topics([m.TopicSpec("t", 10, 3)])[0] == [("t", m.NONE, "")]     # 10 replicas on each
    results, events = s.create_topics([m.TopicSpec("u", 1, 1), m.TopicSpec("big", 10_000, 3)])
    assert results == [
        ("u", m.INVALID_PARTITIONS, "1 partitions x replication factor 1 would give broker 1 11 replicas, "
                                    "over its budget of 10 (max_replicas_per_broker: open files)"),
        ("big", m.INVALID_PARTITIONS, "10000 partitions x replication factor 3 would give broker 1 10010 "
                                      "replicas, over its budget of 10 (max_replicas_per_broker: open files)")]
    assert events == [] and sorted(s.topics) == ["t"]


# --- real processes ------------------------------------------------------------------------------------
def _alive(c: BareCluster) -> list[int]:
    return [b for b, node in sorted(c.brokers.items()) if node.running()]


def _retry(call, timeout_s: float, what: str):
    """call() until it does not raise ClientError (a new leader may not be known yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except ClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _round_trip(c: BareCluster, topic: str, value: bytes) -> None:
    with Producer(c.controller_address, acks="all", timeout_s=5.0) as p:
        (offset,) = _retry(lambda: p.send(topic, 0, [value]).offsets, 30, f"a produce to {topic}")
    with Consumer(c.controller_address, timeout_s=5.0) as cons:
        records = _retry(lambda: cons.fetch(topic, 0, offset, max_wait_ms=500).records, 30, f"a fetch from {topic}")
    assert records[0][0] == offset and records[0][2] == value


def test_dotdot_and_10000_partitions_are_refused_and_the_brokers_stay_up(tmp_path):
    # the budget of the brokers (20,000 fds), whatever this machine's limit is
    with BareCluster(tmp_path, brokers=3, broker_settings={"min_insync_replicas": 1},
                      controller_settings={"max_replicas_per_broker": replica_budget(20_000)},
                      topics=[{"name": "ok", "partitions": 1, "replication_factor": 3}]) as c:
        cl = ControllerSyncClient(c.controller_address, timeout_s=5.0)
        try:
            assert cl.create_topics([m.TopicSpec("..", 1, 2)]) == {"..": m.INVALID_TOPIC_EXCEPTION}
            # RF 3 needs all three brokers live at the controller: on a loaded machine a heartbeat can miss a
            # session for a moment, and the answer is then INVALID_REPLICATION_FACTOR, not what this tests
            wait_until(lambda: len([b for b in cl.metadata().brokers.values() if b.alive]) == 3, 20,
                       "three live brokers at the controller")
            assert cl.create_topics([m.TopicSpec("big", 10_000, 3)]) == {"big": m.INVALID_PARTITIONS}
            names = {t for t, _ in cl.metadata().partitions}
        finally:
            cl.close()
        assert names == {"ok"}
        time.sleep(2.0)               # the brokers died within a second of the `..` topic
        assert _alive(c) == [1, 2, 3]
        _round_trip(c, "ok", b"still-serving")


def test_a_persisted_bad_topic_is_skipped_by_every_broker_on_restart(tmp_path):
    with BareCluster(tmp_path, brokers=3, broker_settings={"min_insync_replicas": 1},
                      topics=[{"name": "ok", "partitions": 1, "replication_factor": 3}]) as c:
        _round_trip(c, "ok", b"before")
        for b in (1, 2, 3):
            c.brokers[b].terminate()
        c.controller.terminate()
        # what an older controller accepted and persisted: a topic named '..' on brokers 1 and 2
        state_path = tmp_path / "c0" / "data" / "controller-state.json"
        state = json.loads(state_path.read_text())
        state["topics"].append({"name": "..", "partitions": [
            {"partition": 0, "replicas": [1, 2], "leader": 1, "leader_epoch": 0, "isr": [1, 2],
             "isr_version": 0}]})
        state_path.write_text(json.dumps(state))
        c.controller.start()
        for b in (1, 2, 3):
            c.start_broker(b)
        for b in (1, 2):
            skipped = wait_until(lambda: [e for e in c.events(b) if e["event"] == "partition-skipped"], 20,
                                 f"n{b} skipping the '..' partition")
            assert (skipped[0]["topic"], skipped[0]["partition"]) == ("..", 0)
            assert skipped[0]["error"] == "ValueError: a topic name cannot be '..'"
        time.sleep(1.0)
        assert _alive(c) == [1, 2, 3]
        assert not [e for b in (1, 2, 3) for e in c.events(b) if e["event"] == "internal-error"]
        _round_trip(c, "ok", b"after")


def test_a_broker_over_its_replica_budget_skips_the_partition_once_and_serves_the_rest(tmp_path):
    """The broker's own check (real ReplicaManager and storage, no controller needed for RF 1 leaders)."""
    import asyncio

    from broker.config import BrokerConfig
    from broker.eventlog import EventLog
    from broker.server.partitions import ReplicaManager

    cfg = BrokerConfig(node_id=1, host="127.0.0.1", port=1, controller_host="127.0.0.1", controller_port=1,
                       data_dir=str(tmp_path / "data"), log_file=str(tmp_path / "broker.log"))
    events = EventLog(cfg.log_file, cfg.node_name)
    md = m.Metadata(1, {1: m.BrokerInfo("127.0.0.1", 1, True)}, {
        ("t", p): m.PartitionState("t", p, 1, 0, (1,), (1,), 0) for p in (0, 1)})

    async def scenario() -> list[dict]:
        rm = ReplicaManager(cfg, events, controller=None)
        rm.replica_budget = 1
        rm.open_existing()
        rm.apply_metadata(md)
        rm.apply_metadata(m.Metadata(2, md.brokers, md.partitions))     # the next version: no second event
        try:
            return [sorted(rm.partitions), rm.get("t", 0).replica.role, dict(rm.skipped)]
        finally:
            rm.close_storage()

    opened, role, skipped = asyncio.run(scenario())
    events.close()
    assert opened == [("t", 0)] and role == "leader"
    why = "OSError: already 1 replicas, the fd budget (broker/limits.replica_budget) is 1"
    assert skipped == {("t", 1): why}
    lines = [json.loads(x) for x in (tmp_path / "broker.log").read_text().splitlines()]
    assert [(e["topic"], e["partition"], e["error"]) for e in lines if e["event"] == "partition-skipped"] == [
        ("t", 1, why)]
