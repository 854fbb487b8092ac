"""One consumer group's membership, as Kafka's classic (eager) group protocol runs it. No I/O.

States: Empty (no members), PreparingRebalance (waiting for the members to join again),
CompletingRebalance (a generation is formed; waiting for the leader's assignment), Stable, Dead (the
coordinator gave the group up). A request that must wait (a JoinGroup until every member has joined, a
follower's SyncGroup until the leader's) is parked under the shell's `ticket`; the calls return the
`Reply`s now due, each naming the ticket it answers, and the shell hands them to the waiting requests.
Time comes in as `now_ms`; `tick(now_ms)` expires sessions and ends rebalances that waited too long.

Every transition is an event in `log` (an `EventBuffer`) for the broker's event log, which the shell
drains: the protocol rules read them (docs/formats.md, "Node event logs").

Error names are Kafka's (broker/kafka/errors.py maps them to codes).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

NONE = "NONE"
UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
INVALID_SESSION_TIMEOUT = "INVALID_SESSION_TIMEOUT"
MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
INVALID_REQUEST = "INVALID_REQUEST"

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"


@dataclass(frozen=True)
class GroupLimits:
    """The broker's group settings (broker/config_keys.py `group_*`)."""
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 0
    # one member's protocol metadata, or one assignment: below the broker's cap on a non-produce request
    # (broker/server/rpc.py), so that an oversized one is answered INVALID_REQUEST, not cut off
    max_metadata_bytes: int = 128 * 1024


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup's content. `require_known_member_id`: JoinGroup v4+ (KIP-394), where a member joining
    without an id is first given one (MEMBER_ID_REQUIRED) and must join again with it."""
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    require_known_member_id: bool = True


@dataclass(frozen=True)
class Reply:
    """The answer to the request parked under `ticket`: `error` and the API's fields."""
    ticket: int
    error: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    assignment: bytes = b""
    deadline_ms: int = 0               # the session expires then unless a heartbeat (or request) comes
    join_ticket: int | None = None     # a JoinGroup waiting for the rebalance to complete
    sync_ticket: int | None = None     # a SyncGroup waiting for the leader's assignment

    def metadata_for(self, protocol: str) -> bytes:
        return next(meta for name, meta in self.protocols if name == protocol)

    def to_record(self) -> dict[str, Any]:
        return {"id": self.member_id, "client_id": self.client_id, "host": self.client_host,
                "session_timeout_ms": self.session_timeout_ms, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "instance_id": self.group_instance_id,
                "protocols": [[name, meta.hex()] for name, meta in self.protocols],
                "assignment": self.assignment.hex()}

    @classmethod
    def from_record(cls, rec: dict[str, Any], now_ms: int) -> "Member":
        return cls(rec["id"], rec["client_id"], rec["host"], rec["session_timeout_ms"], rec["rebalance_timeout_ms"],
                   tuple((name, bytes.fromhex(meta)) for name, meta in rec["protocols"]),
                   rec.get("instance_id"), bytes.fromhex(rec["assignment"]),
                   deadline_ms=now_ms + rec["session_timeout_ms"])


class EventBuffer:
    """The group's events, kept until the shell drains them into the broker's event log."""

    def __init__(self) -> None:
        self._events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, name: str, **fields: Any) -> None:
        self._events.append((name, fields))

    def drain(self) -> list[tuple[str, dict[str, Any]]]:
        out, self._events = self._events, []
        return out


class Group:
    def __init__(self, group_id: str, limits: GroupLimits = GroupLimits(), *, generation: int = 0):
        self.group_id = group_id
        self.limits = limits
        self.state = EMPTY
        self.generation = generation
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.pending_ids: set[str] = set()          # ids handed out with MEMBER_ID_REQUIRED, not yet joined
        self.rebalance_deadline_ms: int | None = None
        self.initial_delay_until_ms = 0             # an empty group's first rebalance waits this long
        self.writing: int | None = None             # the generation the shell is writing (leader's sync)
        self.log = EventBuffer()

    # --- events ---------------------------------------------------------------------------------
    def _now(self) -> dict[str, Any]:
        """The fields every group event carries: the group, its generation and its state, after the change."""
        return {"group": self.group_id, "generation": self.generation, "state": self.state}

    def drain_events(self) -> list[tuple[str, dict[str, Any]]]:
        return self.log.drain()

    # --- JoinGroup ------------------------------------------------------------------------------
    def join(self, ticket: int, req: JoinRequest, now_ms: int) -> list[Reply]:
        """A member joins (or joins again). The reply comes now (an error, MEMBER_ID_REQUIRED, a follower
        of a stable group whose metadata did not change) or once the rebalance completes."""
        problem = self._join_problem(req)
        if problem is not None:
            return [Reply(ticket, problem, {"member_id": req.member_id})]
        if not req.member_id:
            new_id = f"{req.client_id or 'member'}-{uuid.uuid4()}"
            if req.require_known_member_id:
                self.pending_ids.add(new_id)
                return [Reply(ticket, MEMBER_ID_REQUIRED, {"member_id": new_id})]
            return self._add_member(ticket, req, new_id, now_ms)
        if req.member_id not in self.members:
            if req.member_id in self.pending_ids:
                self.pending_ids.discard(req.member_id)
                return self._add_member(ticket, req, req.member_id, now_ms)
            return [Reply(ticket, UNKNOWN_MEMBER_ID, {"member_id": req.member_id})]
        return self._rejoin(ticket, req, now_ms)

    def _join_problem(self, req: JoinRequest) -> str | None:
        lim = self.limits
        if self.state == DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if not lim.min_session_timeout_ms <= req.session_timeout_ms <= lim.max_session_timeout_ms:
            return INVALID_SESSION_TIMEOUT
        if not req.protocol_type or not req.protocols:
            return INCONSISTENT_GROUP_PROTOCOL
        if any(len(meta) > lim.max_metadata_bytes for _, meta in req.protocols):
            return INVALID_REQUEST
        others = [m for m in self.members.values() if m.member_id != req.member_id]
        if others:
            if req.protocol_type != self.protocol_type:
                return INCONSISTENT_GROUP_PROTOCOL
            common = set.intersection(*({n for n, _ in m.protocols} for m in others))
            if not common & {n for n, _ in req.protocols}:
                return INCONSISTENT_GROUP_PROTOCOL
        return None

    def _add_member(self, ticket: int, req: JoinRequest, member_id: str, now_ms: int) -> list[Reply]:
        m = Member(member_id, req.client_id, req.client_host, req.session_timeout_ms, req.rebalance_timeout_ms,
                   req.protocols, req.group_instance_id, deadline_ms=now_ms + req.session_timeout_ms,
                   join_ticket=ticket)
        self.members[member_id] = m
        if self.protocol_type is None or len(self.members) == 1:
            self.protocol_type = req.protocol_type
        self.log.emit("group-member-joined", **self._now(), member=member_id, client_id=req.client_id)
        out = self._prepare_rebalance(now_ms, f"{member_id} joined") if self.state != PREPARING else []
        return out + self._maybe_complete_join(now_ms)

    def _rejoin(self, ticket: int, req: JoinRequest, now_ms: int) -> list[Reply]:
        m = self.members[req.member_id]
        out: list[Reply] = []
        if m.join_ticket is not None:          # the client gave up its earlier JoinGroup and sent another
            out.append(Reply(m.join_ticket, REBALANCE_IN_PROGRESS, {"member_id": m.member_id}))
        unchanged = req.protocols == m.protocols
        m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = (req.protocols, req.session_timeout_ms,
                                                                     req.rebalance_timeout_ms)
        m.deadline_ms = now_ms + m.session_timeout_ms
        if self.state == STABLE and unchanged and m.member_id != self.leader:
            return out + [Reply(ticket, NONE, self._join_fields(m, leader_view=False))]
        m.join_ticket = ticket
        if self.state != PREPARING:
            out += self._prepare_rebalance(now_ms, f"{m.member_id} joined again")
        return out + self._maybe_complete_join(now_ms)

    def _prepare_rebalance(self, now_ms: int, why: str) -> list[Reply]:
        """Start a rebalance: every member must join again; waiting SyncGroups are told so."""
        out = [Reply(m.sync_ticket, REBALANCE_IN_PROGRESS) for m in self.members.values() if m.sync_ticket is not None]
        for m in self.members.values():
            m.sync_ticket = None
        delay = self.limits.initial_rebalance_delay_ms if self.state == EMPTY else 0
        self.state, self.writing = PREPARING, None
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.rebalance_deadline_ms = now_ms + max(timeout, delay)
        self.initial_delay_until_ms = now_ms + delay
        self.log.emit("group-rebalance", **self._now(), why=why)
        return out

    def _maybe_complete_join(self, now_ms: int) -> list[Reply]:
        if self.state != PREPARING or now_ms < self.initial_delay_until_ms:
            return []
        if any(m.join_ticket is None for m in self.members.values()):
            return []
        return self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> list[Reply]:
        """A new generation of the members that joined (the others are removed first)."""
        for m in [m for m in self.members.values() if m.join_ticket is None]:
            self._remove(m, "rebalance-timeout")
        self.generation += 1
        self.rebalance_deadline_ms = None
        if not self.members:
            self.state, self.protocol, self.leader = EMPTY, None, None
            self.log.emit("group-generation", **self._now(), leader=None, members=[], protocol=None)
            return []
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        leader = self.members[self.leader]
        common = set.intersection(*({n for n, _ in m.protocols} for m in self.members.values()))
        self.protocol = next(name for name, _ in leader.protocols if name in common)
        self.state = COMPLETING
        self.log.emit("group-generation", **self._now(), leader=self.leader, members=sorted(self.members),
                      protocol=self.protocol)
        out = []
        for m in self.members.values():
            out.append(Reply(m.join_ticket, NONE, self._join_fields(m, leader_view=m.member_id == self.leader)))
            m.join_ticket = None
            m.deadline_ms = now_ms + m.session_timeout_ms
        return out

    def _join_fields(self, m: Member, *, leader_view: bool) -> dict[str, Any]:
        members = ([(o.member_id, o.group_instance_id, o.metadata_for(self.protocol)) for o in self.members.values()]
                   if leader_view else [])
        return {"generation": self.generation, "protocol_type": self.protocol_type, "protocol": self.protocol,
                "leader": self.leader, "member_id": m.member_id, "members": members}

    # --- SyncGroup ------------------------------------------------------------------------------
    def sync(self, ticket: int, member_id: str, generation: int, assignments: dict[str, bytes],
             now_ms: int) -> list[Reply]:
        """A member asks for its assignment; the leader's request carries everyone's."""
        m = self.members.get(member_id)
        if self.state == DEAD:
            return [Reply(ticket, COORDINATOR_NOT_AVAILABLE)]
        if m is None:
            return [Reply(ticket, UNKNOWN_MEMBER_ID)]
        if generation != self.generation:
            return [Reply(ticket, ILLEGAL_GENERATION)]
        if self.state == PREPARING:
            return [Reply(ticket, REBALANCE_IN_PROGRESS)]
        m.deadline_ms = now_ms + m.session_timeout_ms
        if self.state == STABLE:
            return [Reply(ticket, NONE, {"assignment": m.assignment})]
        if m.sync_ticket is not None:
            stale = Reply(m.sync_ticket, REBALANCE_IN_PROGRESS)
            m.sync_ticket = ticket
            out = [stale]
        else:
            m.sync_ticket, out = ticket, []
        if member_id != self.leader or self.writing is not None:
            return out
        if any(len(a) > self.limits.max_metadata_bytes for a in assignments.values()):
            m.sync_ticket = None
            return out + [Reply(ticket, INVALID_REQUEST)]
        for o in self.members.values():
            o.assignment = assignments.get(o.member_id, b"")
        self.writing = self.generation       # the shell writes the generation (`to_record`), then `written`
        return out

    def written(self, generation: int, error: str, now_ms: int) -> list[Reply]:
        """The shell wrote (or failed to write) `generation` with its assignments to the offsets topic.
        Only then is the group Stable and does anyone get an assignment: a generation handed out but
        not written would be formed again, with other members, by the next coordinator. A failed write
        answers the waiting SyncGroups with its error and starts a rebalance."""
        if self.writing != generation or self.generation != generation or self.state != COMPLETING:
            return []                         # a rebalance started meanwhile: the write is moot
        self.writing = None
        if error != NONE:
            out = [Reply(o.sync_ticket, error) for o in self.members.values() if o.sync_ticket is not None]
            for o in self.members.values():
                o.sync_ticket = None
            return out + self._prepare_rebalance(now_ms, f"writing generation {generation} failed: {error}")
        self.state = STABLE
        self.log.emit("group-stable", **self._now(), leader=self.leader,
                      assigned={o.member_id: len(o.assignment) for o in self.members.values()})
        return self._answer_syncs()

    def _answer_syncs(self) -> list[Reply]:
        out = []
        for o in self.members.values():
            if o.sync_ticket is not None:
                out.append(Reply(o.sync_ticket, NONE, {"assignment": o.assignment}))
                o.sync_ticket = None
        return out

    # --- Heartbeat, LeaveGroup, expiry ------------------------------------------------------------
    def heartbeat(self, member_id: str, generation: int, now_ms: int) -> str:
        m = self.members.get(member_id)
        if self.state == DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if m is None:
            return UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ILLEGAL_GENERATION
        m.deadline_ms = now_ms + m.session_timeout_ms
        return REBALANCE_IN_PROGRESS if self.state == PREPARING else NONE

    def leave(self, member_id: str, now_ms: int) -> tuple[str, list[Reply]]:
        m = self.members.get(member_id)
        if self.state == DEAD:
            return COORDINATOR_NOT_AVAILABLE, []
        if m is None:
            return UNKNOWN_MEMBER_ID, []
        return NONE, self._remove_and_rebalance(m, "left", now_ms)

    def _remove(self, m: Member, why: str) -> list[Reply]:
        out = [Reply(t, UNKNOWN_MEMBER_ID, {"member_id": m.member_id}) for t in (m.join_ticket, m.sync_ticket)
               if t is not None]
        del self.members[m.member_id]
        self.log.emit("group-member-removed", **self._now(), member=m.member_id, why=why)
        return out

    def _remove_and_rebalance(self, m: Member, why: str, now_ms: int) -> list[Reply]:
        out = self._remove(m, why)
        if self.state in (STABLE, COMPLETING):
            out += self._prepare_rebalance(now_ms, f"{m.member_id} {why}")
        if self.state == PREPARING:
            out += self._maybe_complete_join(now_ms)
        return out

    def tick(self, now_ms: int) -> list[Reply]:
        """Expire the members whose session ran out (not those waiting in a JoinGroup: a rebalance
        waits for them until its own deadline), and complete a rebalance whose time is up."""
        out: list[Reply] = []
        for m in [m for m in self.members.values() if m.join_ticket is None and m.deadline_ms < now_ms]:
            out += self._remove_and_rebalance(m, "session-timeout", now_ms)
        if self.state == PREPARING:
            if self.rebalance_deadline_ms is not None and now_ms >= self.rebalance_deadline_ms:
                out += self._complete_join(now_ms)
            else:
                out += self._maybe_complete_join(now_ms)
        return out

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has work, or None."""
        times = [m.deadline_ms for m in self.members.values() if m.join_ticket is None]
        if self.state == PREPARING:
            times += [t for t in (self.rebalance_deadline_ms, self.initial_delay_until_ms) if t]
        return min(times) if times else None

    # --- commits, loading, unloading --------------------------------------------------------------
    def commit_error(self, member_id: str, generation: int, *, check_generation: bool = True) -> str:
        """Whether an OffsetCommit of (member, generation) may be stored: Kafka's rules (a commit with no
        member and generation -1 only to a group with no members). `check_generation` False plants the
        bug of a coordinator that takes commits from an older generation's members (a zombie)."""
        if self.state == DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation < 0 and not member_id:
            return NONE if not self.members else UNKNOWN_MEMBER_ID
        if member_id not in self.members:
            return NONE if not check_generation else UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return NONE if not check_generation else ILLEGAL_GENERATION
        return REBALANCE_IN_PROGRESS if self.state == COMPLETING else NONE

    def unload(self) -> list[Reply]:
        """The coordinator gives the group up (its offsets partition moved): every waiting request is
        answered NOT_COORDINATOR, and the group is Dead here."""
        out = [Reply(t, "NOT_COORDINATOR") for m in self.members.values() for t in (m.join_ticket, m.sync_ticket)
               if t is not None]
        self.state = DEAD
        self.log.emit("group-unloaded", **self._now())
        return out

    def to_record(self) -> dict[str, Any]:
        """What the offsets topic keeps of a generation, so that a new coordinator goes on from it."""
        return {"generation": self.generation, "protocol_type": self.protocol_type, "protocol": self.protocol,
                "leader": self.leader, "members": [m.to_record() for m in self.members.values()]}

    @classmethod
    def from_record(cls, group_id: str, rec: dict[str, Any], limits: GroupLimits, now_ms: int) -> "Group":
        """A group as a new coordinator loads it: Stable with its members, whose sessions start now."""
        g = cls(group_id, limits, generation=rec["generation"])
        g.protocol_type, g.protocol, g.leader = rec.get("protocol_type"), rec.get("protocol"), rec.get("leader")
        for mrec in rec.get("members") or []:
            m = Member.from_record(mrec, now_ms)
            g.members[m.member_id] = m
        g.state = STABLE if g.members else EMPTY
        return g

    def describe(self) -> dict[str, Any]:
        """DescribeGroups' view."""
        return {"state": self.state, "protocol_type": self.protocol_type or "", "protocol": self.protocol or "",
                "members": [{"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                             "client_host": m.client_host,
                             "metadata": m.metadata_for(self.protocol) if self.protocol else b"",
                             "assignment": m.assignment} for m in self.members.values()]}
