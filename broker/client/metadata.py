"""Cluster metadata as the client sees it: the controller's METADATA answer, cached and refreshed.

`ClientBase` is what Producer, Consumer and Admin share: the controller address, the metadata cache,
a pool of broker connections, one lock that makes every public call of one object serialize (so an
object may be shared by threads; use one object per thread for parallelism).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from broker.client.connection import Connection
from broker.client.errors import REFRESH_METADATA, ClientError, broker_error
from broker.protocol import apis


@dataclass(frozen=True)
class PartitionMeta:
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    isr_version: int


@dataclass(frozen=True)
class Metadata:
    version: int
    brokers: dict[int, tuple[str, int, bool]]
    partitions: dict[tuple[str, int], PartitionMeta]

    @classmethod
    def parse(cls, body: dict[str, Any]) -> "Metadata":
        try:
            brokers = {int(k): (str(v[0]), int(v[1]), bool(v[2])) for k, v in body["brokers"].items()}
            parts = {}
            for p in body["partitions"]:
                leader = p.get("leader")
                pm = PartitionMeta(
                    topic=p["topic"], partition=int(p["partition"]),
                    leader=None if leader is None or leader < 0 else int(leader),
                    leader_epoch=int(p.get("leader_epoch", -1)), isr=[int(b) for b in p.get("isr", [])],
                    replicas=[int(b) for b in p.get("replicas", [])], isr_version=int(p.get("isr_version", 0)),
                )
                parts[(pm.topic, pm.partition)] = pm
            return cls(int(body.get("version", 0)), brokers, parts)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ClientError("INVALID_RESPONSE", True, f"malformed METADATA answer ({exc!r})") from None


class ClientBase:
    def __init__(self, controller: tuple[str, int], timeout_s: float = 2.0):
        self.controller = (str(controller[0]), int(controller[1]))
        self.timeout_s = float(timeout_s)
        self._lock = threading.RLock()
        self._controller_conn = Connection(*self.controller)
        self._conns: dict[int, Connection] = {}
        self._metadata: Metadata | None = None

    # --- metadata ---------------------------------------------------------------------------
    def refresh_metadata(self) -> Metadata:
        try:
            body = self._controller_conn.request(apis.METADATA, {"known_version": -1, "max_wait_ms": 0},
                                                 self.timeout_s)
        except ClientError as exc:
            raise ClientError("CONTROLLER_NOT_AVAILABLE", True,
                              f"metadata from controller {self.controller[0]}:{self.controller[1]}: {exc}") from None
        md = Metadata.parse(body)
        self._metadata = md
        return md

    def metadata(self) -> Metadata:
        return self._metadata if self._metadata is not None else self.refresh_metadata()

    def partition_meta(self, topic: str, partition: int, *, refresh: bool = False) -> PartitionMeta:
        md = self.refresh_metadata() if refresh else self.metadata()
        pm = md.partitions.get((topic, partition))
        if pm is None and not refresh:
            md = self.refresh_metadata()
            pm = md.partitions.get((topic, partition))
        if pm is None:
            raise ClientError("UNKNOWN_PARTITION", True, f"{topic}/{partition} is not in the controller's metadata")
        return pm

    def leader_connection(self, topic: str, partition: int) -> tuple[PartitionMeta, Connection]:
        pm = self.partition_meta(topic, partition)
        if pm.leader is None:
            pm = self.partition_meta(topic, partition, refresh=True)
            if pm.leader is None:
                raise ClientError("LEADER_NOT_AVAILABLE", True, f"{topic}/{partition} has no leader")
        return pm, self.broker_connection(pm.leader)

    def leader_request(self, api: int, topic: str, partition: int, body: dict[str, Any], timeout_s: float,
                       what: str) -> dict[str, Any]:
        """Send `body` to the partition's leader and return its answer. Any error (a ClientError raised on
        the way, or a broker error code in the answer) that may mean the leader moved drops the cached
        metadata first (errors.REFRESH_METADATA), so the next call asks the controller again."""
        try:
            _pm, conn = self.leader_connection(topic, partition)
            resp = conn.request(api, body, timeout_s)
        except ClientError as exc:
            if exc.code in REFRESH_METADATA:
                self.invalidate()
            raise
        error = resp.get("error", "INVALID_RESPONSE")
        if error != "NONE":
            if error in REFRESH_METADATA:
                self.invalidate()
            raise broker_error(str(error), what)
        return resp

    def broker_connection(self, broker_id: int) -> Connection:
        conn = self._conns.get(broker_id)
        md = self.metadata()
        addr = md.brokers.get(broker_id)
        if addr is None:
            md = self.refresh_metadata()
            addr = md.brokers.get(broker_id)
            if addr is None:
                raise ClientError("BROKER_NOT_AVAILABLE", True, f"broker {broker_id} is not registered")
        if conn is not None and (conn.host, conn.port) != addr[:2]:
            conn.close()
            conn = None
        if conn is None:
            conn = Connection(addr[0], addr[1])
            self._conns[broker_id] = conn
        return conn

    def invalidate(self) -> None:
        """Forget the cached metadata; the next call asks the controller again."""
        self._metadata = None

    def close(self) -> None:
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
            self._controller_conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
