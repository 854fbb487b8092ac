"""Consumer groups on a real three-broker cluster, with the real Kafka clients from PyPI: confluent-kafka
(librdkafka) and kafka-python subscribe, share the partitions out, commit and read their commits back;
the commits survive the SIGKILL of the group's coordinator; and bad group requests, sent as raw frames,
get Kafka's error codes while the broker keeps serving."""
from __future__ import annotations

import socket
import struct
import time

import pytest

from broker.kafka import errors as E
from broker.kafka import messages as km
from broker.kafka import versions as V
from clusters.bare import BareCluster

TOPIC = "g"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with BareCluster(tmp_path_factory.mktemp("groups"), brokers=3, broker_settings={"min_insync_replicas": 2},
                     topics=[{"name": TOPIC, "partitions": PARTITIONS, "replication_factor": 3}]) as c:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": _bootstrap(c), "acks": "all"})
        for i in range(60):
            p.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
        assert p.flush(20) == 0
        yield c


def _bootstrap(c) -> str:
    return ",".join(f"127.0.0.1:{port}" for port in c.ports.values())


def _confluent(c, group: str, **extra):
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": _bootstrap(c), "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     **extra})


def _read(consumer, want: int, timeout_s: float = 30.0) -> list[tuple[int, int]]:
    got, deadline = [], time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset()))
    return got


def _committed(c, group: str) -> dict[int, int]:
    from confluent_kafka import TopicPartition
    probe = _confluent(c, group)
    try:
        return {tp.partition: tp.offset for tp in probe.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                                                 timeout=20)}
    finally:
        probe.close()


def test_confluent_kafka_subscribes_reads_everything_and_its_commit_is_read_back(cluster):
    consumer = _confluent(cluster, "cg-1")
    consumer.subscribe([TOPIC])
    try:
        got = _read(consumer, 60)
        assert sorted(got) == sorted((i % PARTITIONS, i // PARTITIONS) for i in range(60))
        offsets = consumer.commit(asynchronous=False)
        assert {tp.partition: tp.offset for tp in offsets} == {0: 20, 1: 20, 2: 20}
        assert all(tp.error is None for tp in offsets)
    finally:
        consumer.close()
    assert _committed(cluster, "cg-1") == {0: 20, 1: 20, 2: 20}


def test_two_members_share_the_partitions_without_overlap(cluster):
    a, b = _confluent(cluster, "cg-2"), _confluent(cluster, "cg-2")
    try:
        a.subscribe([TOPIC])
        b.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            a.poll(0.1)
            b.poll(0.1)
            pa, pb = {tp.partition for tp in a.assignment()}, {tp.partition for tp in b.assignment()}
            if pa and pb and pa | pb == set(range(PARTITIONS)):
                break
        assert pa and pb and not pa & pb and pa | pb == set(range(PARTITIONS)), (pa, pb)
    finally:
        a.close()
        b.close()


def test_kafka_python_subscribes_commits_and_reads_its_commit_back(cluster):
    import kafka
    from kafka.structs import TopicPartition
    consumer = kafka.KafkaConsumer(TOPIC, bootstrap_servers=_bootstrap(cluster), group_id="cg-3",
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        seen, deadline = 0, time.monotonic() + 30
        while seen < 60 and time.monotonic() < deadline:
            seen += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
        assert seen == 60
        consumer.commit()
        assert {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)} == {0: 20, 1: 20, 2: 20}
    finally:
        consumer.close()
    assert _committed(cluster, "cg-3") == {0: 20, 1: 20, 2: 20}


def _coordinator_of(c, group: str) -> int:
    """The broker whose event log shows it took the group's commits."""
    for b in c.ports:
        if any(e["event"] == "offset-commit" and e.get("group") == group for e in c.events(b)):
            return b
    raise AssertionError(f"no broker logged a commit of {group}")


def test_commits_survive_the_sigkill_of_the_coordinator(cluster):
    from confluent_kafka import TopicPartition
    consumer = _confluent(cluster, "cg-4")
    consumer.subscribe([TOPIC])
    try:
        assert len(_read(consumer, 60)) == 60
        consumer.commit(offsets=[TopicPartition(TOPIC, p, 7 + p) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        consumer.close()
    victim = _coordinator_of(cluster, "cg-4")
    cluster.kill(victim)
    try:
        deadline = time.monotonic() + 40
        while True:          # a new coordinator is elected and loads the offsets partition first
            try:
                got = _committed(cluster, "cg-4")
                if got == {0: 7, 1: 8, 2: 9} or time.monotonic() > deadline:
                    break
            except Exception:  # noqa: BLE001 - the client times out while the coordinator moves
                if time.monotonic() > deadline:
                    raise
        assert got == {0: 7, 1: 8, 2: 9}
        survivors = [b for b in cluster.ports if b != victim]
        loads = [e for b in survivors for e in cluster.events(b) if e["event"] == "group-load" and e["records"] > 0]
        assert loads, "the new coordinator loaded the offsets partition from its log"
    finally:
        cluster.start_broker(victim)


# --- bad input, as raw frames ---------------------------------------------------------------------------

def _ask(c, api: int, version: int, body: dict, broker: int | None = None) -> dict:
    port = c.ports[broker if broker is not None else next(iter(c.ports))]
    frame = km.encode_request(api, version, 7, "bad-input", body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(frame)
        (n,) = struct.unpack(">I", _recv(s, 4))
        corr, answer = km.decode_response(api, version, _recv(s, n))
    assert corr == 7
    return answer


def _recv(s, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "the broker closed the connection"
        buf += chunk
    return buf


def _coordinator(c, group: str) -> int:
    deadline = time.monotonic() + 20
    while True:
        r = _ask(c, V.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
        if r["error_code"] == E.NONE:
            return r["node_id"]
        assert time.monotonic() < deadline, r
        time.sleep(0.2)


def test_bad_group_requests_get_kafkas_error_codes(cluster):
    assert _ask(cluster, V.FIND_COORDINATOR, 2, {"key": "", "key_type": 0})["error_code"] == E.INVALID_GROUP_ID
    node = _coordinator(cluster, "cg-bad")
    other = next(b for b in cluster.ports if b != node)
    commit = {"group_id": "cg-bad", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
              "topics": [{"name": "no-such-topic", "partitions": [
                  {"partition_index": 0, "committed_offset": 5, "committed_metadata": None}]},
                  {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                  "committed_metadata": "x" * 5000}]}]}
    r = _ask(cluster, V.OFFSET_COMMIT, 2, commit, node)
    codes = [p["error_code"] for t in r["topics"] for p in t["partitions"]]
    assert codes == [E.UNKNOWN_TOPIC_OR_PARTITION, E.OFFSET_METADATA_TOO_LARGE]
    r = _ask(cluster, V.OFFSET_COMMIT, 2, commit, other)          # not the coordinator
    assert {p["error_code"] for t in r["topics"] for p in t["partitions"]} == {E.NOT_COORDINATOR}
    join = {"group_id": "cg-bad", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"x" * 200_000}]}
    assert _ask(cluster, V.JOIN_GROUP, 5, join, node)["error_code"] == E.INVALID_REQUEST
    join["protocols"] = [{"name": "range", "metadata": b"m"}]
    first = _ask(cluster, V.JOIN_GROUP, 5, join, node)
    assert first["error_code"] == E.MEMBER_ID_REQUIRED and first["member_id"]
    leader = _ask(cluster, V.JOIN_GROUP, 5, {**join, "member_id": first["member_id"]}, node)
    assert leader["error_code"] == E.NONE and leader["generation_id"] == 1
    sync = {"group_id": "cg-bad", "generation_id": 1, "member_id": "not-a-member", "group_instance_id": None,
            "assignments": []}
    assert _ask(cluster, V.SYNC_GROUP, 3, sync, node)["error_code"] == E.UNKNOWN_MEMBER_ID
    sync["member_id"], sync["generation_id"] = first["member_id"], 9
    assert _ask(cluster, V.SYNC_GROUP, 3, sync, node)["error_code"] == E.ILLEGAL_GENERATION
    hb = {"group_id": "cg-bad", "generation_id": 0, "member_id": first["member_id"], "group_instance_id": None}
    assert _ask(cluster, V.HEARTBEAT, 3, hb, node)["error_code"] == E.ILLEGAL_GENERATION
    stale = {**commit, "generation_id_or_member_epoch": 0, "member_id": first["member_id"],
             "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                        "committed_metadata": None}]}]}
    r = _ask(cluster, V.OFFSET_COMMIT, 2, stale, node)
    assert [p["error_code"] for t in r["topics"] for p in t["partitions"]] == [E.ILLEGAL_GENERATION]
    listed = _ask(cluster, V.LIST_GROUPS, 2, {}, node)
    assert "cg-bad" in {g["group_id"] for g in listed["groups"]}
    [described] = _ask(cluster, V.DESCRIBE_GROUPS, 4, {"groups": ["cg-bad"], "include_authorized_operations": False},
                       node)["groups"]
    assert described["group_state"] == "CompletingRebalance" and len(described["members"]) == 1
    left = _ask(cluster, V.LEAVE_GROUP, 1, {"group_id": "cg-bad", "member_id": first["member_id"]}, node)
    assert left["error_code"] == E.NONE
    assert _ask(cluster, V.API_VERSIONS, 0, {}, node)["error_code"] == E.NONE      # still serving
