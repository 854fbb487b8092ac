"""The controller's asyncio TCP server: reads request frames (broker/protocol/framing.py), serves the
control-plane APIs through ControllerCore, runs the session-expiry timer.

Requests on one connection are served concurrently and answered by correlation id, so a METADATA
long-poll never delays a heartbeat sent on the same connection. A frame that cannot be read (bad magic or
version, a length over MAX_FRAME, a body that is not a msgpack map, a response frame, a connection closed
mid-frame, a frame not completed within frame_read_timeout_ms) gets an api ERROR frame
{error: INVALID_REQUEST, message} where the socket still allows it, and the connection is closed; a
well-formed request with bad fields or an unknown API key gets {error: INVALID_REQUEST, message} on its own
API key and the connection stays open.

Limits: control-plane requests are small, so a frame is at most MAX_REQUEST_FRAME (1 MiB); a connection
must complete its first frame within frame_read_timeout_ms of connecting, and every frame within that time
of its first byte (idle time between frames is not limited); partial frames across all connections hold at
most BUFFER_BUDGET bytes; at most MAX_CONNECTIONS connections are served at once, one beyond that is
closed on accept.
"""
from __future__ import annotations

import asyncio

from broker.controller import messages as m
from broker.controller.core import ControllerCore
from broker.protocol import apis, framing
from broker.protocol.framing import Frame, FrameError

MAX_IN_FLIGHT_PER_CONNECTION = 64
MAX_REQUEST_FRAME = 1024 * 1024
BUFFER_BUDGET = 16 * 1024 * 1024
MAX_CONNECTIONS = 256


class ControllerServer:
    def __init__(self, core: ControllerCore):
        self.core = core
        self.config = core.config
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._timer: asyncio.Task | None = None
        self.fatal: BaseException | None = None
        self.stopped = asyncio.Event()
        self._budget = framing.BufferBudget(BUFFER_BUDGET)

    async def start(self) -> tuple[str, int]:
        self.core.start()
        self._server = await asyncio.start_server(self._connection, self.config.host, self.config.port,
                                                  reuse_address=True)
        self._timer = asyncio.get_running_loop().create_task(self._expiry_loop())
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in (self._timer, *self._connections):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._timer, *self._connections) if t is not None),
                             return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _die(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
            self.core.log.emit("fatal", error=f"{type(exc).__name__}: {exc}")
        self.stopped.set()

    async def _expiry_loop(self) -> None:
        interval = max(0.01, min(0.1, self.config.broker_session_timeout_ms / 10_000))
        while True:
            await asyncio.sleep(interval)
            try:
                self.core.tick()
            except OSError as exc:
                self._die(exc)
                return

    # --- connections -------------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= MAX_CONNECTIONS:
            writer.close()
            return
        task = asyncio.current_task()
        self._connections.add(task)
        first = True
        write_lock = asyncio.Lock()
        in_flight = asyncio.Semaphore(MAX_IN_FLIGHT_PER_CONNECTION)
        requests: set[asyncio.Task] = set()
        try:
            while True:
                try:
                    frame = await framing.read_frame_bounded(
                        reader, max_frame=MAX_REQUEST_FRAME, timeout_s=self.config.frame_read_timeout_ms / 1000,
                        budget=self._budget, first=first)
                    first = False
                    if frame is None:
                        break
                    if frame.kind != framing.REQUEST:
                        raise FrameError(f"a {apis.NAMES.get(frame.api, frame.api)} response frame sent to the "
                                         f"controller")
                except FrameError as exc:
                    await self._send(writer, write_lock, Frame(framing.RESPONSE, 0, apis.ERROR,
                                                               {"error": m.INVALID_REQUEST, "message": str(exc)}))
                    break
                await in_flight.acquire()
                t = asyncio.get_running_loop().create_task(self._serve(frame, writer, write_lock))
                requests.add(t)
                t.add_done_callback(lambda t: (requests.discard(t), in_flight.release()))
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            for t in list(requests):
                t.cancel()
            writer.close()
            self._connections.discard(task)

    async def _serve(self, frame: Frame, writer: asyncio.StreamWriter, write_lock: asyncio.Lock) -> None:
        try:
            body = await self._dispatch(frame)
        except OSError as exc:   # the state could not be saved: stop rather than answer
            self._die(exc)
            return
        except Exception as exc:  # a bug: answer and keep serving, but leave a trace
            self.core.log.emit("internal-error", api=frame.api, error=f"{type(exc).__name__}: {exc}")
            body = {"error": m.INVALID_REQUEST, "message": f"internal error: {type(exc).__name__}: {exc}"}
        await self._send(writer, write_lock, Frame(framing.RESPONSE, frame.correlation_id, frame.api, body))

    async def _dispatch(self, frame: Frame) -> dict:
        try:
            req = m.parse_request(frame.api, frame.body)
        except m.BadRequest as exc:
            return {"error": m.INVALID_REQUEST, "message": f"{apis.NAMES.get(frame.api, frame.api)}: {exc}"}
        core = self.core
        if frame.api == apis.METADATA:
            return await core.metadata(req)
        if frame.api == apis.HEARTBEAT:
            return core.heartbeat(req)
        if frame.api == apis.REGISTER_BROKER:
            return core.register_broker(req)
        if frame.api == apis.ALTER_ISR:
            return core.alter_isr(req)
        if frame.api == apis.ELECT_LEADER:
            return core.elect_leader(req)
        if frame.api == apis.CREATE_PARTITIONS:
            return core.create_partitions(req)
        if frame.api == apis.DELETE_TOPICS:
            return core.delete_topics(req)
        return core.create_topics(req)

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, lock: asyncio.Lock, frame: Frame) -> None:
        data = framing.encode(frame)
        async with lock:
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                pass
