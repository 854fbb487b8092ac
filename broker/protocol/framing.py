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

Servers read with `read_frame_bounded` (or `read_payload_bounded`, for a listener that also speaks Kafka):
a per-listener maximum frame size, a deadline that covers the length prefix too (a connection silent before its first complete frame, or stopped inside a frame, is
closed), and a `BufferBudget` capping the partial-frame bytes buffered across a listener's connections.
A partial frame lives in a buffer the reader owns and empties when it gives up, so an aborted 16 MiB frame
is freed at once (not left, with the exception that reported it, as cyclic garbage for a full collection).
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
    """A frame could not be read or decoded. The connection should be closed after this. `not_native`: a
    frame cut short (or too slow) whose first payload bytes already show it is not a native frame (a
    listener that also speaks Kafka closes such a connection without a native error frame)."""

    def __init__(self, message: str, *, not_native: bool = False):
        super().__init__(message)
        self.not_native = not_native


class BadRequest(ValueError):
    """A well-framed request whose fields are missing or malformed (a native request body, a controller
    request); answered with INVALID_REQUEST and the connection stays open. The message names the field."""


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


def decode_payload(payload: bytes | bytearray) -> Frame:
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
        body = msgpack.unpackb(memoryview(payload)[HEADER_SIZE:], raw=False, strict_map_key=False)
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
    except asyncio.IncompleteReadError as exc:
        exc.partial = b""   # the FrameError's __context__ keeps this exception: do not let it keep the bytes
        raise FrameError(f"connection closed inside a {length}-byte frame") from None
    return decode_payload(payload)


class BufferBudget:
    """Partial-frame bytes buffered by all connections of one listener, capped at `limit`."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0


_CHUNK = 256 * 1024


async def read_payload_bounded(reader: asyncio.StreamReader, *, max_frame: int, timeout_s: float,
                               budget: BufferBudget, first: bool) -> bytearray | None:
    """Read one frame's payload (the bytes after the 4-byte length), of either protocol a listener speaks.
    None on a clean end of stream between frames.

    A frame must be complete within `timeout_s` of its first byte; before the connection's `first` frame
    the clock starts now (a client that connects and sends nothing, or 1-3 bytes, is cut off). Idle time
    between complete frames is unbounded. A declared length over `max_frame`, or more buffered bytes than
    `budget` allows across the listener, is a FrameError (`not_native` when the bytes read so far
    do not start with the native magic). The returned buffer no longer counts against `budget`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    head = bytearray()
    if not first:
        try:
            start = await reader.read(1)
        except (ConnectionError, OSError):
            return None
        if not start:
            return None
        deadline = loop.time() + timeout_s
        head += start
    if not await _fill(reader, head, _LEN.size, deadline, timeout_s, None):
        if not head:
            return None
        raise FrameError(f"connection closed inside a length prefix ({len(head)} of 4 bytes)")
    (length,) = _LEN.unpack(head)
    if length > max_frame:
        raise FrameError(f"declared frame length {length} exceeds this listener's {max_frame}-byte limit")
    buf = bytearray()
    try:
        if not await _fill(reader, buf, length, deadline, timeout_s, budget):
            raise FrameError(f"connection closed after {len(buf)} of a {length}-byte frame")
    except FrameError as exc:
        not_native = len(buf) >= len(MAGIC) and buf[:len(MAGIC)] != MAGIC
        budget.used -= len(buf)
        buf.clear()         # free an aborted frame now, whatever still refers to this bytearray
        if not_native:
            raise FrameError(str(exc), not_native=True) from None
        raise
    except BaseException:
        budget.used -= len(buf)
        buf.clear()
        raise
    budget.used -= len(buf)
    return buf


async def read_frame_bounded(reader: asyncio.StreamReader, *, max_frame: int, timeout_s: float,
                             budget: BufferBudget, first: bool) -> Frame | None:
    """Read one native request frame for a server, under the limits of `read_payload_bounded`."""
    payload = await read_payload_bounded(reader, max_frame=max_frame, timeout_s=timeout_s, budget=budget,
                                         first=first)
    if payload is None:
        return None
    try:
        return decode_payload(payload)
    finally:
        payload.clear()     # the decoded body holds its own copies


async def _fill(reader: asyncio.StreamReader, buf: bytearray, n: int, deadline: float, timeout_s: float,
                budget: BufferBudget | None) -> bool:
    """Append to `buf` until it holds `n` bytes (True) or the stream ends (False); FrameError on the
    deadline or on exceeding `budget`."""
    loop = asyncio.get_running_loop()
    while len(buf) < n:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise FrameError(f"frame not complete within {timeout_s:.1f}s ({len(buf)} of {n} bytes)")
        try:
            chunk = await asyncio.wait_for(reader.read(min(n - len(buf), _CHUNK)), remaining)
        except asyncio.TimeoutError:
            raise FrameError(f"frame not complete within {timeout_s:.1f}s ({len(buf)} of {n} bytes)") from None
        except (ConnectionError, OSError):
            return False
        if not chunk:
            return False
        if budget is not None:
            if budget.used + len(chunk) > budget.limit:
                raise FrameError(f"partial frames on this listener would exceed {budget.limit} buffered bytes")
            budget.used += len(chunk)
        buf += chunk
    return True


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
