"""The Kafka protocol on a real 3-broker cluster's client listener (issue 20), driven with our own codec
(broker/kafka/messages.py) as a raw client: ApiVersions, Metadata, Produce (acks=1/all/0), Fetch with the
leader epoch stamped in each batch and its CRC-32C checked, the error codes of a follower, of KIP-320
fencing and of an offset out of range, ListOffsets, OffsetForLeaderEpoch, CreateTopics, and batches the
broker refuses (bad CRC, transactional, ...); records with keys, headers, null values and producer timestamps
are stored, replicated and served as sent; the idempotent producer's InitProducerId, retries, sequence gaps
and fenced epochs."""
from __future__ import annotations

import struct
import time

import pytest

from broker.client import Admin
from broker.kafka import errors as E
from broker.kafka import messages as M
from broker.kafka import versions as V
from broker.kafka.records import crc32c, decode_batches, encode_batch
from clusters.bare import BareCluster, wait_until
from tests.broker.real_processes import wait_full_isr
from workloads.kafka_wire import KafkaConnection

TOPIC = "kt"
BROKER = {"min_insync_replicas": 2, "heartbeat_interval_ms": 200, "replica_fetch_wait_max_ms": 100}


class KafkaConn(KafkaConnection):
    """A raw Kafka client connection (workloads/kafka_wire.py): one request at a time, correlation ids checked."""

    def __init__(self, address: tuple[str, int]):
        super().__init__(address, timeout_s=10.0, client_id="kafka-listener-test")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with BareCluster(tmp_path_factory.mktemp("kafka-listener"), brokers=3, broker_settings=BROKER,
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        wait_full_isr(admin, TOPIC, 20, "a leader with the full ISR")
        yield c, admin


def leader_of(admin: Admin, topic: str = TOPIC):
    info = wait_full_isr(admin, topic, 20, f"{topic}: a leader with the full ISR")
    return info.leader, info.epoch


def lead_elsewhere(cluster, admin: Admin, leader: int):
    """Elect the lowest-numbered other broker leader of TOPIC/0: (its id, the partition's new info)."""
    other = next(b for b in sorted(cluster.brokers) if b != leader)
    admin.elect_leader(TOPIC, 0, broker=other)
    info = wait_until(lambda: (lambda d: d if d.leader == other else None)(admin.describe(TOPIC)[0]), 20,
                      f"broker {other} leading")
    return other, info


def conn_to(cluster, broker_id: int) -> KafkaConn:
    return KafkaConn(cluster.brokers[broker_id].address)


def produce_body(values: list[bytes], acks: int, *, topic: str = TOPIC, records: bytes | None = None,
                 txn: str | None = None) -> dict:
    if records is None:
        records = encode_batch(0, -1, [(int(time.time() * 1000), None, v) for v in values])
    return {"transactional_id": txn, "acks": acks, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


def produced(resp: dict) -> dict:
    [t] = resp["responses"]
    [p] = t["partition_responses"]
    return p


def fetch_body(offset: int, *, epoch: int = -1, max_wait_ms: int = 0, topic: str = TOPIC,
               partition_max_bytes: int = 1 << 20) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": partition_max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fetched(resp: dict) -> dict:
    assert resp.get("error_code", 0) == 0 and resp.get("session_id", 0) == 0     # v7+ fields
    [t] = resp["responses"]
    [p] = t["partitions"]
    return p


def list_offsets(conn: KafkaConn, timestamp: int, *, epoch: int = -1) -> dict:
    resp = conn.request(V.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": epoch,
                                        "timestamp": timestamp}]}]})
    [t] = resp["topics"]
    [p] = t["partitions"]
    return p


def test_api_versions_v0_and_v3(cluster):
    c, _admin = cluster
    conn = conn_to(c, 1)
    expected = sorted([k, lo, hi] for k, (lo, hi) in V.SUPPORTED.items())
    v0 = conn.request(V.API_VERSIONS, 0, {})
    assert v0["error_code"] == 0
    assert sorted([a["api_key"], a["min_version"], a["max_version"]] for a in v0["api_keys"]) == expected
    v3 = conn.request(V.API_VERSIONS, 3, {"client_software_name": "hw-test", "client_software_version": "1.0"})
    assert v3["error_code"] == 0 and v3["throttle_time_ms"] == 0
    assert sorted([a["api_key"], a["min_version"], a["max_version"]] for a in v3["api_keys"]) == expected
    conn.close()


def test_unsupported_api_versions_version_answers_v0_body(cluster):
    """A newer client asks ApiVersions v9: UNSUPPORTED_VERSION with the ranges in the v0 body, and the
    connection stays open for the retry in a version we speak."""
    c, _admin = cluster
    conn = conn_to(c, 2)
    frame = bytearray(M.encode_request(V.API_VERSIONS, 3, 77, "new-client", {"client_software_name": "x",
                                                                             "client_software_version": "9"}))
    struct.pack_into(">h", frame, 6, 9)         # api_version in the header
    conn.sock.sendall(bytes(frame))
    body = conn.receive(V.API_VERSIONS, 0, 77)
    assert body["error_code"] == E.UNSUPPORTED_VERSION == 35
    assert {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]} == V.SUPPORTED
    assert conn.request(V.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})[
        "error_code"] == 0
    conn.close()


def test_metadata_lists_brokers_and_topic(cluster):
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, 3)
    md = conn.request(V.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                      "include_cluster_authorized_operations": False,
                                      "include_topic_authorized_operations": False})
    assert sorted((b["node_id"], b["host"], b["port"]) for b in md["brokers"]) == sorted(
        (b, *c.brokers[b].address) for b in (1, 2, 3))
    assert md["cluster_id"] == "highwater" and md["controller_id"] in (1, 2, 3)
    [topic] = [t for t in md["topics"] if t["name"] == TOPIC]
    assert topic["error_code"] == 0 and not topic["is_internal"]
    [p] = topic["partitions"]
    assert (p["error_code"], p["partition_index"], p["leader_id"], p["leader_epoch"]) == (0, 0, leader, epoch)
    assert sorted(p["replica_nodes"]) == [1, 2, 3] and sorted(p["isr_nodes"]) == [1, 2, 3]
    assert p["offline_replicas"] == []
    # v9 (flexible: header v2, compact encodings, tag sections) answers the same body
    assert conn.request(V.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                        "include_cluster_authorized_operations": False,
                                        "include_topic_authorized_operations": False}) == md
    unknown = conn.request(V.METADATA, 8, {"topics": [{"name": "no-such-topic"}],
                                           "allow_auto_topic_creation": False})
    assert [(t["name"], t["error_code"], t["partitions"]) for t in unknown["topics"]] == [
        ("no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION, [])]
    # Kafka's auto-creation (auto_create_topics_enable, on by default): the request that names it creates
    # it and is answered LEADER_NOT_AVAILABLE; it has num_partitions partitions of
    # default_replication_factor replicas once the controller made it
    made = conn.request(V.METADATA, 8, {"topics": [{"name": "auto-made"}], "allow_auto_topic_creation": True})
    assert [(t["name"], t["error_code"], t["partitions"]) for t in made["topics"]] == [
        ("auto-made", E.LEADER_NOT_AVAILABLE, [])]
    wait_until(lambda: conn.request(V.METADATA, 1, {"topics": [{"name": "auto-made"}]})["topics"][0]["error_code"] == 0,
               10, "auto-made has a leader")
    [p] = conn.request(V.METADATA, 1, {"topics": [{"name": "auto-made"}]})["topics"][0]["partitions"]
    assert p["partition_index"] == 0 and len(p["replica_nodes"]) == 1
    time.sleep(0.5)     # not allowed by its request: still unknown
    assert conn.request(V.METADATA, 8, {"topics": [{"name": "no-such-topic"}], "allow_auto_topic_creation": False})[
        "topics"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    conn.close()


def test_produce_acks_1_all_0_then_fetch(cluster):
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    start = list_offsets(conn, -1)["offset"]
    r1 = produced(conn.request(V.PRODUCE, 8, produce_body([b"a0", b"a1", b"a2"], 1)))
    assert (r1["index"], r1["error_code"], r1["base_offset"]) == (0, 0, start)
    r2 = produced(conn.request(V.PRODUCE, 7, produce_body([b"b0", b"b1"], -1)))
    assert (r2["error_code"], r2["base_offset"]) == (0, start + 3)
    # acks=0: no response; the next request's response is the next thing on the connection
    conn.send(V.PRODUCE, 3, produce_body([b"c0"], 0))
    wait_until(lambda: list_offsets(conn, -1)["offset"] == start + 6, 10, "the acks=0 record committed")

    p = fetched(conn.request(V.FETCH, 11, fetch_body(start, epoch=epoch)))
    assert (p["error_code"], p["high_watermark"], p["last_stable_offset"], p["log_start_offset"]) == (
        0, start + 6, start + 6, 0)
    batches = decode_batches(p["records"], allow_partial_tail=True)   # verifies every CRC-32C
    values = [(r.offset, r.value) for b in batches for r in b.records]
    assert values == list(enumerate([b"a0", b"a1", b"a2", b"b0", b"b1", b"c0"], start))
    assert all(b.partition_leader_epoch == epoch and b.magic == 2 for b in batches)
    assert all(r.key is None and r.headers == [] and r.timestamp > 0 for b in batches for r in b.records)
    raw = p["records"]
    assert struct.unpack_from(">I", raw, 17)[0] == crc32c(raw[21:12 + struct.unpack_from(">i", raw, 8)[0]])
    # the same read in the oldest fetch version served
    p4 = fetched(conn.request(V.FETCH, 4, fetch_body(start + 4)))
    assert [r.value for b in decode_batches(p4["records"]) for r in b.records] == [b"b1", b"c0"]
    conn.close()


def test_fetch_long_poll_wakes_on_commit(cluster):
    c, admin = cluster
    leader, epoch = leader_of(admin)
    consumer, producer = conn_to(c, leader), conn_to(c, leader)
    end = list_offsets(consumer, -1)["offset"]
    t0 = time.monotonic()
    empty = fetched(consumer.request(V.FETCH, 11, fetch_body(end, epoch=epoch, max_wait_ms=300)))
    assert empty["records"] == b"" and time.monotonic() - t0 >= 0.25
    corr = consumer.send(V.FETCH, 11, fetch_body(end, epoch=epoch, max_wait_ms=10_000))
    time.sleep(0.3)
    t1 = time.monotonic()
    assert produced(producer.request(V.PRODUCE, 8, produce_body([b"woke"], -1)))["error_code"] == 0
    p = fetched(consumer.receive(V.FETCH, 11, corr))
    assert time.monotonic() - t1 < 3
    assert [r.value for b in decode_batches(p["records"]) for r in b.records] == [b"woke"]
    consumer.close()
    producer.close()


def test_follower_answers_not_leader(cluster):
    c, admin = cluster
    leader, _epoch = leader_of(admin)
    follower = next(b for b in (1, 2, 3) if b != leader)
    conn = conn_to(c, follower)
    assert produced(conn.request(V.PRODUCE, 8, produce_body([b"x"], -1)))["error_code"] == \
        E.NOT_LEADER_OR_FOLLOWER == 6
    assert fetched(conn.request(V.FETCH, 11, fetch_body(0)))["error_code"] == 6
    assert list_offsets(conn, -1)["error_code"] == 6
    conn.close()


def test_leader_epoch_fencing_and_offset_out_of_range(cluster):
    c, admin = cluster
    leader, epoch = leader_of(admin)
    first = conn_to(c, leader)      # a record in this epoch, so that the epoch is in the epoch cache
    assert produced(first.request(V.PRODUCE, 8, produce_body([b"old-epoch"], -1)))["error_code"] == 0
    first.close()
    if epoch == 0:      # move leadership once, so that an older epoch exists
        target = next(b for b in (1, 2, 3) if b != leader)
        admin.elect_leader(TOPIC, 0, broker=target)
        wait_until(lambda: leader_of(admin)[1] > epoch, 20, "a new leader epoch")
        leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    wait_until(lambda: list_offsets(conn, -1)["error_code"] == 0, 10, "the new leader serving")
    assert fetched(conn.request(V.FETCH, 11, fetch_body(0, epoch=epoch - 1)))["error_code"] == \
        E.FENCED_LEADER_EPOCH == 74
    assert fetched(conn.request(V.FETCH, 11, fetch_body(0, epoch=epoch + 1)))["error_code"] == \
        E.UNKNOWN_LEADER_EPOCH == 75
    assert list_offsets(conn, -1, epoch=epoch - 1)["error_code"] == 74
    assert list_offsets(conn, -1, epoch=epoch + 1)["error_code"] == 75
    for current, code in ((epoch - 1, 74), (epoch + 1, 75)):
        resp = conn.request(V.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
            {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": 0}]}]})
        assert resp["topics"][0]["partitions"][0]["error_code"] == code
    # the old epoch ends where the new one starts
    resp = conn.request(V.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": epoch, "leader_epoch": epoch - 1}]}]})
    [p] = resp["topics"][0]["partitions"]
    starts = dict(admin.replicas(leader)[(TOPIC, 0)]["epochs"])
    assert (p["error_code"], p["leader_epoch"], p["end_offset"]) == (
        0, max(e for e in starts if e < epoch), starts[epoch])
    hw = list_offsets(conn, -1)["offset"]
    oor = fetched(conn.request(V.FETCH, 11, fetch_body(hw + 1000, epoch=epoch)))
    assert (oor["error_code"], oor["high_watermark"], oor["log_start_offset"], oor["records"]) == (
        E.OFFSET_OUT_OF_RANGE, hw, 0, b"")
    conn.close()


def test_list_offsets_and_offset_for_leader_epoch(cluster):
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    before = int(time.time() * 1000)
    time.sleep(0.01)
    base = produced(conn.request(V.PRODUCE, 8, produce_body([b"t0", b"t1"], -1)))["base_offset"]
    hw = base + 2
    earliest, latest = list_offsets(conn, -2), list_offsets(conn, -1)
    assert (earliest["error_code"], earliest["offset"], earliest["timestamp"]) == (0, 0, -1)
    assert (latest["error_code"], latest["offset"], latest["leader_epoch"]) == (0, hw, epoch)
    by_time = list_offsets(conn, before)
    assert (by_time["error_code"], by_time["offset"], by_time["leader_epoch"]) == (0, base, epoch)
    assert by_time["timestamp"] >= before
    future = list_offsets(conn, int(time.time() * 1000) + 3_600_000)
    assert (future["error_code"], future["offset"], future["timestamp"]) == (0, -1, -1)

    resp = conn.request(V.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": epoch, "leader_epoch": epoch}]}]})
    [p] = resp["topics"][0]["partitions"]
    assert (p["error_code"], p["partition"], p["leader_epoch"], p["end_offset"]) == (0, 0, epoch, hw)
    resp = conn.request(V.OFFSET_FOR_LEADER_EPOCH, 2, {"topics": [
        {"topic": "no-such-topic", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    assert resp["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    conn.close()


def test_create_topics(cluster):
    c, _admin = cluster
    conn = conn_to(c, 2)

    def create(topics: list[dict], version: int = 4, validate_only: bool = False) -> list[tuple]:
        resp = conn.request(V.CREATE_TOPICS, version, {"topics": topics, "timeout_ms": 10_000,
                                                       "validate_only": validate_only})
        return [(t["name"], t["error_code"]) for t in resp["topics"]]

    def spec(name: str, partitions: int = 2, rf: int = 3, configs=()) -> dict:
        return {"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs]}

    assert create([spec("made-by-kafka")]) == [("made-by-kafka", 0)]
    md = wait_until(lambda: (lambda m: m if m["topics"][0]["error_code"] == 0 else None)(
        conn.request(V.METADATA, 8, {"topics": [{"name": "made-by-kafka"}]})), 10, "the new topic in metadata")
    assert [p["partition_index"] for p in md["topics"][0]["partitions"]] == [0, 1]
    assert create([spec("made-by-kafka")], version=2) == [("made-by-kafka", E.TOPIC_ALREADY_EXISTS)]
    assert create([spec("bad/name"), spec("too-many", rf=5), spec("with-config", configs=[("x", "y")]),
                   spec("only-checked")], validate_only=True) == [
        ("bad/name", E.INVALID_TOPIC_EXCEPTION), ("too-many", E.INVALID_REPLICATION_FACTOR),
        ("with-config", E.INVALID_CONFIG), ("only-checked", 0)]
    time.sleep(0.3)
    assert conn.request(V.METADATA, 8, {"topics": [{"name": "only-checked"}], "allow_auto_topic_creation": False})[
        "topics"][0]["error_code"] == 3         # validate_only made nothing
    conn.close()


def _with_attributes(batch: bytes, attributes: int) -> bytes:
    b = bytearray(batch)
    struct.pack_into(">h", b, 21, attributes)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


KAFKA_RECORDS = [   # (timestamp, key, value, headers): what Kafka clients send
    (1_700_000_000_000, b"k0", b"v0", [("trace", b"abc"), ("empty", b""), ("null", None)]),
    (1_700_000_000_007, b"", b"v1", []),               # an empty key is a key
    (1_600_000_000_000, b"k2", None, [("deleted", b"1")]),     # a tombstone, an older CreateTime
    (1_700_000_000_009, None, b"\xff\x00binary", [("h", b"\x00\xff")]),
]


def _records(data: bytes) -> list[tuple]:
    return [(r.timestamp, r.key, r.value, r.headers) for b in decode_batches(data, allow_partial_tail=True)
            for r in b.records]


def test_keys_headers_tombstones_and_create_times_are_stored_replicated_and_served(cluster):
    """One batch of records as Kafka clients send them, acks=all: the leader serves them back exactly
    (key, value, headers, CreateTime), and so does a follower once elected leader: what replication
    copied is the same records."""
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    start = list_offsets(conn, -1)["offset"]
    r = produced(conn.request(V.PRODUCE, 8, produce_body([], -1, records=encode_batch(0, -1, KAFKA_RECORDS))))
    assert (r["error_code"], r["base_offset"], r["log_append_time_ms"]) == (0, start, -1)
    p = fetched(conn.request(V.FETCH, 11, fetch_body(start, epoch=epoch)))
    assert _records(p["records"]) == KAFKA_RECORDS
    conn.close()
    other, info = lead_elsewhere(c, admin, leader)
    conn = conn_to(c, other)
    # a new leader serves its log up to its HW, which moves once the followers fetch from it
    got = wait_until(lambda: _records(fetched(conn.request(V.FETCH, 11, fetch_body(start, epoch=info.epoch)))
                                      ["records"]), 20, f"broker {other} serving the records")
    assert got[:len(KAFKA_RECORDS)] == KAFKA_RECORDS
    conn.close()


def test_refused_batches(cluster):
    c, admin = cluster
    leader, _epoch = leader_of(admin)
    conn = conn_to(c, leader)
    end = list_offsets(conn, -1)["offset"]
    ts = int(time.time() * 1000)
    plain = encode_batch(0, -1, [(ts, None, b"v")])
    corrupt = bytearray(plain)
    corrupt[-1] ^= 0xFF
    cases = {
        "gzip-flag-on-plain-records": (_with_attributes(plain, 1), None, E.CORRUPT_MESSAGE),
        "bad-crc": (bytes(corrupt), None, E.CORRUPT_MESSAGE),
        "idempotent-without-sequence": (encode_batch(0, -1, [(ts, None, b"v")], producer=(7, 0, -1)),
                                        None, E.INVALID_RECORD),
        "transactional": (plain, "txn-1", E.UNSUPPORTED_FOR_MESSAGE_FORMAT),
        "empty": (b"", None, E.INVALID_RECORD),
        "two-batches": (plain + plain, None, E.INVALID_RECORD),
        "too-many-records": (encode_batch(0, -1, [(ts, None, b"")] * 100_001), None, E.MESSAGE_TOO_LARGE),
    }
    got = {}
    for name, (records, txn, _code) in cases.items():
        p = produced(conn.request(V.PRODUCE, 8, produce_body([], -1, records=records, txn=txn)))
        got[name] = p["error_code"]
        assert p["base_offset"] == -1 and p["error_message"]
    assert got == {name: code for name, (_r, _t, code) in cases.items()}
    assert (got["gzip-flag-on-plain-records"], got["bad-crc"]) == (2, 2)
    assert list_offsets(conn, -1)["offset"] == end      # nothing appended
    unknown = produced(conn.request(V.PRODUCE, 8, produce_body([b"x"], 1, topic="no-such-topic")))
    assert unknown["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    conn.close()


def test_acks_0_failure_closes_the_connection(cluster):
    """Kafka's rule: an acks=0 produce that fails closes the connection (the producer then refreshes its
    metadata); the broker keeps serving."""
    c, admin = cluster
    leader, _epoch = leader_of(admin)
    follower = next(b for b in (1, 2, 3) if b != leader)
    conn = conn_to(c, follower)
    conn.send(V.PRODUCE, 8, produce_body([b"lost"], 0))
    assert conn.sock.recv(1) == b""
    conn.close()
    again = conn_to(c, follower)
    assert again.request(V.API_VERSIONS, 0, {})["error_code"] == 0
    again.close()


# --- a handler bug (in-process server: the real handlers with a replica manager that fails) ----------------
class _Broken:
    """Stands in for the ReplicaManager: every call is a bug."""
    metadata = None

    def get(self, topic, partition):
        raise RuntimeError("bug in get")


def test_handler_bug_answers_unknown_server_error_and_keeps_serving():
    import asyncio

    from broker.server.kafka_handlers import KafkaHandlers
    from broker.server.rpc import RpcServer

    async def scenario():
        server = RpcServer({}, kafka=KafkaHandlers(_Broken(), 1, controller=None))
        host, port = await server.start("127.0.0.1", 0)

        async def ask(frame: bytes, api: int, version: int):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(frame)
            await writer.drain()
            try:
                (n,) = struct.unpack(">I", await reader.readexactly(4))
                return M.decode_response(api, version, await reader.readexactly(n))[1]
            except asyncio.IncompleteReadError as exc:
                return ("closed", exc.partial)
            finally:
                writer.close()
        try:
            lo = await ask(M.encode_request(V.LIST_OFFSETS, 5, 1, "t", {"replica_id": -1, "isolation_level": 0,
                           "topics": [{"name": "x", "partitions": [{"partition_index": 3, "current_leader_epoch": -1,
                                                                    "timestamp": -1}]}]}), V.LIST_OFFSETS, 5)
            metadata = await ask(M.encode_request(V.METADATA, 8, 2, "t", {"topics": None}), V.METADATA, 8)
            ok = await ask(M.encode_request(V.API_VERSIONS, 0, 3, "t", {}), V.API_VERSIONS, 0)
        finally:
            await server.close()
        return lo, metadata, ok

    lo, metadata, ok = asyncio.run(scenario())
    assert lo["topics"] == [{"name": "x", "partitions": [{"partition_index": 3, "error_code": -1, "timestamp": -1,
                                                          "offset": -1, "leader_epoch": -1}]}]
    assert metadata["brokers"] == [] and metadata["controller_id"] == -1      # metadata not known yet
    assert ok["error_code"] == 0


def test_kafka_code_mapping():
    assert [E.kafka_code(s) for s in ("NOT_LEADER", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                                      "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_OUT_OF_RANGE",
                                      "UNKNOWN_PARTITION", "REQUEST_TIMED_OUT", "KAFKA_STORAGE_ERROR")] == [
        6, 19, 20, 74, 75, 1, 3, 7, 56]
    assert (E.kafka_code(None), E.kafka_code("NONE"), E.kafka_code("SOMETHING_NEW")) == (0, 0, -1)


def test_fetch_size_limits(cluster):
    """partition_max_bytes bounds a partition's records, except that the first record of the response
    goes out even when it alone is larger (KIP-74)."""
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    big = bytes(range(256)) * 800                               # 204,800 bytes
    base = produced(conn.request(V.PRODUCE, 8, produce_body([big], -1)))["base_offset"]
    p = fetched(conn.request(V.FETCH, 11, fetch_body(base, epoch=epoch, partition_max_bytes=1000)))
    assert [(r.offset, r.value) for b in decode_batches(p["records"]) for r in b.records] == [(base, big)]
    small = [bytes([65 + i]) * 1000 for i in range(10)]
    base = produced(conn.request(V.PRODUCE, 8, produce_body(small, -1)))["base_offset"]
    got: list[bytes] = []
    while len(got) < 10:
        p = fetched(conn.request(V.FETCH, 11, fetch_body(base + len(got), epoch=epoch, partition_max_bytes=3000)))
        part = [r.value for b in decode_batches(p["records"]) for r in b.records]
        assert 1 <= len(part) <= 3 and len(p["records"]) <= 3000
        got.extend(part)
    assert got == small
    conn.close()


def test_fetch_bounds_duplicates_max_bytes_and_reads_by_bytes(cluster):
    """Bounded work per Fetch (issue 28): a partition named 200 times is answered once; max_bytes 0 sends
    only the first record (KIP-74), not everything; a fetch of 10 KB records at 100 KB sends what fits;
    no answer carries more than FETCH_MAX_BYTES whatever max_bytes says."""
    from broker.server.kafka_handlers import FETCH_MAX_BYTES
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    values = [bytes([97 + i % 26]) * 10_000 for i in range(30)]
    base = produced(conn.request(V.PRODUCE, 8, produce_body(values, -1)))["base_offset"]

    body = fetch_body(base, epoch=epoch, partition_max_bytes=100_000)
    body["max_bytes"] = 100_000
    body["topics"][0]["partitions"] *= 200
    resp = conn.request(V.FETCH, 11, body)
    [t] = resp["responses"]
    assert len(t["partitions"]) == 1
    got = [r.value for b in decode_batches(t["partitions"][0]["records"]) for r in b.records]
    assert got == values[:len(got)] and 7 <= len(got) <= 9, len(got)      # ~100 KB of 10 KB records

    body = fetch_body(base, epoch=epoch)
    body["max_bytes"] = 0
    p = fetched(conn.request(V.FETCH, 11, body))
    assert [r.value for b in decode_batches(p["records"]) for r in b.records] == values[:1]

    body = fetch_body(base, epoch=epoch, partition_max_bytes=0x7FFFFFFF)
    body["max_bytes"] = 0x7FFFFFFF
    p = fetched(conn.request(V.FETCH, 11, body))
    assert len(p["records"]) <= FETCH_MAX_BYTES
    conn.close()


def test_list_offsets_with_a_duplicated_partition_is_invalid_request(cluster):
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    one = {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}
    resp = conn.request(V.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": TOPIC, "partitions": [one, one]}]})
    assert [p["error_code"] for p in resp["topics"][0]["partitions"]] == [E.INVALID_REQUEST] * 2
    assert list_offsets(conn, -1)["error_code"] == 0                         # once: answered
    conn.close()


def test_a_huge_metadata_request_closes_the_connection_and_the_broker_keeps_serving(cluster):
    """A Metadata request naming 600,000 topics (10 MB) stalled the broker for seconds while it decoded
    it; now a request other than Produce over 256 KiB, or naming more than 10,000 topics, closes its
    connection unread, and the broker answers the next one at once."""
    from broker.server.kafka_handlers import MAX_METADATA_TOPICS
    c, admin = cluster
    leader, _epoch = leader_of(admin)
    for n in (600_000, MAX_METADATA_TOPICS + 1):
        conn = conn_to(c, leader)
        names = [{"name": f"t{i}"} for i in range(n)]
        with pytest.raises((ConnectionError, OSError, EOFError)):
            conn.request(V.METADATA, 9, {"topics": names, "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
        conn.close()
    conn = conn_to(c, leader)
    t0 = time.monotonic()
    resp = conn.request(V.METADATA, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    assert resp["topics"][0]["error_code"] == 0 and time.monotonic() - t0 < 1.0
    conn.close()


def test_acks_all_errors_when_followers_stop(tmp_path):
    """Both followers SIGSTOPped: an acks=-1 produce times out (REQUEST_TIMED_OUT 7: appended, outcome
    unknown); once the leader shrank the ISR to itself, acks=-1 is refused NOT_ENOUGH_REPLICAS (19) while
    acks=1 is still acknowledged."""
    import signal
    with BareCluster(tmp_path, brokers=3, broker_settings={**BROKER, "replica_lag_time_max_ms": 1000},
                      controller_settings={"broker_session_timeout_ms": 30_000},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        leader, _epoch = leader_of(admin)
        followers = [b for b in (1, 2, 3) if b != leader]
        conn = conn_to(c, leader)
        for b in followers:
            c.signal(b, signal.SIGSTOP)
        try:
            body = produce_body([b"waits"], -1)
            body["timeout_ms"] = 300
            assert produced(conn.request(V.PRODUCE, 8, body))["error_code"] == E.REQUEST_TIMED_OUT == 7
            wait_until(lambda: admin.describe(TOPIC)[0].isr == [leader], 15, "the ISR shrunk to the leader")
            assert produced(conn.request(V.PRODUCE, 8, produce_body([b"refused"], -1)))["error_code"] == \
                E.NOT_ENOUGH_REPLICAS == 19
            assert produced(conn.request(V.PRODUCE, 8, produce_body([b"one"], 1)))["error_code"] == 0
        finally:
            for b in followers:
                c.signal(b, signal.SIGCONT)
        conn.close()
        admin.close()


def test_fetch_batches_follow_leader_epochs(cluster):
    """Records appended under two leaders come back as one batch per run of equal epochs, each batch
    stamped with the epoch the leader's epoch cache gives its offsets."""
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    assert produced(conn.request(V.PRODUCE, 8, produce_body([b"before-1", b"before-2"], -1)))["error_code"] == 0
    conn.close()
    admin.elect_leader(TOPIC, 0, broker=next(b for b in (1, 2, 3) if b != leader))
    wait_until(lambda: leader_of(admin)[1] > epoch, 20, "a new leader epoch")
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    wait_until(lambda: produced(conn.request(V.PRODUCE, 8, produce_body([b"after"], -1)))["error_code"] == 0,
               10, "the new leader acknowledging")
    hw = list_offsets(conn, -1)["offset"]
    batches, offset = [], 0
    while offset < hw:
        p = fetched(conn.request(V.FETCH, 11, fetch_body(offset, epoch=epoch)))
        got = decode_batches(p["records"])
        # one batch per run of equal epochs: neighbours in a response differ
        assert all(x.partition_leader_epoch != y.partition_leader_epoch for x, y in zip(got, got[1:]))
        batches.extend(got)
        offset = got[-1].last_offset + 1
    conn.close()
    starts = sorted(admin.replicas(leader)[(TOPIC, 0)]["epochs"], key=lambda e: e[1])

    def epoch_at(o: int) -> int:
        return max(e for e, start in starts if start <= o)
    assert [r.offset for b in batches for r in b.records] == list(range(hw))
    for b in batches:
        assert {epoch_at(r.offset) for r in b.records} == {b.partition_leader_epoch}
    per_response = [b.partition_leader_epoch for b in batches]
    assert len(set(per_response)) >= 2 and per_response[-1] == epoch
    assert per_response == sorted(per_response)


def test_pipelined_requests_are_answered_in_order(cluster):
    """Several requests written at once (as librdkafka pipelines them), a long-polling fetch first: the
    answers come back in request order, the fetch's after its wait."""
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    end = list_offsets(conn, -1)["offset"]
    requests = [(V.FETCH, 11, fetch_body(end, epoch=epoch, max_wait_ms=400)),
                (V.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"}),
                (V.PRODUCE, 8, produce_body([b"piped"], -1)),
                (V.METADATA, 8, {"topics": [{"name": TOPIC}]}),
                (V.LIST_OFFSETS, 2, {"replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})]
    frames = b"".join(M.encode_request(api, v, 100 + i, "pipe", body) for i, (api, v, body) in enumerate(requests))
    t0 = time.monotonic()
    conn.sock.sendall(frames)
    answers = [conn.receive(api, v, 100 + i) for i, (api, v, _body) in enumerate(requests)]   # checks corr ids
    assert time.monotonic() - t0 >= 0.35                 # the fetch waited, and everything behind it did
    assert fetched(answers[0])["records"] == b""
    assert answers[1]["error_code"] == 0
    assert (produced(answers[2])["error_code"], produced(answers[2])["base_offset"]) == (0, end)
    assert answers[3]["topics"][0]["partitions"][0]["leader_id"] == leader
    assert answers[4]["topics"][0]["partitions"][0]["offset"] == end + 1
    conn.close()


def test_corrupt_record_is_answered_kafka_storage_error(tmp_path):
    """A byte flipped in the running leader's segment: the Kafka fetch that reaches it is answered
    KAFKA_STORAGE_ERROR (56), never with the bad value, and the leader logs a `corrupt` event for it."""
    from broker.storage.codec import HEADER_SIZE
    from broker.storage.partition_store import partition_dir_name
    from broker.storage.scan import scan_partition
    with BareCluster(tmp_path, brokers=3, broker_settings={**BROKER, "flush": "always"},
                      controller_settings={"broker_session_timeout_ms": 2500},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        leader, epoch = leader_of(admin)
        conn = conn_to(c, leader)
        values = [b"%07d" % (1_000_000 + i) for i in range(200)]
        assert produced(conn.request(V.PRODUCE, 8, produce_body(values, -1)))["error_code"] == 0
        segment = scan_partition(c.data_dir(leader) / partition_dir_name(TOPIC, 0)).segments[-1]
        with open(segment.path, "r+b") as f:
            f.seek(segment.positions[150 - segment.base] + HEADER_SIZE + 3)
            byte = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([byte[0] ^ 0x01]))
        p = fetched(conn.request(V.FETCH, 11, fetch_body(100, epoch=epoch)))
        assert (p["error_code"], p["records"]) == (E.KAFKA_STORAGE_ERROR, b"")
        conn.close()
        corrupt = [e for e in c.events(leader) if e.get("event") == "corrupt"]
        assert [e["offset"] for e in corrupt] == [150]
        admin.close()


def test_a_native_consumer_fetch_is_bounded_by_bytes_too(cluster):
    """The native protocol's fetch asks for records by count (up to 10,000): with 500 KB values that
    was gigabytes read on the event loop; now an answer stops at FETCH_MAX_BYTES (at least one record)."""
    from broker.client import Consumer, Producer
    from broker.limits import FETCH_MAX_BYTES
    c, admin = cluster
    leader_of(admin)
    big = [bytes([48 + i % 10]) * 500_000 for i in range(12)]           # 6 MB
    producer = Producer(c.controller_address, acks="all", timeout_s=10.0, retries=3)
    sent = producer.send(TOPIC, 0, big)
    producer.close()
    consumer = Consumer(c.controller_address, timeout_s=10.0)
    got = consumer.fetch(TOPIC, 0, sent.offsets[0], max_records=10_000)
    values = [r[2] for r in got.records]
    assert values == big[:len(values)] and 1 <= len(values) <= FETCH_MAX_BYTES // 500_000
    consumer.close()


@pytest.mark.parametrize("broker_default, topic_configs", [
    ("LogAppendTime", None), ("CreateTime", {"message.timestamp.type": "LogAppendTime"})],
    ids=["broker-setting", "controller-json-topic-config"])
def test_log_append_time_stamps_records_with_the_leaders_clock(tmp_path, broker_default, topic_configs):
    """log_message_timestamp_type = LogAppendTime, or the topic's message.timestamp.type as controller.json
    creates it (the way a test file's [topic] configs reach the cluster): the producer's times are
    replaced by the leader's clock at append, the produce answer says which time that was, and fetched
    batches are marked LogAppendTime with it as their maxTimestamp (so a consumer gives every record that
    time)."""
    topic = {"name": TOPIC, "partitions": 1, "replication_factor": 1,
             **({"configs": topic_configs} if topic_configs else {})}
    with BareCluster(tmp_path, brokers=1, broker_settings={**BROKER, "min_insync_replicas": 1,
                                                            "log_message_timestamp_type": broker_default},
                     topics=[topic]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        info = wait_full_isr(admin, TOPIC, 20, "a leader", isr_size=1)
        conn = conn_to(c, info.leader)
        before = int(time.time() * 1000)
        r = produced(conn.request(V.PRODUCE, 8, produce_body([], -1, records=encode_batch(0, -1, KAFKA_RECORDS))))
        after = int(time.time() * 1000)
        assert r["error_code"] == 0 and before <= r["log_append_time_ms"] <= after
        p = fetched(conn.request(V.FETCH, 11, fetch_body(0, epoch=info.epoch)))
        [batch] = decode_batches(p["records"])
        assert batch.log_append_time and batch.max_timestamp == r["log_append_time_ms"]
        assert [(rec.timestamp, rec.key, rec.value, rec.headers) for rec in batch.records] == [
            (r["log_append_time_ms"], k, v, h) for _ts, k, v, h in KAFKA_RECORDS]
        conn.close()


def test_log_append_time_as_a_topic_config(cluster):
    """CreateTopics with message.timestamp.type = LogAppendTime: that topic's records are stamped by the
    leader and served marked so, on brokers whose own default is CreateTime (the producer's times are
    kept on every other topic); an unsupported config or value is INVALID_CONFIG, naming it."""
    c, admin = cluster
    conn = conn_to(c, 1)
    topics = [{"name": "stamped", "num_partitions": 1, "replication_factor": 3, "assignments": [],
               "configs": [{"name": "message.timestamp.type", "value": "LogAppendTime"}]},
              {"name": "bad-value", "num_partitions": 1, "replication_factor": 3, "assignments": [],
               "configs": [{"name": "message.timestamp.type", "value": "Now"}]},
              {"name": "bad-name", "num_partitions": 1, "replication_factor": 3, "assignments": [],
               "configs": [{"name": "retention.ms", "value": "1"}]}]
    resp = conn.request(V.CREATE_TOPICS, 4, {"topics": topics, "timeout_ms": 10_000, "validate_only": False})
    assert [(t["name"], t["error_code"], t["error_message"]) for t in resp["topics"]] == [
        ("stamped", 0, None),
        ("bad-value", E.INVALID_CONFIG, "message.timestamp.type must be one of CreateTime, LogAppendTime, got 'Now'"),
        ("bad-name", E.INVALID_CONFIG, "unsupported topic config 'retention.ms' (supported: message.timestamp.type)")]
    conn.close()
    info = wait_full_isr(admin, "stamped", 20, "the new topic's leader with its ISR")
    conn = conn_to(c, info.leader)
    before = int(time.time() * 1000)
    r = wait_until(lambda: (lambda p: p if p["error_code"] == 0 else None)(produced(conn.request(
        V.PRODUCE, 8, produce_body([], -1, topic="stamped", records=encode_batch(0, -1, KAFKA_RECORDS))))),
        10, "the leader answering for the new topic")
    assert before <= r["log_append_time_ms"] <= int(time.time() * 1000)
    p = fetched(conn.request(V.FETCH, 11, fetch_body(0, topic="stamped", epoch=info.epoch)))
    [batch] = decode_batches(p["records"])
    assert batch.log_append_time and {rec.timestamp for rec in batch.records} == {r["log_append_time_ms"]}
    conn.close()


# --- the idempotent producer (KIP-98) -----------------------------------------------------------------

def _idempotent(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    return encode_batch(0, -1, [(1_700_000_000_000, None, v) for v in values], producer=(pid, epoch, seq))


def _offsets(conn: KafkaConn, start: int, epoch: int) -> list[tuple[int, bytes]]:
    p = fetched(conn.request(V.FETCH, 11, fetch_body(start, epoch=epoch)))
    return [(r.offset, r.value) for b in decode_batches(p["records"]) for r in b.records]


def test_idempotent_batches_retries_gaps_and_fenced_epochs(cluster):
    """InitProducerId hands out a fresh id at epoch 0; a retried batch is answered with its first offsets
    and not appended again; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45); a newer epoch must start
    at sequence 0 and then fences the older one (INVALID_PRODUCER_EPOCH, 47). A follower elected leader
    knows the producer's state (from the replicated records) and still recognises the retry."""
    c, admin = cluster
    leader, epoch = leader_of(admin)
    conn = conn_to(c, leader)
    ids = [conn.request(V.INIT_PRODUCER_ID, v, {"transactional_id": None, "transaction_timeout_ms": 60000})
           for v in (0, 1, 4)]
    assert [(r["error_code"], r["producer_epoch"]) for r in ids] == [(0, 0)] * 3
    pids = [r["producer_id"] for r in ids]
    assert len(set(pids)) == 3 and all(p >> 40 == leader for p in pids)
    pid = pids[0]

    def send(values, pepoch, seq):
        return produced(conn.request(V.PRODUCE, 8, produce_body([], -1, records=_idempotent(values, pid, pepoch, seq))))

    start = list_offsets(conn, -1)["offset"]
    first = send([b"i0", b"i1", b"i2"], 0, 0)
    assert (first["error_code"], first["base_offset"]) == (0, start)
    again = send([b"i0", b"i1", b"i2"], 0, 0)                  # the retry of a batch already in the log
    assert (again["error_code"], again["base_offset"]) == (0, start)
    assert send([b"i3"], 0, 3)["base_offset"] == start + 3
    gap = send([b"i5"], 0, 5)
    assert (gap["error_code"], gap["base_offset"]) == (E.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert "expected 4" in gap["error_message"]
    assert send([b"n0"], 1, 7)["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER    # a new epoch starts at 0
    assert send([b"n0"], 1, 0)["base_offset"] == start + 4
    fenced = send([b"i4"], 0, 4)
    assert (fenced["error_code"], fenced["base_offset"]) == (E.INVALID_PRODUCER_EPOCH, -1)
    assert _offsets(conn, start, epoch) == list(enumerate([b"i0", b"i1", b"i2", b"i3", b"n0"], start))
    # served as Kafka serves them: one batch per producer epoch, with its id and first sequence
    p = fetched(conn.request(V.FETCH, 11, fetch_body(start, epoch=epoch)))
    assert [(b.producer_id, b.producer_epoch, b.base_sequence, len(b.records))
            for b in decode_batches(p["records"])] == [(pid, 0, 0, 4), (pid, 1, 0, 1)]
    conn.close()

    other, info = lead_elsewhere(c, admin, leader)
    conn = conn_to(c, other)
    retry = wait_until(lambda: (lambda r: r if r["error_code"] != E.NOT_LEADER_OR_FOLLOWER else None)(
        produced(conn.request(V.PRODUCE, 8, produce_body([], -1, records=_idempotent([b"n0"], pid, 1, 0))))),
        20, "the new leader answering")
    assert (retry["error_code"], retry["base_offset"]) == (0, start + 4)
    nxt = produced(conn.request(V.PRODUCE, 8, produce_body([], -1, records=_idempotent([b"n1"], pid, 1, 1))))
    assert (nxt["error_code"], nxt["base_offset"]) == (0, start + 5)
    wait_until(lambda: len(_offsets(conn, start, info.epoch)) == 6, 20, "the records committed")
    conn.close()


def test_producer_state_survives_a_restart(tmp_path):
    """One broker: a retry after the broker was killed and restarted is still recognised, its state
    rebuilt from the log it recovered; producer ids handed out after the restart are new ones."""
    with BareCluster(tmp_path, brokers=1, broker_settings={**BROKER, "min_insync_replicas": 1},
                     topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 1}]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        info = wait_full_isr(admin, TOPIC, 20, "a leader", isr_size=1)
        conn = conn_to(c, info.leader)
        pid = conn.request(V.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 1})["producer_id"]
        for seq in range(0, 30, 3):
            r = produced(conn.request(V.PRODUCE, 8, produce_body(
                [], -1, records=_idempotent([b"a", b"b", b"c"], pid, 0, seq))))
            assert (r["error_code"], r["base_offset"]) == (0, seq)
        conn.close()
        c.kill(info.leader)
        c.start_broker(info.leader)
        info = wait_full_isr(admin, TOPIC, 30, "the leader back", isr_size=1)
        conn = conn_to(c, info.leader)

        def retry():
            r = produced(conn.request(V.PRODUCE, 8, produce_body(
                [], -1, records=_idempotent([b"a", b"b", b"c"], pid, 0, 27))))
            return r if r["error_code"] not in (E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION) else None
        r = wait_until(retry, 20, "the restarted leader answering")
        assert (r["error_code"], r["base_offset"]) == (0, 27)
        assert list_offsets(conn, -1)["offset"] == 30
        new = conn.request(V.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 1})["producer_id"]
        assert new > pid
        conn.close()
