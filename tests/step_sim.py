"""A deterministic step-by-step simulator of 2-3 replicas of one partition, for the scenario tests of the
replication core (tests/broker): each test plays the exact sequence of calls. The explorer's world model
is the top-level `simulator` package; this older driver stays a test helper.

It plays the network (one fetch or OffsetsForLeaderEpoch exchange per `fetch_round`, optionally with
the answer lost), the disks (a flushed prefix per node; HW and epoch checkpoints) and the clock
(`advance`). The controller is the real one, `broker.controller.state.ControllerState` (`controller`):
`start` creates the topic with it, `elect` is its ELECT_LEADER (`elect_leader`), ISR proposals go
through its `alter_isr`, and `epoch`, `leader`, `isr` and `isr_version` read its partition record.
The brokers are registered once and never fenced (the simulator tells replicas about elections
itself), so where the old rule "a clean election keeps the live ISR members" needs it, dead members
leave the ISR by an `alter_isr` on the new leader's behalf right after the election; re-electing the
current leader changes nothing (the controller's answer), where the old simulator bumped the epoch. Nothing is random: a scenario
is the exact sequence of calls. It also remembers which values were acknowledged, so a test can ask
which acknowledged values a replica lost (`lost_acked`) and where replicas disagree (`divergence`).
A node cut off from the controller (`cut_from_controller`) misses elections but keeps talking to the
leader it knew, a zombie fetcher (KAFKA-6880), until `reconnect_to_controller`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from broker.controller import messages as cm
from broker.controller.state import ControllerState, PartitionRecord
from broker.records import MemoryLog, Record
from broker.replication.config import ReplicationConfig
from broker.replication.events import Event
from broker.replication.messages import (
    EpochRequest, EpochResponse, FetchRequest, FetchResponse, IsrProposal,
)
from broker.replication.errors import ErrorCode
from broker.replication.replica import Checkpoints, PartitionReplica


class SimError(RuntimeError):
    """The scenario asked for something impossible (a down node, a clean election outside the ISR, ...)."""


@dataclass
class ProduceOutcome:
    """status: "acked", "failed" (certainly not written, or written but the producer was told it failed),
    "pending" (acks=all, waiting for the HW) or "unknown" (the leader went away while waiting)."""
    node: str
    values: tuple[str, ...]
    acks: int
    status: str
    error: str | None = None
    base_offset: int = -1
    last_offset: int = -1
    epoch: int = -1


@dataclass
class Round:
    kind: str                                    # "fetch" or "epoch"
    request: FetchRequest | EpochRequest
    response: FetchResponse | EpochResponse
    delivered: bool


@dataclass
class SimNode:
    name: str
    broker_id: int
    log: MemoryLog
    replica: PartitionReplica | None = None
    up: bool = True
    flushed: int = 0                             # records [0, flushed) survive a power loss
    auto_flush: bool = True
    hw_checkpoint: int = 0
    epoch_checkpoint: list[tuple[int, int]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


class Sim:
    def __init__(self, nodes: Sequence[str] = ("A", "B"), config: ReplicationConfig | None = None, *,
                 topic: str = "t", partition: int = 0, auto_checkpoint_hw: bool = True,
                 isr_decisions: str = "immediate"):
        """isr_decisions: "immediate" (the controller answers an ISR proposal at once) or "queued"
        (proposals wait in `queued_proposals` until `decide_isr()`, like an AlterPartition in flight)."""
        if isr_decisions not in ("immediate", "queued"):
            raise SimError(f"sim: isr_decisions must be 'immediate' or 'queued', got {isr_decisions!r}")
        self.isr_decisions = isr_decisions
        self.queued_proposals: list[IsrProposal] = []
        if len(set(nodes)) != len(nodes) or not nodes:
            raise SimError(f"sim: node names must be distinct and non-empty, got {list(nodes)}")
        self.config = config or ReplicationConfig()
        self.topic, self.partition = topic, partition
        self.auto_checkpoint_hw = auto_checkpoint_hw
        self.now_ms = 0
        self.nodes: dict[str, SimNode] = {}
        for i, name in enumerate(nodes, start=1):
            n = SimNode(name, i, MemoryLog())
            n.replica = self._new_replica(n)
            self.nodes[name] = n
        # the real controller state machine; brokers register now, the topic is created by start()
        self.controller = ControllerState(min_insync_replicas=self.config.min_insync_replicas,
                                          session_timeout_ms=2 ** 62)
        for n in self.nodes.values():
            self.controller.register_broker(n.broker_id, n.name, 0, self.now_ms)
        self.acked: list[tuple[str, int]] = []          # (value, offset), in acknowledgement order
        self.outcomes: list[ProduceOutcome] = []
        self._pending: list[ProduceOutcome] = []
        self.cut_off: set[str] = set()                  # nodes that do not hear from the controller

    # --- the controller's view of the partition ---------------------------------------------------

    def _partition(self) -> PartitionRecord | None:
        return self.controller.partition(self.topic, self.partition)

    @property
    def epoch(self) -> int:
        p = self._partition()
        return -1 if p is None else p.leader_epoch

    @property
    def leader(self) -> str | None:
        p = self._partition()
        return None if p is None or p.leader is None else self._by_id(p.leader).name

    @property
    def isr(self) -> set[str]:
        p = self._partition()
        return set() if p is None else {self._by_id(i).name for i in p.isr}

    @property
    def isr_version(self) -> int:
        p = self._partition()
        return 0 if p is None else p.isr_version

    # --- clock, controller ----------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def start(self, leader: str, isr: Iterable[str] | None = None) -> None:
        """Epoch 0: the controller creates the topic with `leader` leading, every other node follows,
        ISR = all nodes unless given (then an ISR change of epoch 0, version 1)."""
        if self.epoch >= 0:
            raise SimError("sim: already started")
        n = self._up(leader)
        ids = self._ids(self.nodes)
        results, _ = self.controller.create_topics([cm.TopicSpec(self.topic, self.partition + 1, len(ids))])
        if results[0][1] != cm.NONE:
            raise SimError(f"sim: the controller refused the topic: {results[0][1]} {results[0][2]}")
        p = self._partition()
        assert p is not None
        if p.leader != n.broker_id:
            # the controller places the first replica as leader; put `leader` first in the replica
            # order and reload the controller from its durable form (state.py's to_dict / from_dict)
            d = self.controller.to_dict()
            rec = d["topics"][0]["partitions"][self.partition]
            rec["replicas"] = [n.broker_id] + [r for r in rec["replicas"] if r != n.broker_id]
            rec["isr"] = list(rec["replicas"])
            rec["leader"] = n.broker_id
            self.controller = ControllerState.from_dict(d, now_ms=self.now_ms, session_timeout_ms=2 ** 62,
                                                        min_insync_replicas=self.config.min_insync_replicas)
        if isr is not None:
            self._set_isr(set(isr) | {leader})
        self._announce()

    def elect(self, node: str, isr: Iterable[str] | None = None, unclean: bool = False) -> None:
        """Elect `node` through the controller's ELECT_LEADER: epoch + 1, ISR = the old ISR's live
        members (clean) or just `node` (unclean), unless `isr` is given. Every live node learns the new
        leader."""
        n = self._up(node)
        if node in self.cut_off:
            raise SimError(f"sim: {node} is cut off from the controller and cannot be told it leads")
        if isr is None and not unclean and node not in self.isr:
            raise SimError(f"sim: clean election of {node} impossible, ISR is {sorted(self.isr)}")
        clean = node in self.isr
        if self.leader == node:
            self._bump_epoch()
        else:
            res, _ = self.controller.elect_leader(self.topic, self.partition, broker=n.broker_id,
                                                  unclean=unclean or (isr is not None and not clean))
            if res.error != cm.NONE:
                raise SimError(f"sim: the controller refused to elect {node}: {res.error} {res.message}")
        if isr is not None:
            want = set(isr) | {node}
        elif unclean and not clean:
            want = {node}
        elif unclean:
            want = {node}
        else:
            want = {m for m in self.isr if self.nodes[m].up} | {node}
        if want != self.isr:
            self._set_isr(want)
        self._announce()

    def _bump_epoch(self) -> None:
        """Re-electing the current leader: ControllerState has no operation for a new epoch of the same
        leader (its ELECT_LEADER answers "already leads"), so the controller is reloaded from its durable
        form with the epoch and ISR version one higher, as a controller failover that re-announces the
        leader in a new epoch would leave it. The one place the simulator edits controller state."""
        d = self.controller.to_dict()
        for t in d["topics"]:
            if t["name"] == self.topic:
                rec = t["partitions"][self.partition]
                rec["leader_epoch"] += 1
                rec["isr_version"] += 1
        d["version"] += 1
        self.controller = ControllerState.from_dict(d, now_ms=self.now_ms, session_timeout_ms=2 ** 62,
                                                    min_insync_replicas=self.config.min_insync_replicas)

    def _set_isr(self, names: set[str]) -> None:
        """The ISR becomes `names` by an AlterIsr on the current leader's behalf."""
        p = self._partition()
        assert p is not None and p.leader is not None
        res, _ = self.controller.alter_isr(cm.AlterIsr(self.topic, self.partition, p.leader, p.leader_epoch,
                                                       p.isr_version, tuple(self._ids(names))))
        if res.error != cm.NONE:
            raise SimError(f"sim: the controller refused ISR {sorted(names)}: {res.error} {res.message}")

    def _announce(self) -> None:
        """Every live node not cut off learns the controller's leader, epoch and ISR."""
        p = self._partition()
        assert p is not None and p.leader is not None
        lead = self._by_id(p.leader)
        now = self.now_ms
        if lead.up and lead.replica is not None and lead.name not in self.cut_off:
            lead.replica.become_leader(p.leader_epoch, p.isr, p.replicas, p.isr_version, now)
        for m in self.nodes.values():
            if m.up and m.name != lead.name and m.name not in self.cut_off:
                assert m.replica is not None
                m.replica.become_follower(p.leader_epoch, lead.broker_id, now, isr=p.isr)
        self._after_step()

    def cut_from_controller(self, node: str) -> None:
        """`node` stops hearing about elections (it keeps its role, epoch and leader, and still reaches
        the other nodes: the zombie fetcher of KAFKA-6880)."""
        self._up(node)
        self.cut_off.add(node)

    def reconnect_to_controller(self, node: str) -> None:
        """`node` hears from the controller again and learns the current leader and epoch."""
        n = self._up(node)
        self.cut_off.discard(node)
        assert n.replica is not None
        if self.leader is not None and self.leader != node and self.nodes[self.leader].up:
            n.replica.become_follower(self.epoch, self.nodes[self.leader].broker_id, self.now_ms,
                                      isr=self._ids(self.isr))
        self._after_step()

    def clean_leader_candidates(self) -> list[str]:
        return sorted(m for m in self.isr if self.nodes[m].up and m != self.leader)

    # --- client ----------------------------------------------------------------------------------

    def produce(self, node: str, values: Sequence[str] | str, acks: int = 1) -> ProduceOutcome:
        n = self._up(node)
        vals = (values,) if isinstance(values, str) else tuple(values)
        assert n.replica is not None
        res = n.replica.produce([v.encode() for v in vals], acks=acks, now_ms=self.now_ms)
        out = ProduceOutcome(node, vals, acks, "pending", res.error, res.base_offset, res.last_offset, res.epoch)
        self.outcomes.append(out)
        if res.error is not None:
            out.status = "failed"
        elif res.complete:
            self._ack(out)
        else:
            self._pending.append(out)
        self._after_step()
        return out

    # --- replication -----------------------------------------------------------------------------

    def fetch_round(self, node: str, deliver: bool = True, max_records: int | None = None) -> Round:
        """One request from `node` to its leader and (unless deliver=False: the answer is lost) the
        answer back. The request is an OffsetsForLeaderEpoch while the follower is truncating."""
        n = self._up(node)
        assert n.replica is not None
        req = n.replica.next_follower_request()
        if req is None:
            raise SimError(f"sim: {node} has nothing to send (role {n.replica.role}, phase {n.replica.follower_phase})")
        leader = self._by_id(req.leader_id)
        if not leader.up or leader.replica is None:
            raise SimError(f"sim: {node}'s leader {leader.name} is down")
        if isinstance(req, EpochRequest):
            resp: FetchResponse | EpochResponse = leader.replica.handle_offsets_for_leader_epoch(
                req.requested_epoch, req.current_leader_epoch, req.replica_id)
            if deliver:
                n.replica.on_epoch_response(req, resp)
            kind = "epoch"
        else:
            limit = req.max_records if max_records is None else max_records
            resp = leader.replica.handle_fetch(req.replica_id, req.fetch_offset, req.current_leader_epoch,
                                               self.now_ms, limit)
            if deliver:
                n.replica.on_fetch_response(req, resp)
            kind = "fetch"
        self._after_step()
        return Round(kind, req, resp, deliver)

    def catch_up(self, node: str, max_rounds: int = 50) -> int:
        """fetch_round until `node` fetched at the leader's LEO (so the leader knows it has
        everything) and holds the leader's HW; returns the number of rounds. The leader's HW may
        still wait for other followers: `sync_all` catches everyone up."""
        for i in range(1, max_rounds + 1):
            lead_leo = self._leader_replica().leo
            r = self.fetch_round(node)
            n, lead = self.replica(node), self._leader_replica()
            if (r.kind == "fetch" and r.request.fetch_offset == lead_leo == n.leo and n.hw == lead.hw
                    and n.follower_phase == "fetching"):
                return i
        raise SimError(f"sim: {node} did not catch up in {max_rounds} rounds")

    def sync_all(self, max_passes: int = 10) -> None:
        """Catch every live follower up until all of them hold the leader's LEO and HW (nodes cut off
        from the controller are left alone)."""
        lead = self._leader_replica()
        followers = [m for m in self.nodes.values()
                     if m.up and m.name != self.leader and m.replica is not None and m.replica.role == "follower"
                     and m.name not in self.cut_off]
        for _ in range(max_passes):
            for m in followers:
                self.catch_up(m.name)
            if all(m.replica.leo == lead.leo and m.replica.hw == lead.hw == lead.leo for m in followers):
                return
        raise SimError(f"sim: followers did not converge in {max_passes} passes")

    def shrink_isr(self) -> IsrProposal | None:
        """The leader's ISR-shrink timer fires; an accepted proposal is applied at once."""
        proposal = self._leader_replica().maybe_shrink_isr(self.now_ms)
        if proposal is not None:
            self._submit(proposal)
        self._after_step()
        return proposal

    def decide_isr(self) -> IsrProposal | None:
        """The controller answers the oldest queued ISR proposal (accepts it if still current)."""
        if not self.queued_proposals:
            return None
        proposal = self.queued_proposals.pop(0)
        self._controller_decide(proposal)
        self._after_step()
        return proposal

    # --- disks and crashes -----------------------------------------------------------------------

    def set_auto_flush(self, node: str, on: bool) -> None:
        self.nodes[node].auto_flush = on

    def flush(self, node: str) -> None:
        n = self.nodes[node]
        n.flushed = n.log.leo()

    def checkpoint_hw(self, node: str) -> None:
        n = self._up(node)
        assert n.replica is not None
        n.hw_checkpoint = n.replica.hw

    def crash(self, node: str, lose_unflushed: bool = False) -> None:
        """Kill the node. With lose_unflushed (power loss) its log keeps only the flushed prefix."""
        n = self._up(node)
        n.up, n.replica = False, None
        if lose_unflushed:
            n.log.truncate_to(n.flushed)
        for out in list(self._pending):
            if out.node == node:
                out.status, out.error = "unknown", "leader crashed"
                self._pending.remove(out)

    def restart(self, node: str) -> None:
        """Rebuild the replica from what is on its disk; it follows the current leader if that one
        is up (a restarted former leader stays without a role until `elect`)."""
        n = self.nodes[node]
        if n.up:
            raise SimError(f"sim: {node} is already up")
        n.up = True
        n.replica = self._new_replica(n)
        if (self.leader is not None and self.leader != node and self.nodes[self.leader].up
                and node not in self.cut_off):
            n.replica.become_follower(self.epoch, self.nodes[self.leader].broker_id, self.now_ms,
                                      isr=self._ids(self.isr))
        self._after_step()

    # --- looking at the state --------------------------------------------------------------------

    def replica(self, node: str) -> PartitionReplica:
        n = self._up(node)
        assert n.replica is not None
        return n.replica

    def leo(self, node: str) -> int:
        return self.nodes[node].log.leo()

    def hw(self, node: str) -> int:
        return self.replica(node).hw

    def remote_leo(self, follower: str) -> int | None:
        return self._leader_replica().remote_leo(self.nodes[follower].broker_id)

    def records(self, node: str) -> list[Record]:
        log = self.nodes[node].log
        return log.read(0, log.leo())

    def values(self, node: str) -> list[str]:
        return [r.value.decode() for r in self.records(node)]

    def epochs(self, node: str) -> list[tuple[int, int]]:
        return self.replica(node).epoch_cache.entries()

    def events(self, node: str, name: str | None = None) -> list[Event]:
        return [e for e in self.nodes[node].events if name is None or e.name == name]

    def lost_acked(self, node: str | None = None) -> list[str]:
        """Acknowledged values missing from `node`'s log (default: the current leader's)."""
        ref = node or self.leader
        if ref is None:
            raise SimError("sim: no leader to compare with")
        have = set(self.values(ref))
        return [v for v, _ in self.acked if v not in have]

    def divergence(self, nodes: Iterable[str] | None = None) -> list[tuple[int, dict[str, str]]]:
        """Offsets where two replicas hold different records: [(offset, {node: value})]."""
        names = list(nodes) if nodes is not None else list(self.nodes)
        logs = {m: self.values(m) for m in names}
        out = []
        for off in range(max((len(v) for v in logs.values()), default=0)):
            at = {m: v[off] for m, v in logs.items() if off < len(v)}
            if len(set(at.values())) > 1:
                out.append((off, at))
        return out

    # --- internals -------------------------------------------------------------------------------

    def _new_replica(self, n: SimNode) -> PartitionReplica:
        return PartitionReplica(self.topic, self.partition, n.broker_id, n.log, self.config,
                                checkpoints=Checkpoints(hw=n.hw_checkpoint, epoch_entries=n.epoch_checkpoint))

    def _up(self, node: str) -> SimNode:
        if node not in self.nodes:
            raise SimError(f"sim: no node {node!r}")
        n = self.nodes[node]
        if not n.up:
            raise SimError(f"sim: {node} is down")
        return n

    def _by_id(self, broker_id: int) -> SimNode:
        for n in self.nodes.values():
            if n.broker_id == broker_id:
                return n
        raise SimError(f"sim: no broker {broker_id}")

    def _ids(self, names: Iterable[str]) -> list[int]:
        return sorted(self.nodes[m].broker_id for m in names)

    def _leader_replica(self) -> PartitionReplica:
        if self.leader is None:
            raise SimError("sim: no leader elected")
        return self.replica(self.leader)

    def _ack(self, out: ProduceOutcome) -> None:
        out.status = "acked"
        for i, v in enumerate(out.values):
            self.acked.append((v, out.base_offset + i))

    def _submit(self, proposal: IsrProposal) -> None:
        if self.isr_decisions == "queued":
            self.queued_proposals.append(proposal)
        else:
            self._controller_decide(proposal)

    def _controller_decide(self, proposal: IsrProposal) -> None:
        """The controller's AlterIsr: accepted if based on the current epoch and ISR version."""
        proposer = self._by_id(proposal.leader_id)
        res, _ = self.controller.alter_isr(cm.AlterIsr(proposal.topic, proposal.partition, proposal.leader_id,
                                                       proposal.leader_epoch, proposal.based_on_version,
                                                       tuple(proposal.isr)))
        if not proposer.up or proposer.replica is None:
            return                                              # the answer is lost with it
        if res.error != cm.NONE:
            proposer.replica.on_isr_proposal_failed(proposal)
        else:
            proposer.replica.on_isr_changed(res.isr, res.isr_version, self.now_ms)

    def _after_step(self) -> None:
        if self.leader is not None and self.nodes[self.leader].up:
            lead = self._leader_replica()
            proposal = lead.take_isr_proposal()
            if proposal is not None:
                self._submit(proposal)
            for out in list(self._pending):
                if out.node != self.leader:
                    continue
                st = lead.produce_status(out.last_offset, out.epoch)
                if st.state == "complete":
                    self._ack(out)
                    self._pending.remove(out)
                elif st.state == "failed":
                    # NOT_LEADER after the append: the record may yet survive, so the outcome is unknown
                    out.status = "unknown" if st.error == ErrorCode.NOT_LEADER else "failed"
                    out.error = st.error
                    self._pending.remove(out)
        for out in list(self._pending):
            if out.node != self.leader:
                out.status, out.error = "unknown", "leadership moved"
                self._pending.remove(out)
        for n in self.nodes.values():
            if not n.up or n.replica is None:
                continue
            n.flushed = n.log.leo() if n.auto_flush else min(n.flushed, n.log.leo())
            entries = n.replica.epoch_checkpoint_due()
            if entries is not None:
                n.epoch_checkpoint = entries
            if self.auto_checkpoint_hw:
                n.hw_checkpoint = n.replica.hw
            n.events.extend(n.replica.drain_events())
