"""The broker's Kafka-protocol request handlers: one async method per API served on the client listener,
each taking a decoded request body (broker/kafka/messages.py, snake_case field names) and returning the
response body, calling the ReplicaManager (broker/server/partitions.py) and, for CreateTopics, the
controller. What is served and what is refused with which code: docs/kafka-protocol.md, "Broker behaviour".

`KafkaHandlers.handle(request)` dispatches; it returns None when no response is due (Produce acks=0) and
raises `CloseConnection` when Kafka's rule is to close the connection (an acks=0 produce that failed, so
the producer notices and refreshes its metadata). `error_body(request, code)` is the response for a
request whose handler failed: every partition (or topic) named in it answered with `code`.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from broker.controller.client import ControllerError
from broker.errors import ConfigError
from broker.kafka import errors as E
from broker.kafka import versions as V
from broker.kafka import compression
from broker.kafka.records import (BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK, CompressionError, KafkaCodecError,
                                  decode_batches, encode_batch)
from broker.groups.offsets import OFFSETS_TOPIC
from broker.limits import FETCH_MAX_BYTES, MAX_VALUES_PER_PRODUCE, topic_name_problem
from broker.records import LogCorruption
from broker.replication.errors import check_leader_epoch
from broker.replication.messages import BatchFields
from broker.topic_configs import config_problem, log_append_time

log = logging.getLogger(__name__)

CLUSTER_ID = "highwater"
MAX_FETCH_RECORDS = 5000        # records read from one partition for one fetch (bytes limit it further)
# a Metadata request naming more topics than this closes the connection (Kafka has no such limit; here
# each named topic costs event-loop time, and no client of a test cluster names thousands)
MAX_METADATA_TOPICS = 10_000
RECORD_OVERHEAD = 24            # upper bound of a record's framing in a batch (varints, attributes)
MAX_WAIT_MS = 30_000            # a fetch long-poll waits at most this long, whatever the client asks
AUTHORIZED_OPERATIONS_OMITTED = -(2 ** 31)
LEADER = "leader"               # PartitionReplica.role of a leader


class CloseConnection(Exception):
    """Kafka's answer to this request is to close the connection (no response)."""


@dataclass(frozen=True)
class AutoCreate:
    """Topic auto-creation (broker settings auto_create_topics_enable, num_partitions,
    default_replication_factor: broker/config_keys.py)."""
    enabled: bool = False
    partitions: int = 1
    replication_factor: int = 1


class KafkaHandlers:
    def __init__(self, replicas, broker_id: int, controller, auto_create: AutoCreate = AutoCreate(),
                 log_append_time: bool = False, producer_ids=None, groups=None):
        self.replicas = replicas
        self.groups = groups                       # broker/server/group_handlers.py: the group protocol
        self.producer_ids = producer_ids           # broker/server/producer_ids.py: InitProducerId
        self.log_append_time = log_append_time     # log_message_timestamp_type = LogAppendTime
        self.broker_id = broker_id
        self.controller = controller
        self.cluster_id = CLUSTER_ID               # what Metadata answers (no caller ever set another)
        self.auto_create = auto_create
        self.apis = {
            V.API_VERSIONS: self.api_versions,
            V.METADATA: self.metadata,
            V.PRODUCE: self.produce,
            V.FETCH: self.fetch,
            V.LIST_OFFSETS: self.list_offsets,
            V.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            V.CREATE_TOPICS: self.create_topics,
            V.CREATE_PARTITIONS: self.create_partitions,
            V.DELETE_TOPICS: self.delete_topics,
            V.INIT_PRODUCER_ID: self.init_producer_id,
        }

    async def handle(self, request) -> dict[str, Any] | None:
        if self.groups is not None and request.api_key in self.groups.apis:
            return await self.groups.apis[request.api_key](request.body, request.api_version, request.client_id)
        handler = self.apis[request.api_key]
        return await handler(request.body, request.api_version)

    # --- ApiVersions --------------------------------------------------------------------------
    async def api_versions(self, body: dict[str, Any], version: int = 0) -> dict[str, Any]:
        return self.api_versions_body(E.NONE)

    @staticmethod
    def api_versions_body(error_code: int) -> dict[str, Any]:
        """Also the answer to an unsupported ApiVersions version (UNSUPPORTED_VERSION, v0 format)."""
        return {"error_code": error_code, "throttle_time_ms": 0,
                "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                             for k, (lo, hi) in sorted(V.SUPPORTED.items())]}

    # --- Metadata -----------------------------------------------------------------------------
    async def metadata(self, body: dict[str, Any], version: int = 1) -> dict[str, Any]:
        md = self.replicas.metadata
        brokers = {} if md is None else md.brokers
        live = sorted(b for b, info in brokers.items() if info.alive)
        requested = body.get("topics")
        if requested is not None and len(requested) > MAX_METADATA_TOPICS:
            log.warning("kafka: closing a connection: a Metadata request names %d topics (at most %d)",
                        len(requested), MAX_METADATA_TOPICS)
            raise CloseConnection()
        if md is None:
            names = [] if requested is None else [t["name"] for t in requested]
        elif requested is None:
            names = sorted({t for t, _ in md.partitions})
        else:
            names = [t["name"] for t in requested]
        topics = [self._topic_metadata(md, name, set(live)) for name in names]
        # Kafka's auto-creation: a named topic that does not exist is created (when the broker allows it
        # and the request does not forbid it: allow_auto_topic_creation, true before v4) and answered
        # LEADER_NOT_AVAILABLE, so the client asks again once it has leaders
        unknown = [t for t in topics if t["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION]
        if unknown and requested is not None and self.auto_create.enabled and body.get("allow_auto_topic_creation", True):
            codes = await self._auto_create([t["name"] for t in unknown], len(live))
            for t in unknown:
                t["error_code"] = codes[t["name"]]
        return {"throttle_time_ms": 0,
                "brokers": [{"node_id": b, "host": brokers[b].host, "port": brokers[b].port, "rack": None}
                            for b in live],
                "cluster_id": self.cluster_id, "controller_id": live[0] if live else -1,
                "topics": topics, "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

    def _topic_metadata(self, md, name: str | None, live: set[int]) -> dict[str, Any]:
        out = {"name": name, "is_internal": name == OFFSETS_TOPIC, "partitions": [],
               "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
        if name is None or topic_name_problem(name) is not None:
            return {**out, "error_code": E.INVALID_TOPIC_EXCEPTION}
        parts = [] if md is None else md.topic(name)
        if not parts:
            return {**out, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION}
        for ps in parts:
            out["partitions"].append({
                "error_code": E.NONE if ps.leader is not None else E.LEADER_NOT_AVAILABLE,
                "partition_index": ps.partition,
                "leader_id": ps.leader if ps.leader is not None else -1,
                "leader_epoch": ps.leader_epoch,
                "replica_nodes": list(ps.replicas), "isr_nodes": list(ps.isr),
                "offline_replicas": [b for b in ps.replicas if b not in live]})
        return {**out, "error_code": E.NONE}

    async def _auto_create(self, names: list[str], live: int) -> dict[str, int]:
        """Create `names` with the auto-creation shape; each name's Metadata error code: LEADER_NOT_AVAILABLE
        once created (or created meanwhile by another request), else why not, as Kafka answers it."""
        ac = self.auto_create
        if ac.replication_factor > live:
            return {n: E.INVALID_REPLICATION_FACTOR for n in names}
        specs = [{"name": n, "partitions": ac.partitions, "replication_factor": ac.replication_factor} for n in names]
        try:
            answers = await self.controller.create_topics(specs)
        except ControllerError as exc:
            log.warning("kafka: auto-creating %s failed: %s", ", ".join(names), exc)
            return {n: E.LEADER_NOT_AVAILABLE for n in names}       # the client asks again
        out = {}
        for n in names:
            code = E.kafka_code(answers.get(n, "NONE"))
            out[n] = E.LEADER_NOT_AVAILABLE if code in (E.NONE, E.TOPIC_ALREADY_EXISTS) else code
            if code == E.NONE:
                log.info("kafka: created topic %r on a Metadata request (%d partitions, replication factor %d)",
                         n, ac.partitions, ac.replication_factor)
        return out

    # --- Produce ------------------------------------------------------------------------------
    async def produce(self, body: dict[str, Any], version: int = 3) -> dict[str, Any] | None:
        acks = body["acks"]
        timeout_ms = max(0, body["timeout_ms"])
        txn = body.get("transactional_id")
        jobs = [(t["name"], pd["index"], pd.get("records")) for t in body["topic_data"]
                for pd in t["partition_data"]]
        results = await asyncio.gather(*(self._produce_one(name, p, records, acks, timeout_ms, txn)
                                         for name, p, records in jobs))
        if acks == 0:
            if any(r["error_code"] != E.NONE for r in results):
                raise CloseConnection("acks=0 produce failed")
            return None
        answers = iter(results)
        responses = [{"name": t["name"], "partition_responses": [next(answers) for _ in t["partition_data"]]}
                     for t in body["topic_data"]]
        return {"responses": responses, "throttle_time_ms": 0}

    async def _produce_one(self, topic: str, p: int, records: bytes | None, acks: int, timeout_ms: int,
                           txn: str | None) -> dict[str, Any]:
        def answer(code: int, base_offset: int = -1, message: str | None = None) -> dict[str, Any]:
            part = self.replicas.get(topic, p)
            return {"index": p, "error_code": code, "base_offset": base_offset, "log_append_time_ms": -1,
                    "log_start_offset": part.replica.log.log_start() if part is not None else -1,
                    "record_errors": [], "error_message": message}

        if acks not in (0, 1, -1):
            return answer(E.INVALID_REQUIRED_ACKS, message=f"acks must be 0, 1 or -1, got {acks}")
        if txn is not None:
            return answer(E.UNSUPPORTED_FOR_MESSAGE_FORMAT, message="transactions are not supported")
        if not records:
            return answer(E.INVALID_RECORD, message="no records")
        try:
            batches = decode_batches(records)
        except CompressionError as exc:
            code = {compression.MISSING: E.UNSUPPORTED_COMPRESSION_TYPE,
                    compression.TOO_LARGE: E.MESSAGE_TOO_LARGE}.get(exc.reason, E.CORRUPT_MESSAGE)
            return answer(code, message=str(exc)[:200])
        except KafkaCodecError as exc:
            return answer(E.CORRUPT_MESSAGE, message=str(exc)[:200])
        if len(batches) != 1:       # Kafka's rule from Produce v3 on
            return answer(E.INVALID_RECORD, message=f"{len(batches)} record batches: exactly one per partition")
        [b] = batches                # compressed ones arrive decompressed; stored (and served) uncompressed
        if b.is_transactional or b.is_control:
            return answer(E.UNSUPPORTED_FOR_MESSAGE_FORMAT, message="transactional and control batches are not supported")
        producer = None
        if b.producer_id >= 0:       # an idempotent producer's batch (KIP-98)
            if b.base_sequence < 0 or b.producer_epoch < 0:
                return answer(E.INVALID_RECORD, message=f"producer {b.producer_id}: epoch {b.producer_epoch} "
                              f"and base sequence {b.base_sequence} must be >= 0")
            producer = (b.producer_id, b.producer_epoch, b.base_sequence)
        recs = b.records             # stored as sent: key, value (None: a tombstone), headers, timestamp
        if not recs:
            return answer(E.INVALID_RECORD, message="no records")
        if len(recs) > MAX_VALUES_PER_PRODUCE:
            return answer(E.MESSAGE_TOO_LARGE, message=f"{len(recs)} records in one batch, at most "
                          f"{MAX_VALUES_PER_PRODUCE}")
        if self.replicas.get(topic, p) is None:
            return answer(self._missing_partition(topic, p))
        values = [r.value for r in recs]      # bytes already (decode_batches slices bytes)
        keys = headers = None
        if any(r.key is not None or r.headers or r.value is None for r in recs):
            keys = [r.key for r in recs]
            headers = [tuple(r.headers) for r in recs]
        append_time = self._log_append_time(topic)
        stamps = None if append_time else [r.timestamp for r in recs]
        resp = await self.replicas.produce(topic, p, acks, timeout_ms, values,
                                           BatchFields(keys, headers, stamps, producer))
        code = E.kafka_code(resp["error"])
        out = answer(code, resp["base_offset"] if code == E.NONE else -1, message=resp.get("message"))
        if code == E.NONE and append_time:
            out["log_append_time_ms"] = resp.get("timestamp", -1)
        return out

    def _log_append_time(self, topic: str) -> bool:
        """Whether `topic`'s records carry the leader's append time: its message.timestamp.type, else the
        broker's log_message_timestamp_type."""
        md = self.replicas.metadata
        return log_append_time(md.topic_configs(topic) if md is not None else None, self.log_append_time)

    def _missing_partition(self, topic: str, p: int) -> int:
        """A partition this broker holds no replica of: NOT_LEADER_OR_FOLLOWER if it exists (the client's
        metadata is stale), UNKNOWN_TOPIC_OR_PARTITION if not."""
        if self.replicas.reopening(topic, p):       # being recovered after corruption
            return E.KAFKA_STORAGE_ERROR
        md = self.replicas.metadata
        if md is not None and md.partition(topic, p) is not None:
            return E.NOT_LEADER_OR_FOLLOWER
        return E.UNKNOWN_TOPIC_OR_PARTITION

    # --- Fetch --------------------------------------------------------------------------------
    async def fetch(self, body: dict[str, Any], version: int = 4) -> dict[str, Any]:
        session_id = body.get("session_id", 0)
        session_epoch = body.get("session_epoch", -1)
        if session_id != 0 or session_epoch > 0:
            # incremental fetch of a session this broker never created (it always answers sessionless)
            return {"throttle_time_ms": 0, "error_code": E.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0,
                    "responses": []}
        loop = asyncio.get_running_loop()
        max_wait_s = min(max(0, body["max_wait_ms"]), MAX_WAIT_MS) / 1000.0
        deadline = loop.time() + max_wait_s
        min_bytes = max(1, body.get("min_bytes", 1))
        while True:
            responses, size, failed = await self._fetch_once(body)
            remaining = deadline - loop.time()
            if failed or size >= min_bytes or remaining <= 0:
                return {"throttle_time_ms": 0, "error_code": E.NONE, "session_id": 0, "responses": responses}
            await self._wait_hw_moved(body, remaining)

    async def _fetch_once(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], int, bool]:
        """One pass over the requested partitions. Bounded as Kafka bounds it: the answer carries at most
        max_bytes (capped at broker/limits.py FETCH_MAX_BYTES; 0 or less means 0), each partition at most its
        partition_max_bytes, except that the first record of the first partition with data is sent
        whole even when larger (KIP-74), so a consumer always progresses. A partition named more than
        once is answered once, for its first mention (Kafka keeps one entry per partition). The event
        loop is yielded to between partitions."""
        budget = max(0, min(body.get("max_bytes", 0x7FFFFFFF), FETCH_MAX_BYTES))
        size, failed = 0, False
        responses, seen = [], set()
        for t in body["topics"]:
            parts = []
            for fp in t["partitions"]:
                if (t["topic"], fp["partition"]) in seen:
                    continue
                seen.add((t["topic"], fp["partition"]))
                limit = max(0, min(fp["partition_max_bytes"], budget - size))
                pd = self._fetch_partition(t["topic"], fp, limit, first=size == 0)
                size += len(pd["records"])
                failed = failed or pd["error_code"] != E.NONE
                parts.append(pd)
                await asyncio.sleep(0)
            if parts:
                responses.append({"topic": t["topic"], "partitions": parts})
        return responses, size, failed

    def _fetch_partition(self, topic: str, fp: dict[str, Any], limit: int, first: bool) -> dict[str, Any]:
        p = fp["partition"]
        out = {"partition_index": p, "error_code": E.NONE, "high_watermark": -1, "last_stable_offset": -1,
               "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1,
               "records": b""}
        part = self.replicas.get(topic, p)
        if part is None:
            return {**out, "error_code": self._missing_partition(topic, p)}
        # read by bytes: only the records that fit in `limit` as stored (at least one), never thousands to
        # send a few of them
        max_records = self.replicas.records_within(part, fp["fetch_offset"], MAX_FETCH_RECORDS, limit)
        error, records, hw, _epoch, log_start = self.replicas.read_committed(
            topic, p, fp["fetch_offset"], max_records, fp.get("current_leader_epoch", -1))
        code = E.kafka_code(error)
        if code != E.NONE:
            if code == E.OFFSET_OUT_OF_RANGE:
                return {**out, "error_code": code, "high_watermark": hw, "last_stable_offset": hw,
                        "log_start_offset": log_start}
            return {**out, "error_code": code}
        data = encode_records(records, limit, at_least_one=first, log_append_time=self._log_append_time(topic))
        return {**out, "high_watermark": hw, "last_stable_offset": hw, "log_start_offset": log_start,
                "records": data}

    async def _wait_hw_moved(self, body: dict[str, Any], timeout_s: float) -> None:
        """Until the HW of any requested partition held here moves, or `timeout_s`."""
        signals = {id(part.hw_moved): part.hw_moved
                   for t in body["topics"] for fp in t["partitions"]
                   if (part := self.replicas.get(t["topic"], fp["partition"])) is not None}
        if not signals:
            await asyncio.sleep(timeout_s)
            return
        waits = [asyncio.ensure_future(s.wait(timeout_s)) for s in signals.values()]
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    # --- ListOffsets --------------------------------------------------------------------------
    async def list_offsets(self, body: dict[str, Any], version: int = 1) -> dict[str, Any]:
        """Each partition's offset; a partition named more than once is answered INVALID_REQUEST at every
        mention, as Kafka does."""
        named = Counter((t["name"], lp["partition_index"]) for t in body["topics"] for lp in t["partitions"])
        topics = [{"name": t["name"], "partitions": [
            await self._list_offset(t["name"], lp) if named[(t["name"], lp["partition_index"])] == 1
            else {"partition_index": lp["partition_index"], "error_code": E.INVALID_REQUEST, "timestamp": -1,
                  "offset": -1, "leader_epoch": -1}
            for lp in t["partitions"]]} for t in body["topics"]]
        return {"throttle_time_ms": 0, "topics": topics}

    async def _list_offset(self, topic: str, lp: dict[str, Any]) -> dict[str, Any]:
        p = lp["partition_index"]
        out = {"partition_index": p, "error_code": E.NONE, "timestamp": -1, "offset": -1, "leader_epoch": -1}
        part = self.replicas.get(topic, p)
        if part is None:
            return {**out, "error_code": self._missing_partition(topic, p)}
        r = part.replica
        if r.role != LEADER:
            return {**out, "error_code": E.NOT_LEADER_OR_FOLLOWER}
        fenced = check_leader_epoch(lp.get("current_leader_epoch", -1), r.leader_epoch)
        if fenced is not None:
            return {**out, "error_code": E.kafka_code(str(fenced))}
        ts = lp["timestamp"]
        if ts == -2:                               # earliest
            offset = r.log.log_start()
            return {**out, "offset": offset, "leader_epoch": epoch_for_offset(r, offset)}
        if ts == -1:                               # latest (the HW: there are no transactions)
            return {**out, "offset": r.hw, "leader_epoch": epoch_for_offset(r, r.hw)}
        if ts < 0:
            return {**out, "error_code": E.INVALID_REQUEST}
        try:
            found = await self._first_at_or_after(part, ts)
        except LogCorruption as exc:
            self.replicas.recover_corrupt(part, exc)
            return {**out, "error_code": E.KAFKA_STORAGE_ERROR}
        if found is None:
            return out
        return {**out, "timestamp": found.timestamp, "offset": found.offset, "leader_epoch": found.epoch}

    async def _first_at_or_after(self, part, ts: int):
        """The first committed record whose timestamp is >= ts (timestamps are the leader's clock, which
        may step back across leaders: this scans, it does not bisect; it lets other requests run between
        chunks)."""
        r = part.replica
        offset, hw = r.log.log_start(), r.hw
        while True:
            await asyncio.sleep(0)
            if offset >= hw or part.retired:        # retired: closed after corruption was found
                return None
            chunk = r.log.read(offset, min(1000, hw - offset))
            if not chunk:
                return None
            for rec in chunk:
                if rec.offset >= hw:
                    return None
                if rec.timestamp >= ts:
                    return rec
            offset = chunk[-1].offset + 1

    # --- OffsetForLeaderEpoch -----------------------------------------------------------------
    async def offset_for_leader_epoch(self, body: dict[str, Any], version: int = 0) -> dict[str, Any]:
        replica_id = body.get("replica_id", -2)
        topics = []
        for t in body["topics"]:
            parts = []
            for op in t["partitions"]:
                p = op["partition"]
                part = self.replicas.get(t["topic"], p)
                if part is None:
                    parts.append({"error_code": self._missing_partition(t["topic"], p), "partition": p,
                                  "leader_epoch": -1, "end_offset": -1})
                    continue
                # a client's current epoch is always checked (KIP-320), whatever the broker's
                # fetch_fencing setting, which is about followers' requests
                fenced = check_leader_epoch(op.get("current_leader_epoch", -1), part.replica.leader_epoch)
                if replica_id < 0 and part.replica.role == LEADER and fenced is not None:
                    parts.append({"error_code": E.kafka_code(str(fenced)), "partition": p,
                                  "leader_epoch": -1, "end_offset": -1})
                    continue
                resp = self.replicas.offsets_for_leader_epoch(t["topic"], p, op["leader_epoch"],
                                                              op.get("current_leader_epoch", -1),
                                                              replica_id if replica_id >= 0 else -1)
                parts.append({"error_code": E.kafka_code(resp["error"]), "partition": p,
                              "leader_epoch": resp["leader_epoch"], "end_offset": resp["end_offset"]})
            topics.append({"topic": t["topic"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # --- CreateTopics -------------------------------------------------------------------------
    async def create_topics(self, body: dict[str, Any], version: int = 2) -> dict[str, Any]:
        md = self.replicas.metadata
        live = 0 if md is None else sum(1 for info in md.brokers.values() if info.alive)
        results: dict[int, dict[str, Any]] = {}
        specs: list[tuple[int, dict[str, Any]]] = []
        seen: set[str] = set()
        for i, t in enumerate(body["topics"]):
            name = t["name"]

            def refuse(code: int, message: str) -> None:
                results[i] = {"name": name, "error_code": code, "error_message": message}
            if name in seen:
                refuse(E.INVALID_REQUEST, f"topic {name!r} named twice in one request")
                continue
            seen.add(name)
            problem = topic_name_problem(name)
            partitions = t["num_partitions"] if t["num_partitions"] != -1 else 1
            rf = t["replication_factor"] if t["replication_factor"] != -1 else max(1, min(3, live))
            bad_config = next((why for c in t.get("configs") or ()
                               if (why := config_problem(c["name"], c["value"])) is not None), None)
            if problem is not None:
                refuse(E.INVALID_TOPIC_EXCEPTION, problem)
            elif t.get("assignments"):
                refuse(E.INVALID_REPLICA_ASSIGNMENT, "manual replica assignments are not supported")
            elif bad_config is not None:
                refuse(E.INVALID_CONFIG, bad_config)
            elif partitions < 1:
                refuse(E.INVALID_PARTITIONS, f"num_partitions must be >= 1, got {partitions}")
            elif rf < 1:
                refuse(E.INVALID_REPLICATION_FACTOR, f"replication_factor must be >= 1, got {rf}")
            elif md is not None and md.topic(name):
                refuse(E.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            elif rf > live:
                refuse(E.INVALID_REPLICATION_FACTOR, f"replication factor {rf} is larger than the {live} "
                       "live brokers")
            else:
                specs.append((i, {"name": name, "partitions": partitions, "replication_factor": rf,
                                  "configs": {c["name"]: c["value"] for c in t.get("configs") or ()}}))
        async def ask() -> dict[str, tuple[str, str | None]]:
            answers = await self.controller.create_topics([s for _, s in specs])
            return {n: (e, None) for n, e in answers.items()}
        topics = await self._forwarded(results, [(i, s["name"]) for i, s in specs], ask,
                                       body.get("validate_only", False))
        return {"throttle_time_ms": 0, "topics": topics}

    # --- CreatePartitions ---------------------------------------------------------------------
    async def create_partitions(self, body: dict[str, Any], version: int = 0) -> dict[str, Any]:
        """Grow topics to a new partition count through the controller. As Kafka answers: a topic named
        twice INVALID_REQUEST, an unknown one UNKNOWN_TOPIC_OR_PARTITION, a count not above the current
        INVALID_PARTITIONS, a manual assignment (not supported here) INVALID_REPLICA_ASSIGNMENT."""
        md = self.replicas.metadata
        results: dict[int, dict[str, Any]] = {}
        wanted: list[tuple[int, str, int]] = []
        counts = Counter(t["name"] for t in body["topics"])
        for i, t in enumerate(body["topics"]):
            name, count = t["name"], t["count"]

            def refuse(code: int, message: str) -> None:
                results[i] = {"name": name, "error_code": code, "error_message": message}
            have = len(md.topic(name)) if md is not None else 0
            if counts[name] > 1:
                refuse(E.INVALID_REQUEST, f"topic {name!r} named twice in one request")
            elif not have:
                refuse(E.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            elif t.get("assignments"):
                refuse(E.INVALID_REPLICA_ASSIGNMENT, "manual replica assignments are not supported")
            elif count <= have:
                refuse(E.INVALID_PARTITIONS, f"topic {name!r} has {have} partitions; the new count must be "
                       f"larger, got {count}")
            else:
                wanted.append((i, name, count))
        topics = await self._forwarded(results, [(i, n) for i, n, _ in wanted],
                                       lambda: self.controller.create_partitions({n: c for _, n, c in wanted}),
                                       body.get("validate_only", False))
        return {"throttle_time_ms": 0, "results": topics}

    # --- DeleteTopics -------------------------------------------------------------------------
    async def delete_topics(self, body: dict[str, Any], version: int = 0) -> dict[str, Any]:
        """Delete topics through the controller; brokers drop the replicas once the metadata no longer
        names them (so a client may still see the topic for a moment). As Kafka answers: an unknown
        topic UNKNOWN_TOPIC_OR_PARTITION, a topic named twice INVALID_REQUEST, an internal topic (the
        groups' offsets) INVALID_REQUEST (this broker does not delete its own topics)."""
        md = self.replicas.metadata
        names = body.get("topic_names") or []
        counts = Counter(names)
        results: dict[int, dict[str, Any]] = {}
        wanted: list[tuple[int, str]] = []
        for i, name in enumerate(names):
            def refuse(code: int, message: str) -> None:
                results[i] = {"name": name, "error_code": code, "error_message": message}
            if counts[name] > 1:
                refuse(E.INVALID_REQUEST, f"topic {name!r} named twice in one request")
            elif name == OFFSETS_TOPIC:
                refuse(E.INVALID_REQUEST, f"{name} is the broker's own topic")
            elif md is None or not md.topic(name):
                refuse(E.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            else:
                wanted.append((i, name))
        answers = await self._forwarded(results, wanted,
                                        lambda: self.controller.delete_topics([n for _, n in wanted]), False)
        return {"throttle_time_ms": 0, "responses": [{"name": a["name"], "error_code": a["error_code"]}
                                                     for a in answers]}

    async def _forwarded(self, results: dict[int, dict[str, Any]], wanted: list[tuple[int, str]], ask,
                         validate_only: bool) -> list[dict[str, Any]]:
        """The per-topic answers of a request the controller carries out (CreateTopics, CreatePartitions):
        `results` holds the topics refused already, by position; each of `wanted` (position, name) gets
        what `ask()` ({name: (error, message)}) says of it, or the controller's error for all when it cannot
        be reached, or NONE without asking when the request only validates. In request order."""
        if wanted and not validate_only:
            try:
                answers = await ask()
            except ControllerError as exc:
                answers = {n: (exc.code, exc.message or exc.code) for _, n in wanted}
            for i, name in wanted:
                error, message = answers.get(name, ("UNKNOWN", "the controller did not answer for it"))
                code = E.kafka_code(error)
                results[i] = {"name": name, "error_code": code,
                              "error_message": None if code == E.NONE else (message or str(error))}
        for i, name in wanted:
            results.setdefault(i, {"name": name, "error_code": E.NONE, "error_message": None})
        return [results[i] for i in sorted(results)]

    # --- InitProducerId -----------------------------------------------------------------------
    async def init_producer_id(self, body: dict[str, Any], version: int = 0) -> dict[str, Any]:
        """A new producer id at epoch 0 for an idempotent producer (a producer that was given one before
        and asks again starts over with a new one, as Kafka does without transactions)."""
        def answer(code: int, pid: int = -1, epoch: int = -1) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": code, "producer_id": pid, "producer_epoch": epoch}

        if body.get("transactional_id") is not None:
            log.info("kafka: InitProducerId for transactional id %r refused: transactions are not supported",
                     body["transactional_id"])
            return answer(E.INVALID_REQUEST)
        try:
            pid = self.producer_ids.next()
        except (OSError, ConfigError) as exc:
            log.error("kafka: InitProducerId: %s", exc)
            return answer(E.KAFKA_STORAGE_ERROR)
        log.info("kafka: producer id %d handed out", pid)
        return answer(E.NONE, pid, 0)

    # --- errors -------------------------------------------------------------------------------
    def error_body(self, request, code: int) -> dict[str, Any] | None:
        """The response to `request` with every partition (or topic) answered `code`; None when the api
        has no place for an error (then the caller closes the connection)."""
        body, key = request.body, request.api_key
        if key == V.API_VERSIONS:
            return self.api_versions_body(code)
        if key == V.PRODUCE:
            return {"throttle_time_ms": 0, "responses": [
                {"name": t["name"], "partition_responses": [
                    {"index": pd["index"], "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
                     "log_start_offset": -1, "record_errors": [], "error_message": E.NAMES.get(code)}
                    for pd in t["partition_data"]]} for t in body["topic_data"]]}
        if key == V.FETCH:
            return {"throttle_time_ms": 0, "error_code": code, "session_id": 0, "responses": []}
        if key == V.LIST_OFFSETS:
            return {"throttle_time_ms": 0, "topics": [
                {"name": t["name"], "partitions": [
                    {"partition_index": lp["partition_index"], "error_code": code, "timestamp": -1,
                     "offset": -1, "leader_epoch": -1} for lp in t["partitions"]]} for t in body["topics"]]}
        if key == V.OFFSET_FOR_LEADER_EPOCH:
            return {"throttle_time_ms": 0, "topics": [
                {"topic": t["topic"], "partitions": [
                    {"error_code": code, "partition": op["partition"], "leader_epoch": -1, "end_offset": -1}
                    for op in t["partitions"]]} for t in body["topics"]]}
        if key == V.CREATE_TOPICS:
            return {"throttle_time_ms": 0, "topics": [
                {"name": t["name"], "error_code": code, "error_message": E.NAMES.get(code)}
                for t in body["topics"]]}
        if key == V.DELETE_TOPICS:
            return {"throttle_time_ms": 0, "responses": [{"name": n, "error_code": code}
                                                         for n in body.get("topic_names") or []]}
        if key == V.CREATE_PARTITIONS:
            return {"throttle_time_ms": 0, "results": [
                {"name": t["name"], "error_code": code, "error_message": E.NAMES.get(code)}
                for t in body["topics"]]}
        if key == V.INIT_PRODUCER_ID:
            return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
        if key == V.METADATA:
            return None
        if self.groups is not None and key in self.groups.apis:
            return self.groups.error_body(request, code)
        return None


def epoch_for_offset(replica, offset: int) -> int:
    """The leader epoch in force at `offset`: the largest epoch starting at or before it (-1: none)."""
    best = -1
    for epoch, start in replica.epoch_cache.entries():
        if start <= offset:
            best = epoch
    return best


def _key_and_header_bytes(rec) -> int:
    """A record's key and header bytes (what the fetch limit counts besides its value and the overheads)."""
    size = 0
    if rec.key is not None:
        size += len(rec.key)
    for hkey, hval in rec.headers:
        size += len(hkey) + 2 + (len(hval) if hval is not None else 0)
    return size


def encode_records(records, limit: int, *, at_least_one: bool, log_append_time: bool = False) -> bytes:
    """RecordBatches for `records` (consecutive, committed), one batch per run of equal leader epochs and
    producers (and, with `log_append_time`, of equal append times, the batch's maxTimestamp being every record's),
    stamped with that epoch, within `limit` bytes (estimated from the record sizes); with `at_least_one`
    the first record goes out even when it alone is over the limit (KIP-74)."""
    chosen, size, epoch = [], 0, None
    for rec in records:
        value = rec.value
        cost = (len(value) if value is not None else 0) + RECORD_OVERHEAD + (BATCH_OVERHEAD if rec.epoch != epoch else 0)
        if rec.key is not None or rec.headers:
            cost += _key_and_header_bytes(rec)
        if size + cost > limit and not (at_least_one and not chosen):
            break
        chosen.append(rec)
        size += cost
        epoch = rec.epoch
    out = []
    attributes = TIMESTAMP_TYPE_MASK if log_append_time else 0
    # one batch per leader epoch and producer (an idempotent producer's records keep its id, epoch and
    # first sequence, as Kafka serves them), and per append time with LogAppendTime
    if log_append_time:
        def group(r):
            return r.epoch, r.producer_id, r.producer_epoch, r.timestamp
    else:
        def group(r):
            return r.epoch, r.producer_id, r.producer_epoch
    for _same, run in itertools.groupby(chosen, key=group):
        run = list(run)
        first = run[0]
        out.append(encode_batch(first.offset, first.epoch,
                                [(rec.timestamp or 0, rec.key, rec.value, rec.headers) if rec.headers
                                 else (rec.timestamp or 0, rec.key, rec.value) for rec in run],
                                attributes=attributes,
                                producer=(first.producer_id, first.producer_epoch, first.sequence)))
    return b"".join(out)

