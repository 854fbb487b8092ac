"""The broker's TCP front end: accept connections, read request frames, dispatch, write responses.

Requests on one connection are served one at a time, in order (as Kafka does). A handler returns the
response body, or None for "no response" (PRODUCE with acks=0). A frame that cannot be decoded (random
bytes, wrong magic, an oversized length, a body that is not a map, a connection closed mid-frame) gets an
ERROR response (api key apis.ERROR, error INVALID_REQUEST, correlation id 0) where the socket still
allows it, and the connection is closed; the server keeps running. A well-formed frame whose fields are
wrong gets {"error": "INVALID_REQUEST", "message": ...} and the connection stays open.

Limits (framing.read_frame_bounded): a request frame is at most MAX_REQUEST_FRAME bytes and must be
complete within FRAME_READ_TIMEOUT_S of its first byte; a connection that sends no complete frame within
that time of connecting is closed (idle time between frames is not limited); partial frames across all
connections hold at most BUFFER_BUDGET bytes; at most MAX_CONNECTIONS client connections are served at
once (well under the broker's fd budget), a connection beyond that is closed on accept.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from broker.protocol import apis
from broker.protocol.framing import (MAX_FRAME, REQUEST, RESPONSE, BufferBudget, Frame, FrameError, encode,
                                     read_frame_bounded)
from broker.server.aio import cancel_and_wait

log = logging.getLogger(__name__)

FRAME_READ_TIMEOUT_S = 10.0   # a frame (and a new connection's first frame) must be complete within this
MAX_REQUEST_FRAME = MAX_FRAME  # produce requests carry record batches
BUFFER_BUDGET = 64 * 1024 * 1024
MAX_CONNECTIONS = 1024

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


class BadRequest(ValueError):
    """A request's fields are missing or malformed; answered with INVALID_REQUEST."""


class RpcServer:
    def __init__(self, handlers: dict[int, Handler]):
        self.handlers = handlers
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
                    frame = await read_frame_bounded(reader, max_frame=MAX_REQUEST_FRAME, budget=self._budget,
                                                     timeout_s=FRAME_READ_TIMEOUT_S, first=first)
                    first = False
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
