"""Real Kafka clients behind the native client's interface: the workloads' `--client kafka`.

Owns the adapters that let producers, consumers and final reads drive a Kafka-protocol cluster through a
Kafka client library from PyPI, with the same duck-typed calls as `broker.client.Producer` / `Consumer`:

    p = make_producer("confluent", ["127.0.0.1:9101"], acks="all", timeout_s=2.0, retries=0)
    p.send("hw", 0, [b"17"])                    # SendResult(offsets=[5], epoch=-1)
    c = make_consumer("kafka-python", ["127.0.0.1:9101"], timeout_s=2.0)
    c.fetch("hw", 0, 0, max_records=1000, max_wait_ms=100)   # FetchResult(records, hw, epoch)

Libraries: "confluent" (confluent-kafka, librdkafka) and "kafka-python". Every failure becomes a
`broker.client.ClientError(code, definite)`: `code` is Kafka's error name for a broker error (the same name
for both libraries) or the library's own name for a local one; `definite` comes from the tables below
(KAFKA_ERRORS for broker error codes, CONFLUENT_LOCAL_ERRORS and KAFKA_PYTHON_ERRORS for the libraries'
local errors), documented in docs/clients.md. Anything not in a table is unknown (indefinite).

What the history gets: a send's `epoch` is -1, UNKNOWN_EPOCH (neither library reports the leader epoch of
a produce acknowledgement: a Produce response has no such field). A poll's `hw` is asked of the leader
(ListOffsets, latest) after the records were gathered, so it is an observation made inside the operation;
its `epoch` is -1 with either library: confluent-kafka does not expose a partition's leader epoch, and
kafka-python's (its metadata's belief) is not tied to the HW its unfenced ListOffsets returned, so pairing
them could report a same-epoch hw-regression that is really cross-epoch (a false failure). docs/formats.md
says how the checker treats epoch -1 (unknown: never "the same epoch" as another observation).
"""
from __future__ import annotations

import collections
import logging
import sys
import threading
import time
import uuid
from typing import Any, Iterable, NamedTuple

from broker.client import ClientError, FetchResult, SendResult

log = logging.getLogger(__name__)
_LIBRDKAFKA_LOG = logging.getLogger("librdkafka")


def _connection_failures_are_warnings(record: logging.LogRecord) -> bool:
    """librdkafka logs a lost or refused broker connection (its FAIL facility) at error level; in a chaos
    run the nemesis causes those on purpose and librdkafka reconnects by itself, while a failure that
    reaches a request comes back through the adapter (classified below). So they are warnings here."""
    if record.levelno == logging.ERROR and record.getMessage().startswith("FAIL "):
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True


_LIBRDKAFKA_LOG.addFilter(_connection_failures_are_warnings)

LIBRARIES = ("confluent", "kafka-python")
# the epoch recorded when the client cannot tell it: Kafka's own "no epoch" value (docs/formats.md)
UNKNOWN_EPOCH = -1

# --- classification -------------------------------------------------------------------------------------
# Kafka broker error code -> (Kafka's name, definite). Definite: Kafka's semantics guarantee the broker did
# not append (it refused the request before writing, or it concerns a read). Every other code is unknown.
KAFKA_ERRORS: dict[int, tuple[str, bool]] = {
    1: ("OFFSET_OUT_OF_RANGE", True),          # a read: nothing written
    2: ("CORRUPT_MESSAGE", True),              # the batch failed validation before the append
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True),   # no replica here to append to
    4: ("INVALID_FETCH_SIZE", True),
    5: ("LEADER_NOT_AVAILABLE", True),         # no leader: nobody appended
    # Kafka answers it both ways: a non-leader refuses before any append, and a leader that loses the
    # partition while an acks=all produce waits in purgatory answers it too, after the append (Partition.
    # checkEnoughReplicasReachOffset), when the new leader may well hold the write. The client cannot tell
    # which, so the outcome is unknown (a definite reading made a committed write a "failed" one)
    6: ("NOT_LEADER_OR_FOLLOWER", False),
    7: ("REQUEST_TIMED_OUT", False),           # acks=all timed out AFTER the local append
    8: ("BROKER_NOT_AVAILABLE", False),
    9: ("REPLICA_NOT_AVAILABLE", True),
    10: ("MESSAGE_TOO_LARGE", True),           # size checked before the append
    13: ("NETWORK_EXCEPTION", False),          # the connection broke: the request may have been served
    17: ("INVALID_TOPIC_EXCEPTION", True),
    18: ("RECORD_LIST_TOO_LARGE", True),
    19: ("NOT_ENOUGH_REPLICAS", True),         # ISR below min.insync.replicas, checked BEFORE the append
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", False),  # appended to the leader, ISR shrank before the ack
    21: ("INVALID_REQUIRED_ACKS", True),
    29: ("TOPIC_AUTHORIZATION_FAILED", True),
    32: ("INVALID_TIMESTAMP", True),
    35: ("UNSUPPORTED_VERSION", True),         # the request was not decoded
    42: ("INVALID_REQUEST", True),
    43: ("UNSUPPORTED_FOR_MESSAGE_FORMAT", True),
    # idempotent producer (KIP-98): this attempt was refused, but an earlier attempt of the same batch
    # (a retry's first try) may be in the log
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    47: ("INVALID_PRODUCER_EPOCH", False),
    56: ("KAFKA_STORAGE_ERROR", False),        # the log dir failed, possibly during the write
    74: ("FENCED_LEADER_EPOCH", True),         # reads only (a Produce carries no leader epoch)
    75: ("UNKNOWN_LEADER_EPOCH", True),
    87: ("INVALID_RECORD", True),              # record validation precedes the append
    -1: ("UNKNOWN_SERVER_ERROR", False),
}

# librdkafka's local (client-side) errors, by KafkaError constant name -> definite
CONFLUENT_LOCAL_ERRORS: dict[str, bool] = {
    "_MSG_TIMED_OUT": False,       # message.timeout.ms ran out: it may have been sent and appended
    "_TIMED_OUT": False,           # a request timed out after being sent
    "_TIMED_OUT_QUEUE": False,
    "_TRANSPORT": False,           # the connection broke, perhaps after the broker appended
    "_ALL_BROKERS_DOWN": False,
    "_PURGE_INFLIGHT": False,      # purged while in flight: may have been appended
    "_DESTROY": False,             # the client was closed with the message outstanding
    "_BAD_MSG": False,             # the answer could not be parsed
    "_FATAL": False,
    "_FAIL": False,
    "_RESOLVE": True,              # the broker's name did not resolve: nothing was sent
    "_UNKNOWN_PARTITION": True,    # refused by produce() or before any request: never sent
    "_UNKNOWN_TOPIC": True,
    "_QUEUE_FULL": True,           # produce() refused it: never enqueued
    "_PURGE_QUEUE": True,          # purged from the local queue: never sent
    "_INVALID_ARG": True,
    "_STATE": True,
    "_AUTO_OFFSET_RESET": True,    # a read: the fetch offset was out of range (code OFFSET_OUT_OF_RANGE)
    "_LOG_TRUNCATION": True,       # a read: the log was truncated below the position (code OFFSET_OUT_OF_RANGE)
}
# local errors that mean "reposition the consumer": recorded under Kafka's name so the consumer worker
# reassigns (workloads/consumer.py reacts to OFFSET_OUT_OF_RANGE)
_CONFLUENT_RENAME = {"_AUTO_OFFSET_RESET": "OFFSET_OUT_OF_RANGE", "_LOG_TRUNCATION": "OFFSET_OUT_OF_RANGE"}

# kafka-python's exceptions without a broker error code, by class name -> definite. Exceptions with a
# Kafka code (`errno`) are classified by KAFKA_ERRORS; a class not listed here is unknown.
KAFKA_PYTHON_ERRORS: dict[str, bool] = {
    "KafkaTimeoutError": False,     # from a future: the batch expired or the answer did not come in time
    "KafkaConnectionError": False,  # the connection broke, perhaps after the broker appended
    "NodeNotReadyError": True,      # no connection to the leader: the request was not sent
    "TooManyInFlightRequests": True,
    "MetadataEmptyBrokerList": True,
    "StaleMetadata": True,          # the client had no leader to send to
    "CorrelationIdError": False,
    "Cancelled": False,             # the request was cancelled after it may have been sent
    "KafkaProtocolError": False,
    "InvalidReceiveError": False,
    "IllegalStateError": True,      # a client-side precondition: nothing sent
    "IllegalArgumentError": True,
    "KafkaConfigurationError": True,
    "NoOffsetForPartitionError": True,   # a read
    "LogTruncationError": True,          # a read (code OFFSET_OUT_OF_RANGE)
}
_KAFKA_PYTHON_RENAME = {"LogTruncationError": "OFFSET_OUT_OF_RANGE", "NoOffsetForPartitionError": "OFFSET_OUT_OF_RANGE"}


def classify_code(code: int, message: str = "") -> ClientError:
    """The ClientError for a Kafka broker error code (unknown codes: indefinite, named KAFKA_ERROR_<n>)."""
    name, definite = KAFKA_ERRORS.get(code, (f"KAFKA_ERROR_{code}", False))
    return ClientError(name, definite, message or name)


def classify_confluent(err: Any, context: str = "") -> ClientError:
    """A confluent_kafka.KafkaError as a ClientError."""
    code, name = int(err.code()), str(err.name())
    text = f"{context}: {err.str()}" if context else str(err.str())
    if code >= -1:
        return classify_code(code, text)
    return ClientError(_CONFLUENT_RENAME.get(name, name), CONFLUENT_LOCAL_ERRORS.get(name, False), text)


def classify_kafka_python(exc: BaseException, context: str = "") -> ClientError:
    """A kafka-python exception (raised from a future or a call) as a ClientError."""
    text = f"{context}: {type(exc).__name__}: {exc}" if context else f"{type(exc).__name__}: {exc}"
    errno = getattr(exc, "errno", None)
    if isinstance(errno, int) and not isinstance(errno, bool):
        return classify_code(errno, text)
    for cls in type(exc).__mro__:         # a subclass of a listed class is classified like it
        if cls.__name__ in KAFKA_PYTHON_ERRORS:
            return ClientError(_KAFKA_PYTHON_RENAME.get(cls.__name__, cls.__name__),
                               KAFKA_PYTHON_ERRORS[cls.__name__], text)
    return ClientError(type(exc).__name__, False, text)


def _acks(acks) -> int:
    table = {0: 0, 1: 1, -1: -1, "all": -1, "0": 0, "1": 1, "-1": -1}
    if acks not in table:
        raise ValueError(f"acks must be 0, 1 or 'all', got {acks!r}")
    return table[acks]


def _as_bytes(value) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"values must be bytes or str, got {type(value).__name__}")


def _ms(seconds: float) -> int:
    """A client timeout in the libraries' whole milliseconds, at least 1."""
    return max(1, int(seconds * 1000))


def _servers(bootstrap: Iterable[str] | str) -> list[str]:
    servers = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
    servers = [s for part in servers for s in str(part).split(",") if s.strip()]
    if not servers:
        raise ValueError("no bootstrap servers given")
    return servers


# --- producers ------------------------------------------------------------------------------------------
IDEMPOTENT_RETRIES = 2**31 - 1


class _LibraryProducer:
    """What both library producers check and keep: acks (0, 1 or "all"), the request timeout, retries."""

    def __init__(self, acks, timeout_s: float, retries: int, idempotence: bool = False):
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.acks = _acks(acks)
        if idempotence and self.acks != -1:
            raise ValueError(f"an idempotent producer needs acks=all, got {acks!r}")
        self.timeout_s = float(timeout_s)
        self.idempotence = idempotence
        # idempotent: the library retries as often as the send's deadline allows, the broker dropping
        # the copies (what Kafka's clients do by default)
        self.retries = IDEMPOTENT_RETRIES if idempotence else int(retries)


class ConfluentProducer(_LibraryProducer):
    """confluent-kafka Producer: one value per produce() to an explicit partition, waiting for its delivery
    report. `retries` attempts more (default 0: each send is one attempt); with `idempotence`, librdkafka's
    idempotent producer, retrying until the send's deadline."""

    library = "confluent"

    def __init__(self, bootstrap, acks="all", timeout_s: float = 2.0, retries: int = 0, idempotence: bool = False):
        from confluent_kafka import Producer
        super().__init__(acks, timeout_s, retries, idempotence)
        timeout_ms = _ms(self.timeout_s)
        self._p = Producer({
            "bootstrap.servers": ",".join(_servers(bootstrap)),
            "client.id": "highwater",
            "acks": self.acks,
            "enable.idempotence": self.idempotence,
            "retries": self.retries,
            "max.in.flight.requests.per.connection": 1,
            "linger.ms": 0,
            "request.timeout.ms": timeout_ms,
            # the local deadline: the request's own timeout plus a second for a metadata lookup first
            "message.timeout.ms": timeout_ms + 1000,
            "retry.backoff.ms": 50,
            "topic.metadata.refresh.interval.ms": 5000,
            "broker.address.family": "v4",
            "log_level": 3,
            "logger": _LIBRDKAFKA_LOG,          # librdkafka's own lines go to the harness log, not stderr
        })
        self._lock = threading.Lock()

    def send(self, topic: str, partition: int, values: Iterable[bytes]) -> SendResult:
        batch = [_as_bytes(v) for v in values]
        if not batch:
            raise ValueError("send() needs at least one value")
        with self._lock:
            reports: list[Any] = [None] * len(batch)   # (err, offset, epoch) per value
            done = [0]

            def report_for(i):
                def on_delivery(err, msg):
                    epoch = msg.leader_epoch() if msg is not None and hasattr(msg, "leader_epoch") else None
                    reports[i] = (err, None if msg is None else msg.offset(), epoch)
                    done[0] += 1
                return on_delivery

            for i, value in enumerate(batch):
                try:
                    self._p.produce(topic, value=value, partition=int(partition), on_delivery=report_for(i))
                except BufferError as exc:
                    raise ClientError("_QUEUE_FULL", i == 0, f"produce to {topic}/{partition}: {exc}") from None
                except Exception as exc:  # noqa: BLE001 - KafkaException: refused before it was queued
                    err = exc.args[0] if exc.args and hasattr(exc.args[0], "code") else None
                    if err is None:
                        raise ClientError(type(exc).__name__, i == 0, f"produce: {exc}") from None
                    e = classify_confluent(err, f"produce to {topic}/{partition}")
                    raise ClientError(e.code, e.definite and i == 0, e.message) from None
            deadline = time.monotonic() + self.timeout_s + 3.0
            while done[0] < len(batch):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ClientError("TIMEOUT", False,
                                      f"produce to {topic}/{partition}: no delivery report in time")
                self._p.poll(min(left, 0.05))
        errors = [classify_confluent(r[0], f"produce to {topic}/{partition}") for r in reports if r[0] is not None]
        if errors:
            definite = all(e.definite for e in errors) and len(errors) == len(batch)
            raise ClientError(errors[0].code, definite, errors[0].message)
        offsets = [int(r[1]) for r in reports]
        if self.acks == 0 or any(o < 0 for o in offsets):
            return SendResult([], None)            # acks=0: no offset was reported
        epochs = {r[2] for r in reports}
        epoch = epochs.pop() if len(epochs) == 1 else None
        return SendResult(offsets, epoch if isinstance(epoch, int) and epoch >= 0 else UNKNOWN_EPOCH)

    def close(self) -> None:
        try:
            self._p.flush(0)
        except Exception:  # noqa: BLE001
            pass


class KafkaPythonProducer(_LibraryProducer):
    """kafka-python KafkaProducer: send() to an explicit partition, then the future's result."""

    library = "kafka-python"

    def __init__(self, bootstrap, acks="all", timeout_s: float = 2.0, retries: int = 0, idempotence: bool = False):
        from kafka import KafkaProducer
        super().__init__(acks, timeout_s, retries, idempotence)
        timeout_ms = _ms(self.timeout_s)
        self._p = KafkaProducer(
            bootstrap_servers=_servers(bootstrap), client_id="highwater",
            acks="all" if self.acks == -1 else self.acks, retries=self.retries, enable_idempotence=self.idempotence,
            max_in_flight_requests_per_connection=1, linger_ms=0, request_timeout_ms=timeout_ms,
            delivery_timeout_ms=timeout_ms + 1000, max_block_ms=timeout_ms, retry_backoff_ms=50,
            metadata_max_age_ms=5000)
        self._lock = threading.Lock()

    def send(self, topic: str, partition: int, values: Iterable[bytes]) -> SendResult:
        batch = [_as_bytes(v) for v in values]
        if not batch:
            raise ValueError("send() needs at least one value")
        context = f"produce to {topic}/{partition}"
        with self._lock:
            futures = []
            for i, value in enumerate(batch):
                try:
                    futures.append(self._p.send(topic, value=value, partition=int(partition)))
                except Exception as exc:  # noqa: BLE001 - refused before it entered the accumulator
                    e = classify_kafka_python(exc, context)
                    # a metadata wait that ran out (max_block_ms) never appended the record anywhere
                    definite = (e.definite or type(exc).__name__ == "KafkaTimeoutError") and i == 0
                    raise ClientError(e.code, definite, e.message) from None
            try:
                self._p.flush(timeout=self.timeout_s + 3.0)
            except Exception:  # noqa: BLE001 - a flush that timed out: each future says what became of its value
                pass
            offsets, errors = [], []
            for fut in futures:
                try:
                    md = fut.get(timeout=0.5 if fut.is_done else self.timeout_s + 3.0)
                    offsets.append(int(md.offset))
                except Exception as exc:  # noqa: BLE001
                    errors.append(classify_kafka_python(exc, context))
        if errors:
            definite = all(e.definite for e in errors) and len(errors) == len(batch)
            raise ClientError(errors[0].code, definite, errors[0].message)
        if self.acks == 0 or any(o < 0 for o in offsets):
            return SendResult([], None)
        return SendResult(offsets, UNKNOWN_EPOCH)

    def close(self) -> None:
        try:
            self._p.close(timeout=1)
        except Exception:  # noqa: BLE001
            pass


# --- consumers ------------------------------------------------------------------------------------------
class _BufferedConsumer:
    """fetch(topic, partition, offset) over a library consumer that streams every assigned partition into
    one queue: records of partitions not asked for are buffered per partition. A fetch at an offset other
    than the partition's next one repositions it. After the records are gathered the HW is asked of the
    leader. Waits: up to max_wait_ms for records; up to the request timeout more when the log has records
    at the offset (the HW is above it) that the client has not delivered yet."""

    library = "?"

    def __init__(self, timeout_s: float, topic_partition: type):
        self.timeout_s = float(timeout_s)
        self._TP = topic_partition          # the library's TopicPartition class
        self._lock = threading.Lock()
        self._next: dict[tuple[str, int], int] = {}          # partition -> next offset to deliver
        self._buf: dict[tuple[str, int], collections.deque] = {}
        self._errors: dict[tuple[str, int], ClientError] = {}

    # library hooks
    def _position(self, key: tuple[str, int], offset: int, new: bool) -> None: raise NotImplementedError
    def _pull(self, timeout_s: float, max_n: int) -> None: raise NotImplementedError   # calls _deliver/_error
    def _high_watermark(self, key: tuple[str, int]) -> int: raise NotImplementedError

    def _deliver(self, key, offset: int, epoch: int | None, value: bytes | None) -> None:
        if key in self._next and offset >= self._next[key]:
            buf = self._buf[key]
            if not buf or offset > buf[-1][0]:
                buf.append((int(offset), -1 if epoch is None else int(epoch), value or b""))

    def _error(self, key, err: ClientError) -> None:
        if key in self._next:
            self._errors[key] = err

    def _take(self, key, max_records: int) -> list:
        buf, nxt, out = self._buf[key], self._next[key], []
        while buf and buf[0][0] < nxt:
            buf.popleft()
        while buf and len(out) < max_records:
            out.append(buf.popleft())
        return out

    def fetch(self, topic: str, partition: int, offset: int, max_records: int = 1000,
              max_wait_ms: int = 0) -> FetchResult:
        key, offset = (topic, int(partition)), int(offset)
        with self._lock:
            if self._next.get(key) != offset:
                new = key not in self._next
                self._next[key] = offset
                self._buf[key] = collections.deque()
                self._errors.pop(key, None)
                self._position(key, offset, new)
            start = time.monotonic()
            wait_until = start + max(0, max_wait_ms) / 1000.0
            give_up = start + self.timeout_s + max(0, max_wait_ms) / 1000.0
            records: list = []
            while True:
                records = self._take(key, max(1, max_records))
                if records:
                    if len(records) < max_records:      # what has arrived meanwhile, without waiting
                        self._pull(0, max_records - len(records))
                        records += self._take(key, max_records - len(records))
                    break
                if key in self._errors:
                    raise self._errors.pop(key)
                now = time.monotonic()
                if now < wait_until:
                    self._pull(min(wait_until - now, 0.1), max(1, max_records))
                    continue
                hw = self._high_watermark(key)
                if hw <= offset:
                    # nothing at the offset yet: an empty answer, like a fetch's
                    return FetchResult([], int(hw), UNKNOWN_EPOCH)
                if now >= give_up:
                    raise ClientError("TIMEOUT", False, f"fetch {topic}/{partition} at {offset}: the log's HW "
                                                        f"is {hw} but no record arrived in {self.timeout_s}s")
                self._pull(min(give_up - now, 0.1), max(1, max_records))
            if records:
                self._next[key] = records[-1][0] + 1
            hw = self._high_watermark(key)
            # epoch unknown: no library ties a leader epoch to the HW it reports (module docstring)
            return FetchResult(records, int(hw), UNKNOWN_EPOCH)


class ConfluentConsumer(_BufferedConsumer):
    """confluent-kafka Consumer with assign() (no group membership, nothing committed)."""

    library = "confluent"

    def __init__(self, bootstrap, timeout_s: float = 2.0):
        from confluent_kafka import Consumer, TopicPartition
        super().__init__(timeout_s, TopicPartition)
        timeout_ms = _ms(self.timeout_s)
        self._c = Consumer({
            "bootstrap.servers": ",".join(_servers(bootstrap)),
            "client.id": "highwater",
            "group.id": f"highwater-{uuid.uuid4().hex[:12]}",   # required by the API; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",        # an out-of-range position is reported, never skipped
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
            "fetch.error.backoff.ms": 50,
            "socket.timeout.ms": max(timeout_ms, 10),
            "topic.metadata.refresh.interval.ms": 5000,
            "broker.address.family": "v4",
            "log_level": 3,
            "logger": _LIBRDKAFKA_LOG,          # librdkafka's own lines go to the harness log, not stderr
        })

    def _position(self, key, offset, new) -> None:
        tp = self._TP(key[0], key[1], offset)
        if not new:
            self._c.incremental_unassign([self._TP(key[0], key[1])])
        self._c.incremental_assign([tp])

    def _pull(self, timeout_s, max_n) -> None:
        for msg in self._c.consume(num_messages=max(1, min(max_n, 10000)), timeout=max(0.0, timeout_s)):
            err = msg.error()
            key = (msg.topic(), msg.partition())
            if err is not None:
                if err.code() == -191:          # _PARTITION_EOF: not an error
                    continue
                e = classify_confluent(err, f"fetch {key[0]}/{key[1]}")
                if msg.partition() is not None and msg.partition() >= 0:
                    self._error(key, e)
                else:
                    log.debug("consumer error %s", e)
                continue
            self._deliver(key, msg.offset(), msg.leader_epoch(), msg.value())

    def _high_watermark(self, key) -> int:
        from confluent_kafka import KafkaException
        try:
            _low, high = self._c.get_watermark_offsets(self._TP(key[0], key[1]), timeout=self.timeout_s,
                                                       cached=False)
        except KafkaException as exc:
            raise classify_confluent(exc.args[0], f"list offsets {key[0]}/{key[1]}") from None
        return int(high)

    def close(self) -> None:
        try:
            self._c.close()
        except Exception:  # noqa: BLE001
            pass


class KafkaPythonConsumer(_BufferedConsumer):
    """kafka-python KafkaConsumer with assign() + seek() (no group, nothing committed)."""

    library = "kafka-python"

    def __init__(self, bootstrap, timeout_s: float = 2.0):
        from kafka import KafkaConsumer, TopicPartition
        super().__init__(timeout_s, TopicPartition)
        timeout_ms = _ms(self.timeout_s)
        self._c = KafkaConsumer(
            bootstrap_servers=_servers(bootstrap), client_id="highwater", group_id=None,
            enable_auto_commit=False, auto_offset_reset="none", fetch_max_wait_ms=100,
            request_timeout_ms=max(timeout_ms, 1000), metadata_max_age_ms=5000, retry_backoff_ms=50)

    def _position(self, key, offset, new) -> None:
        tps = [self._TP(t, p) for t, p in self._next]
        if new:
            self._c.assign(tps)
            for (t, p), nxt in self._next.items():
                self._c.seek(self._TP(t, p), nxt)
        else:
            self._c.seek(self._TP(*key), offset)

    def _pull(self, timeout_s, max_n) -> None:
        try:
            batches = self._c.poll(timeout_ms=int(max(0.0, timeout_s) * 1000), max_records=max(1, max_n))
        except Exception as exc:  # noqa: BLE001 - a fetch error: it names its partitions when it can
            e = classify_kafka_python(exc)
            parts = getattr(exc, "args", [None])[0]
            keys = [(tp.topic, tp.partition) for tp in parts] if isinstance(parts, dict) else list(self._next)
            for key in keys:
                self._error(key, e)
            return
        for tp, recs in batches.items():
            for r in recs:
                self._deliver((tp.topic, tp.partition), r.offset, getattr(r, "leader_epoch", None), r.value)

    def _high_watermark(self, key) -> int:
        tp = self._TP(*key)
        try:
            return int(self._c.end_offsets([tp], timeout_ms=int(self.timeout_s * 1000))[tp])
        except Exception as exc:  # noqa: BLE001
            raise classify_kafka_python(exc, f"list offsets {key[0]}/{key[1]}") from None

    def close(self) -> None:
        try:
            self._c.close(autocommit=False)
        except Exception:  # noqa: BLE001
            pass


_PRODUCERS = {"confluent": ConfluentProducer, "kafka-python": KafkaPythonProducer}
_CONSUMERS = {"confluent": ConfluentConsumer, "kafka-python": KafkaPythonConsumer}


def make_producer(library: str, bootstrap, *, acks="all", timeout_s: float = 2.0, retries: int = 0,
                  idempotence: bool = False):
    if library not in _PRODUCERS:
        raise ValueError(f"unknown Kafka client library {library!r} (known: {', '.join(LIBRARIES)})")
    return _PRODUCERS[library](bootstrap, acks=acks, timeout_s=timeout_s, retries=retries, idempotence=idempotence)


def make_consumer(library: str, bootstrap, *, timeout_s: float = 2.0):
    if library not in _CONSUMERS:
        raise ValueError(f"unknown Kafka client library {library!r} (known: {', '.join(LIBRARIES)})")
    return _CONSUMERS[library](bootstrap, timeout_s=timeout_s)


# --- group consumers (the group workload, workloads/group.py) -------------------------------------------
# Kafka's group coordinator errors: all refused before anything was written, except two that Kafka's
# coordinator also answers after the offsets' append was made (it turns an append timeout into
# COORDINATOR_NOT_AVAILABLE, a leader change into NOT_COORDINATOR): a commit answered so may be stored
KAFKA_ERRORS.update({
    12: ("OFFSET_METADATA_TOO_LARGE", True),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", True),
    15: ("COORDINATOR_NOT_AVAILABLE", False),
    16: ("NOT_COORDINATOR", False),
    22: ("ILLEGAL_GENERATION", True),
    23: ("INCONSISTENT_GROUP_PROTOCOL", True),
    24: ("INVALID_GROUP_ID", True),
    25: ("UNKNOWN_MEMBER_ID", True),
    26: ("INVALID_SESSION_TIMEOUT", True),
    27: ("REBALANCE_IN_PROGRESS", True),
    28: ("INVALID_COMMIT_OFFSET_SIZE", True),
    30: ("GROUP_AUTHORIZATION_FAILED", True),
    79: ("MEMBER_ID_REQUIRED", True),
    82: ("FENCED_INSTANCE_ID", True),
})
CONFLUENT_LOCAL_ERRORS.update({
    "_WAIT_COORD": True,           # no coordinator known: the commit was not sent
    "_NO_OFFSET": True,            # nothing to commit
    "_MAX_POLL_EXCEEDED": True,    # the member already left the group
    "_ASSIGNMENT_LOST": True,
})
KAFKA_PYTHON_ERRORS.update({
    "CommitFailedError": True,     # the group rebalanced: the coordinator refused the commit
})

# group membership timeouts: short, so that a member that died without leaving is replaced within a
# short run (a rebalance waits up to max.poll.interval.ms for every known member to rejoin)
GROUP_SESSION_TIMEOUT_MS = 6000
GROUP_HEARTBEAT_MS = 1000
GROUP_MAX_POLL_INTERVAL_MS = 10000
AUTO_COMMIT_INTERVAL_MS = 500
COMMIT_MODES = ("sync", "async", "auto")


class GroupEvent(NamedTuple):
    """A rebalance callback's news: "assign" or "revoke" of `partitions` (`lost`: the client says they
    were lost, not revoked)."""
    kind: str
    partitions: list[int]
    lost: bool = False


class CommitReport(NamedTuple):
    """A commit the client reported through its callback: an auto-commit (mode "auto") or the answer to
    an asynchronous one (mode "async"); `error` None when it succeeded."""
    mode: str
    offsets: dict[int, int]
    error: ClientError | None


class _GroupConsumer:
    """What both library group consumers share. The libraries' callbacks only queue what they report
    (kafka-python calls them on its own I/O thread); the group worker drains the queues between polls.

    A newly assigned partition is paused until the worker has read its committed offset and chosen its
    start (`start`), so that no record is fetched from a position the history has not been told of."""

    def __init__(self, topic: str, group: str, mode: str, timeout_s: float):
        if mode not in COMMIT_MODES:
            raise ValueError(f"commit mode must be one of {', '.join(COMMIT_MODES)}, got {mode!r}")
        self.topic, self.group, self.mode = topic, group, mode
        self.timeout_s = float(timeout_s)
        self._events: collections.deque[GroupEvent] = collections.deque()
        self._reports: collections.deque[CommitReport] = collections.deque()
        self._closed = False

    def set_report_hook(self, hook) -> None:
        """Auto-commit reports go to `hook(report)` as soon as the client makes them (from inside a poll,
        or kafka-python's I/O thread), not to the queue: the history then writes them with the least delay
        after the commit, before the member's next rebalance event is even drained."""
        self._hook = hook

    def _report(self, report: "CommitReport") -> None:
        hook = getattr(self, "_hook", None)
        if hook is not None and report.mode == "auto":
            hook(report)
        else:
            self._reports.append(report)

    def events(self) -> list[GroupEvent]:
        out = []
        while self._events:
            out.append(self._events.popleft())
        return out

    def commit_reports(self) -> list[CommitReport]:
        out = []
        while self._reports:
            out.append(self._reports.popleft())
        return out


def _confluent_generation(metadata: Any) -> int:
    """The generation in librdkafka's serialized group metadata ("CGMDv2:", then the generation as an
    int32 in the machine's byte order, then the group and member ids); -1 when it is not in that form."""
    raw = bytes(metadata) if isinstance(metadata, (bytes, bytearray)) else b""
    if raw.startswith(b"CGMDv2:") and len(raw) >= 11:
        return int.from_bytes(raw[7:11], sys.byteorder, signed=True)
    return UNKNOWN_EPOCH


class ConfluentGroupConsumer(_GroupConsumer):
    """confluent-kafka Consumer with subscribe(): rebalance callbacks, commits (sync, async through
    on_commit, or librdkafka's auto-commit, also reported through on_commit)."""

    library = "confluent"

    def __init__(self, bootstrap, topic: str, group: str, mode: str = "sync", timeout_s: float = 2.0):
        from confluent_kafka import Consumer, TopicPartition
        super().__init__(topic, group, mode, timeout_s)
        self._TP = TopicPartition
        self._c = Consumer({
            "bootstrap.servers": ",".join(_servers(bootstrap)),
            "client.id": "highwater-group",
            "group.id": group,
            "enable.auto.commit": mode == "auto",
            "auto.commit.interval.ms": AUTO_COMMIT_INTERVAL_MS,
            "enable.auto.offset.store": True,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "session.timeout.ms": GROUP_SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": GROUP_HEARTBEAT_MS,
            "max.poll.interval.ms": GROUP_MAX_POLL_INTERVAL_MS,
            "fetch.wait.max.ms": 100,
            "fetch.error.backoff.ms": 50,
            "socket.timeout.ms": max(_ms(self.timeout_s), 10),
            "topic.metadata.refresh.interval.ms": 5000,
            "broker.address.family": "v4",
            "on_commit": self._on_commit,
            "log_level": 3,
            "logger": _LIBRDKAFKA_LOG,
        })
        self._c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)

    # callbacks, served inside consume() (and close())
    def _on_assign(self, consumer, parts) -> None:
        consumer.assign(parts)
        if parts:
            consumer.pause(parts)
        self._events.append(GroupEvent("assign", sorted(tp.partition for tp in parts)))

    def _on_revoke(self, consumer, parts) -> None:
        self._events.append(GroupEvent("revoke", sorted(tp.partition for tp in parts)))
        consumer.unassign()

    def _on_lost(self, consumer, parts) -> None:
        self._events.append(GroupEvent("revoke", sorted(tp.partition for tp in parts), lost=True))
        consumer.unassign()

    def _on_commit(self, err, parts) -> None:
        if self.mode == "sync":
            return                      # a synchronous commit's answer is its call's return
        offsets = {tp.partition: int(tp.offset) for tp in parts or [] if tp.offset >= 0}
        error = None
        if err is not None:
            error = classify_confluent(err, "commit")
        else:
            bad = [tp for tp in parts or [] if tp.error is not None]
            if bad:
                error = classify_confluent(bad[0].error, f"commit {self.topic}/{bad[0].partition}")
        if error is not None and error.code == "_NO_OFFSET":
            return                      # an auto-commit with nothing to commit: no request was made
        self._report(CommitReport(self.mode, offsets, error))

    def membership(self) -> tuple[str, int]:
        try:
            member = self._c.memberid() or ""
        except Exception:  # noqa: BLE001
            member = ""
        try:
            generation = _confluent_generation(self._c.consumer_group_metadata())
        except Exception:  # noqa: BLE001
            generation = UNKNOWN_EPOCH
        return member, generation

    def poll(self, max_records: int, timeout_s: float) -> dict[int, list]:
        """Records by partition, each (offset, leader epoch or -1, value), in order."""
        out: dict[int, list] = {}
        for msg in self._c.consume(num_messages=max(1, max_records), timeout=max(0.0, timeout_s)):
            err = msg.error()
            if err is not None:
                if err.code() != -191:          # _PARTITION_EOF is no error
                    log.debug("group consumer error %s", classify_confluent(err, "consume"))
                continue
            epoch = msg.leader_epoch()
            out.setdefault(msg.partition(), []).append(
                (int(msg.offset()), UNKNOWN_EPOCH if epoch is None else int(epoch), msg.value() or b""))
        return out

    def committed(self, partitions: list[int]) -> dict[int, int]:
        """The group's committed offsets (OffsetFetch), -1 where none is."""
        from confluent_kafka import KafkaException
        try:
            got = self._c.committed([self._TP(self.topic, p) for p in partitions], timeout=self.timeout_s)
        except KafkaException as exc:
            raise classify_confluent(exc.args[0], "committed") from None
        for tp in got:
            if tp.error is not None:
                raise classify_confluent(tp.error, f"committed {self.topic}/{tp.partition}")
        return {tp.partition: (int(tp.offset) if tp.offset >= 0 else -1) for tp in got}

    def low_watermark(self, partition: int) -> int:
        return self._watermarks(partition, cached=False)[0]

    def hw(self, partition: int) -> int:
        """The HW the last fetch reported (asked of the leader when none is known yet)."""
        high = self._watermarks(partition, cached=True)[1]
        return high if high >= 0 else self._watermarks(partition, cached=False)[1]

    def _watermarks(self, partition: int, cached: bool) -> tuple[int, int]:
        from confluent_kafka import KafkaException
        try:
            low, high = self._c.get_watermark_offsets(self._TP(self.topic, partition), timeout=self.timeout_s,
                                                      cached=cached)
        except KafkaException as exc:
            raise classify_confluent(exc.args[0], f"list offsets {self.topic}/{partition}") from None
        return int(low), int(high)

    def start(self, positions: dict[int, int]) -> None:
        """Read each paused, newly assigned partition from its offset."""
        from confluent_kafka import KafkaException
        tps = [self._TP(self.topic, p, o) for p, o in positions.items()]
        try:
            for tp in tps:
                self._c.seek(tp)
            self._c.resume(tps)
        except KafkaException as exc:
            raise classify_confluent(exc.args[0], "seek") from None

    def commit_sync(self, offsets: dict[int, int]) -> None:
        from confluent_kafka import KafkaException
        try:
            got = self._c.commit(offsets=[self._TP(self.topic, p, o) for p, o in offsets.items()],
                                 asynchronous=False)
        except KafkaException as exc:
            raise classify_confluent(exc.args[0], "commit") from None
        for tp in got or []:
            if tp.error is not None:
                raise classify_confluent(tp.error, f"commit {self.topic}/{tp.partition}")

    def commit_async(self, offsets: dict[int, int]) -> None:
        """Sends the commit; its answer comes as a CommitReport (mode "async") from a later poll."""
        from confluent_kafka import KafkaException
        try:
            self._c.commit(offsets=[self._TP(self.topic, p, o) for p, o in offsets.items()], asynchronous=True)
        except KafkaException as exc:
            raise classify_confluent(exc.args[0], "commit") from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._c.close()       # leaves the group (and, with auto-commit, commits: reported on_commit)
        except Exception:  # noqa: BLE001
            pass


class KafkaPythonGroupConsumer(_GroupConsumer):
    """kafka-python KafkaConsumer with subscribe(): a rebalance listener, commits (sync, async, or its
    auto-commit, whose sends are reported through the coordinator's commit calls)."""

    library = "kafka-python"

    def __init__(self, bootstrap, topic: str, group: str, mode: str = "sync", timeout_s: float = 2.0):
        from kafka import KafkaConsumer, TopicPartition
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        super().__init__(topic, group, mode, timeout_s)
        self._TP = TopicPartition
        timeout_ms = _ms(self.timeout_s)
        self._c = KafkaConsumer(
            bootstrap_servers=_servers(bootstrap), client_id="highwater-group", group_id=group,
            enable_auto_commit=mode == "auto", auto_commit_interval_ms=AUTO_COMMIT_INTERVAL_MS,
            # a JoinGroup is answered only once the rebalance is done: up to the rebalance timeout
            auto_offset_reset="earliest", fetch_max_wait_ms=100,
            request_timeout_ms=max(timeout_ms, GROUP_MAX_POLL_INTERVAL_MS + 5000), session_timeout_ms=GROUP_SESSION_TIMEOUT_MS, heartbeat_interval_ms=GROUP_HEARTBEAT_MS,
            max_poll_interval_ms=GROUP_MAX_POLL_INTERVAL_MS, metadata_max_age_ms=5000, retry_backoff_ms=50,
            default_offset_commit_callback=self._on_default_commit)
        if mode == "auto":
            self._report_auto_sync_commits()
        owner = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                owner._events.append(GroupEvent("revoke", sorted(tp.partition for tp in revoked)))

            def on_partitions_assigned(self, assigned):
                if assigned:
                    owner._c.pause(*assigned)
                owner._events.append(GroupEvent("assign", sorted(tp.partition for tp in assigned)))

            def on_partitions_lost(self, lost):
                owner._events.append(GroupEvent("revoke", sorted(tp.partition for tp in lost), lost=True))

        self._c.subscribe([topic], listener=Listener())

    def _report_auto_sync_commits(self) -> None:
        """kafka-python also auto-commits synchronously before a rebalance, without its callback: wrap the
        coordinator's synchronous commit on this instance (this consumer never calls it itself in auto
        mode) to report those commits too. kafka-python 3 makes it a coroutine, `_commit_offsets_sync_async`
        (which its `commit_offsets_sync` also runs); older versions call `commit_offsets_sync`."""
        coordinator = getattr(self._c, "_coordinator", None)
        inner_async = getattr(coordinator, "_commit_offsets_sync_async", None)
        if inner_async is not None:
            async def reported_async(offsets, *args, **kwargs):
                try:
                    result = await inner_async(offsets, *args, **kwargs)
                except BaseException as exc:
                    if offsets:
                        self._report(CommitReport("auto", self._offsets(offsets),
                                                          classify_kafka_python(exc, "commit")))
                    raise
                if offsets:
                    self._report(CommitReport("auto", self._offsets(offsets), None))
                return result
            coordinator._commit_offsets_sync_async = reported_async
            return
        inner = getattr(coordinator, "commit_offsets_sync", None)
        if inner is None:
            log.warning("kafka-python %s: no synchronous commit to wrap; its pre-rebalance auto-commits go "
                        "unrecorded", getattr(__import__("kafka"), "__version__", "?"))
            return

        def reported(offsets, *args, **kwargs):
            try:
                result = inner(offsets, *args, **kwargs)
            except Exception as exc:
                self._report(CommitReport("auto", self._offsets(offsets), classify_kafka_python(exc, "commit")))
                raise
            self._report(CommitReport("auto", self._offsets(offsets), None))
            return result
        coordinator.commit_offsets_sync = reported

    @staticmethod
    def _offsets(offsets) -> dict[int, int]:
        return {tp.partition: int(getattr(om, "offset", om)) for tp, om in (offsets or {}).items()}

    def _on_default_commit(self, offsets, res_or_exc) -> None:
        if self.mode == "sync" or not offsets:
            return
        error = classify_kafka_python(res_or_exc, "commit") if isinstance(res_or_exc, BaseException) else None
        self._report(CommitReport(self.mode, self._offsets(offsets), error))

    def membership(self) -> tuple[str, int]:
        try:
            meta = self._c.group_metadata()
            generation = getattr(meta, "generation_id", UNKNOWN_EPOCH)
            return str(getattr(meta, "member_id", "") or ""), int(UNKNOWN_EPOCH if generation is None else generation)
        except Exception:  # noqa: BLE001
            return "", UNKNOWN_EPOCH

    def poll(self, max_records: int, timeout_s: float) -> dict[int, list]:
        try:
            batches = self._c.poll(timeout_ms=int(max(0.0, timeout_s) * 1000), max_records=max(1, max_records))
        except Exception as exc:  # noqa: BLE001 - a fetch or group error: the worker backs off
            raise classify_kafka_python(exc, "poll") from None
        out: dict[int, list] = {}
        for tp, recs in batches.items():
            for r in recs:
                epoch = getattr(r, "leader_epoch", None)
                out.setdefault(tp.partition, []).append(
                    (int(r.offset), UNKNOWN_EPOCH if epoch is None or epoch < 0 else int(epoch), r.value or b""))
        return out

    def committed(self, partitions: list[int]) -> dict[int, int]:
        out = {}
        for p in partitions:
            try:
                o = self._c.committed(self._TP(self.topic, p), timeout_ms=_ms(self.timeout_s))
            except Exception as exc:  # noqa: BLE001
                raise classify_kafka_python(exc, f"committed {self.topic}/{p}") from None
            out[p] = -1 if o is None else int(o)
        return out

    def low_watermark(self, partition: int) -> int:
        tp = self._TP(self.topic, partition)
        try:
            return int(self._c.beginning_offsets([tp], timeout_ms=_ms(self.timeout_s))[tp])
        except Exception as exc:  # noqa: BLE001
            raise classify_kafka_python(exc, f"list offsets {self.topic}/{partition}") from None

    def hw(self, partition: int) -> int:
        tp = self._TP(self.topic, partition)
        high = self._c.highwater(tp)
        if high is not None:
            return int(high)
        try:
            return int(self._c.end_offsets([tp], timeout_ms=_ms(self.timeout_s))[tp])
        except Exception as exc:  # noqa: BLE001
            raise classify_kafka_python(exc, f"list offsets {self.topic}/{partition}") from None

    def start(self, positions: dict[int, int]) -> None:
        try:
            tps = []
            for p, o in positions.items():
                tp = self._TP(self.topic, p)
                self._c.seek(tp, o)
                tps.append(tp)
            self._c.resume(*tps)
        except Exception as exc:  # noqa: BLE001
            raise classify_kafka_python(exc, "seek") from None

    def _commit_offsets(self, offsets: dict[int, int]) -> dict:
        from kafka.structs import OffsetAndMetadata
        try:
            return {self._TP(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        except TypeError:                 # kafka-python before 2.1: (offset, metadata)
            return {self._TP(self.topic, p): OffsetAndMetadata(o, "") for p, o in offsets.items()}

    def commit_sync(self, offsets: dict[int, int]) -> None:
        try:
            self._c.commit(self._commit_offsets(offsets), timeout_ms=_ms(self.timeout_s))
        except Exception as exc:  # noqa: BLE001
            raise classify_kafka_python(exc, "commit") from None

    def commit_async(self, offsets: dict[int, int]) -> None:
        try:
            self._c.commit_async(self._commit_offsets(offsets))     # answered through _on_default_commit
        except Exception as exc:  # noqa: BLE001
            raise classify_kafka_python(exc, "commit") from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            # no commit of its own on the way out: every commit the history is told of is one it records
            self._c.close(autocommit=False)
        except Exception:  # noqa: BLE001
            pass


class OffsetsReader:
    """The group's committed offsets through a client that never joins the group (the final `committed`
    read): the committed() of a consumer (confluent-kafka or kafka-python) that names the group and
    never subscribes, so it never joins it."""

    def __init__(self, library: str, bootstrap, timeout_s: float = 2.0):
        if library not in LIBRARIES:
            raise ValueError(f"unknown Kafka client library {library!r} (known: {', '.join(LIBRARIES)})")
        self.library, self.bootstrap, self.timeout_s = library, _servers(bootstrap), float(timeout_s)
        self._admin: Any = None

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
        """OffsetFetch of `group` for `partitions`: offset by partition, -1 where none is committed."""
        if self.library == "confluent":
            from confluent_kafka import Consumer, KafkaException, TopicPartition
            c = Consumer({"bootstrap.servers": ",".join(self.bootstrap), "group.id": group,
                          "enable.auto.commit": False, "broker.address.family": "v4",
                          "log_level": 3, "logger": _LIBRDKAFKA_LOG})
            try:
                got = c.committed([TopicPartition(topic, p) for p in partitions], timeout=self.timeout_s)
            except KafkaException as exc:
                raise classify_confluent(exc.args[0], "committed") from None
            finally:
                c.close()
            for tp in got:
                if tp.error is not None:
                    raise classify_confluent(tp.error, f"committed {topic}/{tp.partition}")
            return {tp.partition: (int(tp.offset) if tp.offset >= 0 else -1) for tp in got}
        from kafka import KafkaConsumer, TopicPartition
        out = {}
        try:
            if self._admin is None:      # named for the group, never subscribed: it joins nothing
                self._admin = KafkaConsumer(bootstrap_servers=self.bootstrap, client_id="highwater-final",
                                            group_id=group, enable_auto_commit=False,
                                            request_timeout_ms=_ms(max(self.timeout_s, 1.0)))
            for p in partitions:
                o = self._admin.committed(TopicPartition(topic, p), timeout_ms=_ms(self.timeout_s))
                out[p] = -1 if o is None or o < 0 else int(o)
        except Exception as exc:  # noqa: BLE001
            raise classify_kafka_python(exc, "committed") from None
        return out

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close(autocommit=False)
            except Exception:  # noqa: BLE001
                pass
            self._admin = None


_GROUP_CONSUMERS = {"confluent": ConfluentGroupConsumer, "kafka-python": KafkaPythonGroupConsumer}


def make_group_consumer(library: str, bootstrap, *, topic: str, group: str, mode: str = "sync",
                        timeout_s: float = 2.0):
    """A group member subscribed to `topic` in `group`, committing in `mode` (sync, async or auto)."""
    if library not in _GROUP_CONSUMERS:
        raise ValueError(f"unknown Kafka client library {library!r} (known: {', '.join(LIBRARIES)})")
    return _GROUP_CONSUMERS[library](bootstrap, topic, group, mode=mode, timeout_s=timeout_s)
