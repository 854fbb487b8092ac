"""Producer: PRODUCE to a partition's leader with acks 0, 1 or "all"; a send() of many values is one request.

Definite failures (ClientError.definite) are retried up to `retries` times with tenacity, refreshing the
metadata in between; indefinite ones (the write may have happened) are never retried.
After a failure that may mean the leader moved (errors.REFRESH_METADATA: NOT_LEADER, connection errors,
TIMEOUT, REQUEST_TIMED_OUT, ...) the cached metadata is dropped, so the next send asks the controller
for the current leader.
"""
from __future__ import annotations

from typing import Iterable

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from broker.client.errors import REFRESH_METADATA, ClientError
from broker.client.metadata import ClientBase
from broker.client.results import SendResult
from broker.protocol import apis

_ACKS = {0: 0, 1: 1, -1: -1, "all": -1, "0": 0, "1": 1, "-1": -1}


def _as_bytes(value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"values must be bytes or str, got {type(value).__name__}")


class Producer(ClientBase):
    """Thread-safe (calls on one object serialize); use one Producer per thread for parallel sends."""

    def __init__(self, controller: tuple[str, int], acks=1, timeout_s: float = 2.0, retries: int = 0):
        super().__init__(controller, timeout_s)
        if acks not in _ACKS:
            raise ValueError(f"acks must be 0, 1 or 'all', got {acks!r}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.acks = _ACKS[acks]
        self.retries = int(retries)

    def send(self, topic: str, partition: int, values: Iterable[bytes]) -> SendResult:
        batch = [_as_bytes(v) for v in values]
        if not batch:
            raise ValueError("send() needs at least one value")
        with self._lock:
            retrying = Retrying(
                stop=stop_after_attempt(self.retries + 1),
                retry=retry_if_exception(lambda e: isinstance(e, ClientError) and e.definite),
                wait=wait_exponential(multiplier=0.05, max=0.5),
                reraise=True,
            )
            return retrying(self._send_once, topic, partition, batch)

    def _send_once(self, topic: str, partition: int, batch: list[bytes]) -> SendResult:
        body = {"topic": topic, "partition": partition, "acks": self.acks,
                "timeout_ms": int(self.timeout_s * 1000), "values": batch}
        if self.acks == 0:
            try:
                _pm, conn = self.leader_connection(topic, partition)
                conn.send_only(apis.PRODUCE, body, self.timeout_s)
            except ClientError as exc:
                if exc.code in REFRESH_METADATA:
                    self.invalidate()
                raise
            return SendResult([], None)
        # the broker answers REQUEST_TIMED_OUT at timeout_ms; the socket waits a little longer for it
        resp = self.leader_request(apis.PRODUCE, topic, partition, body, self.timeout_s + 1.0,
                                   f"PRODUCE {topic}/{partition}")
        base = int(resp["base_offset"])
        return SendResult(list(range(base, base + len(batch))), int(resp["leader_epoch"]))
