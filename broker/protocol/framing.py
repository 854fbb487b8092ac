"""Wire framing: a small versioned, length-prefixed protocol shared by brokers, controller and clients.

A frame is a 4-byte big-endian length N followed by N bytes:

    magic   2 bytes  b"HW"
    version 1 byte   PROTOCOL_VERSION
    kind    1 byte   0 = request, 1 = response
    corr    4 bytes  correlation id (big-endian, echoed by the response)
    api     2 bytes  API key (big-endian), see broker/protocol/apis.py
    body    N-10 bytes, a msgpack map (bytes values stay bytes)

Anything else (wrong magic or version, a length over MAX_FRAME, a body that is not a msgpack map, a
connection closed mid-frame) is a `FrameError`; servers answer what they can and close the connection.
"""
from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass
from typing import Any

import msgpack

MAGIC = b"HW"
PROTOCOL_VERSION = 1
REQUEST = 0
RESPONSE = 1
MAX_FRAME = 16 * 1024 * 1024

_LEN = struct.Struct(">I")
_HEADER = struct.Struct(">2sBBIH")  # magic, version, kind, correlation id, api key
HEADER_SIZE = _HEADER.size


class FrameError(ValueError):
    """A frame could not be read or decoded. The connection should be closed after this."""


@dataclass(frozen=True, slots=True)
class Frame:
    kind: int
    correlation_id: int
    api: int
    body: dict[str, Any]


def encode(frame: Frame) -> bytes:
    body = msgpack.packb(frame.body, use_bin_type=True)
    payload_len = HEADER_SIZE + len(body)
    if payload_len > MAX_FRAME:
        raise FrameError(f"frame of {payload_len} bytes exceeds the {MAX_FRAME}-byte limit")
    return b"".join((
        _LEN.pack(payload_len),
        _HEADER.pack(MAGIC, PROTOCOL_VERSION, frame.kind, frame.correlation_id & 0xFFFFFFFF, frame.api),
        body,
    ))


def decode_payload(payload: bytes) -> Frame:
    if len(payload) < HEADER_SIZE:
        raise FrameError(f"frame of {len(payload)} bytes is shorter than its {HEADER_SIZE}-byte header")
    magic, version, kind, corr, api = _HEADER.unpack_from(payload)
    if magic != MAGIC:
        raise FrameError(f"bad magic {magic!r} (expected {MAGIC!r})")
    if version != PROTOCOL_VERSION:
        raise FrameError(f"unsupported protocol version {version} (this side speaks {PROTOCOL_VERSION})")
    if kind not in (REQUEST, RESPONSE):
        raise FrameError(f"bad frame kind {kind}")
    try:
        body = msgpack.unpackb(payload[HEADER_SIZE:], raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise FrameError(f"body is not msgpack ({type(exc).__name__})") from None
    if not isinstance(body, dict):
        raise FrameError(f"body must be a map, got {type(body).__name__}")
    return Frame(kind, corr, api, body)


async def read_frame(reader: asyncio.StreamReader) -> Frame | None:
    """Read one frame; None on a clean end of stream before a new frame; FrameError otherwise."""
    try:
        head = await reader.readexactly(_LEN.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError("connection closed inside a length prefix") from None
    (length,) = _LEN.unpack(head)
    if length > MAX_FRAME:
        raise FrameError(f"declared frame length {length} exceeds the {MAX_FRAME}-byte limit")
    try:
        payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError(f"connection closed inside a {length}-byte frame") from None
    return decode_payload(payload)


def read_frame_blocking(sock) -> Frame | None:
    """Blocking-socket twin of read_frame, for the synchronous client library."""
    head = _recv_exactly(sock, _LEN.size, allow_eof=True)
    if head is None:
        return None
    (length,) = _LEN.unpack(head)
    if length > MAX_FRAME:
        raise FrameError(f"declared frame length {length} exceeds the {MAX_FRAME}-byte limit")
    payload = _recv_exactly(sock, length, allow_eof=False)
    return decode_payload(payload)


def _recv_exactly(sock, n: int, *, allow_eof: bool) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            if allow_eof and not chunks:
                return None
            raise FrameError(f"connection closed after {len(chunks)} of {n} bytes")
        chunks += chunk
    return bytes(chunks)
