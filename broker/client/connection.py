"""One blocking TCP connection to a broker or the controller, speaking broker/protocol/framing.py.

`request(api, body, timeout_s)` sends one frame and waits for the matching response under a deadline;
every socket operation has a timeout. Failures are ClientErrors classified as definite (nothing reached
the server: connect failed, send failed) or indefinite (the request was sent: TIMEOUT, CONNECTION_LOST,
INVALID_RESPONSE). After any failure the socket is closed; the next request reconnects. A pooled socket
the server has closed meanwhile (it restarted) is detected before sending, so it costs no indefinite error.
"""
from __future__ import annotations

import contextlib
import itertools
import select
import socket
import time
from typing import Any

from broker.client.errors import ClientError
from broker.protocol import apis
from broker.protocol.framing import REQUEST, RESPONSE, Frame, FrameError, encode, read_frame_blocking


class Connection:
    def __init__(self, host: str, port: int):
        self.host = host
        self.port = port
        self._sock: socket.socket | None = None
        self._corr = itertools.count(1)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None

    def _connect(self, timeout_s: float) -> socket.socket:
        if self._sock is not None and not _looks_alive(self._sock):
            self.close()
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=max(timeout_s, 0.001))
            except OSError as exc:
                raise ClientError("BROKER_NOT_AVAILABLE", True, f"connect to {self.address}: {exc}") from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self._sock

    def send_only(self, api: int, body: dict[str, Any], timeout_s: float) -> None:
        """Send a request that gets no response (PRODUCE with acks=0)."""
        sock = self._connect(timeout_s)
        data = encode(Frame(REQUEST, next(self._corr), api, body))
        try:
            sock.settimeout(max(timeout_s, 0.001))
            sock.sendall(data)
        except OSError as exc:
            self.close()
            raise ClientError("BROKER_NOT_AVAILABLE", True, f"send to {self.address}: {exc}") from None

    def request(self, api: int, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        sock = self._connect(timeout_s)
        corr = next(self._corr) & 0xFFFFFFFF
        try:
            data = encode(Frame(REQUEST, corr, api, body))
        except FrameError as exc:
            raise ClientError("INVALID_REQUEST", True, str(exc)) from None
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.sendall(data)
        except OSError as exc:
            # a frame that did not fully reach the server is never processed by it
            self.close()
            raise ClientError("BROKER_NOT_AVAILABLE", True, f"send to {self.address}: {exc}") from None
        what = f"{apis.NAMES.get(api, api)} to {self.address}"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise ClientError("TIMEOUT", False, f"{what}: no answer within {timeout_s:.3f}s")
            try:
                sock.settimeout(remaining)
                frame = read_frame_blocking(sock)
            except socket.timeout:
                self.close()
                raise ClientError("TIMEOUT", False, f"{what}: no answer within {timeout_s:.3f}s") from None
            except FrameError as exc:
                self.close()
                raise ClientError("CONNECTION_LOST", False, f"{what}: {exc}") from None
            except OSError as exc:
                self.close()
                raise ClientError("CONNECTION_LOST", False, f"{what}: {exc}") from None
            if frame is None:
                self.close()
                raise ClientError("CONNECTION_LOST", False, f"{what}: connection closed by the server")
            if frame.kind != RESPONSE:
                self.close()
                raise ClientError("INVALID_RESPONSE", False, f"{what}: got a request frame")
            if frame.correlation_id != corr:
                continue  # a late answer to an earlier request that timed out on this socket: skip
            if frame.api == apis.ERROR:
                self.close()
                code = str(frame.body.get("error", "INVALID_REQUEST"))
                raise ClientError(code, True, f"{what}: {frame.body.get('message', code)}")
            return frame.body


def _looks_alive(sock: socket.socket) -> bool:
    """False if the peer closed this idle socket (it is readable: EOF or stray bytes)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable
