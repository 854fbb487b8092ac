"""An idempotent Kafka producer whose batches stay in the open, for scenarios that stage a retry.

An idempotent producer (KIP-98) sends a batch again, with its producer id, epoch and sequence unchanged,
when it never saw the answer to the first attempt. The client libraries decide for themselves when that
happens; a scenario that stages a retry needs to decide it. `WireProducer` speaks the Kafka protocol
itself, through broker/kafka's codecs: Metadata to find a partition's leader, InitProducerId once, and
Produce v8 with one idempotent batch per send. Every batch it sent is kept by partition, and `resend`
sends one again, byte for byte, to the partition's leader at that moment:

    p = WireProducer(["127.0.0.1:9101"], timeout_s=5.0)
    p.send("hw", 0, [b"17"])            # SendResult(offsets=[3], epoch=-1), the batch kept as p.sent[0]
    p.resend(p.sent[0])                 # Resent(offset=3, ...): answered as a duplicate, or appended again

It has no retries of its own and needs acks=all, as every idempotent producer does. Errors become
`broker.client.ClientError`s with the Kafka adapters' classification (workloads/kafka_client.py).
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from broker.client import ClientError, SendResult
from broker.kafka import messages as M
from broker.kafka import versions as V
from broker.kafka.records import encode_batch
from workloads.kafka_client import UNKNOWN_EPOCH, classify_code

PRODUCE_VERSION = 8
METADATA_VERSION = 1
INIT_PRODUCER_ID_VERSION = 1
CLIENT_ID = "highwater-wire"
NOT_LEADER_CODES = (5, 6)      # LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER: ask the metadata again


@dataclass(frozen=True)
class SentBatch:
    """One batch as it went out: the bytes a retry sends again, and what its sequence numbers cover."""
    topic: str
    partition: int
    records: bytes
    base_sequence: int
    count: int
    offsets: tuple[int, ...] = ()       # as the first answer gave them; empty when it had none


@dataclass(frozen=True)
class Resent:
    """The answer to a resent batch: `offset` is the first record's, `same` whether it equals the first
    answer's (a recognised retry), `leader` the broker that answered."""
    offset: int
    same: bool | None                   # None: the first attempt had no answer to compare with
    leader: int


class KafkaConnection:
    """One raw Kafka-protocol connection: `request` sends one request and returns the decoded answer;
    `send` and `receive` do the halves (answers come in request order; the correlation id is checked).
    The tests drive the Kafka listener with it too."""

    def __init__(self, address: tuple[str, int], timeout_s: float = 10.0, client_id: str = CLIENT_ID):
        self.sock = socket.create_connection(address, timeout=timeout_s)
        self.client_id = client_id
        self.corr = 0

    def send(self, api: int, version: int, body: dict) -> int:
        """Send one request; returns its correlation id."""
        self.corr += 1
        self.sock.sendall(M.encode_request(api, version, self.corr, self.client_id, body))
        return self.corr

    def receive(self, api: int, version: int, corr: int) -> dict:
        """The next answer, which must be the one to request `corr`."""
        (size,) = struct.unpack(">I", self.recv_exactly(4))
        got, answer = M.decode_response(api, version, self.recv_exactly(size))
        if got != corr:
            raise ClientError("CorrelationIdError", False, f"answer {got} to request {corr}")
        return answer

    def request(self, api: int, version: int, body: dict) -> dict:
        return self.receive(api, version, self.send(api, version, body))

    def recv_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()


def _host_port(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"a bootstrap server is host:port, got {server!r}")
    return host.strip("[]"), int(port)


class WireProducer:
    """An idempotent producer (acks=all, one batch per send) that keeps what it sent in `sent`."""

    library = "wire"
    idempotence = True

    def __init__(self, bootstrap: Iterable[str] | str, *, timeout_s: float = 5.0):
        servers = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
        self.bootstrap = [_host_port(s) for part in servers for s in str(part).split(",") if s.strip()]
        if not self.bootstrap:
            raise ValueError("no bootstrap servers given")
        self.timeout_s = float(timeout_s)
        self.producer_id = -1
        self.producer_epoch = -1
        self.sent: list[SentBatch] = []
        self._next_seq: dict[tuple[str, int], int] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[tuple[str, int], int] = {}     # partition -> its leader, until it stops answering
        self._conns: dict[int, KafkaConnection] = {}
        self._lock = threading.Lock()

    # --- the ProducerClient protocol (workloads/clients.py) ----------------------------------------
    def send(self, topic: str, partition: int, values: Iterable[bytes]) -> SendResult:
        values = [bytes(v) for v in values]
        if not values:
            raise ValueError("send() needs at least one value")
        with self._lock:
            self._init_producer_id()
            key = (topic, partition)
            seq = self._next_seq.get(key, 0)
            now = int(time.time() * 1000)
            records = encode_batch(0, -1, [(now, None, v) for v in values],
                                   producer=(self.producer_id, self.producer_epoch, seq))
            # the sequence moves on whatever the answer: a producer that resends a batch resends these bytes
            self._next_seq[key] = (seq + len(values)) % 2**31
            batch = SentBatch(topic, partition, records, seq, len(values))
            try:
                offset, _leader = self._produce(topic, partition, records)
            except ClientError:
                self.sent.append(batch)
                raise
            offsets = tuple(range(offset, offset + len(values)))
            self.sent.append(SentBatch(topic, partition, records, seq, len(values), offsets))
            return SendResult(list(offsets), UNKNOWN_EPOCH)

    def resend(self, batch: SentBatch) -> Resent:
        """Send `batch` again, unchanged, as a producer does that never saw the first answer."""
        with self._lock:
            offset, leader = self._produce(batch.topic, batch.partition, batch.records)
            return Resent(offset, offset == batch.offsets[0] if batch.offsets else None, leader)

    def close(self) -> None:
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()

    # --- requests -----------------------------------------------------------------------------------
    def _produce(self, topic: str, partition: int, records: bytes) -> tuple[int, int]:
        leader = self._leader(topic, partition)
        body = {"transactional_id": None, "acks": -1, "timeout_ms": int(self.timeout_s * 1000),
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
        try:
            answer = self._request(leader, V.PRODUCE, PRODUCE_VERSION, body, f"produce to {topic}/{partition}")
        except ClientError:
            self._leaders.pop((topic, partition), None)
            raise
        [part] = answer["responses"][0]["partition_responses"]
        code = part["error_code"]
        if code:
            if code in NOT_LEADER_CODES:
                self._leaders.pop((topic, partition), None)     # look the leader up again next time
            raise classify_code(code, f"produce to {topic}/{partition} at broker {leader}: "
                                      f"{part.get('error_message') or 'refused'}")
        return part["base_offset"], leader

    def _init_producer_id(self) -> None:
        if self.producer_id >= 0:
            return
        self._metadata(None)
        node = min(self._brokers, default=None)
        if node is None:
            raise ClientError("BROKER_NOT_AVAILABLE", True, "no broker in the metadata")
        answer = self._request(node, V.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION,
                               {"transactional_id": None, "transaction_timeout_ms": 60_000}, "InitProducerId")
        if answer["error_code"]:
            raise classify_code(answer["error_code"], "InitProducerId refused")
        self.producer_id, self.producer_epoch = answer["producer_id"], answer["producer_epoch"]

    def _leader(self, topic: str, partition: int) -> int:
        known = self._leaders.get((topic, partition))
        if known is not None:
            return known
        for t in self._metadata(topic).get("topics", ()):
            for p in t["partitions"]:
                if p["partition_index"] == partition and p["leader_id"] >= 0 and p["leader_id"] in self._brokers:
                    self._leaders[(topic, partition)] = p["leader_id"]
                    return p["leader_id"]
        raise ClientError("LEADER_NOT_AVAILABLE", True, f"no leader for {topic}/{partition} in the metadata")

    def _metadata(self, topic: str | None) -> dict:
        """A Metadata answer from the first bootstrap server that gives one; remembers the brokers."""
        body = {"topics": None if topic is None else [{"name": topic}], "allow_auto_topic_creation": False}
        problems = []
        for host, port in self.bootstrap:
            try:
                conn = KafkaConnection((host, port), self.timeout_s)
            except OSError as exc:
                problems.append(f"{host}:{port}: {exc}")
                continue
            try:
                answer = conn.request(V.METADATA, METADATA_VERSION, body)
            except (OSError, ConnectionError) as exc:
                problems.append(f"{host}:{port}: {exc}")
                continue
            finally:
                conn.close()
            self._brokers = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
            return answer
        raise ClientError("_TRANSPORT", True, "no bootstrap server answered Metadata: " + "; ".join(problems))

    def _request(self, node: int, api: int, version: int, body: dict, what: str) -> dict:
        conn = self._conns.get(node)
        try:
            if conn is None:
                host, port = self._brokers[node]
                conn = self._conns[node] = KafkaConnection((host, port), self.timeout_s)
            else:       # the timeout may have changed since it connected (a scenario step sets its own)
                conn.sock.settimeout(self.timeout_s)
            return conn.request(api, version, body)
        except (OSError, ConnectionError) as exc:
            dropped = self._conns.pop(node, None)
            if dropped is not None:
                dropped.close()
            sent = conn is not None
            # a request that may have been written is of unknown outcome; a failed connect is definite
            raise ClientError("_TRANSPORT", not sent, f"{what} at broker {node}: {exc}") from None
