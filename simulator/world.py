"""The simulated world: N brokers holding one partition, the controller, a network, disks and a clock.

Owns `SimSettings`, `World`, `SimNode`, `Message`, `Ack` and `SimError`. The brokers run the real
replication core (`broker.replication.replica.PartitionReplica`) and the controller is the real
`broker.controller.state.ControllerState`; this module plays only what a shell does around them:

- network: every request and answer is a `Message` in `in_flight` (fetch and OffsetsForLeaderEpoch
  requests and answers, heartbeats, registrations, metadata pushes, alter-isr proposals and answers).
  Any of them may be delivered (in any order), dropped or duplicated. Links are one-way between any
  two of the nodes and the controller "c0"; a message on a cut link cannot be delivered until healed.
- disks: a flushed prefix per node (flush "always": everything; "never": only `flush` actions), the
  HW checkpoint (`checkpoint` actions) and the leader-epoch checkpoint (written after every event,
  before acknowledging, as Kafka does). `crash` keeps the whole log, `power-loss` only the flushed part.
  `damage` is a storage fault (the nemesis's corrupt faults): a down broker's disk loses the last record
  of its log, which its recovery cuts, whatever was flushed or acknowledged. As the nemesis spares the
  last in-sync copy, it strikes only a broker the controller has fenced and holds outside the ISR (and
  the ELR), with no ISR expansion naming it on the way, so a protocol that keeps its promises loses
  nothing acknowledged to it; the observer hears it as a `damaged` row (broker/rules).
- controller: a change of its state pushes a metadata message to every registered live broker; a
  broker applies it as broker/server/partitions.py does (leader -> become_leader, another leader ->
  become_follower + ISR, no leader -> become_none).
- clients: `produce` writes one value to a broker that believes it leads; acks=1 is acknowledged on
  append, acks=all when `produce_status` completes (parked produces are re-checked after every event);
  a consumer polls every leader after every event, from just below its HW (`_poll`).
- the protocol rules (broker/rules) hear all of it through `observer` (simulator/observe.py).

`enabled()` lists every legal action in a fixed order, bounded in number: at most `LINK_SEND_CAP`
requests on a link when sending, `LINK_CAP` messages on a link when duplicating, at most two metadata
pushes per link (a third supersedes the oldest), `advance` in the fixed sizes of `SimSettings.advances`
(`apply` accepts any positive size, so a shrinker may shorten advances).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from broker.config_keys import check_values, parse_acks, sim_keys, wire_acks
from broker.controller import messages as cm
from broker.controller.state import ControllerState
from broker.records import MemoryLog, Record
from broker.replication.config import ReplicationConfig
from broker.replication.messages import (
    EpochRequest, FetchRequest, IsrProposal,
)
from broker.replication.replica import LEADER, FOLLOWER, Checkpoints, PartitionReplica
from broker.settings import Setting, SettingError
from simulator import actions as A
from simulator.actions import Action, CONTROLLER
from simulator.observe import Acked, RuleObserver

TOPIC, PARTITION = "t", 0
LINK_SEND_CAP = 2        # a follower sends a request only while fewer requests and answers are on the way
                         # between it and its leader; a heartbeat / metadata only below this on its link
LINK_CAP = 3             # a message is duplicated only while its link holds fewer messages
METADATA_CAP = 2         # metadata pushes waiting on one link; a newer one supersedes the oldest
POLL_RECORDS = 3         # a simulated consumer's poll asks for this many records


class SimError(RuntimeError):
    """An action that is not enabled in this state, or a bad setting (the message names which)."""


# The simulator's own settings; the broker and controller settings it models are the keys
# broker/config_keys.py marks `sim`, under their test-file names, with the broker's defaults.
SIM_ONLY = (
    Setting("replicas", int, 3, "replicas (nodes n1..nN)", min=1, max=9),
    Setting("acks", object, 1, "0, 1 or \"all\"", parse=parse_acks),
    Setting("auto_checkpoint_hw", bool, False, "the HW checkpoint follows the HW after every event"),
)


def _check_settings(self) -> None:
    for s in SIM_ONLY:
        try:
            value = s.value(getattr(self, s.name))
        except SettingError as exc:
            raise SimError(f"sim settings: {s.name} {exc.problem}") from None
        object.__setattr__(self, s.name, value)     # acks in its one spelling
    check_values(self, sim_keys(), SimError, "sim settings: ", attr="sim_name", choices="simulator")


def _advances(self) -> tuple[int, ...]:
    """The clock steps `enabled()` offers: a short one, one past the replica lag limit and one past the
    session timeout."""
    return tuple(sorted({100, self.replica_lag_time_max_ms + 1, self.session_timeout_ms + 1}))


def _replication_config(self) -> ReplicationConfig:
    return ReplicationConfig(**{k.replication: getattr(self, k.sim_name) for k in sim_keys() if k.replication})


_SIM_FIELDS = [(s.name, s.type, field(default=s.default)) for s in SIM_ONLY] + \
    [(k.sim_name, k.setting.type, field(default=k.default)) for k in sim_keys()]
SimSettings = dataclasses.make_dataclass("SimSettings", _SIM_FIELDS, frozen=True, namespace={
    "__post_init__": _check_settings, "advances": property(_advances),
    "replication_config": _replication_config, "__module__": __name__,
    "__doc__": "A simulated cluster's settings: SIM_ONLY and the broker keys the simulator models."})


@dataclass(slots=True)
class Message:
    """One message on the network. kind: fetch, fetch-answer, epoch, epoch-answer, heartbeat,
    register, metadata, alter-isr, alter-isr-answer. `body` depends on the kind; `inc` is the
    incarnation of the node it belongs to (an answer is never handed to a later incarnation)."""
    id: int
    kind: str
    src: str
    dst: str
    body: Any
    inc: int = 0

    def describe(self, world: "World") -> str:
        b = self.body
        if self.kind == "fetch":
            return f"{self.src}'s fetch from {b.fetch_offset} (epoch {b.current_leader_epoch}) reaches {self.dst}"
        if self.kind == "fetch-answer":
            req, resp = b
            if resp.error is not None:
                what = f"{resp.error}"
            else:
                k = len(resp.records)
                what = f"{k} record{'' if k == 1 else 's'}, HW {resp.high_watermark}"
            return f"{self.src}'s answer to {self.dst}'s fetch from {req.fetch_offset} ({what}) reaches {self.dst}"
        if self.kind == "epoch":
            return (f"{self.src}'s OffsetsForLeaderEpoch (where does epoch {b.requested_epoch} end?) "
                    f"reaches {self.dst}")
        if self.kind == "epoch-answer":
            req, resp = b
            what = str(resp.error) if resp.error is not None else (
                f"epoch {resp.end.epoch} ends at {resp.end.end_offset}" if resp.end else "no answer")
            return f"{self.src}'s answer to {self.dst}'s OffsetsForLeaderEpoch ({what}) reaches {self.dst}"
        if self.kind == "heartbeat":
            return f"{self.src}'s heartbeat reaches the controller"
        if self.kind == "register":
            return f"{self.src}'s registration reaches the controller"
        if self.kind == "metadata":
            ps, version, _fenced = b
            return (f"metadata v{version} (leader {_name(ps.leader)}, epoch {ps.leader_epoch}, "
                    f"ISR {_names(ps.isr)}) reaches {self.dst}")
        if self.kind == "alter-isr":
            p, _ = b
            return f"{self.src}'s proposal ISR {_names(p.isr)} ({p.kind}) reaches the controller"
        if self.kind == "alter-isr-answer":
            p, res = b
            return f"the controller's answer {res.error} to ISR {_names(p.isr)} reaches {self.dst}"
        return f"{self.kind} from {self.src} reaches {self.dst}"


def _name(broker_id: int | None) -> str:
    return "none" if broker_id is None else f"n{broker_id}"


def _names(ids) -> str:
    return "{" + ",".join(f"n{i}" for i in ids) + "}"


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledged write: the client was told `value` is at `offset` (written in `epoch` by `leader`)."""
    value: str
    offset: int
    epoch: int
    leader: str


@dataclass(slots=True)
class Parked:
    value: str
    node: str
    offset: int
    epoch: int


@dataclass
class SimNode:
    name: str
    broker_id: int
    log: MemoryLog
    replica: PartitionReplica | None = None
    up: bool = True
    inc: int = 0                                  # incarnation: bumped by every restart
    flushed: int = 0                              # records [0, flushed) survive a power loss
    hw_checkpoint: int = 0
    epoch_checkpoint: list[tuple[int, int]] = field(default_factory=list)
    broker_epoch: int | None = None               # None: not (yet) registered in this incarnation
    meta_version: int = -1                        # the newest metadata version applied
    polled: tuple | None = None                   # (epoch, HW, LEO) a consumer last polled it at, as leader
    reported: int = -1                            # the fetch offset its last leo-reported row named


class World:
    """See the module docstring. `history` holds the applied actions (with their story text)."""

    def __init__(self, settings: SimSettings | None = None):
        self.settings = s = settings or SimSettings()
        self.config = s.replication_config()
        self.now_ms = 0
        self.controller = ControllerState(session_timeout_ms=s.session_timeout_ms,
                                          unclean_leader_election=s.unclean_leader_election,
                                          eligible_leader_replicas=s.eligible_leader_replicas,
                                          min_insync_replicas=s.min_insync_replicas)
        self.nodes: dict[str, SimNode] = {}
        self._by_id: dict[int, SimNode] = {}
        for i in range(1, s.replicas + 1):
            n = SimNode(f"n{i}", i, MemoryLog())
            n.replica = self._new_replica(n)
            self.nodes[n.name] = n
            self._by_id[i] = n
        self.endpoints: tuple[str, ...] = tuple(self.nodes) + (CONTROLLER,)
        self.in_flight: dict[int, Message] = {}
        self.link_count: dict[tuple[str, str], int] = {}
        self.cuts: set[tuple[str, str]] = set()
        self.acked: list[Ack] = []
        self.parked: list[Parked] = []
        self.outcomes: list[tuple[str, str]] = []     # (value, "acked" | "failed: ..." | "unknown: ...")
        self.history: list[Action] = []
        self.events: list[dict] = []                  # the controller's events, in order
        self.observer = RuleObserver(s, PARTITION)     # the protocol rules (broker/rules), fed as a broker logs
        self._events_seen = 0
        self.next_value = 1
        self._next_msg = 1
        self.meta_waiting: dict[str, int] = {name: 0 for name in self.nodes}   # metadata pushes per node
        # the Action objects enabled() hands out, built once (frozen, so they can be shared)
        self._acts = {name: {k: Action(k, name) for k in (A.PRODUCE, A.SEND, A.HEARTBEAT, A.METADATA,
                                                          A.ALTER_ISR, A.CRASH, A.POWER_LOSS, A.RESTART,
                                                          A.FLUSH, A.CHECKPOINT, A.DAMAGE)}
                      for name in self.nodes}
        for name in self.nodes:
            self._acts[name]["elect-clean"] = Action(A.ELECT, name, arg=0)
            self._acts[name]["elect-unclean"] = Action(A.ELECT, name, arg=1)
        self._link_acts = [((a, b), Action(A.CUT, a, b), Action(A.HEAL, a, b))
                           for a in self.endpoints for b in self.endpoints if a != b]
        self._advance_acts = [Action(A.ADVANCE, arg=ms) for ms in s.advances]
        self._expire_act = Action(A.EXPIRE)
        self._msg_act_cache: dict[int, tuple[Action, Action, Action]] = {}
        # start: every broker registers, the topic is created, every broker learns the metadata
        for n in self.nodes.values():
            n.broker_epoch, ev = self.controller.register_broker(n.broker_id, n.name, 0, 0)
            self.events.extend(ev)
        results, ev = self.controller.create_topics([cm.TopicSpec(TOPIC, 1, s.replicas)])
        if results[0][1] != cm.NONE:                                   # pragma: no cover - setup bug
            raise SimError(f"sim: topic creation failed: {results}")
        self.events.extend(ev)
        ps = self.controller.partition(TOPIC, PARTITION).view()
        for n in self.nodes.values():
            self._apply_metadata(n, ps, self.controller.version, self._fenced())
        self._after_event()

    # --- looking at the state --------------------------------------------------------------------

    def values(self, node: str) -> list[str]:
        log = self.nodes[node].log
        return [r.value.decode() for r in log.read(0, log.leo())]

    def records(self, node: str) -> list[Record]:
        log = self.nodes[node].log
        return log.read(0, log.leo())

    def partition_state(self) -> cm.PartitionState:
        return self.controller.partition(TOPIC, PARTITION).view()

    def leader(self) -> str | None:
        """The leader by the controller (None when it has none)."""
        p = self.controller.partition(TOPIC, PARTITION)
        return None if p.leader is None else self._by_id[p.leader].name

    def leaders(self) -> list[tuple[str, int]]:
        """(node, epoch) of every live replica that believes it leads."""
        return [(n.name, n.replica.leader_epoch) for n in self.nodes.values()
                if n.up and n.replica is not None and n.replica.role == LEADER]

    @property
    def next_msg_id(self) -> int:
        """The id the next message will get (ids are handed out in order, starting at 1)."""
        return self._next_msg

    def link_open(self, src: str, dst: str) -> bool:
        return (src, dst) not in self.cuts

    # --- enabled actions -------------------------------------------------------------------------

    def enabled(self) -> list[Action]:
        """The legal actions now, in a fixed order: produce, send, then deliver / drop / duplicate per
        message (by id), heartbeat, expire, metadata, alter-isr, crash / power-loss / restart, flush,
        checkpoint, elect, cut / heal per link, advance. The Action objects are built once and reused."""
        out: list[Action] = []
        add = out.append
        nodes = list(self.nodes.values())
        lc = self.link_count
        cuts = self.cuts
        acts = self._acts
        for n in nodes:
            r = n.replica
            if r is not None and r.role == LEADER:
                add(acts[n.name][A.PRODUCE])
        for n in nodes:
            if self._can_send(n):
                add(acts[n.name][A.SEND])
        for m in self.in_flight.values():
            link = (m.src, m.dst)
            deliver, drop, dup = self._msg_acts(m.id)
            if link not in cuts:
                add(deliver)
            add(drop)
            if lc.get(link, 0) < LINK_CAP:
                add(dup)
        for n in nodes:
            if n.up and lc.get((n.name, CONTROLLER), 0) < LINK_SEND_CAP:
                add(acts[n.name][A.HEARTBEAT])
        if self._expire_due():
            add(self._expire_act)
        for n in nodes:
            if self._metadata_due(n):
                add(acts[n.name][A.METADATA])
        for n in nodes:
            if self._shrink_due(n):
                add(acts[n.name][A.ALTER_ISR])
        self._add_node_state_acts(nodes, add)
        p = self.controller.partition(TOPIC, PARTITION)
        for n in nodes:
            how = self._elect_how(p, n.broker_id)
            if how is not None:
                add(acts[n.name]["elect-" + how])
        for link, cut, heal in self._link_acts:
            add(heal if link in cuts else cut)
        out.extend(self._advance_acts)
        return out

    def _add_node_state_acts(self, nodes: list[SimNode], add) -> None:
        """Per node: crash / power-loss or restart / damage, then flush, then checkpoint."""
        acts = self._acts
        for n in nodes:
            a = acts[n.name]
            if n.up:
                add(a[A.CRASH])
                if n.flushed < n.log.leo():
                    add(a[A.POWER_LOSS])
            else:
                add(a[A.RESTART])
                if self._damage_allowed(n):
                    add(a[A.DAMAGE])
        for n in nodes:
            if n.up and n.flushed < n.log.leo():
                add(acts[n.name][A.FLUSH])
        for n in nodes:
            r = n.replica
            if r is not None and n.hw_checkpoint != r.hw:
                add(acts[n.name][A.CHECKPOINT])

    def _msg_acts(self, msg_id: int) -> tuple[Action, Action, Action]:
        got = self._msg_act_cache.get(msg_id)
        if got is None:
            got = (Action(A.DELIVER, msg=msg_id), Action(A.DROP, msg=msg_id), Action(A.DUPLICATE, msg=msg_id))
            self._msg_act_cache[msg_id] = got
        return got

    def is_enabled(self, action: Action) -> bool:
        k, n = action.kind, self.nodes.get(action.node) if action.node is not None else None
        if k == A.ADVANCE:
            return isinstance(action.arg, int) and action.arg > 0
        if k == A.EXPIRE:
            return self._expire_due()
        if k in (A.DELIVER, A.DROP, A.DUPLICATE):
            m = self.in_flight.get(action.msg)  # type: ignore[arg-type]
            if m is None:
                return False
            if k == A.DELIVER:
                return (m.src, m.dst) not in self.cuts
            if k == A.DUPLICATE:
                return self.link_count.get((m.src, m.dst), 0) < LINK_CAP
            return True
        if k in (A.CUT, A.HEAL):
            a, b = action.node, action.peer
            if a not in self.endpoints or b not in self.endpoints or a == b:
                return False
            return ((a, b) in self.cuts) == (k == A.HEAL)
        if n is None:
            return False
        r = n.replica
        if k == A.PRODUCE:
            return n.up and r is not None and r.role == LEADER
        if k == A.SEND:
            return self._can_send(n)
        if k == A.HEARTBEAT:
            return n.up and self.link_count.get((n.name, CONTROLLER), 0) < LINK_SEND_CAP
        if k == A.METADATA:
            return self._metadata_due(n)
        if k == A.ALTER_ISR:
            return self._shrink_due(n)
        if k == A.CRASH:
            return n.up
        if k == A.POWER_LOSS:
            return n.up and n.flushed < n.log.leo()
        if k == A.RESTART:
            return not n.up
        if k == A.DAMAGE:
            return self._damage_allowed(n)
        if k == A.FLUSH:
            return n.up and n.flushed < n.log.leo()
        if k == A.CHECKPOINT:
            return n.up and r is not None and n.hw_checkpoint != r.hw
        if k == A.ELECT:
            how = self._elect_how(self.controller.partition(TOPIC, PARTITION), n.broker_id)
            return how is not None and (how == "unclean") == bool(action.arg)
        return False

    def _can_send(self, n: SimNode) -> bool:
        r = n.replica
        if not n.up or r is None or r.role != FOLLOWER or r.leader_id is None:
            return False
        if r.follower_phase not in ("truncating", "fetching"):
            return False
        leader = self._by_id[r.leader_id].name
        lc = self.link_count
        return lc.get((n.name, leader), 0) + lc.get((leader, n.name), 0) < LINK_SEND_CAP

    def _expire_due(self) -> bool:
        t, limit = self.now_ms, self.controller.session_timeout_ms
        return any(not b.fenced and t - b.last_heartbeat_ms > limit for b in self.controller.brokers.values())

    def _metadata_due(self, n: SimNode) -> bool:
        return (n.up and n.broker_epoch is not None and n.meta_version < self.controller.version
                and self.meta_waiting[n.name] == 0
                and self.link_count.get((CONTROLLER, n.name), 0) < LINK_SEND_CAP)

    def _shrink_due(self, n: SimNode) -> bool:
        return n.up and n.replica is not None and n.replica.isr_shrink_due(self.now_ms)

    def _damage_allowed(self, n: SimNode) -> bool:
        """A storage fault may strike `n` (see the module docstring): it is down with a record to lose,
        the controller has fenced it and keeps it out of the ISR and the ELR, and no ISR expansion that
        names it is pending at a leader or on its way to the controller (one made before its crash could
        still be accepted after its restart, with the cut log: KIP-903's stale-broker-epoch case)."""
        if n.up or n.log.leo() <= n.log.log_start() or self.controller.is_live(n.broker_id):
            return False
        p = self.controller.partition(TOPIC, PARTITION)
        bid = n.broker_id
        if bid in p.isr or bid in p.elr or p.leader == bid:
            return False
        for other in self.nodes.values():
            pending = other.replica.pending_isr_proposal if other.replica is not None else None
            if pending is not None and bid in pending.isr:
                return False
        for m in self.in_flight.values():
            if m.kind == "alter-isr" and bid in m.body[0].isr:
                return False
        return True

    def _elect_how(self, p, broker_id: int) -> str | None:
        """"clean" / "unclean" when an admin election of the broker would change the leader, else None.
        Unclean admin elections are offered only with unclean_leader_election set."""
        if p.leader == broker_id or not self.controller.is_live(broker_id):
            return None
        if broker_id in p.isr or (self.settings.eligible_leader_replicas and broker_id in p.elr):
            return "clean"
        if self.settings.unclean_leader_election:
            return "unclean"
        return None

    # --- applying ----------------------------------------------------------------------------------

    def apply(self, action: Action) -> Action:
        """Apply an enabled action; returns it with its story line (also appended to `history`).
        Raises SimError when the action is not enabled now."""
        if not self.is_enabled(action):
            raise SimError(f"sim: action not enabled: {action.short()}")
        text = getattr(self, "_do_" + action.kind.replace("-", "_"))(action)
        self._after_event()
        done = action.with_text(text)
        self.history.append(done)
        return done

    def run(self, actions) -> "World":
        for a in actions:
            self.apply(a)
        return self

    def _do_produce(self, a: Action) -> str:
        n = self.nodes[a.node]
        r = n.replica
        value = f"v{self.next_value}"
        self.next_value += 1
        acks_text = str(self.settings.acks)
        acks = wire_acks(self.settings.acks)
        res = r.produce([value.encode()], acks=acks, now_ms=self.now_ms)
        if res.error is None and res.complete and acks != 0:
            # flush "always" is modelled as the group commit finishing within this step, before the answer
            flushed = n.log.leo() if self.settings.flush == "always" else n.flushed
            self.observer.ack(n.name, Acked(res.base_offset, res.last_offset, res.epoch, acks, res.hw, res.isr,
                                            self.settings.min_insync_replicas, flushed))
        if res.error is not None and res.base_offset < 0:
            self.outcomes.append((value, f"failed: {res.error}"))
            return f"{n.name} appends {value} (acks={acks_text}): refused, {res.error}"
        if acks == 0:
            self.outcomes.append((value, "sent (acks=0)"))
            return f"{n.name} appends {value} (acks=0) at offset {res.base_offset}: the client hears nothing"
        if acks == 1:
            self._told_acked(Ack(value, res.base_offset, res.epoch, n.name))
            return f"{n.name} appends {value} (acks={acks_text}): acknowledged at offset {res.base_offset}"
        if res.complete:
            self._told_acked(Ack(value, res.base_offset, res.epoch, n.name))
            return f"{n.name} appends {value} (acks=all): acknowledged at offset {res.base_offset}"
        self.parked.append(Parked(value, n.name, res.last_offset, res.epoch))
        return f"{n.name} appends {value} (acks=all) at offset {res.base_offset}: waiting for the HW"

    def _told_acked(self, ack: Ack) -> None:
        """The client hears that its write succeeded (a `sent` row for the rules)."""
        self.acked.append(ack)
        self.outcomes.append((ack.value, "acked"))
        self.observer.sent(ack.offset, ack.value, ack.epoch)

    def _do_send(self, a: Action) -> str:
        n = self.nodes[a.node]
        r = n.replica
        req = r.next_follower_request()
        leader = self._by_id[req.leader_id].name
        if isinstance(req, EpochRequest):
            self._send("epoch", n.name, leader, req, n.inc)
            return f"{n.name} asks {leader} where epoch {req.requested_epoch} ends (OffsetsForLeaderEpoch)"
        if req.fetch_offset != n.reported:
            n.reported = req.fetch_offset
            self.observer.leo_reported(n.name, req.fetch_offset, n.flushed, req.current_leader_epoch)
        self._send("fetch", n.name, leader, req, n.inc)
        return f"{n.name} sends {leader} a fetch from offset {req.fetch_offset} (epoch {req.current_leader_epoch})"

    def _do_deliver(self, a: Action) -> str:
        m = self._take(a.msg)
        text = f"deliver #{m.id}: " + m.describe(self)
        note = self._deliver(m)
        return text + (f": {note}" if note else "")

    def _do_drop(self, a: Action) -> str:
        m = self._take(a.msg)
        return f"drop #{m.id}: " + m.describe(self).replace(" reaches ", " never reaches ", 1)

    def _do_duplicate(self, a: Action) -> str:
        m = self.in_flight[a.msg]
        copy = self._send(m.kind, m.src, m.dst, m.body, m.inc)
        return f"duplicate #{m.id} as #{copy.id}: " + m.describe(self).split(" reaches ")[0]

    def _do_heartbeat(self, a: Action) -> str:
        """A registered broker's heartbeat; a broker not registered yet (its registration was lost)
        asks to register again instead, as the broker's start-up loop retries."""
        n = self.nodes[a.node]
        if n.broker_epoch is None:
            self._send("register", n.name, CONTROLLER, None, n.inc)
            return f"{n.name} asks the controller to register it again"
        self._send("heartbeat", n.name, CONTROLLER, n.broker_epoch, n.inc)
        return f"{n.name} sends a heartbeat (broker epoch {n.broker_epoch})"

    def _do_expire(self, a: Action) -> str:
        before = self.controller.version
        ev = self.controller.expire_sessions(self.now_ms)
        self.events.extend(ev)
        fenced = [f"n{e['broker']}" for e in ev if e["event"] == "fenced"]
        self._controller_changed(before)
        return f"the controller fences {', '.join(fenced)} (no heartbeat for over {self.settings.session_timeout_ms} ms)" \
            + self._leader_note(ev)

    def _do_metadata(self, a: Action) -> str:
        n = self.nodes[a.node]
        ps = self.partition_state()
        self._send("metadata", CONTROLLER, n.name, (ps, self.controller.version, self._fenced()), n.inc)
        return f"the controller sends {n.name} metadata v{self.controller.version}"

    def _do_alter_isr(self, a: Action) -> str:
        n = self.nodes[a.node]
        proposal = n.replica.maybe_shrink_isr(self.now_ms)
        if proposal is None:                           # pragma: no cover - _shrink_due said otherwise
            return f"{n.name}'s ISR timer: nothing to shrink"
        self._send("alter-isr", n.name, CONTROLLER, (proposal, n.broker_epoch), n.inc)
        return f"{n.name} proposes ISR {_names(proposal.isr)} (shrink) to the controller"

    def _do_crash(self, a: Action) -> str:
        self._down(self.nodes[a.node])
        return f"{a.node} is killed (SIGKILL): its log stays as it is"

    def _do_power_loss(self, a: Action) -> str:
        n = self.nodes[a.node]
        cut = n.flushed
        self._down(n)
        n.log.truncate_to(cut)
        return f"{n.name} loses power: the unflushed tail from offset {cut} is gone"

    def _do_damage(self, a: Action) -> str:
        n = self.nodes[a.node]
        cut = n.log.leo() - 1
        n.log.truncate_to(cut)
        n.flushed = min(n.flushed, cut)
        self.observer.damaged(n.name, cut)
        return (f"{n.name}'s disk loses the last record of its log (offset {cut}) while it is down: its "
                f"recovery will cut the log there (HW checkpoint {n.hw_checkpoint})")

    def _do_restart(self, a: Action) -> str:
        n = self.nodes[a.node]
        n.up = True
        n.inc += 1
        n.broker_epoch, n.meta_version = None, -1
        n.replica = self._new_replica(n)
        self.observer.restart(n.name, n.replica.leo, n.replica.hw)
        self._send("register", n.name, CONTROLLER, None, n.inc)
        return (f"{n.name} restarts (LEO {n.log.leo()}, HW checkpoint {n.hw_checkpoint}) "
                f"and asks the controller to register it")

    def _do_cut(self, a: Action) -> str:
        self.cuts.add((a.node, a.peer))
        return f"cut {a.node} -> {a.peer}: messages that way stop arriving"

    def _do_heal(self, a: Action) -> str:
        self.cuts.discard((a.node, a.peer))
        return f"heal {a.node} -> {a.peer}"

    def _do_advance(self, a: Action) -> str:
        self.now_ms += a.arg
        return f"{a.arg} ms pass (now {self.now_ms} ms)"

    def _do_elect(self, a: Action) -> str:
        n = self.nodes[a.node]
        before = self.controller.version
        res, ev = self.controller.elect_leader(TOPIC, PARTITION, broker=n.broker_id, unclean=bool(a.arg))
        self.events.extend(ev)
        self._controller_changed(before)
        kind = "unclean " if a.arg else ""
        if res.error != cm.NONE:                       # pragma: no cover - _elect_how said otherwise
            return f"admin {kind}election of {n.name} refused: {res.error}"
        return f"admin {kind}election: {n.name} leads epoch {res.leader_epoch}, ISR {_names(res.isr)}"

    def _do_flush(self, a: Action) -> str:
        n = self.nodes[a.node]
        n.flushed = n.log.leo()
        return f"{n.name} flushes its log up to offset {n.flushed}"

    def _do_checkpoint(self, a: Action) -> str:
        n = self.nodes[a.node]
        n.hw_checkpoint = n.replica.hw
        return f"{n.name} writes its HW checkpoint: {n.hw_checkpoint}"

    # --- delivery ----------------------------------------------------------------------------------

    def _deliver(self, m: Message) -> str:
        k = m.kind
        if m.dst == CONTROLLER:
            return self._deliver_to_controller(m)
        n = self.nodes[m.dst]
        r = n.replica
        if not n.up or r is None:
            return f"{n.name} is down: lost"
        if k == "fetch":
            req: FetchRequest = m.body
            resp = r.handle_fetch(req.replica_id, req.fetch_offset, req.current_leader_epoch, self.now_ms,
                                  req.max_records)
            self._answer("fetch-answer", m, (req, resp))
            return f"HW {r.hw}" if resp.error is None else str(resp.error)
        if k == "epoch":
            ereq: EpochRequest = m.body
            eresp = r.handle_offsets_for_leader_epoch(ereq.requested_epoch, ereq.current_leader_epoch,
                                                      ereq.replica_id)
            self._answer("epoch-answer", m, (ereq, eresp))
            return ""
        if k == "fetch-answer":
            freq, fresp = m.body
            leo = r.leo
            if not r.on_fetch_response(freq, fresp):
                return "stale, ignored"
            return f"{n.name} LEO {leo}->{r.leo}, HW {r.hw}"
        if k == "epoch-answer":
            ereq, eresp = m.body
            leo = r.leo
            if not r.on_epoch_response(ereq, eresp):
                return "stale, ignored"
            return f"{n.name} truncates to {r.leo}" if r.leo < leo else f"{n.name} keeps its log (LEO {leo})"
        if k == "metadata":
            ps, version, fenced = m.body
            if version <= n.meta_version:
                return "older than what it has, ignored"
            self._apply_metadata(n, ps, version, fenced)
            return f"{n.name} is {r.role} of epoch {r.leader_epoch}"
        if k == "alter-isr-answer":
            proposal, res = m.body
            self._isr_answer(n, proposal, res)
            return ""
        raise AssertionError(k)                        # pragma: no cover

    def _deliver_to_controller(self, m: Message) -> str:
        ctl = self.controller
        before = ctl.version
        n = self.nodes[m.src]
        ev: list[dict] = []
        note = ""
        if m.kind == "heartbeat":
            err, ev = ctl.heartbeat(n.broker_id, m.body, self.now_ms)
            note = "" if err == cm.NONE else err
            if err == cm.STALE_BROKER_EPOCH and n.up and n.inc == m.inc and n.broker_epoch == m.body:
                n.broker_epoch = None           # as broker/server/controller_link.py: register again
                note += ": it will register again"
        elif m.kind == "register":
            epoch, ev = ctl.register_broker(n.broker_id, n.name, 0, self.now_ms, clean_shutdown=False)
            if n.up and n.inc == m.inc:
                n.broker_epoch = epoch                 # the answer (simplified: it always arrives)
            note = f"broker epoch {epoch}"
        elif m.kind == "alter-isr":
            proposal, broker_epoch = m.body
            res, ev = ctl.alter_isr(cm.AlterIsr(proposal.topic, proposal.partition, proposal.leader_id,
                                                proposal.leader_epoch, proposal.based_on_version,
                                                tuple(proposal.isr), broker_epoch))
            if n.up and n.inc == m.inc:
                self._send("alter-isr-answer", CONTROLLER, n.name, (proposal, res), n.inc)
            note = res.error if res.error != cm.NONE else f"ISR {_names(res.isr)} v{res.isr_version}"
        else:                                           # pragma: no cover
            raise AssertionError(m.kind)
        self.events.extend(ev)
        self._controller_changed(before)
        return note + self._leader_note(ev)

    def _isr_answer(self, n: SimNode, proposal: IsrProposal, res: cm.AlterIsrResult) -> None:
        """As broker/server/partitions.py: accepted -> on_isr_changed; refused -> the proposal failed,
        and a newer ISR for our own leadership in the answer is taken."""
        r = n.replica
        if res.error == cm.NONE:
            if r.role == LEADER and r.leader_epoch == res.leader_epoch and n.broker_id in res.isr:
                r.on_isr_changed(res.isr, res.isr_version, self.now_ms)
            else:
                r.on_isr_proposal_failed(proposal)
            return
        r.on_isr_proposal_failed(proposal)
        if (res.leader == n.broker_id and res.leader_epoch == r.leader_epoch and r.role == LEADER
                and n.broker_id in res.isr):
            r.on_isr_changed(res.isr, res.isr_version, self.now_ms)

    def _apply_metadata(self, n: SimNode, ps: cm.PartitionState, version: int, fenced: tuple[int, ...]) -> None:
        """As broker/server/partitions.py apply_metadata for one partition (fenced brokers first:
        KIP-841, they are not proposed for the ISR)."""
        n.meta_version = version
        r = n.replica
        r.set_fenced_brokers(fenced)
        me = n.broker_id
        try:
            if ps.leader == me:
                r.become_leader(ps.leader_epoch, ps.isr, ps.replicas, ps.isr_version, self.now_ms)
            elif ps.leader is not None and me in ps.replicas:
                if r.become_follower(ps.leader_epoch, ps.leader, self.now_ms, isr=ps.isr) is None:
                    r.on_isr_changed(ps.isr, ps.isr_version, self.now_ms)
            elif r.role != "none" and ps.leader_epoch >= r.leader_epoch:
                r.become_none()
        except ValueError:
            pass                                        # inconsistent metadata: wait for the next one

    # --- internals ---------------------------------------------------------------------------------

    def _new_replica(self, n: SimNode) -> PartitionReplica:
        r = PartitionReplica(TOPIC, PARTITION, n.broker_id, n.log, self.config,
                             checkpoints=Checkpoints(hw=n.hw_checkpoint, epoch_entries=n.epoch_checkpoint))
        return r

    def _send(self, kind: str, src: str, dst: str, body: Any, inc: int) -> Message:
        m = Message(self._next_msg, kind, src, dst, body, inc)
        self._next_msg += 1
        self.in_flight[m.id] = m
        key = (src, dst)
        self.link_count[key] = self.link_count.get(key, 0) + 1
        if kind == "metadata":
            self.meta_waiting[dst] += 1
        return m

    def _take(self, msg_id: int) -> Message:
        m = self.in_flight.pop(msg_id)
        key = (m.src, m.dst)
        self.link_count[key] -= 1
        self._msg_act_cache.pop(msg_id, None)
        if m.kind == "metadata":
            self.meta_waiting[m.dst] -= 1
        return m

    def _answer(self, kind: str, request: Message, body: Any) -> None:
        """The answer to `request` goes back to the node that sent it, if that incarnation still runs."""
        n = self.nodes[request.src]
        if n.up and n.inc == request.inc:
            self._send(kind, request.dst, request.src, body, n.inc)

    def _down(self, n: SimNode) -> None:
        n.up = False
        n.replica = None
        n.broker_epoch = None
        for mid in [mid for mid, m in self.in_flight.items() if n.name in (m.dst, m.src)]:
            self._take(mid)                             # its connections are reset: nothing it sent arrives later
        for p in [p for p in self.parked if p.node == n.name]:
            self.parked.remove(p)
            self.outcomes.append((p.value, "unknown: leader crashed"))

    def _controller_changed(self, before: int) -> None:
        """Push the new metadata to every registered live broker (at most METADATA_CAP per link)."""
        version = self.controller.version
        if version == before:
            return
        ps = self.partition_state()
        fenced = self._fenced()
        for n in self.nodes.values():
            if not n.up or n.broker_epoch is None:
                continue
            if self.meta_waiting[n.name] >= METADATA_CAP:
                oldest = next(m.id for m in self.in_flight.values() if m.kind == "metadata" and m.dst == n.name)
                self._take(oldest)                      # superseded by the newer push
            self._send("metadata", CONTROLLER, n.name, (ps, version, fenced), n.inc)

    def _fenced(self) -> tuple[int, ...]:
        return tuple(sorted(b for b, st in self.controller.brokers.items() if st.fenced))

    def _leader_note(self, ev: list[dict]) -> str:
        for e in ev:
            if e["event"] == "leader-change":
                return f"; leader {_name(e['leader'])}, epoch {e['epoch']}, ISR {_names(e['isr'])}"
        return ""

    def _poll(self, n: SimNode, r: PartitionReplica) -> None:
        """A consumer polls a leader from just below its HW, as a consumer near the end of the log does,
        and the rules check what it was given (read-uncommitted: below the HW the poll reports and below
        every HW a leader has had). Only when the leader's epoch, HW or LEO moved since its last poll (the
        same poll again reads the same records). It changes nothing in the world, so schedules stay as
        they were."""
        key = (r.leader_epoch, r.hw, r.leo)
        if n.polled == key:
            return
        n.polled = key
        read = r.read_for_consumer(max(r.log.log_start(), r.hw - 1), POLL_RECORDS, r.leader_epoch)
        if read.error is None and read.records:
            self.observer.read(read.records[-1].offset, read.high_watermark, read.leader_epoch)

    def _observe_controller(self) -> None:
        """Hand the controller's events logged since the last call to the rules."""
        if self._events_seen < len(self.events):
            self.observer.controller_events(self.events[self._events_seen:])
            self._events_seen = len(self.events)

    def _after_event(self) -> None:
        """What the shells do after every step: send ISR proposals made while handling a fetch, write
        epoch checkpoints (before acknowledging), flush (flush "always"), re-check parked acks=all
        produces, and let a consumer poll each leader around its HW (`_poll`)."""
        always = self.settings.flush == "always"
        auto_hw = self.settings.auto_checkpoint_hw
        self._observe_controller()
        for n in self.nodes.values():
            r = n.replica
            if not n.up or r is None:
                continue
            leo = n.log.leo()
            if always or n.flushed > leo:
                n.flushed = leo
            self.observer.replica_events(n.name, r.drain_events(), n.flushed if always else None)
            entries = r.epoch_checkpoint_due()
            if entries is not None:
                n.epoch_checkpoint = entries
            if auto_hw:
                n.hw_checkpoint = r.hw
            if r.role == LEADER:
                proposal = r.take_isr_proposal()
                if proposal is not None:
                    self._send("alter-isr", n.name, CONTROLLER, (proposal, n.broker_epoch), n.inc)
                self._poll(n, r)
        if self.parked:
            for p in list(self.parked):
                n = self.nodes[p.node]
                st = n.replica.produce_status(p.offset, p.epoch)
                if st.state == "complete":
                    self.observer.ack(p.node, Acked(p.offset, p.offset, p.epoch, -1, st.hw, st.isr,
                                                    self.settings.min_insync_replicas, n.flushed))
                    self.parked.remove(p)
                    self._told_acked(Ack(p.value, p.offset, p.epoch, p.node))
                elif st.state == "failed":
                    self.parked.remove(p)
                    self.outcomes.append((p.value, ("unknown: " if str(st.error) == "NOT_LEADER" else "failed: ")
                                          + str(st.error)))

    # --- settling ----------------------------------------------------------------------------------

    def settle(self, max_rounds: int = 200) -> None:
        """Heal every link, restart every node, and let messages flow (no time passes) until nothing
        changes: the state the end-of-schedule loss check looks at. Applied through `apply`, so the
        steps appear in `history`."""
        for a, b in sorted(self.cuts):
            self.apply(Action(A.HEAL, a, b))
        for n in self.nodes.values():
            if not n.up:
                self.apply(Action(A.RESTART, n.name))
        stable = 0
        last = None
        for _ in range(max_rounds):
            while self.in_flight:
                self.apply(Action(A.DELIVER, msg=next(iter(self.in_flight))))
            for n in self.nodes.values():
                if self._needs_heartbeat(n) and self.is_enabled(Action(A.HEARTBEAT, n.name)):
                    self.apply(Action(A.HEARTBEAT, n.name))
                for kind in (A.METADATA, A.SEND):
                    act = Action(kind, n.name)
                    if self.is_enabled(act):
                        self.apply(act)
            if self.leader() is None:
                for n in self.nodes.values():
                    act = Action(A.ELECT, n.name, arg=0)
                    if self.is_enabled(act):
                        self.apply(act)
                        break
            fp = self._fingerprint()
            stable = stable + 1 if fp == last else 0
            last = fp
            if stable >= 3:
                break
        while self.in_flight:                           # the last round's requests and their answers
            self.apply(Action(A.DELIVER, msg=next(iter(self.in_flight))))

    def _needs_heartbeat(self, n: SimNode) -> bool:
        if n.broker_epoch is None:
            return not any(m.kind == "register" and m.src == n.name and m.inc == n.inc
                           for m in self.in_flight.values())
        b = self.controller.brokers.get(n.broker_id)
        return b is not None and (b.fenced or b.last_heartbeat_ms < self.now_ms)

    def _fingerprint(self) -> tuple:
        return (self.controller.version, len(self.acked), len(self.parked),
                tuple((n.up, n.log.leo(), n.replica.hw if n.replica else -1,
                       n.replica.role if n.replica else "", n.replica.follower_phase if n.replica else "")
                      for n in self.nodes.values()))
