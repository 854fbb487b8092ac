"""Real Kafka clients from PyPI against a real 3-broker cluster (issue 20): confluent-kafka (librdkafka)
and kafka-python each produce 1,000 values with acks=all, every one acknowledged with its offset, then
consume them all in order with assign from offset 0. Leader epochs (KIP-320): given Metadata v9, librdkafka
sends the partition's leader epoch in every Fetch, so after the leadership went away and back (epoch 0 ->
2) the broker fences its first fetch with the old epoch (FENCED_LEADER_EPOCH) and the client recovers
(new metadata, OffsetForLeaderEpoch validation, fetch at epoch 2) with nothing lost or repeated; the
workloads' kafka-python adapter reads on through it (recording epoch -1: docs/clients.md, "Epochs"). Under faults (slow): acks=all through a leader
SIGKILL loses no acknowledged value; acks=1 under the KIP-101 staging of test_hw_loss_real.py loses the
acknowledged values with truncation="hw" and keeps them with leader-epoch truncation.

Idempotence (KIP-98): kafka-python 3.x turns it on by default, librdkafka with enable.idempotence=true;
both produce through InitProducerId and sequence numbers (the test below). The other tests make their
producers without it, to test the plain path.
"""
from __future__ import annotations

import logging
import re
import signal
import time

import pytest

from broker.client import Admin, Producer
from clusters.bare import BareCluster, wait_until
from tests.broker.real_processes import wait_full_isr

N = 1000
BROKER = {"min_insync_replicas": 2, "heartbeat_interval_ms": 200, "replica_fetch_wait_max_ms": 100}
TOPICS = ["confluent", "kafka-python", "epochs-confluent", "epochs-kafka-python", "records-confluent",
          "records-kafka-python", "idempotent-confluent", "idempotent-kafka-python"] + [f"codec-{s}-{c}" for s in ("confluent", "kafka-python")
                                     for c in ("gzip", "snappy", "lz4", "zstd")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with BareCluster(tmp_path_factory.mktemp("kafka-clients"), brokers=3, broker_settings=BROKER,
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


def test_confluent_kafka_produces_to_a_topic_it_never_created(cluster):
    """Kafka's auto-creation: librdkafka's metadata request for an unknown topic creates it (one
    partition, replication factor 1: the broker's num_partitions and default_replication_factor), and
    the message it held back is delivered."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster), "acks": 1,
                                         "enable.idempotence": False, "message.timeout.ms": 20000})
    reports = []
    producer.produce("made-on-first-use", b"first", on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(25) == 0
    assert reports == [(None, 0)]
    md = producer.list_topics("made-on-first-use", timeout=5).topics["made-on-first-use"]
    assert md.error is None and list(md.partitions) == [0] and len(md.partitions[0].replicas) == 1


@pytest.mark.parametrize("library", ["confluent", "kafka-python"])
def test_idempotent_producers_of_both_libraries(cluster, library):
    """Each library's idempotent producer (its default settings otherwise: up to 5 requests in flight),
    1,000 values with lz4: InitProducerId, every value acknowledged once at consecutive offsets, and the
    log holds each exactly once."""
    topic = f"idempotent-{library}"
    if library == "confluent":
        confluent_kafka = pytest.importorskip("confluent_kafka")
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster), "enable.idempotence": True,
                                             "compression.type": "lz4", "linger.ms": 5})
        reports = []
        for v in values():
            producer.produce(topic, v, partition=0, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        assert producer.flush(30) == 0
        assert sorted(reports, key=lambda r: r[1]) == [(None, i) for i in range(N)]
    else:
        kafka = pytest.importorskip("kafka")
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap(cluster), compression_type="lz4", linger_ms=5)
        assert producer.config["enable_idempotence"] is True       # kafka-python 3.x's default
        futures = [producer.send(topic, v, partition=0) for v in values()]
        producer.flush(30)
        assert [f.get(timeout=10).offset for f in futures] == list(range(N))
        producer.close(5)
    got = _received_kafka_python(cluster, topic, N)
    assert [v for _k, v, _h, _ts in got] == values()


CODECS = ["gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("sender", ["confluent", "kafka-python"])
def test_each_codec_round_trips_between_both_libraries(cluster, sender, codec):
    """A well-compressing batch of 200 keyed records with headers, compressed by one library with each
    codec (librdkafka writes raw snappy, kafka-python the xerial framing), every record acknowledged at its
    offset, and read back as sent by both libraries (served uncompressed)."""
    topic = f"codec-{sender}-{codec}"
    sent = [(f"k{i % 7}".encode(), b"a" * 100 + str(i).encode(), [("i", str(i).encode())]) for i in range(200)]
    if sender == "confluent":
        confluent_kafka = pytest.importorskip("confluent_kafka")
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                                             "enable.idempotence": False, "compression.type": codec,
                                             "linger.ms": 50, "message.timeout.ms": 20000})
        reports = []
        for key, value, headers in sent:
            producer.produce(topic, value, key, partition=0, headers=headers,
                             on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        assert producer.flush(30) == 0
        assert sorted(reports, key=lambda r: r[1]) == [(None, i) for i in range(len(sent))]
    else:
        kafka = pytest.importorskip("kafka")
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all", enable_idempotence=False,
                                       compression_type=codec, linger_ms=50)
        futures = [producer.send(topic, value=v, key=k, headers=h, partition=0) for k, v, h in sent]
        producer.flush(30)
        assert [f.get(timeout=10).offset for f in futures] == list(range(len(sent)))
        producer.close(5)
    want = [(k, v, h) for k, v, h in sent]
    assert [(k, v, h) for k, v, h, _ts in _received_confluent(cluster, topic, len(sent))] == want
    assert [(k, v, h) for k, v, h, _ts in _received_kafka_python(cluster, topic, len(sent))] == want


def test_create_partitions_from_both_libraries(cluster):
    """Kafka's CreatePartitions: a topic grows to a new count (each new partition with the topic's
    replication factor and a leader, and takes writes); a count not above the current one is
    INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic("grows", 1, 3)])["grows"].result(10)
    wait_until(lambda: admin.list_topics("grows", timeout=5).topics["grows"].error is None, 10, "grows exists")
    admin.create_partitions([NewPartitions("grows", 3)])["grows"].result(10)

    def grown():
        t = admin.list_topics("grows", timeout=5).topics["grows"]
        parts = t.partitions
        return len(parts) == 3 and all(p.leader >= 1 and len(p.replicas) == 3 for p in parts.values())
    wait_until(grown, 15, "grows has 3 partitions with leaders")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                                         "enable.idempotence": False})
    reports = []
    producer.produce("grows", b"in-p2", partition=2, on_delivery=lambda err, msg: reports.append((err, msg.partition())))
    assert producer.flush(20) == 0 and reports == [(None, 2)]
    with pytest.raises(confluent_kafka.KafkaException) as fewer:
        admin.create_partitions([NewPartitions("grows", 2)])["grows"].result(10)
    assert fewer.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    with pytest.raises(confluent_kafka.KafkaException) as unknown:
        admin.create_partitions([NewPartitions("never-made", 2)])["never-made"].result(10)
    assert unknown.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART

    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient, NewPartitions as KpNewPartitions
    kp = KafkaAdminClient(bootstrap_servers=bootstrap(cluster), request_timeout_ms=10000)
    try:
        kp.create_partitions({"grows": KpNewPartitions(4)})
        wait_until(lambda: len(admin.list_topics("grows", timeout=5).topics["grows"].partitions) == 4, 15,
                   "grows has 4 partitions")
    finally:
        kp.close()


def test_delete_topics_from_both_libraries(cluster):
    """Kafka's DeleteTopics: the topic leaves the metadata, every broker removes its replicas' files,
    and the name can be created again, empty; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic("doomed", 2, 3)])["doomed"].result(10)
    wait_until(lambda: admin.list_topics("doomed", timeout=5).topics["doomed"].error is None, 10, "doomed exists")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    producer.produce("doomed", b"gone", partition=0)
    assert producer.flush(20) == 0
    dirs = [d for b in cluster.ports for d in cluster.data_dir(b).iterdir() if d.name.startswith("doomed")]
    assert len(dirs) == 6
    admin.delete_topics(["doomed"])["doomed"].result(10)
    wait_until(lambda: not any(d.exists() for d in dirs), 15, "every replica of doomed removed")
    assert "doomed" not in admin.list_topics(timeout=5).topics
    assert all(any(e["event"] == "partition-deleted" and e["topic"] == "doomed" for e in cluster.events(b))
               for b in cluster.ports)
    with pytest.raises(confluent_kafka.KafkaException) as unknown:
        admin.delete_topics(["never-made"])["never-made"].result(10)
    assert unknown.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART

    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient, NewTopic as KpNewTopic
    kp = KafkaAdminClient(bootstrap_servers=bootstrap(cluster), request_timeout_ms=10000)
    try:
        kp.create_topics([KpNewTopic("doomed", 1, 3)])          # the name is free again
        wait_until(lambda: len(admin.list_topics("doomed", timeout=5).topics["doomed"].partitions) == 1, 15,
                   "doomed exists again with 1 partition")
        kp.delete_topics(["doomed"])
        wait_until(lambda: "doomed" not in admin.list_topics(timeout=5).topics, 15, "doomed deleted again")
    finally:
        kp.close()


def test_kafka_python_produce_acks_all_and_consume(cluster):
    kafka = pytest.importorskip("kafka")
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


# --- records as Kafka stores them: keys, headers, tombstones, CreateTime ------------------------------------
SENT = [  # (key, value, headers, timestamp ms)
    (b"user-1", b"one", [("trace", b"t-1"), ("empty", b"")], 1_700_000_000_000),
    (b"", b"empty key", [], 1_700_000_000_001),
    (b"user-1", None, [("reason", b"deleted")], 1_600_000_000_000),    # a tombstone, an older time
    (None, b"\xff\x00", [("bin", b"\x00\xff")], 1_700_000_000_003),
]


def _received_confluent(cluster, topic: str, n: int = len(SENT)) -> list[tuple]:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "hw-records",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            kind, ts = msg.timestamp()
            assert kind == confluent_kafka.TIMESTAMP_CREATE_TIME
            got.append((msg.key(), msg.value(), list(msg.headers() or []), ts))
    consumer.close()
    return got


def _received_kafka_python(cluster, topic: str, n: int = len(SENT)) -> list[tuple]:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap(cluster), enable_auto_commit=False, group_id=None)
    tp = kafka.TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got, deadline = [], time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for r in records:
                assert r.timestamp_type == 0        # CreateTime
                got.append((r.key, r.value, list(r.headers), r.timestamp))
    consumer.close()
    return got


@pytest.mark.parametrize("sender", ["confluent", "kafka-python"])
def test_keys_headers_and_tombstones_round_trip_between_both_libraries(cluster, sender):
    """What one library sends, the other reads back as sent, and so does the sender: keys (an empty one
    too), headers (an empty and a binary value), a tombstone, and each record's own CreateTime."""
    topic = f"records-{sender}"
    if sender == "confluent":
        confluent_kafka = pytest.importorskip("confluent_kafka")
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                                             "enable.idempotence": False})
        errors = []
        for key, value, headers, ts in SENT:
            producer.produce(topic, value, key, partition=0, headers=headers, timestamp=ts,
                             on_delivery=lambda err, _msg: errors.append(err))
        assert producer.flush(30) == 0 and errors == [None] * len(SENT)
    else:
        kafka = pytest.importorskip("kafka")
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all", enable_idempotence=False)
        futures = [producer.send(topic, value=value, key=key, headers=headers, partition=0, timestamp_ms=ts)
                   for key, value, headers, ts in SENT]
        producer.flush(30)
        assert [f.get(timeout=10).offset for f in futures] == list(range(len(SENT)))
        producer.close(5)
    assert _received_confluent(cluster, topic) == [tuple(x) for x in SENT]
    assert _received_kafka_python(cluster, topic) == [tuple(x) for x in SENT]


# --- leader epochs (KIP-320) -----------------------------------------------------------------------------
FETCH_LINE = re.compile(r"Fetch topic (\S+) \[(\d+)\] at offset (\d+) \(leader epoch (-?\d+), "
                        r"current leader epoch (-?\d+)")
FENCED_LINE = re.compile(r"(\S+) \[(\d+)\]: Fetch failed at offset (\d+) \(leader epoch (-?\d+)\): "
                         r"FENCED_LEADER_EPOCH")


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _away_and_back(admin, topic: str) -> tuple[int, int]:
    """Move the leadership of `topic`/0 to another in-sync broker and back: (leader, its new epoch)."""
    info = wait_full_isr(admin, topic, 20, f"{topic}: a leader with the full ISR")
    leader, epoch = info.leader, info.epoch
    other = min(b for b in info.isr if b != leader)
    admin.elect_leader(topic, 0, broker=other)
    wait_until(lambda: (d := admin.describe(topic)) and d[0].leader == other and len(d[0].isr) == 3 and d[0],
               20, f"{topic}: broker {other} leads with the full ISR")
    admin.elect_leader(topic, 0, broker=leader)
    back = wait_until(lambda: (d := admin.describe(topic)) and d[0].leader == leader and len(d[0].isr) == 3
                      and d[0], 20, f"{topic}: broker {leader} leads again")
    assert back.epoch == epoch + 2
    # the broker itself leads the new epoch (not only the controller's record of it)
    wait_until(lambda: (r := admin.replicas(leader)) and r.get((topic, 0), {}).get("leader_epoch") == epoch + 2
               and r[(topic, 0)].get("role") == "leader", 10, f"broker {leader} leads {topic}/0 at epoch {epoch + 2}")
    return leader, epoch + 2


def test_librdkafka_sends_the_leader_epoch_and_is_fenced_after_a_leader_change(cluster):
    """librdkafka's Fetch carries current_leader_epoch = the partition's epoch; a consumer paused across two
    elections (the same broker leads again, epoch 0 -> 2) still holds epoch 0, so the broker refuses its
    first fetch with FENCED_LEADER_EPOCH, and the client recovers: all 200 values in order, once each."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = "epochs-confluent"
    c, admin = cluster, Admin(cluster.controller_address, timeout_s=2.0)
    first = wait_full_isr(admin, topic, 20, f"{topic}: a leader with the full ISR")
    assert first.epoch == 0
    native = Producer(c.controller_address, acks=-1, timeout_s=5.0)
    assert native.send(topic, 0, [b"a%d" % i for i in range(100)]).offsets == list(range(100))
    lines = _Lines()
    log = logging.getLogger("test-librdkafka-epochs")
    log.addHandler(lines)
    log.setLevel(logging.DEBUG)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap(c), "group.id": "hw-epochs", "enable.auto.commit": False,
        "enable.partition.eof": False, "fetch.wait.max.ms": 200, "debug": "fetch,metadata", "logger": log})
    got: list[tuple[int, bytes, int]] = []

    def read_until(n: int) -> None:
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for msg in consumer.consume(200, 0.3):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value(), msg.leader_epoch()))

    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        read_until(100)
        consumer.pause([confluent_kafka.TopicPartition(topic, 0)])
        time.sleep(1.0)                      # no fetch in flight: the next one is sent after resume
        before = len(lines.lines)
        leader, epoch = _away_and_back(admin, topic)
        assert native.send(topic, 0, [b"b%d" % i for i in range(100)]).offsets == list(range(100, 200))
        consumer.resume([confluent_kafka.TopicPartition(topic, 0)])
        read_until(200)
    finally:
        consumer.close()
        native.close()
        log.removeHandler(lines)
    assert [(o, v) for o, v, _ in got] == [(i, b"a%d" % i) for i in range(100)] + \
        [(100 + i, b"b%d" % i) for i in range(100)]
    assert {e for o, _, e in got if o < 100} == {0} and {e for o, _, e in got if o >= 100} == {epoch}
    # before the elections every fetch carried epoch 0, the partition's epoch then
    early = [cur for m in map(FETCH_LINE.search, lines.lines[:before]) if m and m[1] == topic
             for cur in [int(m[5])]]
    assert early and set(early) == {0}
    late = [(int(m[3]), int(m[5])) for m in map(FETCH_LINE.search, lines.lines[before:]) if m and m[1] == topic]
    # after resume: the first fetch still says epoch 0 and is fenced by the broker; then epoch 2
    assert late[0] == (100, 0), late[:3]
    fenced = [m.groups() for m in map(FENCED_LINE.search, lines.lines[before:]) if m]
    assert fenced and fenced[0] == (topic, "0", "100", "0"), fenced
    assert late[-1][1] == epoch and {cur for _, cur in late} == {0, epoch}, late


def test_kafka_python_adapter_reads_through_an_epoch_change_and_records_no_unfenced_epoch(cluster):
    """workloads/kafka_client.py's kafka-python consumer reads on through the leadership going away and
    back (epoch 0 -> 2), and records epoch -1 for every poll: its metadata's epoch is not tied to the HW
    its unfenced ListOffsets returned (docs/clients.md, "Epochs"), so pairing them could fake a same-epoch
    hw-regression."""
    pytest.importorskip("kafka")
    from workloads.kafka_client import make_consumer
    topic = "epochs-kafka-python"
    c, admin = cluster, Admin(cluster.controller_address, timeout_s=2.0)
    assert wait_full_isr(admin, topic, 20, f"{topic}: a leader with the full ISR").epoch == 0
    native = Producer(c.controller_address, acks=-1, timeout_s=5.0)
    consumer = make_consumer("kafka-python", bootstrap(c).split(","), timeout_s=5.0)
    results = []

    def read_until(n: int) -> None:
        deadline = time.monotonic() + 30
        nxt = sum(len(r.records) for r in results)
        while nxt < n and time.monotonic() < deadline:
            r = consumer.fetch(topic, 0, nxt, max_records=1000, max_wait_ms=200)
            results.append(r)
            nxt += len(r.records)

    try:
        assert native.send(topic, 0, [b"a%d" % i for i in range(50)]).offsets == list(range(50))
        read_until(50)
        _leader, epoch = _away_and_back(admin, topic)
        assert native.send(topic, 0, [b"b%d" % i for i in range(50)]).offsets == list(range(50, 100))
        read_until(100)
    finally:
        consumer.close()
        native.close()
    records = [rec for r in results for rec in r.records]
    assert [(o, v) for o, _, v in records] == [(i, b"a%d" % i) for i in range(50)] + \
        [(50 + i, b"b%d" % i) for i in range(50)]
    assert epoch == 2
    assert {r.epoch for r in results} == {-1}


# --- under faults (slow): the same guarantees the native client gets ------------------------------------
# (nightly: tests/workloads/test_kafka_client_real.py checks the same through the workloads' adapters on
# every run; these drive the libraries directly)
class Client:
    """One Kafka client library behind the two calls these tests need."""

    def __init__(self, name: str, bootstrap_servers: str):
        self.name, self.bootstrap = name, bootstrap_servers

    def producer(self, acks):
        if self.name == "confluent":
            import confluent_kafka
            return _ConfluentProducer(confluent_kafka.Producer({
                "bootstrap.servers": self.bootstrap, "acks": str(acks), "enable.idempotence": False,
                "linger.ms": 2, "retries": 0, "message.timeout.ms": 8000, "max.in.flight": 1}))
        import kafka
        return _KafkaPythonProducer(kafka.KafkaProducer(
            bootstrap_servers=self.bootstrap, acks=acks, enable_idempotence=False, retries=0, linger_ms=2,
            request_timeout_ms=5000, max_in_flight_requests_per_connection=1))

    def read_all(self, topic: str, expect_at_least: int, quiet_s: float = 3.0) -> list[tuple[int, bytes]]:
        """Every record from offset 0 (assign, no group), until none came for `quiet_s` after
        `expect_at_least` were read (or 30 s)."""
        got: list[tuple[int, bytes]] = []
        deadline, last = time.monotonic() + 30, time.monotonic()
        if self.name == "confluent":
            import confluent_kafka
            consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "hw-read",
                                                 "enable.auto.commit": False})
            consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])

            def poll():
                return [(m.offset(), m.value()) for m in consumer.consume(500, 0.3) if m.error() is None]
        else:
            import kafka
            consumer = kafka.KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                           group_id=None)
            tp = kafka.TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)

            def poll():
                return [(r.offset, r.value) for rs in consumer.poll(timeout_ms=300).values() for r in rs]
        try:
            while time.monotonic() < deadline:
                batch = poll()
                if batch:
                    got.extend(batch)
                    last = time.monotonic()
                elif len(got) >= expect_at_least and time.monotonic() - last > quiet_s:
                    break
        finally:
            consumer.close()
        return got


class _ConfluentProducer:
    def __init__(self, p):
        self.p = p
        self.acked: dict[bytes, int] = {}
        self.failed: list[bytes] = []

    def send(self, topic: str, value: bytes) -> None:
        def report(err, msg):
            if err is None:
                self.acked[msg.value()] = msg.offset()
            else:
                self.failed.append(msg.value())
        while True:
            try:
                self.p.produce(topic, value, partition=0, on_delivery=report)
                break
            except BufferError:
                self.p.poll(0.01)
        self.p.poll(0)

    def finish(self) -> None:
        self.p.flush(30)


class _KafkaPythonProducer:
    def __init__(self, p):
        self.p = p
        self.futures: list[tuple[bytes, object]] = []
        self.acked: dict[bytes, int] = {}
        self.failed: list[bytes] = []

    def send(self, topic: str, value: bytes) -> None:
        self.futures.append((value, self.p.send(topic, value, partition=0)))

    def finish(self) -> None:
        self.p.flush(30)
        for value, f in self.futures:
            try:
                self.acked[value] = f.get(0).offset
            except Exception:       # noqa: BLE001 - any failure: not acknowledged
                self.failed.append(value)
        self.p.close(5)


FAULT_BROKER = {"min_insync_replicas": 2, "heartbeat_interval_ms": 200, "replica_lag_time_max_ms": 4000,
                "replica_fetch_wait_max_ms": 200}


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_acks_all_through_a_leader_kill_loses_nothing(tmp_path, client):
    """acks=all, RF=3, min.insync.replicas=2, leader-epoch truncation: SIGKILL the leader while
    producing, restart it; every acknowledged value is read back at its acknowledged offset, and the
    partition reads in order without gaps."""
    pytest.importorskip({"confluent": "confluent_kafka", "kafka-python": "kafka"}[client])
    with BareCluster(tmp_path, brokers=3, broker_settings=FAULT_BROKER,
                      controller_settings={"broker_session_timeout_ms": 2500},
                      topics=[{"name": "t", "partitions": 1, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address, timeout_s=1.0)
        leader = wait_full_isr(admin, "t", 20, "a leader with the full ISR").leader
        kafka_client = Client(client, bootstrap(c))
        producer = kafka_client.producer("all")
        t0 = time.monotonic()
        i, killed, restarted = 0, False, False
        while time.monotonic() - t0 < 9:
            producer.send("t", b"%d" % i)
            i += 1
            time.sleep(0.002)
            if not killed and time.monotonic() - t0 > 2:
                c.kill(leader)
                killed = True
            if killed and not restarted and time.monotonic() - t0 > 5:
                c.start_broker(leader)
                restarted = True
        producer.finish()
        wait_full_isr(admin, "t", 30, "the full ISR again")
        got = kafka_client.read_all("t", len(producer.acked))
        admin.close()
    offsets = [o for o, _ in got]
    assert offsets == list(range(len(got)))
    stored = {v: o for o, v in got}
    assert len(producer.acked) > 500
    assert {v: stored.get(v) for v in producer.acked} == producer.acked       # nothing acknowledged lost


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.parametrize("truncation", ["hw", "leader-epoch"])
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_acks_1_hw_truncation_loses_an_acknowledged_write(tmp_path, client, truncation):
    """The staging of tests/broker/test_hw_loss_real.py (KIP-101 scenario 1) with a Kafka client producing
    (acks=1) and reading: with truncation="hw" the five acknowledged values are gone from the new leader;
    with leader-epoch truncation they are all there."""
    pytest.importorskip({"confluent": "confluent_kafka", "kafka-python": "kafka"}[client])
    values = [b"m0", b"m1", b"m2", b"m3", b"m4"]
    with BareCluster(tmp_path, brokers=2,
                      broker_settings={"truncation": truncation, "min_insync_replicas": 1, "flush": "always",
                                       "hw_checkpoint_interval_ms": 60_000, "heartbeat_interval_ms": 300,
                                       "replica_lag_time_max_ms": 30_000},
                      controller_settings={"broker_session_timeout_ms": 8000, "unclean_leader_election": True},
                      topics=[{"name": "kip101", "partitions": 1, "replication_factor": 2}]) as c:
        admin = Admin(c.controller_address, timeout_s=1.0)
        a = wait_full_isr(admin, "kip101", 30, "both replicas in the ISR", isr_size=2).leader
        b = 3 - a

        def replica(broker: int) -> dict | None:
            rep = admin.replicas(broker)
            return None if rep is None else rep.get(("kip101", 0))

        kafka_client = Client(client, bootstrap(c))
        producer = kafka_client.producer(1)
        for v in values:
            producer.send("kip101", v)
        producer.finish()
        assert producer.acked == {v: i for i, v in enumerate(values)}
        wait_until(lambda: (lambda r: r and (r["leo"], r["hw"]) == (5, 5))(replica(b)), 10, "B at LEO 5, HW 5")
        c.signal(a, signal.SIGSTOP)
        try:
            c.kill(b)
            c.start_broker(b)
            wait_until(lambda: (lambda r: r and r["role"] == "follower" and r["leader"] == a)(replica(b)), 6,
                       "restarted B following A")
        finally:
            c.kill(a)
        wait_until(lambda: (lambda r: r and r["role"] == "leader")(replica(b)), 30, "B leading")
        # one more value through the new leader, so that the read below shows where the log now ends
        after = kafka_client.producer(1)
        after.send("kip101", b"after")
        after.finish()
        got = kafka_client.read_all("kip101", 1, quiet_s=2.0)
        admin.close()
    if truncation == "hw":
        assert after.acked == {b"after": 0}
        assert got == [(0, b"after")]           # m0..m4 were acknowledged and are gone
    else:
        assert after.acked == {b"after": 5}
        assert got == list(enumerate(values + [b"after"]))
