"""Garbage on a broker's port (real broker process): random bytes, a truncated frame, an oversized
length, a body that is not a map, a bad magic. Each gets an ERROR frame where possible and a closed
connection; the broker keeps serving valid requests. Wrong fields in a well-formed frame get
INVALID_REQUEST on the same connection, which stays open."""
from __future__ import annotations

import os
import random
import socket
import struct

import msgpack
import pytest

from broker.client.connection import Connection
from broker.protocol import apis
from broker.protocol.framing import HEADER_SIZE, MAGIC, PROTOCOL_VERSION, REQUEST, RESPONSE, Frame, \
    read_frame_blocking
from broker.server.launch import LocalCluster


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("garbage"), brokers=1,
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
