"""The follower fetcher of one partition: carries the state machine's follower requests to the leader.

Loop: `req = replica.next_follower_request()`:
  - EpochRequest (leader-epoch mode, after becoming follower): OFFSETS_FOR_LEADER_EPOCH to the leader,
    answer -> `on_epoch_response` (which truncates, maybe asks again);
  - FetchRequest: FETCH {offset = our LEO, current_leader_epoch, replica_id, max_wait_ms =
    replica_fetch_wait_max_ms} -> `on_fetch_response` (append, follower HW; OFFSET_OUT_OF_RANGE cut);
  - None (not a follower, or fenced: our epoch is stale): sleep until the metadata loop wakes us.
In "hw" mode the truncation to the HW happened inside become_follower, so the first request is a fetch.
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH / NOT_LEADER answers and connection errors back off
briefly (the metadata loop meanwhile learns the new leader or epoch) and retry. When the metadata names
a new leader or epoch while a request is in flight to the old one (possibly paused: it would hold us
for the whole RPC timeout), that request is abandoned at once.

A disk error while applying an answer (the append or truncation fails: ENOSPC, EIO, EROFS) leaves the log
as it was (the storage log takes a failed append back), so the fetcher asks for the same offset again,
waiting FETCH_RETRY_MIN_S doubling to FETCH_RETRY_MAX_S, and resumes when the disk has room; the manager
turns it into `storage-error` events (retrying, then resolved). The task itself is watched: if it dies
of anything else, that is an `internal-error` event and a new task starts after RESTART_AFTER_S.
"""
from __future__ import annotations

import asyncio
import logging

from broker.limits import internal_topic
from broker.protocol import apis
from broker.records import from_replica_record
from broker.replication import EpochRequest, EpochResponse, ErrorCode, FetchRequest, FetchResponse
from broker.replication.epoch_cache import EpochEndOffset
from broker.server.aio import cancel_and_wait
from broker.server.peer import PeerConnection, PeerError

log = logging.getLogger(__name__)

BACKOFF_S = 0.1
IDLE_S = 1.0
RPC_MARGIN_S = 2.0
FETCH_RETRY_MIN_S = 0.2     # after a disk error (a full or failing disk): the first wait before asking again
FETCH_RETRY_MAX_S = 5.0     # ... doubling up to this
RESTART_AFTER_S = 1.0       # a fetcher task that died of a bug is started again after this


def _error(code) -> ErrorCode | None:
    if code in (None, "NONE"):
        return None
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.NOT_LEADER     # any other refusal: back off and re-learn the leader


def _next_wait(wait: float) -> float:
    """The back-off after another disk error: FETCH_RETRY_MIN_S first, then doubling to FETCH_RETRY_MAX_S."""
    return min(max(wait * 2, FETCH_RETRY_MIN_S), FETCH_RETRY_MAX_S)


class Fetcher:
    def __init__(self, manager, part):
        self.manager = manager
        self.part = part
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._conn: PeerConnection | None = None
        self._inflight: tuple[object, asyncio.Task] | None = None   # (request, task awaiting its answer)
        self._reported = -1             # the fetch offset the last `leo-reported` line named

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        part = self.part
        if self.manager.task_died(task, f"fetcher {part.topic}/{part.partition}") and task is self._task:
            asyncio.get_running_loop().call_later(RESTART_AFTER_S, self._restart, task)

    def _restart(self, dead: asyncio.Task) -> None:
        if self._task is dead and not self.part.retired and not self.manager.closing:
            self.start()

    def wake(self) -> None:
        """Called after metadata changed this partition: re-check, and drop a request to a deposed leader."""
        self._wake.set()
        if self._inflight is not None:
            req, task = self._inflight
            r = self.part.replica
            if not task.done() and (r.role != "follower" or r.leader_id != req.leader_id
                                    or r.leader_epoch != req.current_leader_epoch):
                task.cancel()

    def cancel(self) -> None:
        """Stop at once without waiting (the replica is being retired synchronously)."""
        if self._task is not None:
            self._task.cancel()
        if self._conn is not None:
            self._conn.close()

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        if self._conn is not None:
            self._conn.close()

    async def _idle(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        self._wake.clear()

    def _connection(self, leader_id: int) -> PeerConnection | None:
        addr = self.manager.broker_address(leader_id)
        if addr is None:
            return None
        if self._conn is None or self._conn.address != addr:
            if self._conn is not None:
                self._conn.close()
            self._conn = PeerConnection(*addr, source_host=self.manager.config.host)
        return self._conn

    async def _run(self) -> None:
        part, r = self.part, self.part.replica
        disk_wait = 0.0
        while True:
            if asyncio.current_task().cancelling():    # a cancellation swallowed by wait_for (3.11)
                raise asyncio.CancelledError
            req = r.next_follower_request()
            if req is None:
                await self._idle(IDLE_S)
                continue
            conn = self._connection(req.leader_id)
            if conn is None:
                await self._idle(BACKOFF_S)
                continue
            exchange = asyncio.ensure_future(self._exchange(conn, req))
            self._inflight = (req, exchange)
            try:
                err = await exchange
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():
                    raise                      # the fetcher itself is stopping
                conn.close()                   # abandoned: the leader changed under it
                continue
            except PeerError as exc:
                log.debug("fetcher %s/%s: %s", part.topic, part.partition, exc)
                self.manager.after_change(part)
                await self._idle(BACKOFF_S)
                continue
            except OSError as exc:             # our disk: the log is as it was, ask for the same again
                self.manager.after_change(part)
                self.manager.storage_failed(part, "append", exc, "retrying")
                disk_wait = _next_wait(disk_wait)
                await self._idle(disk_wait)
                continue
            finally:
                self._inflight = None
            disk_wait = 0.0
            self.manager.storage_ok(part, "append")
            self.manager.after_change(part)
            if self.manager.commit is not None:
                await self._flush_until_durable()     # before the next fetch reports our LEO
            if err is not None:
                await self._idle(BACKOFF_S)

    async def _flush_until_durable(self) -> None:
        """Wait until what we appended is flushed (group commit), retrying a failed flush with backoff:
        the next fetch tells the leader our LEO, which it may count toward the HW and acknowledge, so it
        must never go out over records a failed flush left unflushed (the protocol rule
        reported-before-flush found exactly that under the disk-full fault)."""
        part, wait = self.part, 0.0
        while True:
            try:
                await self.manager.commit.durable(part)
            except OSError as exc:
                self.manager.storage_failed(part, "flush", exc, "retrying")
                wait = _next_wait(wait)
                await asyncio.sleep(wait)
                continue
            self.manager.storage_ok(part, "flush")
            return

    async def _exchange(self, conn: PeerConnection, req) -> ErrorCode | None:
        """Send one follower request, hand the answer to the state machine; return its error."""
        part, r = self.part, self.part.replica
        cfg = self.manager.config
        if isinstance(req, EpochRequest):
            body = await conn.request(apis.OFFSETS_FOR_LEADER_EPOCH, {
                "topic": part.topic, "partition": part.partition, "leader_epoch": req.requested_epoch,
                "current_leader_epoch": req.current_leader_epoch, "replica_id": req.replica_id}, RPC_MARGIN_S)
            err = _error(body.get("error"))
            end = None if err is not None else EpochEndOffset(int(body["leader_epoch"]), int(body["end_offset"]))
            r.on_epoch_response(req, EpochResponse(err, end, req.current_leader_epoch))
            return err
        assert isinstance(req, FetchRequest)
        if req.fetch_offset != self._reported:
            # the fetch offset is our LEO as the leader will count it (its HW follows): say what of it is
            # fsynced, once per new offset (the protocol rules check it: broker/rules)
            self._reported = req.fetch_offset
            self.manager.events.emit("leo-reported", partition=part.partition, leo=req.fetch_offset,
                                     flushed=part.store.log.flushed_offset(), epoch=req.current_leader_epoch,
                                     leader=req.leader_id, **internal_topic(part.topic))
        body = await conn.request(apis.FETCH, {
            "topic": part.topic, "partition": part.partition, "offset": req.fetch_offset,
            "max_records": req.max_records, "max_wait_ms": cfg.replica_fetch_wait_max_ms,
            "replica_id": req.replica_id, "current_leader_epoch": req.current_leader_epoch},
            cfg.replica_fetch_wait_max_ms / 1000.0 + RPC_MARGIN_S)
        err = _error(body.get("error"))
        records = tuple(map(from_replica_record, body.get("records", ()))) if err is None else ()
        r.on_fetch_response(req, FetchResponse(
            err, records, int(body.get("hw", 0)), int(body.get("leader_epoch", -1)),
            int(body.get("leo", 0)), int(body.get("log_start", 0))))
        return err
