"""An asyncio client connection from a broker to another broker or to the controller.

`PeerConnection.request(api, body, timeout_s)` sends one request and awaits its response; one request at
a time per connection (callers that long-poll in parallel use separate connections). Any failure
(connect refused, timeout, closed connection, undecodable answer) raises PeerError and drops the socket;
the next request reconnects. The connection leaves from `source_host` (the broker's own host, see
broker/controller/client.open_connection_from).
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

from broker.controller.client import open_connection_from
from broker.protocol import apis
from broker.protocol.framing import REQUEST, RESPONSE, Frame, FrameError, encode, read_frame


class PeerError(Exception):
    """A request to a peer failed at the transport level (not a protocol error code)."""


class PeerConnection:
    def __init__(self, host: str, port: int, *, source_host: str | None = None, connect_timeout_s: float = 1.0):
        self.host = host
        self.port = port
        self.source_host = source_host
        self.connect_timeout_s = connect_timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._corr = itertools.count(1)
        self._lock = asyncio.Lock()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    async def _ensure(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._writer is None or self._writer.is_closing() or self._reader.at_eof():
            self.close()
            try:
                self._reader, self._writer = await asyncio.wait_for(
                    open_connection_from(self.source_host, self.host, self.port, limit=1 << 22),
                    self.connect_timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:
                raise PeerError(f"connect to {self.host}:{self.port}: {exc!r}") from None
        return self._reader, self._writer

    async def request(self, api: int, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        async with self._lock:
            try:
                return await asyncio.wait_for(self._request(api, body), timeout_s)
            except asyncio.TimeoutError:
                self.close()
                raise PeerError(f"{apis.NAMES.get(api, api)} to {self.host}:{self.port}: "
                                f"no answer within {timeout_s:.3f}s") from None
            except PeerError:
                self.close()
                raise
            except (OSError, FrameError, asyncio.IncompleteReadError) as exc:
                self.close()
                raise PeerError(f"{apis.NAMES.get(api, api)} to {self.host}:{self.port}: {exc!r}") from None

    async def _request(self, api: int, body: dict[str, Any]) -> dict[str, Any]:
        reader, writer = await self._ensure()
        corr = next(self._corr) & 0xFFFFFFFF
        writer.write(encode(Frame(REQUEST, corr, api, body)))
        await writer.drain()
        while True:
            frame = await read_frame(reader)
            if frame is None:
                raise PeerError(f"{self.host}:{self.port} closed the connection")
            if frame.kind != RESPONSE:
                raise PeerError(f"{self.host}:{self.port} sent a request frame")
            if frame.api == apis.ERROR:
                raise PeerError(f"{self.host}:{self.port} rejected the frame: {frame.body.get('message')}")
            if frame.correlation_id == corr:
                return frame.body

    def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self._reader = self._writer = None
