"""The controller's pure state machine: brokers (registration epoch, fenced or not, last heartbeat),
topics and partitions (replicas, leader, leader_epoch, ISR, isr_version) and the metadata version.

No sockets, clocks or files: time comes in as `now_ms` (a monotonic clock of the caller's choosing), and
every operation returns the structured events it caused (dicts with an "event" key: `registered`,
`fenced`, `unfenced`, `topic-created`, `leader-change`, `isr-change`, `elect-leader`, `unclean-shutdown`).
Any change bumps `version` once per operation; `to_dict()` / `from_dict()` are the durable form (store.py
writes it).

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
  ids[i], ids[i+1], ...), with ISR = replicas and leader = the first replica;
- ELECT_LEADER (`elect_leader`): a named live replica that is eligible (ISR; ELR with KIP-966; any with
  unclean), or the election rule again for a partition whose leader is missing or fenced.

KIP-966, with `eligible_leader_replicas` (docs/architecture.md "Eligible leader replicas"): replicas leaving
an ISR that is or becomes smaller than `min_insync_replicas` join the partition's ELR, an ISR at min ISR
clears it; the ISR may become empty (no last-member rule); elections go ISR -> live ELR member (it becomes
the ISR) -> unclean -> none; a registration with clean_shutdown=False takes the broker out of every ELR and
out of the ISR where it is the sole member of a leaderless partition.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.controller import messages as m
from broker.limits import topic_name_problem
from broker.errors import StateError

STATE_FORMAT = 1
MAX_PARTITIONS = 10_000

Event = dict[str, Any]


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
    elr: list[int] = field(default_factory=list)    # KIP-966 eligible leader replicas (replica order)

    def view(self) -> m.PartitionState:
        return m.PartitionState(self.topic, self.partition, self.leader, self.leader_epoch, tuple(self.isr),
                                tuple(self.replicas), self.isr_version, tuple(self.elr))


_KEEP = object()


class ControllerState:
    def __init__(self, *, session_timeout_ms: int = 3000, unclean_leader_election: bool = False,
                 max_replicas_per_broker: int = 1_000_000, eligible_leader_replicas: bool = False,
                 min_insync_replicas: int = 1):
        self.session_timeout_ms = session_timeout_ms
        self.min_insync_replicas = min_insync_replicas  # the ELR rule's threshold (KIP-966)
        self.max_replicas_per_broker = max_replicas_per_broker
        self.unclean_leader_election = unclean_leader_election
        self.eligible_leader_replicas = eligible_leader_replicas      # KIP-966
        self.version = 0
        self.next_broker_epoch = 1
        self.brokers: dict[int, BrokerState] = {}
        self.topics: dict[str, list[PartitionRecord]] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}     # topic -> its configs, for topics that set any

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
        return m.Metadata(self.version, brokers, {(p.topic, p.partition): p.view() for p in self.partitions()},
                          {t: dict(c) for t, c in self.topic_configs.items()})

    # --- operations --------------------------------------------------------------------------------
    def register_broker(self, broker_id: int, host: str, port: int, now_ms: int,
                        clean_shutdown: bool | None = None) -> tuple[int, list[Event]]:
        """A broker (re)starts: returns its new broker_epoch and the events. `clean_shutdown` False (KIP-966:
        no clean-shutdown marker, so its unflushed tail may be lost) takes it out of every ELR first."""
        events: list[Event] = []
        old = self.brokers.get(broker_id)
        if old is not None and not old.fenced:
            self._fence([(old, "re-registered")], events)   # the old incarnation bounced
        epoch = self.next_broker_epoch
        self.next_broker_epoch += 1
        b = BrokerState(broker_id, host, port, epoch, fenced=True, last_heartbeat_ms=now_ms)
        self.brokers[broker_id] = b
        registered: Event = {"event": "registered", "broker": broker_id, "broker_epoch": epoch, "host": host,
                             "port": port}
        if clean_shutdown is not None:
            registered["clean_shutdown"] = clean_shutdown
        events.append(registered)
        if clean_shutdown is False and self.eligible_leader_replicas:
            self._unclean_shutdown(broker_id, events)
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

    def elect_leader(self, topic: str, partition: int, broker: int | None = None,
                     unclean: bool = False) -> tuple[m.ElectResult, list[Event]]:
        """ELECT_LEADER (admin). With `broker`: make it leader if it is live and eligible (in the ISR, in the
        ELR with KIP-966 on, or any replica with `unclean`); it already leading is no change. Without: if the
        leader is missing or fenced, run the election rule again, unclean election allowed for this one
        election when `unclean`; a live leader is no change. Refusals carry the current state."""
        p = self.partition(topic, partition)
        if p is None:
            return m.ElectResult(m.UNKNOWN_PARTITION, False, None, -1, (), (),
                                 f"no partition {topic}/{partition}"), []
        name = f"{topic}/{partition}"

        def answer(code: str, message: str, changed: bool = False) -> m.ElectResult:
            return m.ElectResult(code, changed, p.leader, p.leader_epoch, tuple(p.isr), tuple(p.elr), message)

        elr_text = f" or the ELR {p.elr}" if self.eligible_leader_replicas else ""
        if broker is not None:
            if broker not in p.replicas:
                return answer(m.INELIGIBLE_REPLICA, f"broker {broker} is not a replica of {name} "
                                                    f"(replicas {p.replicas})"), []
            if not self.is_live(broker):
                return answer(m.INELIGIBLE_REPLICA, f"broker {broker} is fenced or unregistered"), []
            if p.leader == broker:
                return answer(m.NONE, f"broker {broker} already leads {name} at epoch {p.leader_epoch}"), []
            if broker in p.isr:
                how, isr, elr = "isr", p.isr, p.elr
            elif self.eligible_leader_replicas and broker in p.elr:
                how, isr, elr = "elr", [broker], self._next_elr(p, [broker])
            elif unclean:
                how, isr, elr = "unclean", [broker], []
            else:
                return answer(m.INELIGIBLE_REPLICA, f"broker {broker} is not in the ISR {p.isr}{elr_text} of "
                                                    f"{name}; only an unclean election may pick it"), []
            leader = broker
        else:
            if p.leader is not None and self.is_live(p.leader):
                return answer(m.NONE, f"broker {p.leader} leads {name} at epoch {p.leader_epoch}: "
                                      f"no election needed"), []
            leader, isr, elr, how = self._elect(p, p.isr, unclean=unclean or self.unclean_leader_election)
            if leader is None:
                return answer(m.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                              f"no live replica in the ISR {p.isr}{elr_text} of {name}"
                              + ("" if unclean else "; an unclean election may pick another replica")), []
        events: list[Event] = [{"event": "elect-leader", "topic": topic, "partition": partition,
                                "requested": broker, "unclean": unclean, "leader": leader, "how": how}]
        self._change(p, events, leader=leader, isr=isr, elr=elr)
        self._bump()
        return answer(m.NONE, f"broker {leader} leads {name} at epoch {p.leader_epoch} ({how} election)",
                      changed=True), events

    def create_topics(self, specs: list[m.TopicSpec]) -> tuple[list[tuple[str, str, str]], list[Event]]:
        """Returns [(name, error, message)] and the events. Existing identical topics are NONE."""
        results: list[tuple[str, str, str]] = []
        events: list[Event] = []
        ids = self.live_brokers()     # placement over unfenced brokers only, as KRaft does
        load = self._replica_load(ids)
        for spec in specs:
            bad_name = topic_name_problem(spec.name)
            if bad_name is not None:
                results.append((spec.name, m.INVALID_TOPIC_EXCEPTION, bad_name))
                continue
            existing = self.topics.get(spec.name)
            if existing is not None:
                configs = self.topic_configs.get(spec.name, {})
                same = (len(existing) == spec.partitions
                        and all(len(p.replicas) == spec.replication_factor for p in existing)
                        and configs == dict(spec.configs))
                results.append((spec.name, m.NONE, "") if same else (
                    spec.name, m.TOPIC_ALREADY_EXISTS,
                    f"topic {spec.name!r} exists with {len(existing)} partitions of "
                    f"{len(existing[0].replicas)} replicas" + (f" and configs {configs}" if configs else "")))
                continue
            if spec.partitions > MAX_PARTITIONS:
                results.append((spec.name, m.INVALID_REQUEST, f"at most {MAX_PARTITIONS} partitions"))
                continue
            if spec.replication_factor > len(ids):
                results.append((spec.name, m.INVALID_REPLICATION_FACTOR,
                                f"replication factor {spec.replication_factor} but {len(ids)} live brokers"))
                continue
            parts, added = self._place(spec.name, range(spec.partitions), spec.replication_factor, ids)
            over = self._take_budget(load, added)
            if over:
                results.append((spec.name, m.INVALID_PARTITIONS, f"{spec.partitions} partitions x replication "
                                f"factor {spec.replication_factor} would give {over}"))
                continue
            self.topics[spec.name] = parts
            if spec.configs:
                self.topic_configs[spec.name] = dict(spec.configs)
            events.append({"event": "topic-created", "topic": spec.name, "partitions": spec.partitions,
                           "replication_factor": spec.replication_factor,
                           **({"configs": dict(spec.configs)} if spec.configs else {})})
            events += [_first_leader(p) for p in parts]
            results.append((spec.name, m.NONE, ""))
        if events:
            self._bump()
        return results, events

    def create_partitions(self, counts: list[m.PartitionCount]) -> tuple[list[tuple[str, str, str]], list[Event]]:
        """Grow topics to `count` partitions each (Kafka's CreatePartitions): the new partitions get the
        topic's replication factor, placed over the live brokers as create_topics places a topic's, each
        led by its first replica. Returns [(name, error, message)] and the events; a topic that already has
        `count` partitions is NONE (idempotent), one with more is INVALID_PARTITIONS."""
        results: list[tuple[str, str, str]] = []
        events: list[Event] = []
        ids = self.live_brokers()
        load = self._replica_load(ids)
        for spec in counts:
            parts = self.topics.get(spec.name)
            if not parts:
                results.append((spec.name, m.UNKNOWN_PARTITION, f"topic {spec.name!r} does not exist"))
                continue
            have, rf = len(parts), len(parts[0].replicas)
            if spec.count == have:
                results.append((spec.name, m.NONE, ""))
                continue
            if spec.count < have:
                results.append((spec.name, m.INVALID_PARTITIONS, f"topic {spec.name!r} has {have} partitions, more "
                                f"than the {spec.count} asked for (partitions are never removed)"))
                continue
            if spec.count > MAX_PARTITIONS:
                results.append((spec.name, m.INVALID_PARTITIONS, f"at most {MAX_PARTITIONS} partitions"))
                continue
            if rf > len(ids):
                results.append((spec.name, m.INVALID_REPLICATION_FACTOR,
                                f"its replication factor is {rf} but {len(ids)} brokers are live"))
                continue
            new, added = self._place(spec.name, range(have, spec.count), rf, ids)
            over = self._take_budget(load, added)
            if over:
                results.append((spec.name, m.INVALID_PARTITIONS, f"{spec.count - have} more partitions would give {over}"))
                continue
            parts.extend(new)
            events.append({"event": "partitions-added", "topic": spec.name, "partitions": spec.count, "before": have})
            events += [_first_leader(p) for p in new]
            results.append((spec.name, m.NONE, ""))
        if events:
            self._bump()
        return results, events

    def delete_topics(self, names: list[str]) -> tuple[list[tuple[str, str, str]], list[Event]]:
        """Remove topics and their partitions (Kafka's DeleteTopics): brokers drop their replicas when
        the metadata no longer names them. Returns [(name, error, message)] and the events; an unknown
        topic is UNKNOWN_PARTITION."""
        results: list[tuple[str, str, str]] = []
        events: list[Event] = []
        for name in names:
            parts = self.topics.pop(name, None)
            if parts is None:
                results.append((name, m.UNKNOWN_PARTITION, f"topic {name!r} does not exist"))
                continue
            self.topic_configs.pop(name, None)
            events.append({"event": "topic-deleted", "topic": name, "partitions": len(parts)})
            results.append((name, m.NONE, ""))
        if events:
            self._bump()
        return results, events

    # --- internals ---------------------------------------------------------------------------------
    def _replica_load(self, ids: list[int]) -> dict[int, int]:
        """The partition replicas each of the brokers `ids` holds now."""
        load = {b: 0 for b in ids}
        for parts in self.topics.values():
            for p in parts:
                for r in p.replicas:
                    if r in load:
                        load[r] += 1
        return load

    def _take_budget(self, load: dict[int, int], added: dict[int, int]) -> str | None:
        """Add `added` to each broker's `load`, unless that takes one past max_replicas_per_broker: then
        leave `load` as it is and say which broker ("broker 2 130 replicas, over its budget of ...")."""
        for b, n in added.items():
            if load[b] + n > self.max_replicas_per_broker:
                return (f"broker {b} {load[b] + n} replicas, over its budget of {self.max_replicas_per_broker} "
                        "(max_replicas_per_broker: open files)")
        for b, n in added.items():
            load[b] += n
        return None

    @staticmethod
    def _place(name: str, partitions: range, rf: int, ids: list[int]) -> tuple[list[PartitionRecord], dict[int, int]]:
        """New partitions of topic `name`, replica j of partition i on broker ids[(i + j) % len(ids)], each led
        by its first replica; and the replicas that adds to each broker."""
        parts, added = [], {b: 0 for b in ids}
        for i in partitions:
            replicas = [ids[(i + j) % len(ids)] for j in range(rf)]
            parts.append(PartitionRecord(name, i, replicas, replicas[0], 0, list(replicas), 0))
            for r in replicas:
                added[r] += 1
        return parts, added

    def _bump(self) -> None:
        self.version += 1

    def _elect(self, p: PartitionRecord, isr: list[int], elr: list[int] | None = None,
               unclean: bool | None = None) -> tuple[int | None, list[int], list[int], str]:
        """(leader, isr, elr, how) by the election rule, given the ISR (and ELR) to elect from: the first live
        ISR member in replica order ("isr"); with KIP-966 on, else the first live ELR member, which becomes the
        ISR ("elr"); with unclean election, else the first live replica, ISR = [it], ELR cleared ("unclean");
        else no leader ("none")."""
        elr = p.elr if elr is None else elr
        unclean = self.unclean_leader_election if unclean is None else unclean
        for r in p.replicas:
            if r in isr and self.is_live(r):
                return r, isr, elr, "isr"
        if self.eligible_leader_replicas:
            for r in p.replicas:
                if r in elr and self.is_live(r):
                    return r, [r], self._next_elr(p, [r], isr, elr), "elr"
        if unclean:
            for r in p.replicas:
                if self.is_live(r):
                    return r, [r], [], "unclean"
        return None, isr, elr, "none"

    def _next_elr(self, p: PartitionRecord, new_isr: list[int], old_isr: list[int] | None = None,
                  old_elr: list[int] | None = None) -> list[int]:
        """KIP-966: members leaving an ISR (old_isr, default the partition's) that is or becomes smaller
        than min_insync_replicas join the ELR (the HW stopped while they were in, so they hold every
        committed record); an ISR at min ISR or more clears it; an ISR member is never in the ELR. Replica
        order. Always [] with KIP-966 off."""
        if not self.eligible_leader_replicas or len(new_isr) >= self.min_insync_replicas:
            return []
        old_isr = p.isr if old_isr is None else old_isr
        old_elr = p.elr if old_elr is None else old_elr
        return [r for r in p.replicas if (r in old_elr or r in old_isr) and r not in new_isr]

    def _change(self, p: PartitionRecord, events: list[Event], *, leader: Any = _KEEP,
                isr: list[int] | None = None, elr: list[int] | None = None) -> None:
        """Apply a leader / ISR change. The ELR follows the ISR change by `_next_elr` unless `elr` is given.
        With KIP-966 on, isr-change and leader-change events carry the ELR."""
        new_leader = p.leader if leader is _KEEP else leader
        new_isr = p.isr if isr is None else list(isr)
        new_elr = self._next_elr(p, new_isr) if elr is None else list(elr)
        if new_leader == p.leader and new_isr == p.isr and new_elr == p.elr:
            return
        leader_changed = new_leader != p.leader
        isr_changed = new_isr != p.isr or new_elr != p.elr
        if leader_changed:
            p.leader = new_leader
            p.leader_epoch += 1
        p.isr = new_isr
        p.elr = new_elr
        p.isr_version += 1
        extra = {"elr": list(p.elr)} if self.eligible_leader_replicas else {}
        if isr_changed:
            events.append({"event": "isr-change", "topic": p.topic, "partition": p.partition,
                           "isr": list(p.isr), "version": p.isr_version, **extra})
        if leader_changed:
            events.append({"event": "leader-change", "topic": p.topic, "partition": p.partition,
                           "leader": p.leader, "epoch": p.leader_epoch, "isr": list(p.isr),
                           "version": p.isr_version, **extra})

    def _fence(self, brokers: list[tuple[BrokerState, str]], events: list[Event]) -> None:
        for b, why in brokers:
            b.fenced = True
            events.append({"event": "fenced", "broker": b.broker_id, "broker_epoch": b.epoch, "why": why})
        gone = {b.broker_id for b, _ in brokers}
        for p in self.partitions():
            isr = [r for r in p.isr if r not in gone]
            if not isr and not self.eligible_leader_replicas:
                # the ISR keeps a last member: the leader (it has every committed record). With KIP-966 the
                # ISR may become empty: the members it loses join the ELR instead.
                isr = [p.leader] if p.leader in p.isr else p.isr[:1]
            if p.leader in gone:
                elr = self._next_elr(p, isr)
                leader, isr, elr, _how = self._elect(p, isr, elr)
                self._change(p, events, leader=leader, isr=isr, elr=elr)
            else:
                self._change(p, events, isr=isr)

    def _unclean_shutdown(self, broker_id: int, events: list[Event]) -> None:
        """KIP-966: a broker back from an unclean shutdown may have lost its unflushed tail, committed records
        included. It leaves every ELR, and the ISR where it is the sole member of a leaderless partition, so
        it is never elected with a cut log (only an unclean election may pick it)."""
        touched = [p for p in self.partitions()
                   if broker_id in p.elr or (p.isr == [broker_id] and p.leader is None)]
        if not touched:
            return          # in no ELR and leading nothing alone: nothing to take away (its `registered`
                            # event says clean_shutdown: false); a new broker's first start is unclean too
        events.append({"event": "unclean-shutdown", "broker": broker_id,
                       "partitions": [f"{p.topic}/{p.partition}" for p in touched]})
        for p in touched:
            self._change(p, events, isr=[r for r in p.isr if r != broker_id],
                         elr=[r for r in p.elr if r != broker_id])

    def _unfence(self, b: BrokerState, events: list[Event]) -> None:
        b.fenced = False
        events.append({"event": "unfenced", "broker": b.broker_id, "broker_epoch": b.epoch})
        self._elect_leaderless(events)

    def _elect_leaderless(self, events: list[Event]) -> None:
        for p in self.partitions():
            if p.leader is None:
                leader, isr, elr, _how = self._elect(p, p.isr)
                self._change(p, events, leader=leader, isr=isr, elr=elr)

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
                 "leader_epoch": p.leader_epoch, "isr": p.isr, "isr_version": p.isr_version, "elr": p.elr}
                for p in self.topics[name]],
                **({"configs": self.topic_configs[name]} if name in self.topic_configs else {})}
                for name in sorted(self.topics)],
        }

    @classmethod
    def from_dict(cls, d: Any, *, now_ms: int, **settings: Any) -> "ControllerState":
        """Rebuild from `to_dict()` output, with `settings` the keywords of `ControllerState()` (the
        controller's policies, which the state file does not hold); every live broker gets a session
        timeout of grace from now_ms. Topics persisted by an older controller are kept even if their names
        break today's rule: the brokers skip a partition they cannot create (broker/server/partitions.py)."""
        s = cls(**settings)
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
                                                 _int(p, "isr_version", where),
                                                 [int(r) for r in p.get("elr", [])]))
                s.topics[name] = parts
                configs = t.get("configs", {})
                if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
                    raise StateError(f"topics[{name}]: 'configs' must be a map of strings")
                if configs:
                    s.topic_configs[name] = {str(k): v for k, v in configs.items()}
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


def _first_leader(p: PartitionRecord) -> Event:
    """The leader-change event of a partition just made."""
    return {"event": "leader-change", "topic": p.topic, "partition": p.partition, "leader": p.leader,
            "epoch": p.leader_epoch, "isr": list(p.isr), "version": p.isr_version}
