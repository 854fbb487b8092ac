"""Control-plane message shapes (controller <-> brokers and clients): field checks, error codes, and the
typed views of METADATA that brokers and the client library use.

Every body is a msgpack map (broker/protocol/framing.py). Requests, by API key (broker/protocol/apis.py):

    REGISTER_BROKER {broker_id:int>=1, host:str, port:int, clean_shutdown?:bool}
        -> {error, broker_epoch:int, message?}
        clean_shutdown (KIP-966): false when the broker found no clean-shutdown marker in its data dir
        (it was killed or lost power); absent: unknown (treated as clean).
    HEARTBEAT       {broker_id:int, broker_epoch:int}
        -> {error, message?}              STALE_BROKER_EPOCH: unknown broker or old epoch, register again
    METADATA        {known_version:int (-1: answer at once), max_wait_ms:int>=0}
        -> {error, version, brokers: {id: [host, port, alive]},
            partitions: [{topic, partition, leader:int|None, leader_epoch, isr, replicas, isr_version, elr}],
            topic_configs?: {topic: {config: value}}}
        elr: the eligible leader replicas (KIP-966; [] unless the controller runs with them).
        topic_configs: the configs topics were created with, only for topics that set some.
        long-poll: answers as soon as version > known_version, else after max_wait_ms.
    ALTER_ISR       {topic, partition, leader_id, leader_epoch, isr_version, isr:[int], broker_epoch?}
        -> {error, isr, isr_version, leader, leader_epoch, message?}   (current state, also on error)
    CREATE_TOPICS   {topics: [{name, partitions:int>=1, replication_factor:int>=1, configs?: {name: value}}]}
        -> {error, topics: [{name, error, message?}]}                   idempotent
        configs: topic configs (broker/topic_configs.py); any other name or value is a BAD_REQUEST.
    CREATE_PARTITIONS {topics: [{name, count:int>=1}]}
        -> {error, topics: [{name, error, message?}]}   count: the new total; idempotent at that count.
        Errors: UNKNOWN_PARTITION (no such topic), INVALID_PARTITIONS (fewer than it has, or over a
        broker's replica budget), INVALID_REPLICATION_FACTOR (fewer live brokers than its replicas).
    DELETE_TOPICS   {topics: [name]}
        -> {error, topics: [{name, error, message?}]}   UNKNOWN_PARTITION for a topic that does not exist.
    ELECT_LEADER    {topic, partition, broker?:int|None, unclean?:bool}
        -> {error, changed:bool, leader, leader_epoch, isr, elr, message}   (current state, also on error)
        with broker: make it leader if live and eligible (ISR; ELR with KIP-966; any replica if unclean);
        without: elect again if the leader is missing or fenced (unclean allowed once if unclean).
        Errors: UNKNOWN_PARTITION, INELIGIBLE_REPLICA, ELIGIBLE_LEADERS_NOT_AVAILABLE.

Error codes are strings (the constants below). A request whose fields are missing or mistyped gets
{error: INVALID_REQUEST, message} on the same API key; an undecodable frame gets an api ERROR (0) frame
with {error: INVALID_REQUEST, message} and the connection is closed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.protocol import apis
from broker.topic_configs import checked_configs
from broker.protocol.framing import BadRequest

# --- error codes -----------------------------------------------------------------------------------
NONE = "NONE"
INVALID_REQUEST = "INVALID_REQUEST"
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"        # heartbeat from an unknown broker or an old registration
INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"  # ALTER_ISR with a stale isr_version
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"      # ALTER_ISR with a stale leader_epoch
NOT_LEADER = "NOT_LEADER"                        # ALTER_ISR from a broker that is not the leader
UNKNOWN_PARTITION = "UNKNOWN_PARTITION"
INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"        # ALTER_ISR adding a fenced / non-replica broker
INVALID_REPLICATION_FACTOR = "INVALID_REPLICATION_FACTOR"  # more replicas than registered brokers
TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"    # same name, different partition count / replication
INVALID_TOPIC_EXCEPTION = "INVALID_TOPIC_EXCEPTION"  # CREATE_TOPICS with a name outside Kafka's rule
INVALID_PARTITIONS = "INVALID_PARTITIONS"        # CREATE_TOPICS that would pass a broker's replica budget
CONTROLLER_NOT_AVAILABLE = "CONTROLLER_NOT_AVAILABLE"  # client side: no answer from the controller
ELIGIBLE_LEADERS_NOT_AVAILABLE = "ELIGIBLE_LEADERS_NOT_AVAILABLE"  # ELECT_LEADER: no live eligible replica


# --- field checks ----------------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check(body: dict, name: str, kind: str, minimum: int | None = None) -> Any:
    if name not in body:
        raise BadRequest(f"missing field {name!r}")
    v = body[name]
    if kind == "int":
        ok = _is_int(v) and (minimum is None or v >= minimum)
        want = "an integer" + (f" >= {minimum}" if minimum is not None else "")
    elif kind == "str":
        ok, want = isinstance(v, str) and v != "", "a non-empty string"
    elif kind == "int-list":
        ok, want = isinstance(v, list) and all(_is_int(x) for x in v), "a list of integers"
    elif kind == "list":
        ok, want = isinstance(v, list), "a list"
    else:  # pragma: no cover - programming error
        raise AssertionError(kind)
    if not ok:
        raise BadRequest(f"field {name!r} must be {want}, got {v!r:.60}")
    return v


def _optional_bool(body: dict, name: str) -> bool | None:
    v = body.get(name)
    if v is not None and not isinstance(v, bool):
        raise BadRequest(f"field {name!r} must be true or false, got {v!r:.60}")
    return v


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    broker_id: int
    host: str
    port: int
    clean_shutdown: bool | None = None      # KIP-966: None = not told (an older broker): treated as clean

    @classmethod
    def parse(cls, body: dict) -> "RegisterBroker":
        return cls(_check(body, "broker_id", "int", 1), _check(body, "host", "str"), _check(body, "port", "int", 0),
                   _optional_bool(body, "clean_shutdown"))

    def to_wire(self) -> dict:
        body = {"broker_id": self.broker_id, "host": self.host, "port": self.port}
        if self.clean_shutdown is not None:
            body["clean_shutdown"] = self.clean_shutdown
        return body


@dataclass(frozen=True, slots=True)
class Heartbeat:
    broker_id: int
    broker_epoch: int

    @classmethod
    def parse(cls, body: dict) -> "Heartbeat":
        return cls(_check(body, "broker_id", "int"), _check(body, "broker_epoch", "int"))

    def to_wire(self) -> dict:
        return {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch}


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    known_version: int = -1
    max_wait_ms: int = 0

    @classmethod
    def parse(cls, body: dict) -> "MetadataRequest":
        known = body.get("known_version", -1)
        wait = body.get("max_wait_ms", 0)
        if not _is_int(known):
            raise BadRequest(f"field 'known_version' must be an integer, got {known!r:.60}")
        if not _is_int(wait) or wait < 0:
            raise BadRequest(f"field 'max_wait_ms' must be an integer >= 0, got {wait!r:.60}")
        return cls(known, wait)

    def to_wire(self) -> dict:
        return {"known_version": self.known_version, "max_wait_ms": self.max_wait_ms}


@dataclass(frozen=True, slots=True)
class AlterIsr:
    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    isr_version: int
    isr: tuple[int, ...]
    broker_epoch: int | None = None     # optional: the leader's registration epoch (checked when given)

    @classmethod
    def parse(cls, body: dict) -> "AlterIsr":
        broker_epoch = body.get("broker_epoch")
        if broker_epoch is not None and not _is_int(broker_epoch):
            raise BadRequest(f"field 'broker_epoch' must be an integer, got {broker_epoch!r:.60}")
        return cls(
            _check(body, "topic", "str"), _check(body, "partition", "int", 0), _check(body, "leader_id", "int"),
            _check(body, "leader_epoch", "int"), _check(body, "isr_version", "int"),
            tuple(_check(body, "isr", "int-list")), broker_epoch,
        )

    def to_wire(self) -> dict:
        body = {"topic": self.topic, "partition": self.partition, "leader_id": self.leader_id,
                "leader_epoch": self.leader_epoch, "isr_version": self.isr_version, "isr": list(self.isr)}
        if self.broker_epoch is not None:
            body["broker_epoch"] = self.broker_epoch
        return body


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()      # topic configs (broker/topic_configs.py), sorted by name

    @classmethod
    def parse(cls, body: Any) -> "TopicSpec":
        if not isinstance(body, dict):
            raise BadRequest(f"a topic must be a map, got {body!r:.60}")
        try:
            configs = checked_configs(body.get("configs", {}))
        except ValueError as exc:
            raise BadRequest(f"'configs': {exc}") from None
        return cls(_check(body, "name", "str"), _check(body, "partitions", "int", 1),
                   _check(body, "replication_factor", "int", 1), tuple(sorted(configs.items())))

    def to_wire(self) -> dict:
        body = {"name": self.name, "partitions": self.partitions, "replication_factor": self.replication_factor}
        if self.configs:
            body["configs"] = dict(self.configs)
        return body


@dataclass(frozen=True, slots=True)
class CreateTopics:
    topics: tuple[TopicSpec, ...]

    @classmethod
    def parse(cls, body: dict) -> "CreateTopics":
        return cls(tuple(TopicSpec.parse(t) for t in _check(body, "topics", "list")))

    def to_wire(self) -> dict:
        return {"topics": [t.to_wire() for t in self.topics]}


@dataclass(frozen=True, slots=True)
class PartitionCount:
    """A topic's new partition count (CREATE_PARTITIONS)."""
    name: str
    count: int

    @classmethod
    def parse(cls, body: Any) -> "PartitionCount":
        if not isinstance(body, dict):
            raise BadRequest(f"a topic must be a map, got {body!r:.60}")
        return cls(_check(body, "name", "str"), _check(body, "count", "int", 1))

    def to_wire(self) -> dict:
        return {"name": self.name, "count": self.count}


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    topics: tuple[PartitionCount, ...]

    @classmethod
    def parse(cls, body: dict) -> "CreatePartitions":
        return cls(tuple(PartitionCount.parse(t) for t in _check(body, "topics", "list")))

    def to_wire(self) -> dict:
        return {"topics": [t.to_wire() for t in self.topics]}


@dataclass(frozen=True, slots=True)
class DeleteTopics:
    names: tuple[str, ...]

    @classmethod
    def parse(cls, body: dict) -> "DeleteTopics":
        names = _check(body, "topics", "list")
        if not all(isinstance(n, str) for n in names):
            raise BadRequest("field 'topics' must be a list of topic names")
        return cls(tuple(names))

    def to_wire(self) -> dict:
        return {"topics": list(self.names)}


@dataclass(frozen=True, slots=True)
class ElectLeader:
    topic: str
    partition: int
    broker: int | None = None
    unclean: bool = False

    @classmethod
    def parse(cls, body: dict) -> "ElectLeader":
        broker = body.get("broker")
        if broker is not None and (not _is_int(broker) or broker < 1):
            raise BadRequest(f"field 'broker' must be a broker id >= 1 or null, got {broker!r:.60}")
        return cls(_check(body, "topic", "str"), _check(body, "partition", "int", 0), broker,
                   bool(_optional_bool(body, "unclean")))

    def to_wire(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "broker": self.broker, "unclean": self.unclean}


REQUEST_TYPES = {
    apis.REGISTER_BROKER: RegisterBroker,
    apis.HEARTBEAT: Heartbeat,
    apis.METADATA: MetadataRequest,
    apis.ALTER_ISR: AlterIsr,
    apis.CREATE_TOPICS: CreateTopics,
    apis.ELECT_LEADER: ElectLeader,
    apis.CREATE_PARTITIONS: CreatePartitions,
    apis.DELETE_TOPICS: DeleteTopics,
}


def parse_request(api: int, body: dict):
    """The typed request for `api`, or BadRequest naming the bad field (or the unknown API key)."""
    kind = REQUEST_TYPES.get(api)
    if kind is None:
        raise BadRequest(f"API key {api} is not served by the controller")
    return kind.parse(body)


# --- typed views of responses ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    isr_version: int
    elr: tuple[int, ...] = ()           # KIP-966 eligible leader replicas

    def to_wire(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "leader": self.leader,
                "leader_epoch": self.leader_epoch, "isr": list(self.isr), "replicas": list(self.replicas),
                "isr_version": self.isr_version, "elr": list(self.elr)}

    @classmethod
    def from_wire(cls, d: dict) -> "PartitionState":
        return cls(d["topic"], d["partition"], d["leader"], d["leader_epoch"], tuple(d["isr"]),
                   tuple(d["replicas"]), d["isr_version"], tuple(d.get("elr") or ()))


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    host: str
    port: int
    alive: bool


@dataclass(frozen=True, slots=True)
class Metadata:
    version: int
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)    # topic -> the configs it was created with

    def topic_configs(self, topic: str) -> dict[str, str]:
        return self.configs.get(topic, {})

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.partitions.get((topic, partition))

    def topic(self, topic: str) -> list[PartitionState]:
        """The topic's partitions in partition order ([] when the topic does not exist)."""
        return sorted((p for (t, _), p in self.partitions.items() if t == topic), key=lambda p: p.partition)

    def leader_address(self, topic: str, partition: int) -> tuple[str, int] | None:
        p = self.partitions.get((topic, partition))
        if p is None or p.leader is None or p.leader not in self.brokers:
            return None
        b = self.brokers[p.leader]
        return (b.host, b.port)

    @classmethod
    def from_wire(cls, body: dict) -> "Metadata":
        brokers = {int(bid): BrokerInfo(v[0], v[1], bool(v[2])) for bid, v in body["brokers"].items()}
        parts = (PartitionState.from_wire(p) for p in body["partitions"])
        return cls(body["version"], brokers, {(p.topic, p.partition): p for p in parts},
                   {str(t): dict(c) for t, c in body.get("topic_configs", {}).items()})

    def to_wire(self) -> dict:
        body = {"error": NONE, "version": self.version,
                "brokers": {bid: [b.host, b.port, b.alive] for bid, b in self.brokers.items()},
                "partitions": [p.to_wire() for _, p in sorted(self.partitions.items())]}
        if self.configs:
            body["topic_configs"] = self.configs
        return body


@dataclass(frozen=True, slots=True)
class AlterIsrResult:
    error: str
    isr: tuple[int, ...]
    isr_version: int
    leader: int | None
    leader_epoch: int
    message: str = ""

    def to_wire(self) -> dict:
        body = {"error": self.error, "isr": list(self.isr), "isr_version": self.isr_version,
                "leader": self.leader, "leader_epoch": self.leader_epoch}
        if self.message:
            body["message"] = self.message
        return body

    @classmethod
    def from_wire(cls, d: dict) -> "AlterIsrResult":
        return cls(d["error"], tuple(d.get("isr") or ()), d.get("isr_version", -1), d.get("leader"),
                   d.get("leader_epoch", -1), d.get("message", ""))


@dataclass(frozen=True, slots=True)
class ElectResult:
    """ELECT_LEADER's answer: the partition's state after the request (unchanged on error)."""
    error: str
    changed: bool
    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    message: str = ""

    def to_wire(self) -> dict:
        return {"error": self.error, "changed": self.changed, "leader": self.leader,
                "leader_epoch": self.leader_epoch, "isr": list(self.isr), "elr": list(self.elr),
                "message": self.message}

    @classmethod
    def from_wire(cls, d: dict) -> "ElectResult":
        return cls(d["error"], bool(d.get("changed")), d.get("leader"), d.get("leader_epoch", -1),
                   tuple(d.get("isr") or ()), tuple(d.get("elr") or ()), d.get("message", ""))
