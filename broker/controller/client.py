"""Clients of the controller's control plane.

`ControllerClient` (asyncio) is what a broker process uses: register, heartbeat, metadata long-poll and
alter_isr, all multiplexed over one connection by correlation id (a long-poll does not hold up heartbeats).
`ControllerSyncClient` (blocking sockets with timeouts) is what the synchronous client library and tests
use: metadata(), create_topics(), and the same broker-side calls.

A broker's outgoing connections (to the controller and to other brokers) leave from the broker's own
host: `open_connection_from(source_host, host, port)` binds the socket to (source_host, 0) before
connecting. Without it the kernel picks the route's preferred source (127.0.0.1 on loopback), and
partitions that match on (source, destination) addresses could not tell the nodes apart.

Both raise `ControllerUnavailable` (code CONTROLLER_NOT_AVAILABLE) when the controller cannot be reached or
does not answer in time (the connection is then dropped and the next call reconnects), and
`ControllerError(code, message)` for an error answer where the call has no natural result value
(register, heartbeat, create_topics). ALTER_ISR answers come back as `AlterIsrResult` whatever the error.
"""
from __future__ import annotations

import asyncio
import itertools
import socket
import threading
from typing import Iterable

from broker.controller import messages as m
from broker.protocol import apis, framing
from broker.protocol.framing import Frame, FrameError


class ControllerError(Exception):
    def __init__(self, code: str, message: str = ""):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


class ControllerUnavailable(ControllerError):
    def __init__(self, message: str):
        super().__init__(m.CONTROLLER_NOT_AVAILABLE, message)


WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "*"})


def source_address(source_host: str | None) -> tuple[str, int] | None:
    """`local_addr` for a connection leaving from `source_host` (None: let the kernel choose)."""
    if source_host is None or source_host in WILDCARD_HOSTS:
        return None
    return (source_host, 0)


async def open_connection_from(source_host: str | None, host: str, port: int, **kwargs):
    """asyncio.open_connection(host, port) from `source_host` (a node's own listening host)."""
    return await asyncio.open_connection(host, port, local_addr=source_address(source_host), **kwargs)


def _specs(topics: Iterable) -> m.CreateTopics:
    out = []
    for t in topics:
        if isinstance(t, m.TopicSpec):
            out.append(t)
        elif isinstance(t, dict):
            out.append(m.TopicSpec(t["name"], t["partitions"], t["replication_factor"],
                                   tuple(sorted(t.get("configs", {}).items()))))
        else:
            out.append(m.TopicSpec(*t))
    return m.CreateTopics(tuple(out))


def _raise_on_error(api: int, body: dict) -> dict:
    error = body.get("error", m.INVALID_REQUEST)
    if error != m.NONE:
        raise ControllerError(error, str(body.get("message", f"{apis.NAMES.get(api, api)} failed")))
    return body


def _create_topics_result(body: dict) -> dict[str, str]:
    """{topic name: error code}; raises ControllerError when the request as a whole failed."""
    results = {t["name"]: t["error"] for t in body.get("topics", [])}
    if body.get("error") != m.NONE and not results:
        _raise_on_error(apis.CREATE_TOPICS, body)
    return results


class ControllerClient:
    """Asyncio control-plane client for broker processes. Create it inside the event loop that uses it."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 2.0, source_host: str | None = None):
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.source_host = source_host          # the broker's own host: connections leave from it
        self._corr = itertools.count(1)
        self._connect_lock = asyncio.Lock()
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._pending: dict[int, asyncio.Future] = {}

    # --- API -----------------------------------------------------------------------------------------
    async def register(self, broker_id: int, host: str, port: int, clean_shutdown: bool | None = None) -> int:
        """Register (or re-register after a restart / STALE_BROKER_EPOCH); returns the new broker_epoch.
        `clean_shutdown` False tells the controller (KIP-966) that this broker may have lost its unflushed tail."""
        body = await self.request(apis.REGISTER_BROKER,
                                  m.RegisterBroker(broker_id, host, port, clean_shutdown).to_wire())
        return _raise_on_error(apis.REGISTER_BROKER, body)["broker_epoch"]

    async def heartbeat(self, broker_id: int, broker_epoch: int) -> None:
        """Raises ControllerError(STALE_BROKER_EPOCH) when the broker must register again."""
        body = await self.request(apis.HEARTBEAT, m.Heartbeat(broker_id, broker_epoch).to_wire())
        _raise_on_error(apis.HEARTBEAT, body)

    async def metadata(self, known_version: int = -1, max_wait_ms: int = 0) -> m.Metadata:
        """Long-poll: returns once the controller's version exceeds known_version, or after max_wait_ms."""
        body = await self.request(apis.METADATA, m.MetadataRequest(known_version, max_wait_ms).to_wire(),
                                  timeout_s=self.timeout_s + max_wait_ms / 1000)
        return m.Metadata.from_wire(_raise_on_error(apis.METADATA, body))

    async def alter_isr(self, req: m.AlterIsr) -> m.AlterIsrResult:
        """Send the leader's ISR change `req`; the answer is the controller's (its error and current ISR)."""
        return m.AlterIsrResult.from_wire(await self.request(apis.ALTER_ISR, req.to_wire()))

    async def create_topics(self, topics: Iterable) -> dict[str, str]:
        body = await self.request(apis.CREATE_TOPICS, _specs(topics).to_wire())
        return _create_topics_result(body)

    async def create_partitions(self, counts: dict[str, int]) -> dict[str, tuple[str, str]]:
        """{topic: (error, message)} for growing each topic to its count of partitions."""
        body = await self.request(apis.CREATE_PARTITIONS, m.CreatePartitions(
            tuple(m.PartitionCount(n, c) for n, c in counts.items())).to_wire())
        if body.get("error") != m.NONE and not body.get("topics"):
            _raise_on_error(apis.CREATE_PARTITIONS, body)
        return {t["name"]: (t["error"], t.get("message", "")) for t in body["topics"]}

    async def delete_topics(self, names: list[str]) -> dict[str, tuple[str, str]]:
        """{topic: (error, message)} for deleting each of `names`."""
        body = await self.request(apis.DELETE_TOPICS, m.DeleteTopics(tuple(names)).to_wire())
        if body.get("error") != m.NONE and not body.get("topics"):
            _raise_on_error(apis.DELETE_TOPICS, body)
        return {t["name"]: (t["error"], t.get("message", "")) for t in body["topics"]}

    async def close(self) -> None:
        self._drop("client closed")
        if self._reader_task is not None:
            self._reader_task.cancel()
            try:
                await self._reader_task
            except (asyncio.CancelledError, Exception):
                pass
            self._reader_task = None

    # --- transport -----------------------------------------------------------------------------------
    async def request(self, api: int, body: dict, *, timeout_s: float | None = None) -> dict:
        """Send one request and wait for its response body (raises ControllerUnavailable)."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        writer = await self._ensure_connected()
        corr = next(self._corr) & 0x7FFFFFFF
        fut = asyncio.get_running_loop().create_future()
        self._pending[corr] = fut
        try:
            writer.write(framing.encode(Frame(framing.REQUEST, corr, api, body)))
            await asyncio.wait_for(writer.drain(), timeout_s)
            frame = await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            self._drop(f"no answer to {apis.NAMES.get(api, api)} within {timeout_s:.1f}s")
            raise ControllerUnavailable(f"no answer to {apis.NAMES.get(api, api)} from "
                                        f"{self.host}:{self.port} within {timeout_s:.1f}s") from None
        except (OSError, ConnectionError) as exc:
            self._drop(str(exc))
            raise ControllerUnavailable(f"connection to {self.host}:{self.port} failed: {exc}") from None
        finally:
            self._pending.pop(corr, None)
        if frame.api != api:
            raise ControllerError(frame.body.get("error", m.INVALID_REQUEST), str(frame.body.get("message", "")))
        return frame.body

    async def _ensure_connected(self) -> asyncio.StreamWriter:
        async with self._connect_lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(
                    open_connection_from(self.source_host, self.host, self.port), self.timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:
                raise ControllerUnavailable(
                    f"cannot connect to the controller at {self.host}:{self.port}: {exc or 'timeout'}") from None
            self._writer = writer
            self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(reader, writer))
            return writer

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        why = "connection closed by the controller"
        try:
            while True:
                frame = await framing.read_frame(reader)
                if frame is None:
                    break
                fut = self._pending.get(frame.correlation_id)
                if fut is not None and not fut.done():
                    fut.set_result(frame)
                elif frame.api == apis.ERROR:   # an error frame for a request we cannot identify
                    why = f"controller rejected a frame: {frame.body.get('message', '')}"
                    break
        except (FrameError, OSError) as exc:
            why = f"bad answer from the controller: {exc}"
        except asyncio.CancelledError:
            pass
        finally:
            if self._writer is writer:
                self._drop(why)
            else:
                writer.close()

    def _drop(self, why: str) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        for fut in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(ControllerUnavailable(why))
        self._pending.clear()


class ControllerSyncClient:
    """Blocking control-plane client (thread-safe: one request at a time per object)."""

    def __init__(self, address: tuple[str, int], *, timeout_s: float = 2.0):
        self.address = (address[0], int(address[1]))
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._corr = itertools.count(1)

    def metadata(self, known_version: int = -1, max_wait_ms: int = 0) -> m.Metadata:
        body = self.request(apis.METADATA, m.MetadataRequest(known_version, max_wait_ms).to_wire(),
                            timeout_s=self.timeout_s + max_wait_ms / 1000)
        return m.Metadata.from_wire(_raise_on_error(apis.METADATA, body))

    def create_topics(self, topics: Iterable) -> dict[str, str]:
        """{topic: error code} (NONE when created or already there with the same layout)."""
        return _create_topics_result(self.request(apis.CREATE_TOPICS, _specs(topics).to_wire()))

    def register(self, broker_id: int, host: str, port: int, clean_shutdown: bool | None = None) -> int:
        body = self.request(apis.REGISTER_BROKER, m.RegisterBroker(broker_id, host, port, clean_shutdown).to_wire())
        return _raise_on_error(apis.REGISTER_BROKER, body)["broker_epoch"]

    def heartbeat(self, broker_id: int, broker_epoch: int) -> None:
        _raise_on_error(apis.HEARTBEAT, self.request(apis.HEARTBEAT, m.Heartbeat(broker_id, broker_epoch).to_wire()))

    def alter_isr(self, req: m.AlterIsr) -> m.AlterIsrResult:
        return m.AlterIsrResult.from_wire(self.request(apis.ALTER_ISR, req.to_wire()))

    def request(self, api: int, body: dict, *, timeout_s: float | None = None) -> dict:
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        with self._lock:
            try:
                sock = self._connect()
                sock.settimeout(timeout_s)
                corr = next(self._corr) & 0x7FFFFFFF
                sock.sendall(framing.encode(Frame(framing.REQUEST, corr, api, body)))
                while True:
                    frame = framing.read_frame_blocking(sock)
                    if frame is None:
                        raise ConnectionError("connection closed by the controller")
                    if frame.correlation_id == corr or frame.api == apis.ERROR:
                        break
            except (OSError, FrameError) as exc:
                self._close_locked()
                what = "timed out" if isinstance(exc, socket.timeout) else str(exc)
                raise ControllerUnavailable(f"{apis.NAMES.get(api, api)} to the controller at "
                                            f"{self.address[0]}:{self.address[1]}: {what}") from None
        if frame.api != api:
            self.close()
            raise ControllerError(frame.body.get("error", m.INVALID_REQUEST), str(frame.body.get("message", "")))
        return frame.body

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _connect(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.create_connection(self.address, timeout=self.timeout_s)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self._sock

    def _close_locked(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> "ControllerSyncClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
