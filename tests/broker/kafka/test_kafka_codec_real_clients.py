"""The codec against real Kafka client libraries (confluent-kafka = librdkafka, kafka-python), with no
broker in between: a tiny scripted server on 127.0.0.1 answers with `encode_response` and decodes what
the clients send with `decode_request` / `decode_batches`. A client that produces and consumes three
values through it shows that both libraries accept our encodings (ApiVersions v3 with header v0,
Metadata, Produce, ListOffsets, Fetch with RecordBatch v2) and that we decode their frames, byte for
byte as they sent them; and that, given Metadata v9, both send the partition's leader epoch as each
Fetch's current_leader_epoch (KIP-320). (The broker's real listener is tested with real brokers elsewhere.)"""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from broker.kafka import versions as V
from broker.kafka.messages import UnsupportedRequest, decode_request, encode_response
from broker.kafka.records import decode_batches, encode_batch

TOPIC = "t"
EPOCH = 5       # the partition's leader epoch: not 0 or -1, so an epoch a client sends is known to come from us


class ScriptedServer:
    """One node (id 1) leading one partition (t/0) at leader epoch EPOCH, log kept in memory. Records, per
    api name, the `current_leader_epoch` of every partition a Fetch, ListOffsets or OffsetForLeaderEpoch
    named (KIP-320: what the client believes the leader's epoch is; -1 when it does not say)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.log: list[tuple[int, bytes]] = []         # (timestamp, value)
        self.seen: list[tuple[int, int]] = []          # (api key, version) decoded
        self.epochs: dict[int, list[int]] = {}         # api key -> current_leader_epoch sent, in order
        self.epoch = EPOCH                             # the partition's leader epoch now
        self.fence_next_fetch = False                  # answer the next Fetch FENCED_LEADER_EPOCH, epoch + 1
        self.problems: list[str] = []
        self.lock = threading.Lock()
        self.closing = False
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closing = True
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def _accept(self):
        while not self.closing:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read(self, conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _serve(self, conn):
        try:
            while True:
                (n,) = struct.unpack(">i", self._read(conn, 4))
                payload = self._read(conn, n)
                try:
                    req = decode_request(payload)
                except UnsupportedRequest as u:
                    if u.api_key == V.API_VERSIONS:
                        conn.sendall(encode_response(V.API_VERSIONS, 0, u.correlation_id,
                                                     {"error_code": 35, "api_keys": self._api_keys()}))
                        continue
                    with self.lock:
                        self.problems.append(f"unsupported {u.api_key} v{u.api_version}")
                    return
                with self.lock:
                    self.seen.append((req.api_key, req.api_version))
                    self._note_epochs(req)
                    body = self._answer(req)
                if body is None:
                    return
                if req.api_key == V.PRODUCE and req.body["acks"] == 0:
                    continue
                conn.sendall(encode_response(req.api_key, req.api_version, req.correlation_id, body))
        except (EOFError, OSError):
            pass
        except Exception as e:  # a codec bug: the test reports it
            with self.lock:
                self.problems.append(f"{type(e).__name__}: {e}")
        finally:
            conn.close()

    @staticmethod
    def _api_keys():
        """What the broker advertises, less the group protocol (this server has no coordinator: the
        clients then do without one, as with a broker that has no groups)."""
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(V.SUPPORTED.items())
                if k not in V.GROUP_APIS]

    def _note_epochs(self, req):
        if req.api_key in (V.FETCH, V.LIST_OFFSETS, V.OFFSET_FOR_LEADER_EPOCH):
            for t in req.body["topics"]:
                for p in t["partitions"]:
                    self.epochs.setdefault(req.api_key, []).append(p.get("current_leader_epoch", -1))

    def _answer(self, req):
        b = req.body
        if req.api_key == V.API_VERSIONS:
            return {"error_code": 0, "api_keys": self._api_keys()}
        if req.api_key == V.METADATA:
            return {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}], "cluster_id": "scripted",
                    "controller_id": 1,
                    "topics": [{"error_code": 0, "name": TOPIC, "partitions": [
                        {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": self.epoch,
                         "replica_nodes": [1], "isr_nodes": [1]}]}]}
        if req.api_key == V.PRODUCE:
            [topic] = b["topic_data"]
            [part] = topic["partition_data"]
            base = len(self.log)
            for batch in decode_batches(part["records"]):
                self.log += [(r.timestamp, r.value) for r in batch.records]
            return {"responses": [{"name": topic["name"], "partition_responses": [
                {"index": part["index"], "error_code": 0, "base_offset": base, "log_start_offset": 0}]}]}
        if req.api_key == V.LIST_OFFSETS:
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                 "offset": 0 if p["timestamp"] == -2 else len(self.log), "leader_epoch": self.epoch}
                for p in t["partitions"]]} for t in b["topics"]]}
        if req.api_key == V.OFFSET_FOR_LEADER_EPOCH:
            return {"topics": [{"topic": t["topic"], "partitions": [
                {"error_code": 0, "partition": p["partition"], "leader_epoch": self.epoch, "end_offset": len(self.log)}
                for p in t["partitions"]]} for t in b["topics"]]}
        stale = req.api_key == V.FETCH and any(
            0 <= p.get("current_leader_epoch", -1) < self.epoch for t in b["topics"] for p in t["partitions"])
        if req.api_key == V.FETCH and (self.fence_next_fetch or stale):
            # a leader change the client has not seen: KIP-320 refuses its epoch, metadata has the new one;
            # as a real leader does, every later Fetch with the old epoch is refused too
            if self.fence_next_fetch:
                self.fence_next_fetch = False
                self.epoch += 1
            return {"session_id": 0, "responses": [{"topic": t["topic"], "partitions": [
                {"partition_index": p["partition"], "error_code": 74, "high_watermark": -1, "records": b""}
                for p in t["partitions"]]} for t in b["topics"]]}
        if req.api_key == V.FETCH:
            responses = []
            for t in b["topics"]:
                parts = []
                for p in t["partitions"]:
                    start = p["fetch_offset"]
                    recs = [(ts, None, v) for ts, v in self.log[start:]]
                    parts.append({"partition_index": p["partition"], "error_code": 0,
                                  "high_watermark": len(self.log), "last_stable_offset": len(self.log),
                                  "log_start_offset": 0, "aborted_transactions": None,
                                  "records": encode_batch(start, EPOCH, recs) if recs else b""})
                responses.append({"topic": t["topic"], "partitions": parts})
            if not any(p["records"] for r in responses for p in r["partitions"]):
                time.sleep(min(b["max_wait_ms"], 100) / 1000)
            return {"session_id": 0, "responses": responses}
        self.problems.append(f"unexpected api {req.api_key} v{req.api_version}")
        return None


@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.close()


def _wait(cond, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_librdkafka_produces_and_consumes_through_our_codec(server):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    conf = {"bootstrap.servers": f"127.0.0.1:{server.port}", "enable.idempotence": False,
            "compression.type": "none", "acks": "all"}
    producer = confluent_kafka.Producer(conf)
    errors = []
    for i in range(3):
        producer.produce(TOPIC, value=b"value-%d" % i, partition=0,
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(15) == 0
    assert errors == [] and server.problems == []
    assert [v for _, v in server.log] == [b"value-0", b"value-1", b"value-2"]
    assert (V.API_VERSIONS, 3) in server.seen                     # librdkafka's first request
    assert any(k == V.PRODUCE and v >= 3 for k, v in server.seen)

    consumer = confluent_kafka.Consumer({"bootstrap.servers": f"127.0.0.1:{server.port}", "group.id": "unused",
                                         "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.offset(), msg.value()))
        assert got == [(0, b"value-0"), (1, b"value-1"), (2, b"value-2")], server.problems
        assert any(k == V.FETCH and v >= 4 for k, v in server.seen)
    finally:
        consumer.close()
    assert server.problems == []
    # librdkafka keeps a Metadata answer's leader epoch only from v9 (flexible) on, and then sends it as
    # every Fetch's current_leader_epoch (KIP-320); with Metadata v8 it sent -1
    assert (V.METADATA, 9) in server.seen
    assert server.epochs[V.FETCH] and set(server.epochs[V.FETCH]) == {EPOCH}


def test_kafka_python_produces_and_consumes_through_our_codec(server):
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=f"127.0.0.1:{server.port}", enable_idempotence=False,
                                   acks="all", linger_ms=0)
    try:
        for i in range(3):
            producer.send(TOPIC, value=b"kp-%d" % i, partition=0).get(timeout=15)
    finally:
        producer.close(timeout=5)
    assert [v for _, v in server.log] == [b"kp-0", b"kp-1", b"kp-2"]
    assert server.problems == []
    consumer = kafka.KafkaConsumer(bootstrap_servers=f"127.0.0.1:{server.port}", enable_auto_commit=False,
                                   consumer_timeout_ms=10000)
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = []
        for msg in consumer:
            got.append((msg.offset, msg.value))
            if len(got) == 3:
                break
        assert got == [(0, b"kp-0"), (1, b"kp-1"), (2, b"kp-2")], server.problems
    finally:
        consumer.close()
    assert server.problems == []
    assert any(k == V.FETCH for k, _ in server.seen)
    # kafka-python too takes leader epochs from Metadata v9+ only (KAFKA-9212), then sends them in Fetch
    assert (V.METADATA, 9) in server.seen
    assert server.epochs[V.FETCH] and set(server.epochs[V.FETCH]) == {EPOCH}


def _consume(poll, n: int, timeout_s: float = 10.0) -> list[int]:
    got: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        got += poll()
    return got


@pytest.mark.parametrize("library", ["confluent", "kafka-python"])
def test_a_fenced_fetch_makes_the_client_take_the_new_epoch(server, library):
    """A Fetch answered FENCED_LEADER_EPOCH (74): the client asks Metadata again, validates its position with
    OffsetForLeaderEpoch (v2+, which carries the current leader epoch) and fetches on with the new epoch;
    nothing is skipped or repeated. The epochs a client sends come from Metadata v9 only: 5, then 6."""
    server.log = [(1000 + i, b"x%d" % i) for i in range(3)]
    if library == "confluent":
        confluent_kafka = pytest.importorskip("confluent_kafka")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": f"127.0.0.1:{server.port}", "group.id": "unused",
                                             "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])

        def poll():
            return [m.offset() for m in consumer.consume(10, 0.2) if m.error() is None]
    else:
        kafka = pytest.importorskip("kafka")
        consumer = kafka.KafkaConsumer(bootstrap_servers=f"127.0.0.1:{server.port}", enable_auto_commit=False,
                                       fetch_max_wait_ms=100)
        tp = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)

        def poll():
            return [r.offset for rs in consumer.poll(200).values() for r in rs]
    try:
        got = _consume(poll, 3)
        with server.lock:
            server.fence_next_fetch = True
            server.log.append((2000, b"y"))
        got += _consume(poll, 1)
    finally:
        consumer.close()
    assert got == [0, 1, 2, 3] and server.problems == []
    fetched = server.epochs[V.FETCH]
    assert set(fetched) == {EPOCH, EPOCH + 1} and fetched[-1] == EPOCH + 1
    assert fetched == sorted(fetched)                     # never back to the old epoch
    assert [v for k, v in server.seen if k == V.OFFSET_FOR_LEADER_EPOCH] and \
        min(v for k, v in server.seen if k == V.OFFSET_FOR_LEADER_EPOCH) >= 2
