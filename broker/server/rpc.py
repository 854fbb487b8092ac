"""The broker's TCP front end: accept connections, read request frames, dispatch, write responses.

Requests on one connection are served one at a time, in order (as Kafka does). A handler returns the
response body, or None for "no response" (PRODUCE with acks=0). A frame that cannot be decoded (random
bytes, wrong magic, an oversized length, a body that is not a map, a connection closed mid-frame) gets an
ERROR response (api key apis.ERROR, error INVALID_REQUEST, correlation id 0) where the socket still
allows it, and the connection is closed; the server keeps running. A well-formed frame whose fields are
wrong gets {"error": "INVALID_REQUEST", "message": ...} and the connection stays open.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from broker.protocol import apis
from broker.protocol.framing import (MAX_FRAME, REQUEST, RESPONSE, Frame, FrameError, decode_payload, encode)
from broker.server.aio import cancel_and_wait

log = logging.getLogger(__name__)

FRAME_READ_TIMEOUT_S = 10.0   # a frame whose length prefix arrived must be complete within this

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


class BadRequest(ValueError):
    """A request's fields are missing or malformed; answered with INVALID_REQUEST."""


class RpcServer:
    def __init__(self, handlers: dict[int, Handler]):
        self.handlers = handlers
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._conn_tasks: set[asyncio.Task] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, limit=1 << 20, backlog=256)
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
        self._writers.add(writer)
        me = asyncio.current_task()
        self._conn_tasks.add(me)
        try:
            while True:
                try:
                    frame = await read_request_frame(reader)
                except FrameError as exc:
                    await _answer_garbage(writer, str(exc))
                    return
                if frame is None:
                    return
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


async def read_request_frame(reader: asyncio.StreamReader) -> Frame | None:
    """framing.read_frame, plus a deadline for the rest of a frame once its length prefix arrived (a
    peer that sends half a frame and goes quiet does not hold the connection forever)."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError("connection closed inside a length prefix") from None
    length = int.from_bytes(head, "big")
    if length > MAX_FRAME:
        raise FrameError(f"declared frame length {length} exceeds the {MAX_FRAME}-byte limit")
    try:
        payload = await asyncio.wait_for(reader.readexactly(length), FRAME_READ_TIMEOUT_S)
    except asyncio.IncompleteReadError:
        raise FrameError(f"connection closed inside a {length}-byte frame") from None
    except asyncio.TimeoutError:
        raise FrameError(f"a {length}-byte frame did not arrive within {FRAME_READ_TIMEOUT_S:.0f}s") from None
    return decode_payload(payload)


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
