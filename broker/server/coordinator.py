"""The group coordinator's shell: it drives the group state machines (broker/groups/membership.py) with
real requests and a real clock, and keeps the committed offsets in the replicated `__consumer_offsets`
topic (broker/groups/offsets.py).

- This broker coordinates the groups of every offsets partition it leads. When it becomes the leader of
  one it first loads the partition's log (its committed offsets and the groups' last generations),
  answering COORDINATOR_LOAD_IN_PROGRESS meanwhile; when it stops leading one, its groups are given up
  (the requests waiting in them are answered NOT_COORDINATOR).
- An OffsetCommit is an append to the group's offsets partition with acks=all: it is acknowledged only
  once the partition's HW passed it, so min.insync.replicas, the truncation mode and every seed's rule
  apply to commits as to any other write. Only then does the coordinator's view of the offset change.
- The leader's SyncGroup that completes a generation is written there too, and no member gets its
  assignment (nor is the group Stable) before that write is acknowledged, so that a new coordinator
  goes on from that generation instead of forming it again with other members.
- The offsets topic is created on the first FindCoordinator that needs it (`offsets_topic_*` settings),
  with Kafka's answer COORDINATOR_NOT_AVAILABLE until it has a leader.

Planted historical bugs (`GroupRules`): commits taken from a stale generation; OffsetFetch answered
from a partition still loading; and KAFKA-20634, a coordinator whose offsets partition became a follower
that goes on answering: a commit it appended as the leader, whose answer was pending when leadership
moved, it acknowledges once its own (follower's) HW passes the commit's offset, though the follower's
log was truncated and refilled from the new leader there, so the committed record is gone. Events go to the broker's event log (docs/formats.md).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from broker.controller.client import ControllerError
from broker.groups import membership as gm
from broker.groups.membership import Group, GroupLimits, JoinRequest, Reply
from broker.groups.offsets import (OFFSETS_TOPIC, Committed, OffsetStore, group_record, offset_record,
                                   partition_for, replay)
from broker.replication.messages import BatchFields

log = logging.getLogger(__name__)

NOT_COORDINATOR = "NOT_COORDINATOR"
LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
TICK_S = 0.1                 # how often sessions and rebalance deadlines are looked at
LOAD_CHUNK = 200             # records read per event-loop turn while loading
OFFSET_METADATA_MAX = 4096   # Kafka's offset.metadata.max.bytes
# what a failed append to the offsets topic tells the committer (Kafka's mapping), by the replica
# manager's error strings (broker/server/partitions.py); an append that timed out may still be there
_APPEND_ERRORS = {"UNKNOWN_PARTITION": gm.COORDINATOR_NOT_AVAILABLE,
                  "NOT_ENOUGH_REPLICAS": gm.COORDINATOR_NOT_AVAILABLE,
                  "NOT_ENOUGH_REPLICAS_AFTER_APPEND": gm.COORDINATOR_NOT_AVAILABLE,
                  "REQUEST_TIMED_OUT": gm.COORDINATOR_NOT_AVAILABLE,
                  "NOT_LEADER": NOT_COORDINATOR, "NOT_ASSIGNED_REPLICA": NOT_COORDINATOR,
                  "FENCED_LEADER_EPOCH": NOT_COORDINATOR, "KAFKA_STORAGE_ERROR": NOT_COORDINATOR,
                  "MESSAGE_TOO_LARGE": "INVALID_COMMIT_OFFSET_SIZE"}


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True)
class GroupRules:
    """The offsets topic's shape and the coordinator's rules (broker/config_keys.py `offsets_topic_*`,
    `group_*`). The two booleans are Kafka's behaviour when true; false plants a historical bug."""
    partitions: int = 3
    replication_factor: int = 3
    commit_timeout_ms: int = 5000
    load_min_ms: int = 0         # a load takes at least this long (broker/config_keys.py group_load_min_ms)
    limits: GroupLimits = GroupLimits()
    commit_checks_generation: bool = True
    offset_fetch_waits_for_load: bool = True
    resigns_when_following: bool = True


@dataclass
class OwnedPartition:
    """An offsets partition this broker leads, at `epoch`: its groups and committed offsets."""
    partition: int
    epoch: int
    loaded: bool = False
    groups: dict[str, Group] = field(default_factory=dict)
    offsets: OffsetStore = field(default_factory=OffsetStore)
    task: asyncio.Task | None = None


class GroupCoordinator:
    def __init__(self, replicas, events, controller, rules: GroupRules = GroupRules()):
        self.replicas = replicas
        self.events = events
        self.controller = controller
        self.rules = rules
        self.owned: dict[int, OwnedPartition] = {}
        self._waiting: dict[int, asyncio.Future] = {}
        self._tickets = itertools.count(1)
        self._creating: asyncio.Task | None = None

    # --- leadership of the offsets partitions ---------------------------------------------------------
    def on_metadata(self) -> None:
        """Load the offsets partitions this broker now leads; give up the ones it no longer leads."""
        md = self.replicas.metadata
        if md is None:
            return
        leading: dict[int, int] = {}
        for ps in md.topic(OFFSETS_TOPIC):
            part = self.replicas.get(OFFSETS_TOPIC, ps.partition)
            if part is not None and part.replica.role == "leader":
                leading[ps.partition] = part.replica.leader_epoch
        for p in [p for p, o in self.owned.items() if leading.get(p) != o.epoch]:
            if p not in leading and not self.rules.resigns_when_following:
                continue             # the planted KAFKA-20634: it keeps the groups, and answers for them
            self._give_up(p)
        for p, epoch in leading.items():
            if p not in self.owned:
                owned = OwnedPartition(p, epoch)
                self.owned[p] = owned
                owned.task = asyncio.get_running_loop().create_task(self._load(owned))

    def _give_up(self, p: int) -> None:
        owned = self.owned.pop(p)
        if owned.task is not None and not owned.task.done():
            owned.task.cancel()
        for g in owned.groups.values():
            self._deliver(g, g.unload())
        self.events.emit("group-coordinator-resigned", offsets_partition=p, epoch=owned.epoch,
                         groups=sorted(owned.groups))

    async def _load(self, owned: OwnedPartition) -> None:
        """Read the partition's whole log (to its end: the leader's records), a chunk per turn, then
        serve its groups."""
        part = self.replicas.get(OFFSETS_TOPIC, owned.partition)
        t0 = now_ms()
        log_ = part.replica.log
        offset, end, records = log_.log_start(), log_.leo(), []
        while offset < end:
            chunk = log_.read(offset, min(LOAD_CHUNK, end - offset))
            if not chunk:
                break
            records.extend((r.key, r.value) for r in chunk)
            offset = chunk[-1].offset + 1
            await asyncio.sleep(0)
        left_s = (t0 + self.rules.load_min_ms - now_ms()) / 1000.0
        if left_s > 0:
            await asyncio.sleep(left_s)
        loaded = replay(records)
        owned.offsets = loaded.offsets
        now = now_ms()
        for group_id, rec in loaded.generations.items():
            try:
                owned.groups[group_id] = Group.from_record(group_id, rec, self.rules.limits, now)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("offsets partition %d: group %r's record is unreadable (%s)", owned.partition,
                            group_id, exc)
        owned.loaded = True
        self.events.emit("group-load", offsets_partition=owned.partition, epoch=owned.epoch, end=end,
                         records=loaded.records, undecodable=loaded.undecodable,
                         groups={g: grp.generation for g, grp in owned.groups.items()},
                         ms=now_ms() - t0)

    def _where(self, group_id: str) -> tuple[str, OwnedPartition | None]:
        """The group's offsets partition if this broker serves it now, else the error to answer."""
        md = self.replicas.metadata
        n = len(md.topic(OFFSETS_TOPIC)) if md is not None else 0
        if n == 0:
            return gm.COORDINATOR_NOT_AVAILABLE, None
        owned = self.owned.get(partition_for(group_id, n))
        if owned is None:
            return NOT_COORDINATOR, None
        if not owned.loaded:
            return LOAD_IN_PROGRESS, owned
        return gm.NONE, owned

    # --- FindCoordinator ----------------------------------------------------------------------------
    async def find(self, group_id: str) -> tuple[str, int, str, int]:
        """(error, node id, host, port) of the group's coordinator: the leader of its offsets partition."""
        md = self.replicas.metadata
        parts = md.topic(OFFSETS_TOPIC) if md is not None else []
        if not parts:
            self._create_offsets_topic()
            return gm.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        ps = parts[partition_for(group_id, len(parts))]
        if ps.leader is None or ps.leader not in md.brokers or not md.brokers[ps.leader].alive:
            return gm.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        b = md.brokers[ps.leader]
        return gm.NONE, ps.leader, b.host, b.port

    def _create_offsets_topic(self) -> None:
        if self._creating is not None and not self._creating.done():
            return
        self._creating = asyncio.get_running_loop().create_task(self._create())

    async def _create(self) -> None:
        md = self.replicas.metadata
        live = sum(1 for b in md.brokers.values() if b.alive) if md is not None else 0
        rf = self.rules.replication_factor
        if live < rf:
            log.warning("groups: %s needs %d live brokers (offsets_topic_replication_factor), %d are live",
                        OFFSETS_TOPIC, rf, live)
            return
        try:
            answers = await self.controller.create_topics(
                [{"name": OFFSETS_TOPIC, "partitions": self.rules.partitions, "replication_factor": rf}])
        except ControllerError as exc:
            log.warning("groups: creating %s failed: %s", OFFSETS_TOPIC, exc)
            return
        self.events.emit("offsets-topic-created", answer=answers.get(OFFSETS_TOPIC), partitions=self.rules.partitions,
                         replication_factor=rf)

    # --- parking and answering ----------------------------------------------------------------------
    def _park(self) -> tuple[int, asyncio.Future]:
        ticket = next(self._tickets)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = fut
        return ticket, fut

    def _deliver(self, group: Group, replies: Iterable[Reply]) -> None:
        for r in replies:
            fut = self._waiting.pop(r.ticket, None)
            if fut is not None and not fut.done():
                fut.set_result(r)
        for name, fields in group.drain_events():
            self.events.emit(name, **fields)

    async def _wait(self, ticket: int, fut: asyncio.Future, timeout_s: float) -> Reply:
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            return Reply(ticket, gm.REBALANCE_IN_PROGRESS)
        finally:
            self._waiting.pop(ticket, None)

    def _group(self, owned: OwnedPartition, group_id: str) -> Group:
        g = owned.groups.get(group_id)
        if g is None:
            g = owned.groups[group_id] = Group(group_id, self.rules.limits)
        return g

    # --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------------
    async def join(self, group_id: str, req: JoinRequest) -> Reply:
        err, owned = self._where(group_id)
        if err != gm.NONE:
            return Reply(0, err, {"member_id": req.member_id})
        g = self._group(owned, group_id)
        ticket, fut = self._park()
        self._deliver(g, g.join(ticket, req, now_ms()))
        # the machine answers by the rebalance's deadline at the latest (tick); this is a backstop
        return await self._wait(ticket, fut, req.rebalance_timeout_ms / 1000.0 + 5.0)

    async def sync(self, group_id: str, member_id: str, generation: int, assignments: dict[str, bytes]) -> Reply:
        err, owned = self._where(group_id)
        if err != gm.NONE:
            return Reply(0, err)
        g = owned.groups.get(group_id)
        if g is None:
            return Reply(0, gm.UNKNOWN_MEMBER_ID)
        ticket, fut = self._park()
        replies = g.sync(ticket, member_id, generation, assignments, now_ms())
        self._deliver(g, replies)
        if g.writing == generation and member_id == g.leader:
            await self._write_generation(owned, g, generation)
        m = g.members.get(member_id)
        return await self._wait(ticket, fut, (m.session_timeout_ms if m else 30_000) / 1000.0 + 5.0)

    async def _write_generation(self, owned: OwnedPartition, g: Group, generation: int) -> None:
        """Write the generation the leader's assignment completed; the members get their assignments
        (`Group.written`) only once it is acknowledged, so a generation is never handed out unwritten."""
        key, value = group_record(g.group_id, g.to_record())
        err, _ = await self._append(owned.partition, [key], [value])
        self._deliver(g, g.written(generation, err, now_ms()))

    def heartbeat(self, group_id: str, member_id: str, generation: int) -> str:
        err, owned = self._where(group_id)
        if err != gm.NONE:
            return err
        g = owned.groups.get(group_id)
        if g is None:
            return gm.UNKNOWN_MEMBER_ID
        code = g.heartbeat(member_id, generation, now_ms())
        self._deliver(g, [])
        return code

    def leave(self, group_id: str, member_ids: list[str]) -> tuple[str, dict[str, str]]:
        """(group error, {member: error})."""
        err, owned = self._where(group_id)
        if err != gm.NONE:
            return err, {}
        g = owned.groups.get(group_id)
        out = {}
        for mid in member_ids:
            if g is None:
                out[mid] = gm.UNKNOWN_MEMBER_ID
                continue
            code, replies = g.leave(mid, now_ms())
            out[mid] = code
            self._deliver(g, replies)
        return gm.NONE, out

    # --- OffsetCommit, OffsetFetch --------------------------------------------------------------------
    async def commit(self, group_id: str, member_id: str, generation: int,
                     offsets: list[tuple[str, int, int, int, str | None]]) -> dict[tuple[str, int], str]:
        """Store `offsets` [(topic, partition, offset, leader epoch, metadata)]: each one's error."""
        wanted = [(t, p) for t, p, *_ in offsets]
        err, owned = self._where(group_id)
        if err != gm.NONE:
            return {tp: err for tp in wanted}
        g = owned.groups.get(group_id)
        if g is None:
            if generation >= 0:
                return {tp: gm.ILLEGAL_GENERATION for tp in wanted}
            g = self._group(owned, group_id)
        err = g.commit_error(member_id, generation, check_generation=self.rules.commit_checks_generation)
        if err != gm.NONE:
            self.events.emit("offset-commit-refused", group=group_id, member=member_id, generation=generation,
                             group_generation=g.generation, error=err)
            return {tp: err for tp in wanted}
        out: dict[tuple[str, int], str] = {}
        md = self.replicas.metadata
        keys, values, stored = [], [], []
        stamp = int(time.time() * 1000)
        for topic, p, offset, epoch, metadata in offsets:
            if md is None or md.partition(topic, p) is None:
                out[(topic, p)] = "UNKNOWN_TOPIC_OR_PARTITION"
            elif metadata is not None and len(metadata.encode()) > OFFSET_METADATA_MAX:
                out[(topic, p)] = "OFFSET_METADATA_TOO_LARGE"
            else:
                c = Committed(offset, epoch, metadata, generation, member_id, stamp)
                k, v = offset_record(group_id, topic, p, c)
                keys.append(k)
                values.append(v)
                stored.append((topic, p, c))
        if not stored:
            return out
        err, base = await self._append(owned.partition, keys, values)
        for i, (topic, p, c) in enumerate(stored):
            out[(topic, p)] = err
            if err == gm.NONE and self.owned.get(owned.partition) is owned:
                owned.offsets.put(group_id, topic, p, c)
        self.events.emit("offset-commit", group=group_id, member=member_id, generation=generation,
                         group_generation=g.generation, offsets_partition=owned.partition,
                         base=base, error=err, offsets=[[t, p, c.offset] for t, p, c in stored])
        return out

    async def _append(self, partition: int, keys: list[bytes], values: list[bytes]) -> tuple[str, int]:
        """Append to an offsets partition with acks=all: (error as the committer is told it, base offset)."""
        resp = await self.replicas.produce(OFFSETS_TOPIC, partition, -1, self.rules.commit_timeout_ms, values,
                                           BatchFields(keys=keys))
        code = resp["error"]
        base = resp.get("base_offset", -1)
        if code == "NONE":
            return gm.NONE, base
        if not self.rules.resigns_when_following and base >= 0 and code in ("REQUEST_TIMED_OUT", "NOT_LEADER"):
            # the planted KAFKA-20634: appended as the leader, leadership moved before the HW passed it;
            # the old coordinator waits for its own HW as a follower instead, and calls that committed
            if await self._follower_hw_passes(partition, base + len(values) - 1):
                return gm.NONE, base
        return _APPEND_ERRORS.get(code, "UNKNOWN_SERVER_ERROR"), base

    async def _follower_hw_passes(self, partition: int, last: int) -> bool:
        deadline = time.monotonic() + self.rules.commit_timeout_ms / 1000.0
        while time.monotonic() < deadline:
            part = self.replicas.get(OFFSETS_TOPIC, partition)
            if part is not None and part.replica.hw > last:
                return True
            await asyncio.sleep(0.05)
        return False

    def fetch_offsets(self, group_id: str, wanted: list[tuple[str, int]] | None
                      ) -> tuple[str, list[tuple[str, int, Committed | None]]]:
        """(group error, [(topic, partition, committed or None)]); `wanted` None: every committed one."""
        err, owned = self._where(group_id)
        if err == LOAD_IN_PROGRESS and not self.rules.offset_fetch_waits_for_load:
            err = gm.NONE           # the planted bug: answered from what is loaded so far (nothing)
        if err != gm.NONE:
            return err, []
        have = owned.offsets.of(group_id)
        if wanted is None:
            return gm.NONE, [(t, p, c) for (t, p), c in sorted(have.items())]
        return gm.NONE, [(t, p, have.get((t, p))) for t, p in wanted]

    # --- ListGroups, DescribeGroups, time ---------------------------------------------------------------
    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group this broker coordinates."""
        return sorted((gid, g.protocol_type or "", g.state) for o in self.owned.values() if o.loaded
                      for gid, g in o.groups.items())

    def describe(self, group_id: str) -> tuple[str, dict[str, Any] | None]:
        err, owned = self._where(group_id)
        if err != gm.NONE:
            return err, None
        g = owned.groups.get(group_id)
        return gm.NONE, (g.describe() if g is not None else None)

    async def tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self.tick()

    def tick(self) -> None:
        now = now_ms()
        for owned in list(self.owned.values()):
            for g in list(owned.groups.values()):
                self._deliver(g, g.tick(now))
