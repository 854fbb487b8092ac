"""Garbage on a broker's port (real broker process): random bytes, a truncated frame, an oversized
length, a body that is not a map, a bad magic. Each gets an ERROR frame where possible and a closed
connection; the broker keeps serving valid requests. Wrong fields in a well-formed frame get
INVALID_REQUEST on the same connection, which stays open.

The Kafka side of the same listener (a first frame without the native magic): malformed frames, unknown
api keys, unsupported versions, oversized requests, a frame cut at every byte and random bytes after a
valid request each close the connection (an unsupported ApiVersions version is answered, as Kafka does);
a fresh ApiVersions is served afterwards and the broker process is alive."""
from __future__ import annotations

import os
import random
import socket
import struct

import msgpack
import pytest

from broker.client.connection import Connection
from broker.kafka import messages as kafka_messages
from broker.kafka import records as kafka_records
from broker.kafka import versions as kafka_versions
from broker.protocol import apis
from broker.protocol.framing import HEADER_SIZE, MAGIC, PROTOCOL_VERSION, REQUEST, RESPONSE, Frame, \
    read_frame_blocking
from clusters.bare import BareCluster
from broker.server.rpc import MAX_REQUEST_FRAME


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BareCluster(tmp_path_factory.mktemp("garbage"), brokers=1,
                      topics=[{"name": "g", "partitions": 1, "replication_factor": 1}]) as cluster:
        yield cluster, cluster.brokers[1].address


def header(api: int = apis.PING, corr: int = 9, magic: bytes = MAGIC) -> bytes:
    return struct.pack(">2sBBIH", magic, PROTOCOL_VERSION, REQUEST, corr, api)


def exchange(address, data: bytes, *, half_close: bool = True) -> tuple[Frame | None, bool]:
    """Send raw bytes; return (the frame answered or None, whether the server then closed)."""
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        frame = read_frame_blocking(s)
        closed = s.recv(1) == b""
        return frame, closed


def still_serves(address) -> None:
    conn = Connection(*address)
    assert conn.request(apis.PING, {}, 5.0) == {"error": "NONE", "broker_id": 1}
    conn.close()


def error_frame(frame: Frame | None) -> tuple:
    assert frame is not None
    return frame.kind, frame.correlation_id, frame.api, frame.body["error"]


GARBAGE = {
    "random-bytes": lambda: random.Random(7).randbytes(300),
    "truncated-frame": lambda: struct.pack(">I", 200) + header() + b"\x80",
    "oversized-length": lambda: struct.pack(">I", 0xFFFFFFF0) + header(),
    "non-map-body": lambda: (lambda body: struct.pack(">I", HEADER_SIZE + len(body)) + header() + body)(
        msgpack.packb([1, 2, 3])),
}
# a first frame without the native magic is a Kafka request (the listener serves both): malformed as
# Kafka, the connection is closed without an answer
NOT_NATIVE = {
    "bad-magic": lambda: (lambda body: struct.pack(">I", HEADER_SIZE + len(body)) + header(magic=b"XX") + body)(
        msgpack.packb({})),
    "short-header": lambda: struct.pack(">I", 3) + b"abc",
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_gets_error_and_close(broker, kind):
    _cluster, address = broker
    frame, closed = exchange(address, GARBAGE[kind]())
    assert error_frame(frame) == (RESPONSE, 0, apis.ERROR, "INVALID_REQUEST")
    assert closed
    still_serves(address)


@pytest.mark.parametrize("kind", sorted(NOT_NATIVE))
def test_non_native_first_frame_is_closed_as_kafka(broker, kind):
    _cluster, address = broker
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(NOT_NATIVE[kind]())
        s.shutdown(socket.SHUT_WR)
        assert s.recv(1) == b""
    still_serves(address)


def test_bad_magic_on_a_native_connection_gets_error(broker):
    """Once the first frame made a connection native, a later frame with another magic is native garbage."""
    _cluster, address = broker
    ping = (lambda body: struct.pack(">I", HEADER_SIZE + len(body)) + header(corr=1) + body)(msgpack.packb({}))
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(ping + NOT_NATIVE["bad-magic"]())
        s.shutdown(socket.SHUT_WR)
        pong, error = read_frame_blocking(s), read_frame_blocking(s)
        assert s.recv(1) == b""
    assert (pong.kind, pong.correlation_id, pong.body) == (RESPONSE, 1, {"error": "NONE", "broker_id": 1})
    assert error_frame(error) == (RESPONSE, 0, apis.ERROR, "INVALID_REQUEST")
    assert error.body["message"] == "bad magic b'XX' (expected b'HW')"


def test_silent_truncated_frame_does_not_block_others(broker):
    """Half a frame and then silence: other connections are served meanwhile."""
    _cluster, address = broker
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(struct.pack(">I", 100) + header())
        still_serves(address)


def test_bad_fields_keep_connection_open(broker):
    _cluster, address = broker
    conn = Connection(*address)
    assert conn.request(apis.PRODUCE, {"topic": "g", "partition": 0, "acks": 7, "values": [b"x"]}, 5.0) == {
        "error": "INVALID_REQUEST", "message": "field 'acks' must be 0, 1 or -1, got 7"}
    resp = conn.request(apis.FETCH, {"topic": "g", "partition": "zero", "offset": 0}, 5.0)
    assert resp == {"error": "INVALID_REQUEST", "message": "field 'partition' must be int, got str"}
    assert conn.request(apis.FETCH, {"topic": "nope", "partition": 0, "offset": 0}, 5.0)["error"] == \
        "UNKNOWN_PARTITION"
    assert conn.request(77, {}, 5.0) == {"error": "INVALID_REQUEST", "message": "unknown api key 77"}
    assert conn.request(apis.PING, {}, 5.0) == {"error": "NONE", "broker_id": 1}
    conn.close()
    assert _cluster.brokers[1].running()
    assert os.path.exists(_cluster.event_log(1))


# --- the Kafka side of the listener -------------------------------------------------------------------
def kafka_frame(api: int, version: int, body: dict, corr: int = 5) -> bytes:
    return kafka_messages.encode_request(api, version, corr, "garbage-test", body)


def api_versions_frame(corr: int = 5) -> bytes:
    return kafka_frame(kafka_versions.API_VERSIONS, 0, {}, corr)


def kafka_exchange(address, data: bytes) -> tuple[list[bytes], bool]:
    """Send raw bytes, half-close; return (the response payloads received, whether the server closed)."""
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        received = bytearray()
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    payloads, pos = [], 0
    while pos + 4 <= len(received):
        (n,) = struct.unpack_from(">I", received, pos)
        payloads.append(bytes(received[pos + 4:pos + 4 + n]))
        pos += 4 + n
    assert pos == len(received), "a partial response"
    return payloads, True


def kafka_still_serves(cluster, address) -> None:
    """A fresh connection's ApiVersions is answered, and the broker process is alive."""
    [payload], _ = kafka_exchange(address, api_versions_frame(corr=99))
    corr, body = kafka_messages.decode_response(kafka_versions.API_VERSIONS, 0, payload)
    assert corr == 99 and body["error_code"] == 0
    assert {a["api_key"] for a in body["api_keys"]} == set(kafka_versions.SUPPORTED)
    assert cluster.brokers[1].running()


def _with_version(frame: bytes, version: int) -> bytes:
    out = bytearray(frame)
    struct.pack_into(">h", out, 6, version)
    return bytes(out)


def _metadata_frame() -> bytes:
    return kafka_frame(kafka_versions.METADATA, 8, {"topics": [{"name": "g"}], "allow_auto_topic_creation": False})


KAFKA_GARBAGE = {
    # malformed: a truncated body, a negative array length, a bad varint in a flexible body (trailing bytes
    # after a request body are ignored, as Kafka's brokers ignore them: tests/broker/kafka/test_kafka_messages.py)
    "truncated-body": lambda: (lambda f: struct.pack(">I", len(f) - 4 - 3) + f[4:-3])(_metadata_frame()),
    "negative-array": lambda: (lambda f: f[:-6] + struct.pack(">i", -5) + f[-2:])(
        kafka_frame(kafka_versions.METADATA, 1, {"topics": []})[:-4] + b"\0\0\0\0\0\0"),
    "bad-varint": lambda: (lambda f: struct.pack(">I", len(f) - 4 + 6) + f[4:-1] + b"\xff" * 6 + f[-1:])(
        kafka_frame(kafka_versions.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})),
    "header-only": lambda: struct.pack(">I", 8) + struct.pack(">hhi", 3, 8, 1),
    # well-formed frames the broker does not serve
    "unknown-api-key": lambda: struct.pack(">I", 10) + struct.pack(">hhih", 9999, 0, 1, -1),
    "find-coordinator-v4": lambda: _with_version(kafka_frame(kafka_versions.FIND_COORDINATOR, 2, {"key": "g"}), 4),
    "produce-v2": lambda: _with_version(kafka_frame(kafka_versions.PRODUCE, 3, {
        "transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": []}), 2),
    "fetch-v12": lambda: struct.pack(">I", 11) + struct.pack(">hhih", 1, 12, 1, -1) + b"\0",
}


@pytest.mark.parametrize("kind", sorted(KAFKA_GARBAGE))
def test_kafka_garbage_closes_without_answer(broker, kind):
    cluster, address = broker
    payloads, closed = kafka_exchange(address, KAFKA_GARBAGE[kind]())
    assert payloads == [] and closed
    kafka_still_serves(cluster, address)


def test_kafka_garbage_after_a_valid_request(broker):
    """ApiVersions, then random bytes on the same connection: the ApiVersions is answered, then the
    connection closes; the next connection is served."""
    cluster, address = broker
    for seed in range(10):
        tail = random.Random(seed).randbytes(random.Random(seed + 100).randrange(1, 400))
        payloads, closed = kafka_exchange(address, api_versions_frame(corr=seed) + tail)
        assert closed and len(payloads) >= 1
        corr, body = kafka_messages.decode_response(kafka_versions.API_VERSIONS, 0, payloads[0])
        assert (corr, body["error_code"]) == (seed, 0)
    kafka_still_serves(cluster, address)


def test_kafka_unsupported_api_versions_version_is_answered(broker):
    cluster, address = broker
    payloads, _ = kafka_exchange(address, _with_version(api_versions_frame(corr=3), 11) + api_versions_frame(4))
    assert len(payloads) == 2
    corr, body = kafka_messages.decode_response(kafka_versions.API_VERSIONS, 0, payloads[0])
    assert (corr, body["error_code"]) == (3, 35)
    assert {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]} == \
        kafka_versions.SUPPORTED
    assert kafka_messages.decode_response(kafka_versions.API_VERSIONS, 0, payloads[1])[0] == 4
    kafka_still_serves(cluster, address)


def test_kafka_oversized_request(broker):
    """A declared length over the listener's limit closes the connection, first frame or later."""
    cluster, address = broker
    huge = struct.pack(">I", MAX_REQUEST_FRAME + 1) + struct.pack(">hhi", 0, 8, 1)
    payloads, closed = kafka_exchange(address, api_versions_frame(corr=1) + huge)
    assert closed and len(payloads) == 1
    _payloads, closed = kafka_exchange(address, huge)     # first frame: protocol not known yet
    assert closed
    kafka_still_serves(cluster, address)


def test_kafka_frame_cut_at_every_byte(broker):
    """A produce request cut after each of its bytes: the broker closes (never answers a partial
    request as Kafka), and keeps serving."""
    cluster, address = broker
    records = kafka_records.encode_batch(0, -1, [(1, None, b"value")])
    frame = kafka_frame(kafka_versions.PRODUCE, 8, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                                     "topic_data": [{"name": "g", "partition_data": [
                                                         {"index": 0, "records": records}]}]})
    for cut in range(1, len(frame)):
        payloads, closed = kafka_exchange(address, frame[:cut])
        assert closed
        if cut > 6:     # the first bytes of the payload are known: not native, so no native error frame
            assert payloads == [], cut
    whole, _ = kafka_exchange(address, frame)
    assert len(whole) == 1
    kafka_still_serves(cluster, address)
