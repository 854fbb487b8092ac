"""The running controller without the network: the pure state (state.py) plus what makes it real —
the durable state file (saved before any answer that depends on a change), the event log, the session
clock, config-listed topic creation, and the wake-up of METADATA long-polls when the version moves.

Runs inside one asyncio event loop; every method is called from that loop only.
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable

from broker.controller import messages as m
from broker.controller.config import ControllerConfig
from broker.controller.state import ControllerState, Event
from broker.controller.store import StateStore
from broker.eventlog import EventLog

MAX_LONG_POLL_MS = 60_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ControllerCore:
    def __init__(self, config: ControllerConfig, log: EventLog, *, clock: Callable[[], int] = monotonic_ms):
        self.config = config
        self.log = log
        self.clock = clock
        self.store = StateStore(config.data_dir)
        self.state = self._load()
        self._saved_version = self.state.version
        self._changed = asyncio.Event()
        self._wire_cache: tuple[int, dict] | None = None
        self._pending_topics = {t.name: t for t in config.topics}
        self._last_tick_ms = self.clock()

    def _load(self) -> ControllerState:
        raw = self.store.load()
        kwargs = dict(session_timeout_ms=self.config.broker_session_timeout_ms,
                      unclean_leader_election=self.config.unclean_leader_election,
                      eligible_leader_replicas=self.config.eligible_leader_replicas,
                      min_insync_replicas=self.config.min_insync_replicas,
                      max_replicas_per_broker=self.config.replica_budget)
        if raw is None:
            return ControllerState(**kwargs)
        return ControllerState.from_dict(raw, now_ms=self.clock(), **kwargs)

    # --- start-up ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Log the loaded state, elect leaderless partitions, create config topics if brokers suffice."""
        s = self.state
        self.log.emit("start", version=s.version, brokers=sorted(s.brokers), topics=sorted(s.topics),
                      restored=self.store.path.exists())
        # the restored state of every partition: the state file is saved before a change's lines are
        # logged, so a SIGKILL between the two leaves a change that is in force but was never logged
        for part in s.partitions():
            self.log.emit("partition-state", topic=part.topic, partition=part.partition, leader=part.leader,
                          epoch=part.leader_epoch, isr=list(part.isr), elr=list(part.elr),
                          version=part.isr_version)
        self._commit(s.elect_leaderless())
        self._create_config_topics()

    # --- operations (each: apply, save if changed, log, wake long-polls) ---------------------------
    def register_broker(self, req: m.RegisterBroker) -> dict:
        epoch, events = self.state.register_broker(req.broker_id, req.host, req.port, self.clock(),
                                                   clean_shutdown=req.clean_shutdown)
        self._commit(events)
        self._create_config_topics()
        return {"error": m.NONE, "broker_epoch": epoch}

    def heartbeat(self, req: m.Heartbeat) -> dict:
        error, events = self.state.heartbeat(req.broker_id, req.broker_epoch, self.clock())
        self._commit(events)
        if error != m.NONE:
            return {"error": error, "message": f"broker {req.broker_id} epoch {req.broker_epoch} is not "
                                              f"registered; register again"}
        return {"error": m.NONE}

    def alter_isr(self, req: m.AlterIsr) -> dict:
        result, events = self.state.alter_isr(req)
        self._commit(events)
        return result.to_wire()

    def elect_leader(self, req: m.ElectLeader) -> dict:
        result, events = self.state.elect_leader(req.topic, req.partition, req.broker, req.unclean)
        if result.error != m.NONE:
            self.log.emit("elect-refused", topic=req.topic, partition=req.partition, requested=req.broker,
                          unclean=req.unclean, error=result.error, message=result.message)
        self._commit(events)
        return result.to_wire()

    def create_topics(self, req: m.CreateTopics) -> dict:
        results, events = self.state.create_topics(list(req.topics))
        self._commit(events)
        return _per_topic(results)

    def create_partitions(self, req: m.CreatePartitions) -> dict:
        results, events = self.state.create_partitions(list(req.topics))
        self._commit(events)
        return _per_topic(results)

    def delete_topics(self, req: m.DeleteTopics) -> dict:
        results, events = self.state.delete_topics(list(req.names))
        self._commit(events)
        return _per_topic(results)

    async def metadata(self, req: m.MetadataRequest) -> dict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(req.max_wait_ms, MAX_LONG_POLL_MS) / 1000
        while self.state.version <= req.known_version:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                break
        return self.metadata_wire()

    def metadata_wire(self) -> dict:
        if self._wire_cache is None or self._wire_cache[0] != self.state.version:
            self._wire_cache = (self.state.version, self.state.metadata().to_wire())
        return self._wire_cache[1]

    def tick(self) -> None:
        """Called periodically: fence expired sessions. A controller stalled for more than half a session
        timeout (paused, starved) first gives every broker a fresh session: their heartbeats were queued."""
        now = self.clock()
        stalled = now - self._last_tick_ms
        self._last_tick_ms = now
        if stalled > self.config.broker_session_timeout_ms / 2:
            self.state.grant_grace(now)
            self.log.emit("stall", ms=stalled)
            return
        self._commit(self.state.expire_sessions(now))

    # --- internals ---------------------------------------------------------------------------------
    def _create_config_topics(self) -> None:
        if not self._pending_topics or len(self.state.live_brokers()) < self.config.brokers_needed:
            return
        results, events = self.state.create_topics(list(self._pending_topics.values()))
        self._commit(events)
        for name, error, message in results:
            if error == m.NONE:
                del self._pending_topics[name]
            elif error in (m.TOPIC_ALREADY_EXISTS, m.INVALID_TOPIC_EXCEPTION, m.INVALID_PARTITIONS):
                del self._pending_topics[name]
                self.log.emit("topic-error", topic=name, error=error, message=message)

    def _commit(self, events: list[Event]) -> None:
        """Make the change durable, log its events, wake long-polls. Save failures propagate (fatal)."""
        if self.state.version != self._saved_version:
            self.store.save(self.state.to_dict())
            self._saved_version = self.state.version
            self._changed.set()
            self._changed = asyncio.Event()
        for e in events:
            fields = {k: v for k, v in e.items() if k != "event"}
            self.log.emit(e["event"], **fields)


def _per_topic(results: list[tuple[str, str, str]]) -> dict:
    """A CREATE_TOPICS, CREATE_PARTITIONS or DELETE_TOPICS answer: each topic's error (and message), the
    first error."""
    topics = [{"name": n, "error": e, **({"message": msg} if msg else {})} for n, e, msg in results]
    errors = [e for _, e, _ in results if e != m.NONE]
    return {"error": errors[0] if errors else m.NONE, "topics": topics}
