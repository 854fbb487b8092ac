"""Consumer: FETCH from a partition's leader; never sees records at or above the high watermark.

A fetch is a read, so after NOT_LEADER, a connection failure or a timeout (errors.REFRESH_METADATA) it
is tried once more with fresh metadata from the controller before the ClientError reaches the caller.
"""
from __future__ import annotations

from broker.client.errors import REFRESH_METADATA, ClientError
from broker.client.metadata import ClientBase
from broker.client.results import FetchResult
from broker.protocol import apis


class Consumer(ClientBase):
    """Thread-safe (calls on one object serialize); use one Consumer per thread for parallel fetches."""

    def fetch(self, topic: str, partition: int, offset: int, max_records: int = 1000,
              max_wait_ms: int = 0) -> FetchResult:
        with self._lock:
            try:
                return self._fetch_once(topic, partition, offset, max_records, max_wait_ms)
            except ClientError as exc:
                if exc.code not in REFRESH_METADATA:
                    raise
                self.invalidate()
                return self._fetch_once(topic, partition, offset, max_records, max_wait_ms)

    def _fetch_once(self, topic, partition, offset, max_records, max_wait_ms) -> FetchResult:
        body = {"topic": topic, "partition": partition, "offset": int(offset), "max_records": int(max_records),
                "max_wait_ms": int(max_wait_ms), "replica_id": -1, "current_leader_epoch": -1}
        resp = self.leader_request(apis.FETCH, topic, partition, body, self.timeout_s + max_wait_ms / 1000.0,
                                   f"FETCH {topic}/{partition} at {offset}")
        records = [(int(o), int(e), v) for o, e, v in resp.get("records", [])]
        return FetchResult(records, int(resp["hw"]), int(resp.get("leader_epoch", -1)),
                           int(resp.get("log_start", 0)))
