"""Data-plane request handlers: check each request's fields, then call the replica manager.

    PRODUCE {topic, partition, acks (0|1|-1), timeout_ms, values: [bytes]} -> {error, base_offset, leader_epoch}
        (acks=0: no response is sent)
    FETCH {topic, partition, offset, max_records, max_wait_ms, replica_id, current_leader_epoch}
        -> {error, records: [[offset, epoch, value]], hw, leader_epoch, log_start}
    OFFSETS_FOR_LEADER_EPOCH {topic, partition, leader_epoch, current_leader_epoch, replica_id?}
        -> {error, leader_epoch, end_offset}
    DESCRIBE_REPLICAS {} -> {broker_id, partitions: [{topic, partition, role, leader_epoch, leo, hw, isr}]}
    PING {} -> {error: NONE, broker_id}
    FLUSH {topic?: str|None, partition?: int|None} -> {error, broker_id, partitions: [{topic, partition,
        flushed_offset, was}], message?}
        (admin) fsync this broker's logs now: every partition, every partition of `topic`, or one; under the
        power-loss emulation the pending tail becomes durable. UNKNOWN_PARTITION when the named topic or
        partition is not held here, KAFKA_STORAGE_ERROR when a flush fails. Logged as a `flush` event.
"""
from __future__ import annotations

from typing import Any

from broker.limits import MAX_VALUES_PER_PRODUCE
from broker.server.partitions import FetchedBy
from broker.server.rpc import BadRequest, field



class Handlers:
    def __init__(self, replicas, broker_id: int):
        self.replicas = replicas
        self.broker_id = broker_id

    async def produce(self, body: dict[str, Any]) -> dict[str, Any] | None:
        topic = field(body, "topic", str)
        partition = field(body, "partition", int)
        acks = field(body, "acks", int)
        if acks not in (0, 1, -1):
            raise BadRequest(f"field 'acks' must be 0, 1 or -1, got {acks}")
        timeout_ms = field(body, "timeout_ms", int, 30_000)
        if timeout_ms < 0:
            raise BadRequest(f"field 'timeout_ms' must be >= 0, got {timeout_ms}")
        values = field(body, "values", list)
        if not values or len(values) > MAX_VALUES_PER_PRODUCE:
            raise BadRequest(f"field 'values' must hold 1..{MAX_VALUES_PER_PRODUCE} values, got {len(values)}")
        for i, v in enumerate(values):
            if not isinstance(v, bytes):
                raise BadRequest(f"field 'values[{i}]' must be bytes, got {type(v).__name__}")
        resp = await self.replicas.produce(topic, partition, acks, timeout_ms, values)
        return None if acks == 0 else resp

    async def fetch(self, body: dict[str, Any]) -> dict[str, Any]:
        topic = field(body, "topic", str)
        partition = field(body, "partition", int)
        offset = field(body, "offset", int)
        max_records = field(body, "max_records", int, 1000)
        max_wait_ms = field(body, "max_wait_ms", int, 0)
        replica_id = field(body, "replica_id", int, -1)
        current_leader_epoch = field(body, "current_leader_epoch", int, -1)
        if max_records < 1 or max_wait_ms < 0 or offset < 0:
            raise BadRequest("fields 'offset', 'max_wait_ms' must be >= 0 and 'max_records' >= 1")
        return await self.replicas.fetch(topic, partition, offset, min(max_records, 10_000), min(max_wait_ms, 30_000),
                                         FetchedBy(replica_id, current_leader_epoch))

    async def offsets_for_leader_epoch(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.replicas.offsets_for_leader_epoch(
            field(body, "topic", str), field(body, "partition", int), field(body, "leader_epoch", int),
            field(body, "current_leader_epoch", int, -1), field(body, "replica_id", int, -1))

    async def describe_replicas(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"error": "NONE", "broker_id": self.broker_id, "partitions": self.replicas.describe()}

    async def ping(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"error": "NONE", "broker_id": self.broker_id}

    async def flush(self, body: dict[str, Any]) -> dict[str, Any]:
        topic = field(body, "topic", (str, type(None)), None)
        partition = field(body, "partition", (int, type(None)), None)
        if partition is not None and topic is None:
            raise BadRequest("field 'partition' needs field 'topic'")
        parts = [part for key, part in sorted(self.replicas.partitions.items())
                 if (topic is None or key[0] == topic) and (partition is None or key[1] == partition)]
        if topic is not None and not parts:
            what = topic if partition is None else f"{topic}/{partition}"
            return {"error": "UNKNOWN_PARTITION", "broker_id": self.broker_id, "partitions": [],
                    "message": f"broker {self.broker_id} holds no replica of {what}"}
        done = []
        for part in parts:
            log = part.store.log
            was = log.flushed_offset()
            try:
                flushed = log.flush()       # the same SegmentedLog.flush the flush="interval" timer calls
            except OSError as exc:
                return {"error": "KAFKA_STORAGE_ERROR", "broker_id": self.broker_id, "partitions": done,
                        "message": f"{part.topic}/{part.partition}: flush: {exc}"}
            done.append({"topic": part.topic, "partition": part.partition, "flushed_offset": flushed, "was": was})
        self.replicas.events.emit("flush", partitions=[[d["topic"], d["partition"], d["was"], d["flushed_offset"]]
                                                       for d in done])
        return {"error": "NONE", "broker_id": self.broker_id, "partitions": done}
