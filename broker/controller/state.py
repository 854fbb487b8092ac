"""The controller's pure state machine: brokers (registration epoch, fenced or not, last heartbeat),
topics and partitions (replicas, leader, leader_epoch, ISR, isr_version) and the metadata version.

No sockets, clocks or files: time comes in as `now_ms` (a monotonic clock of the caller's choosing), and
every operation returns the structured events it caused (dicts with an "event" key: `registered`,
`fenced`, `unfenced`, `topic-created`, `leader-change`, `isr-change`). Any change bumps `version` once per
operation; `to_dict()` / `from_dict()` are the durable form (store.py writes it).

Rules (Kafka's, see /tmp/client-api.md "Control plane"):
- a broker silent for longer than the session timeout is fenced (brokers expiring at the same check are
  fenced together): removed from every ISR, except that an ISR never becomes empty (it keeps the
  partition's leader as its last member); partitions it led elect the first live ISR member in replica
  order, or, only with unclean leader election and no live ISR member, the first live replica (the ISR
  becomes [that replica]); otherwise the leader is None;
- every leader change (to None too) bumps leader_epoch; every partition change bumps isr_version;
- a broker that registers again while still registered has bounced: it is fenced, then unfenced;
  a heartbeat from a fenced broker with its current epoch unfences it; unfencing elects leaders for every
  leaderless partition (same rule);
- ALTER_ISR is conditional on the leader's leader_epoch and isr_version; stale requests are rejected;
- CREATE_TOPICS refuses a name outside Kafka's rule (broker/limits.py) with INVALID_TOPIC_EXCEPTION, and
  a topic that would give any live broker more than `max_replicas_per_broker` replicas (existing ones
  included) with INVALID_PARTITIONS: a broker's open files grow with its replicas;
- new topics place replicas round-robin over the live broker ids in ascending order (partition i gets
  ids[i], ids[i+1], ...), with ISR = replicas and leader = the first replica.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.controller import messages as m
from broker.limits import topic_name_problem

STATE_FORMAT = 1
MAX_PARTITIONS = 10_000

Event = dict[str, Any]


class StateError(ValueError):
    """The durable state does not have the expected shape; the message names the field."""


@dataclass
class BrokerState:
    broker_id: int
    host: str
    port: int
    epoch: int
    fenced: bool
    last_heartbeat_ms: int = 0


@dataclass
class PartitionRecord:
    topic: str
    partition: int
    replicas: list[int]
    leader: int | None
    leader_epoch: int
    isr: list[int]
    isr_version: int

    def view(self) -> m.PartitionState:
        return m.PartitionState(self.topic, self.partition, self.leader, self.leader_epoch, tuple(self.isr),
                                tuple(self.replicas), self.isr_version)


_KEEP = object()


class ControllerState:
    def __init__(self, *, session_timeout_ms: int = 3000, unclean_leader_election: bool = False,
                 max_replicas_per_broker: int = 1_000_000, eligible_leader_replicas: bool = False):
        self.session_timeout_ms = session_timeout_ms
        self.max_replicas_per_broker = max_replicas_per_broker
        self.unclean_leader_election = unclean_leader_election
        self.eligible_leader_replicas = eligible_leader_replicas      # KIP-966
        self.version = 0
        self.next_broker_epoch = 1
        self.brokers: dict[int, BrokerState] = {}
        self.topics: dict[str, list[PartitionRecord]] = {}

    # --- queries -----------------------------------------------------------------------------------
    def is_live(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced

    def live_brokers(self) -> list[int]:
        return sorted(b for b in self.brokers if self.is_live(b))

    def partition(self, topic: str, partition: int) -> PartitionRecord | None:
        parts = self.topics.get(topic)
        if parts is None or not 0 <= partition < len(parts):
            return None
        return parts[partition]

    def partitions(self) -> list[PartitionRecord]:
        return [p for name in sorted(self.topics) for p in self.topics[name]]

    def metadata(self) -> m.Metadata:
        brokers = {b.broker_id: m.BrokerInfo(b.host, b.port, not b.fenced) for b in self.brokers.values()}
        return m.Metadata(self.version, brokers, {(p.topic, p.partition): p.view() for p in self.partitions()})

    # --- operations --------------------------------------------------------------------------------
    def register_broker(self, broker_id: int, host: str, port: int, now_ms: int) -> tuple[int, list[Event]]:
        """A broker (re)starts: returns its new broker_epoch and the events."""
        events: list[Event] = []
        old = self.brokers.get(broker_id)
        if old is not None and not old.fenced:
            self._fence([(old, "re-registered")], events)   # the old incarnation bounced
        epoch = self.next_broker_epoch
        self.next_broker_epoch += 1
        b = BrokerState(broker_id, host, port, epoch, fenced=True, last_heartbeat_ms=now_ms)
        self.brokers[broker_id] = b
        events.append({"event": "registered", "broker": broker_id, "broker_epoch": epoch, "host": host,
                       "port": port})
        self._unfence(b, events)
        self._bump()
        return epoch, events

    def heartbeat(self, broker_id: int, broker_epoch: int, now_ms: int) -> tuple[str, list[Event]]:
        b = self.brokers.get(broker_id)
        if b is None or b.epoch != broker_epoch:
            return m.STALE_BROKER_EPOCH, []
        b.last_heartbeat_ms = now_ms
        events: list[Event] = []
        if b.fenced:
            self._unfence(b, events)
            self._bump()
        return m.NONE, events

    def expire_sessions(self, now_ms: int) -> list[Event]:
        """Fence every live broker whose last heartbeat is more than the session timeout ago."""
        events: list[Event] = []
        expired = [(b, f"no heartbeat for {now_ms - b.last_heartbeat_ms} ms")
                   for _, b in sorted(self.brokers.items())
                   if not b.fenced and now_ms - b.last_heartbeat_ms > self.session_timeout_ms]
        if expired:
            self._fence(expired, events)   # all at once: no transient leaders among the expired
            self._bump()
        return events

    def elect_leaderless(self) -> list[Event]:
        """Elect leaders for leaderless partitions (at start-up, e.g. after unclean election was enabled)."""
        events: list[Event] = []
        self._elect_leaderless(events)
        if events:
            self._bump()
        return events

    def grant_grace(self, now_ms: int) -> None:
        """Every live broker gets one full session timeout from now (controller restart or stall)."""
        for b in self.brokers.values():
            b.last_heartbeat_ms = now_ms

    def alter_isr(self, req: m.AlterIsr) -> tuple[m.AlterIsrResult, list[Event]]:
        p = self.partition(req.topic, req.partition)
        if p is None:
            return m.AlterIsrResult(m.UNKNOWN_PARTITION, (), -1, None, -1,
                                    f"no partition {req.topic}/{req.partition}"), []

        def reject(code: str, message: str) -> tuple[m.AlterIsrResult, list[Event]]:
            return m.AlterIsrResult(code, tuple(p.isr), p.isr_version, p.leader, p.leader_epoch, message), []

        b = self.brokers.get(req.leader_id)
        if req.broker_epoch is not None and (b is None or b.epoch != req.broker_epoch):
            return reject(m.STALE_BROKER_EPOCH, f"broker {req.leader_id} epoch {req.broker_epoch} is not current")
        if req.leader_epoch != p.leader_epoch:
            return reject(m.FENCED_LEADER_EPOCH, f"leader epoch {req.leader_epoch}, current {p.leader_epoch}")
        if req.leader_id != p.leader:
            return reject(m.NOT_LEADER, f"broker {req.leader_id} is not the leader (leader {p.leader})")
        if req.isr_version != p.isr_version:
            return reject(m.INVALID_UPDATE_VERSION, f"isr_version {req.isr_version}, current {p.isr_version}")
        new = list(req.isr)
        if not new or len(set(new)) != len(new) or req.leader_id not in new:
            return reject(m.INVALID_REQUEST, f"ISR {new} must be non-empty, without duplicates, with the leader")
        outside = [r for r in new if r not in p.replicas]
        if outside:
            return reject(m.INELIGIBLE_REPLICA, f"brokers {outside} are not replicas {p.replicas}")
        not_live = [r for r in new if r not in p.isr and not self.is_live(r)]
        if not_live:
            return reject(m.INELIGIBLE_REPLICA, f"brokers {not_live} are fenced or unregistered")
        ordered = [r for r in p.replicas if r in new]
        events: list[Event] = []
        if ordered != p.isr:
            self._change(p, events, isr=ordered)
            self._bump()
        return m.AlterIsrResult(m.NONE, tuple(p.isr), p.isr_version, p.leader, p.leader_epoch), events

    def create_topics(self, specs: list[m.TopicSpec]) -> tuple[list[tuple[str, str, str]], list[Event]]:
        """Returns [(name, error, message)] and the events. Existing identical topics are NONE."""
        results: list[tuple[str, str, str]] = []
        events: list[Event] = []
        ids = self.live_brokers()     # placement over unfenced brokers only, as KRaft does
        load = {b: 0 for b in ids}      # replicas each live broker already holds
        for parts in self.topics.values():
            for p in parts:
                for r in p.replicas:
                    if r in load:
                        load[r] += 1
        for spec in specs:
            bad_name = topic_name_problem(spec.name)
            if bad_name is not None:
                results.append((spec.name, m.INVALID_TOPIC_EXCEPTION, bad_name))
                continue
            existing = self.topics.get(spec.name)
            if existing is not None:
                same = (len(existing) == spec.partitions
                        and all(len(p.replicas) == spec.replication_factor for p in existing))
                results.append((spec.name, m.NONE, "") if same else (
                    spec.name, m.TOPIC_ALREADY_EXISTS,
                    f"topic {spec.name!r} exists with {len(existing)} partitions of "
                    f"{len(existing[0].replicas)} replicas"))
                continue
            if spec.partitions > MAX_PARTITIONS:
                results.append((spec.name, m.INVALID_REQUEST, f"at most {MAX_PARTITIONS} partitions"))
                continue
            if spec.replication_factor > len(ids):
                results.append((spec.name, m.INVALID_REPLICATION_FACTOR,
                                f"replication factor {spec.replication_factor} but {len(ids)} live brokers"))
                continue
            parts = []
            added = {b: 0 for b in ids}
            for i in range(spec.partitions):
                replicas = [ids[(i + j) % len(ids)] for j in range(spec.replication_factor)]
                parts.append(PartitionRecord(spec.name, i, replicas, replicas[0], 0, list(replicas), 0))
                for r in replicas:
                    added[r] += 1
            over = [b for b in ids if load[b] + added[b] > self.max_replicas_per_broker]
            if over:
                b = over[0]
                results.append((spec.name, m.INVALID_PARTITIONS,
                                f"{spec.partitions} partitions x replication factor {spec.replication_factor} "
                                f"would give broker {b} {load[b] + added[b]} replicas, over its budget of "
                                f"{self.max_replicas_per_broker} (max_replicas_per_broker: open files)"))
                continue
            for b in ids:
                load[b] += added[b]
            self.topics[spec.name] = parts
            events.append({"event": "topic-created", "topic": spec.name, "partitions": spec.partitions,
                           "replication_factor": spec.replication_factor})
            for p in parts:
                events.append({"event": "leader-change", "topic": p.topic, "partition": p.partition,
                               "leader": p.leader, "epoch": p.leader_epoch, "isr": list(p.isr)})
            results.append((spec.name, m.NONE, ""))
        if events:
            self._bump()
        return results, events

    # --- internals ---------------------------------------------------------------------------------
    def _bump(self) -> None:
        self.version += 1

    def _elect(self, p: PartitionRecord, isr: list[int]) -> tuple[int | None, list[int]]:
        """(leader, isr) by the election rule, given the ISR to elect from."""
        for r in p.replicas:
            if r in isr and self.is_live(r):
                return r, isr
        if self.unclean_leader_election:
            for r in p.replicas:
                if self.is_live(r):
                    return r, [r]
        return None, isr

    def _change(self, p: PartitionRecord, events: list[Event], *, leader: Any = _KEEP,
                isr: list[int] | None = None) -> None:
        new_leader = p.leader if leader is _KEEP else leader
        new_isr = p.isr if isr is None else list(isr)
        if new_leader == p.leader and new_isr == p.isr:
            return
        leader_changed = new_leader != p.leader
        isr_changed = new_isr != p.isr
        if leader_changed:
            p.leader = new_leader
            p.leader_epoch += 1
        p.isr = new_isr
        p.isr_version += 1
        if isr_changed:
            events.append({"event": "isr-change", "topic": p.topic, "partition": p.partition,
                           "isr": list(p.isr), "version": p.isr_version})
        if leader_changed:
            events.append({"event": "leader-change", "topic": p.topic, "partition": p.partition,
                           "leader": p.leader, "epoch": p.leader_epoch, "isr": list(p.isr)})

    def _fence(self, brokers: list[tuple[BrokerState, str]], events: list[Event]) -> None:
        for b, why in brokers:
            b.fenced = True
            events.append({"event": "fenced", "broker": b.broker_id, "broker_epoch": b.epoch, "why": why})
        gone = {b.broker_id for b, _ in brokers}
        for p in self.partitions():
            isr = [r for r in p.isr if r not in gone]
            if not isr:   # the ISR keeps a last member: the leader (it has every committed record)
                isr = [p.leader] if p.leader in p.isr else p.isr[:1]
            if p.leader in gone:
                leader, isr = self._elect(p, isr)
                self._change(p, events, leader=leader, isr=isr)
            else:
                self._change(p, events, isr=isr)

    def _unfence(self, b: BrokerState, events: list[Event]) -> None:
        b.fenced = False
        events.append({"event": "unfenced", "broker": b.broker_id, "broker_epoch": b.epoch})
        self._elect_leaderless(events)

    def _elect_leaderless(self, events: list[Event]) -> None:
        for p in self.partitions():
            if p.leader is None:
                leader, isr = self._elect(p, p.isr)
                self._change(p, events, leader=leader, isr=isr)

    # --- durable form ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "version": self.version,
            "next_broker_epoch": self.next_broker_epoch,
            "brokers": [{"id": b.broker_id, "host": b.host, "port": b.port, "epoch": b.epoch, "fenced": b.fenced}
                        for _, b in sorted(self.brokers.items())],
            "topics": [{"name": name, "partitions": [
                {"partition": p.partition, "replicas": p.replicas, "leader": p.leader,
                 "leader_epoch": p.leader_epoch, "isr": p.isr, "isr_version": p.isr_version}
                for p in self.topics[name]]} for name in sorted(self.topics)],
        }

    @classmethod
    def from_dict(cls, d: Any, *, now_ms: int, session_timeout_ms: int = 3000,
                  unclean_leader_election: bool = False, max_replicas_per_broker: int = 1_000_000,
                  eligible_leader_replicas: bool = False) -> "ControllerState":
        """Rebuild from `to_dict()` output; every live broker gets a session timeout of grace from now_ms.
        Topics persisted by an older controller are kept even if their names break today's rule: the
        brokers skip a partition they cannot create (broker/server/partitions.py)."""
        s = cls(session_timeout_ms=session_timeout_ms, unclean_leader_election=unclean_leader_election,
                max_replicas_per_broker=max_replicas_per_broker, eligible_leader_replicas=eligible_leader_replicas)
        try:
            if not isinstance(d, dict) or d.get("format") != STATE_FORMAT:
                raise StateError(f"'format' must be {STATE_FORMAT}")
            s.version = _int(d, "version")
            s.next_broker_epoch = _int(d, "next_broker_epoch")
            for i, b in enumerate(d["brokers"]):
                where = f"brokers[{i}]"
                s.brokers[_int(b, "id", where)] = BrokerState(
                    _int(b, "id", where), str(b["host"]), _int(b, "port", where), _int(b, "epoch", where),
                    bool(b["fenced"]), now_ms)
            for t in d["topics"]:
                name = str(t["name"])
                parts = []
                for i, p in enumerate(t["partitions"]):
                    where = f"topics[{name}].partitions[{i}]"
                    if _int(p, "partition", where) != i:
                        raise StateError(f"{where}: 'partition' must be {i}")
                    leader = p["leader"]
                    if leader is not None and not isinstance(leader, int):
                        raise StateError(f"{where}: 'leader' must be an integer or null")
                    parts.append(PartitionRecord(name, i, [int(r) for r in p["replicas"]], leader,
                                                 _int(p, "leader_epoch", where), [int(r) for r in p["isr"]],
                                                 _int(p, "isr_version", where)))
                s.topics[name] = parts
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, StateError):
                raise
            raise StateError(f"malformed state ({type(exc).__name__}: {exc})") from None
        return s


def _int(d: dict, key: str, where: str = "") -> int:
    v = d[key]
    if not isinstance(v, int) or isinstance(v, bool):
        raise StateError(f"{where + ': ' if where else ''}{key!r} must be an integer, got {v!r:.40}")
    return v
