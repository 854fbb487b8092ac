"""Real Kafka clients from PyPI against a real 3-broker cluster (issue 20): confluent-kafka (librdkafka)
and kafka-python each produce 1,000 values with acks=all, every one acknowledged with its offset, then
consume them all in order with assign from offset 0.

kafka-python 3.x turns idempotence on by default and then needs InitProducerId, which the broker does not
serve (the broker does not deduplicate retries): its producer is made with enable_idempotence=False.
librdkafka leaves idempotence off by default.
"""
from __future__ import annotations

import logging
import time

import pytest

from broker.client import Admin
from broker.server.launch import LocalCluster
from tests.broker.real_processes import wait_full_isr

N = 1000
BROKER = {"min_insync_replicas": 2, "heartbeat_interval_ms": 200, "replica_fetch_wait_max_ms": 100}
TOPICS = ["confluent", "kafka-python"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("kafka-clients"), brokers=3, broker_settings=BROKER,
                      topics=[{"name": t, "partitions": 1, "replication_factor": 3} for t in TOPICS]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        for t in TOPICS:
            wait_full_isr(admin, t, 20, f"{t}: a leader with the full ISR")
        yield c


def bootstrap(cluster) -> str:
    return ",".join("%s:%d" % cluster.brokers[b].address for b in sorted(cluster.brokers))


def values() -> list[bytes]:
    return [f"v{i}".encode() for i in range(N)]


def test_confluent_kafka_produce_acks_all_and_consume(cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = "confluent"
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                                         "enable.idempotence": False, "linger.ms": 5})
    reports: list[tuple[object, int, bytes]] = []
    for v in values():
        producer.produce(topic, v, partition=0,
                         on_delivery=lambda err, msg: reports.append((err, msg.offset(), msg.value())))
    assert producer.flush(30) == 0
    assert [err for err, _, _ in reports if err is not None] == []
    assert sorted((o, v) for _, o, v in reports) == list(enumerate(values()))

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "hw-test",
                                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes, int]] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append((msg.offset(), msg.value(), msg.leader_epoch()))
    consumer.close()
    assert [(o, v) for o, v, _ in got] == list(enumerate(values()))
    assert {e for _, _, e in got} == {0}       # the leader epoch stamped in the batches


def test_kafka_python_produce_acks_all_and_consume(cluster, caplog):
    kafka = pytest.importorskip("kafka")
    caplog.set_level(logging.WARNING)
    topic = "kafka-python"
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all", enable_idempotence=False,
                                   linger_ms=5)
    futures = [producer.send(topic, v, partition=0) for v in values()]
    producer.flush(30)
    metas = [f.get(timeout=10) for f in futures]
    producer.close(5)
    assert [(m.partition, m.offset) for m in metas] == [(0, i) for i in range(N)]

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap(cluster), enable_auto_commit=False,
                                   group_id=None)
    tp = kafka.TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend((r.offset, r.value) for r in records)
    consumer.close()
    assert got == list(enumerate(values()))
