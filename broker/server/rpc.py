"""The broker's TCP front end: accept connections, read request frames, dispatch, write responses.

Requests on one connection are served one at a time, in order (as Kafka does). A handler returns the
response body, or None for "no response" (PRODUCE with acks=0). A frame that cannot be decoded (random
bytes, wrong magic, an oversized length, a body that is not a map, a connection closed mid-frame) gets an
ERROR response (api key apis.ERROR, error INVALID_REQUEST, correlation id 0) where the socket still
allows it, and the connection is closed; the server keeps running. A well-formed frame whose fields are
wrong gets {"error": "INVALID_REQUEST", "message": ...} and the connection stays open.

Limits (framing.read_payload_bounded): a request frame is at most MAX_REQUEST_FRAME bytes and must be
complete within FRAME_READ_TIMEOUT_S of its first byte; a connection that sends no complete frame within
that time of connecting is closed (idle time between frames is not limited); partial frames across all
connections hold at most BUFFER_BUDGET bytes; at most MAX_CONNECTIONS client connections are served at
once (well under the broker's fd budget), a connection beyond that is closed on accept.

Two protocols share the listener (docs/kafka-protocol.md, "Broker behaviour"): the first frame of a
connection decides. A payload starting with the native magic b"HW" makes it a native connection (as
above); anything else a Kafka connection, served by `KafkaHandlers` (broker/server/kafka_handlers.py) with
the codec of broker/kafka/messages.py. The frame limits above apply to both. On a Kafka connection
requests are answered in order, one at a time (Kafka's rule); an unsupported ApiVersions version gets
UNSUPPORTED_VERSION with the supported ranges (the connection stays open, so the client can fall back);
an unknown api key, another api's unsupported version, a malformed frame, a frame over the limits or
a request other than Produce over MAX_KAFKA_REQUEST (256 KiB) closes the connection without an answer;
a handler bug is logged and answered UNKNOWN_SERVER_ERROR where the api has an error field (else the
connection is closed).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from broker.kafka import errors as kafka_errors
from broker.kafka.messages import KafkaCodecError, UnsupportedRequest, decode_request, encode_response
from broker.kafka.versions import API_VERSIONS, PRODUCE
from broker.protocol import apis
from broker.protocol.framing import (MAGIC, MAX_FRAME, REQUEST, RESPONSE, BufferBudget, Frame, FrameError,
                                     BadRequest, decode_payload, encode, read_payload_bounded)
from broker.server.aio import cancel_and_wait
from broker.server.kafka_handlers import CloseConnection

log = logging.getLogger(__name__)

FRAME_READ_TIMEOUT_S = 10.0   # a frame (and a new connection's first frame) must be complete within this
MAX_REQUEST_FRAME = MAX_FRAME  # produce requests carry record batches
# a Kafka request other than Produce is at most this big: it names topics and partitions, and decoding
# one costs about 0.35 s per MB on the event loop (a Metadata request naming 600,000 topics, 10 MB, took
# 3.4 s to decode and stalled the heartbeats). 256 KiB hold some 15,000 topic names.
MAX_KAFKA_REQUEST = 256 * 1024
BUFFER_BUDGET = 64 * 1024 * 1024
MAX_CONNECTIONS = 1024

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


class RpcServer:
    def __init__(self, handlers: dict[int, Handler], kafka=None):
        self.handlers = handlers
        self.kafka = kafka              # KafkaHandlers, or None: native protocol only
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._conn_tasks: set[asyncio.Task] = set()
        self._budget = BufferBudget(BUFFER_BUDGET)

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, limit=1 << 16, backlog=256)
        sockname = self._server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def close(self, timeout_s: float = 1.0) -> None:
        """Stop listening, close every connection and cancel the requests still being served (a parked
        produce, a long-poll), so none of them touches the partitions after the shutdown's final flush."""
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        await cancel_and_wait(list(self._conn_tasks), timeout_s)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection's task. Cancelled by `close` at shutdown, it ends quietly: Python 3.11's
        start_server calls `task.exception()` on a cancelled connection task, which raises inside an event
        loop callback and printed an "Exception in callback" traceback into the broker's output at every
        SIGTERM (fixed in Python 3.12)."""
        try:
            await self._serve_connection(reader, writer)
        except asyncio.CancelledError:
            pass

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._conn_tasks) >= MAX_CONNECTIONS:
            writer.close()
            return
        self._writers.add(writer)
        me = asyncio.current_task()
        self._conn_tasks.add(me)
        first = True
        try:
            while True:
                try:
                    payload = await read_payload_bounded(reader, max_frame=MAX_REQUEST_FRAME, budget=self._budget,
                                                         timeout_s=FRAME_READ_TIMEOUT_S, first=first)
                except FrameError as exc:
                    if not (first and self.kafka is not None and exc.not_native):
                        await _answer_garbage(writer, str(exc))
                    return
                if payload is None:
                    return
                if first and self.kafka is not None and payload[:len(MAGIC)] != MAGIC:
                    await self._serve_kafka(reader, writer, payload)
                    return
                first = False
                try:
                    frame = decode_payload(payload)
                except FrameError as exc:
                    await _answer_garbage(writer, str(exc))
                    return
                finally:
                    del payload
                if frame.kind != REQUEST:
                    await _answer_garbage(writer, "expected a request frame")
                    return
                body = await self._dispatch(frame)
                if body is not None:
                    writer.write(encode(Frame(RESPONSE, frame.correlation_id, frame.api, body)))
                    await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        except asyncio.CancelledError:
            raise
        finally:
            self._writers.discard(writer)
            self._conn_tasks.discard(me)
            writer.close()

    async def _serve_kafka(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           payload: bytes | None) -> None:
        """A Kafka connection, from its first request (`payload`) on; returns when it must be closed."""
        while payload is not None:
            if len(payload) > MAX_KAFKA_REQUEST and payload[:2] != _PRODUCE_KEY:
                log.warning("kafka: closing a connection: a request of api key %d is %d bytes (more than %d "
                            "for any request but Produce)", int.from_bytes(payload[:2], "big", signed=True),
                            len(payload), MAX_KAFKA_REQUEST)
                return
            try:
                request = decode_request(bytes(payload))
            except UnsupportedRequest as exc:
                if exc.api_key != API_VERSIONS:
                    log.debug("kafka: closing a connection: %s", exc)
                    return
                # as Kafka does: the ranges in the v0 format, so the client can retry in a version we speak
                writer.write(encode_response(API_VERSIONS, 0, exc.correlation_id, self.kafka.api_versions_body(
                    kafka_errors.UNSUPPORTED_VERSION)))
                await writer.drain()
            except KafkaCodecError as exc:
                log.debug("kafka: closing a connection after a malformed request: %s", exc)
                return
            else:
                del payload
                data = await self._kafka_answer(request)
                if data is _CLOSE:
                    return
                if data is not None:
                    writer.write(data)
                    await writer.drain()
            try:
                payload = await read_payload_bounded(reader, max_frame=MAX_REQUEST_FRAME, budget=self._budget,
                                                     timeout_s=FRAME_READ_TIMEOUT_S, first=False)
            except FrameError as exc:
                log.debug("kafka: closing a connection: %s", exc)
                return

    async def _kafka_answer(self, request) -> bytes | None | object:
        """The encoded response frame, None for no response, or _CLOSE."""
        try:
            body = await self.kafka.handle(request)
            if body is None:
                return None
            return encode_response(request.api_key, request.api_version, request.correlation_id, body)
        except CloseConnection:
            return _CLOSE
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception:       # a bug in a handler must not take the broker down: answer and log
            log.exception("internal error serving kafka api %s v%s", request.api_key, request.api_version)
        try:
            body = self.kafka.error_body(request, kafka_errors.UNKNOWN_SERVER_ERROR)
            if body is None:
                return _CLOSE
            return encode_response(request.api_key, request.api_version, request.correlation_id, body)
        except Exception:       # noqa: BLE001 - the request itself is odd: close
            log.exception("kafka api %s v%s: cannot encode an error response", request.api_key,
                          request.api_version)
            return _CLOSE

    async def _dispatch(self, frame: Frame) -> dict[str, Any] | None:
        handler = self.handlers.get(frame.api)
        if handler is None:
            return {"error": "INVALID_REQUEST", "message": f"unknown api key {frame.api}"}
        try:
            return await handler(frame.body)
        except BadRequest as exc:
            return {"error": "INVALID_REQUEST", "message": str(exc)}
        except (KeyError, TypeError, ValueError) as exc:
            return {"error": "INVALID_REQUEST", "message": f"{apis.NAMES.get(frame.api)}: {type(exc).__name__}: {exc}"}
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:     # a bug in a handler must not take the broker down: answer and log
            log.exception("internal error serving %s", apis.NAMES.get(frame.api, frame.api))
            return {"error": "INTERNAL_ERROR", "message": f"{type(exc).__name__}: {exc}"}


_CLOSE = object()
_PRODUCE_KEY = PRODUCE.to_bytes(2, "big")


async def _answer_garbage(writer: asyncio.StreamWriter, message: str) -> None:
    try:
        writer.write(encode(Frame(RESPONSE, 0, apis.ERROR, {"error": "INVALID_REQUEST", "message": message})))
        await asyncio.wait_for(writer.drain(), 1.0)
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass


# --- request field helpers ------------------------------------------------------------------------

def field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    """body[name] checked against `kind` (bool is never an int); BadRequest names the field."""
    if name not in body:
        if default is ...:
            raise BadRequest(f"missing field {name!r}")
        return default
    value = body[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise BadRequest(f"field {name!r} must be {'/'.join(k.__name__ for k in kinds)}, got bool")
    if not isinstance(value, kinds):
        raise BadRequest(f"field {name!r} must be {'/'.join(k.__name__ for k in kinds)}, got {type(value).__name__}")
    return value
