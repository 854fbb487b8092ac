"""The replica manager: every partition replica this broker holds, and the I/O around the pure
replication state machine (broker/replication.PartitionReplica) of each.

For each partition it owns the disk store (broker/storage.PartitionStore), the state machine, the
parked produces and fetches (produce.py) and the follower fetcher task (fetcher.py). After every call
into a state machine, `after_change(part)` carries out what it asks for: log its events to the event log,
persist a changed leader-epoch cache (before any answer goes out), send an ISR proposal to the
controller, wake parked fetches (appends, HW moves) and re-check parked produces.

Roles follow the controller's metadata (`apply_metadata`): leader -> become_leader, another broker ->
become_follower (+ fetcher), no leader -> become_none.

A partition in the metadata that this broker cannot create or update (a topic name outside Kafka's rule
persisted by an older controller, EMFILE or any other OSError, more replicas than the fd budget of
broker/limits.replica_budget, anything else) is logged once as a `partition-skipped` event and skipped; the
broker keeps serving its other partitions and tries again on the next metadata version.

A read that finds a record failing verification (broker.records.LogCorruption: bytes rotted on disk while
the broker ran) is never served or replicated. The request is answered KAFKA_STORAGE_ERROR, a `corrupt`
event is logged, and the replica is recovered the way a restart recovers it. It is retired, closed and
opened again, and that open's recovery scan cuts the log at the bad record (a `truncate` event with
why=recovery). The scan reads the whole partition, so it runs in a worker thread: the event loop, and
with it the heartbeats, never waits for it; meanwhile requests for the partition are answered
KAFKA_STORAGE_ERROR. Then the broker registers with the controller again (`rejoin`), which fences its
old incarnation, so leadership moves to another ISR member. The fresh replica waits for that new metadata
and follows the new leader, which sends the cut records back.

A disk error (EMFILE, ENOSPC, EIO, EROFS) never stops the broker and never stops replication silently.
Each is a `storage-error` event, once per partition, kind of work and error, whose `action` says what
happens next, and a second one with action `resolved` when that work succeeds again:
  - periodic checkpoint or flush: `retrying`, on the next tick;
  - a leader's append: `refused`. The storage log takes back a failed append, so nothing of it exists
    and the produce is answered KAFKA_STORAGE_ERROR (definite). When appends keep failing for
    OFFLINE_AFTER_S, the broker also registers again (`rejoin`, action `offline`), so that the
    controller moves leadership to a replica whose disk works, as Kafka does when a log dir goes offline;
  - a follower's append or truncation: `retrying`. Its fetcher asks for the same offset again, backing off
    up to FETCH_RETRY_MAX_S, and resumes when the disk has room. Meanwhile the leader drops it from the
    ISR as it would any follower that stopped fetching;
  - the group commit's flush after an append: the produce is answered REQUEST_TIMED_OUT (indefinite: the
    records are in the log and may be replicated); the records stay pending, so the next flush tries
    them again, and a follower sends no fetch (which reports its LEO) until they are flushed. A leader
    whose flushes keep failing for OFFLINE_AFTER_S registers again too (action `offline`).
A fetcher or ISR-proposal task that dies of anything else is an `internal-error` event; a fetcher is
started again.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import time
from typing import Any, NamedTuple

from broker.config import BrokerConfig
from broker.controller.client import ControllerClient, ControllerError
from broker.controller.messages import AlterIsr, Metadata, PartitionState
from broker.eventlog import EventLog
from broker.limits import FETCH_MAX_BYTES, replica_budget, topic_name_problem, internal_topic
from broker.records import LogCorruption, replica_record
from broker.replication import PLAIN, BatchFields, Checkpoints, IsrProposal, PartitionReplica, ReplicationConfig
from broker.replication.producers import Snapshot
from broker.server.aio import cancel_and_wait
from broker.server.commit import GroupCommit
from broker.server.fetcher import Fetcher
from broker.server.produce import TIMED_OUT, ProducePurgatory, Signal
from broker.storage import PartitionStore, init_data_dir, list_partitions

log = logging.getLogger(__name__)


STORAGE_ERROR = "KAFKA_STORAGE_ERROR"      # Kafka's name for "this replica's disk failed"; clients retry
OFFLINE_AFTER_S = 10.0      # a leader whose appends fail this long registers again, so leadership moves


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def _code(error: Any) -> str:
    return "NONE" if error is None else str(error)


class Partition:
    """One replica on this broker: store + state machine + what waits on it."""

    def __init__(self, topic: str, partition: int, store: PartitionStore, replica: PartitionReplica):
        self.topic = topic
        self.partition = partition
        self.store = store
        self.replica = replica
        self.purgatory = ProducePurgatory()
        self.appended = Signal()        # wakes follower fetches
        self.hw_moved = Signal()        # wakes consumer fetches
        self.fetcher: Fetcher | None = None
        self.last_leo = replica.leo
        self.last_hw = replica.hw
        self.checkpointed_hw: int | None = None
        self.retired = False            # taken out of service (corruption found): a fresh Partition replaces it
        self.lead_after_epoch = -1      # recovered from corruption: never lead again at this epoch or below


class FetchedBy(NamedTuple):
    """Who sends a fetch: a follower's broker id (-1: a consumer) and the leader epoch it believes current
    (KIP-320; -1: not told)."""
    replica_id: int = -1
    current_leader_epoch: int = -1


CONSUMER = FetchedBy()


class ReplicaManager:
    def __init__(self, config: BrokerConfig, events: EventLog, controller: ControllerClient):
        self.config = config
        self.events = events
        self.controller = controller
        self.repl_config = ReplicationConfig.from_broker_config(config)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.metadata: Metadata | None = None
        self._named: set[tuple[str, int]] = set()     # every partition some metadata named (DeleteTopics)
        self._isr_tasks: set[asyncio.Task] = set()
        self._closing = False
        # flush="always": this layer flushes (group commit) instead of the storage doing one fsync per append
        self.commit = GroupCommit() if config.flush == "always" else None
        self.replica_budget = replica_budget()        # replicas this broker's fd limit allows
        self.skipped: dict[tuple[str, int], str] = {}   # partitions the metadata named but we could not create
        # failing disk work: (topic, partition, work) -> [error, since (monotonic s), last escalation]
        self.storage_errors: dict[tuple[str, int, str], list] = {}
        self.rejoin = None              # callable(reason): register with the controller again (app.py sets it)
        # partitions whose recovery scan runs in a worker thread after corruption (`recover_corrupt`):
        # metadata leaves them alone until they are back
        self._reopening: dict[tuple[str, int], asyncio.Task] = {}

    # --- opening ------------------------------------------------------------------------------
    def open_existing(self) -> None:
        init_data_dir(self.config.data_dir)
        for topic, p in list_partitions(self.config.data_dir):
            self._open(topic, p)

    def _open(self, topic: str, p: int) -> Partition:
        return self._adopt(topic, p, self._open_store(topic, p))

    def _open_store(self, topic: str, p: int) -> PartitionStore:
        """Open the partition's files: the recovery scan reads every segment (I/O only, no broker state,
        so it may run in a worker thread)."""
        cfg = self.config
        return PartitionStore.open(cfg.data_dir, topic, p, power_loss=cfg.power_loss,
                                   segment_records=cfg.segment_records,
                                   flush_policy="never" if cfg.flush == "always" else cfg.flush)

    def _adopt(self, topic: str, p: int, store: PartitionStore) -> Partition:
        """The replica over an opened store, in service: events for what recovery did, checkpoints read."""
        cfg = self.config
        rec = store.recovery
        if rec.cut:
            self.events.emit("truncate", partition=p, topic=topic, **{"from": None}, to=rec.cut_offset,
                             why="recovery", bytes_cut=rec.bytes_cut, reason=rec.reason)
        loaded = store.read_checkpoints()       # a lost or corrupt checkpoint never stops the broker
        snapshot, snapshot_problems = store.read_producer_snapshot()
        for bad in loaded.problems + snapshot_problems:
            self.events.emit("storage-error", topic=topic, partition=p, error=f"{bad.file}: {bad.problem}"[:300],
                             file=bad.file, action=bad.action, why="checkpoint")
        hw = loaded.hw or 0
        entries = loaded.epoch_entries
        saved = Checkpoints(hw=hw, epoch_entries=entries,
                            producer_snapshot=Snapshot(*snapshot) if snapshot is not None else None)
        replica = PartitionReplica(topic, p, cfg.node_id, store.log, self.repl_config, checkpoints=saved)
        part = Partition(topic, p, store, replica)
        part.checkpointed_hw = hw
        self.partitions[(topic, p)] = part
        self.events.emit("recovered", partition=p, topic=topic, leo=replica.leo, hw=replica.hw,
                         checkpoint_hw=hw, epochs=replica.epoch_cache.entries())
        self.after_change(part)
        return part

    @property
    def closing(self) -> bool:
        """Shutdown has begun (`quiesce`): no fetcher is started again."""
        return self._closing

    def reopening(self, topic: str, p: int) -> bool:
        """The replica is being recovered after corruption (its recovery scan runs in a worker thread)."""
        return (topic, p) in self._reopening

    def absent(self, topic: str, p: int) -> str:
        """The error for a partition not held here now: KAFKA_STORAGE_ERROR while it is being recovered
        (it will be back; leadership moves meanwhile), else UNKNOWN_PARTITION."""
        return STORAGE_ERROR if (topic, p) in self._reopening else "UNKNOWN_PARTITION"

    def get(self, topic: str, p: int) -> Partition | None:
        return self.partitions.get((topic, p))

    # --- carrying out what the state machine asks for ------------------------------------------
    def after_change(self, part: Partition) -> None:
        r = part.replica
        for ev in r.drain_events():
            fields = ev.fields()
            if ev.name == "truncate":
                # producer snapshots taken past the cut describe records that are gone: deleted now, before
                # anything is appended at those offsets again
                self._disk_work(part, "producer-snapshot", lambda: part.store.producer_snapshots.delete_above(ev.to))
                if self.commit is not None:
                    # what the log counts as fsynced after the cut (flush="always": no flush ran since it)
                    log_ = part.store.log
                    fields.update(flushed=log_.flushed_offset(), log_start=log_.log_start())
            self.events.emit(ev.name, **fields, **internal_topic(part.topic))
        if part.retired:
            return
        self._disk_work(part, "epoch-checkpoint", lambda: self._write_epochs(part))
        if r.producers.loaded:          # only a loaded table is ever due for a snapshot
            self._disk_work(part, "producer-snapshot", lambda: self._write_producers(part))
        proposal = r.take_isr_proposal()
        if proposal is not None:
            self._send_proposal(part, proposal)
        leo, hw = r.leo, r.hw
        if self.commit is not None and part.store.log.flushed_offset() < leo:
            self.commit.mark(part)
        if leo != part.last_leo:
            part.last_leo = leo
            part.appended.fire()
        if hw != part.last_hw:
            part.last_hw = hw
            part.hw_moved.fire()
        part.purgatory.recheck(lambda last, epoch: _status(r, last, epoch))

    # --- metadata -----------------------------------------------------------------------------
    def apply_metadata(self, md: Metadata) -> None:
        self.metadata = md
        self._drop_deleted(md)
        me = self.config.node_id
        fenced = [b for b, info in md.brokers.items() if not info.alive]
        for part in self.partitions.values():
            part.replica.set_fenced_brokers(fenced)
        for (topic, p), ps in md.partitions.items():
            part = self.partitions.get((topic, p))
            if (me not in ps.replicas and part is None) or (topic, p) in self._reopening:
                continue
            try:
                if part is None:
                    part = self._create(topic, p)
                    part.replica.set_fenced_brokers(fenced)
                self._apply_partition(part, ps)
            except Exception as exc:    # noqa: BLE001 - one bad partition must not stop the broker
                self._skip(topic, p, exc)
            else:
                self.skipped.pop((topic, p), None)

    def _drop_deleted(self, md: Metadata) -> None:
        """Delete the replicas of topics the metadata named before and names no more (DeleteTopics):
        close them, answer what waits on them, and remove their files. A replica found on disk at
        start-up that no metadata ever named is left alone."""
        topics = {t for t, _ in md.partitions}
        for key in [k for k in self.partitions if k[0] not in topics and k in self._named]:
            self._delete(self.partitions[key])
        self._named |= set(md.partitions)
        self._named &= set(md.partitions) | set(self.partitions)

    def _retire(self, part: Partition, parked_outcome: str) -> None:
        """Take a replica out of service (corrupt, or its topic deleted): no role, no fetcher, parked
        produces answered `parked_outcome`, long-polls woken, and no longer among `partitions`."""
        part.retired = True
        part.replica.become_none()      # anyone still holding the old replica now gets NOT_LEADER
        self.after_change(part)         # logs the role change
        if part.fetcher is not None:
            part.fetcher.cancel()
        part.purgatory.fail_all(parked_outcome)
        part.appended.fire()
        part.hw_moved.fire()
        key = (part.topic, part.partition)
        if self.partitions.get(key) is part:
            del self.partitions[key]

    def _delete(self, part: Partition) -> None:
        self._retire(part, "UNKNOWN_PARTITION")
        directory = part.store.directory
        try:
            part.store.close(flush=False)
            shutil.rmtree(directory)
        except OSError as exc:
            log.error("partition %r/%s: deleting %s: %s", part.topic, part.partition, directory, exc)
        self.events.emit("partition-deleted", topic=part.topic, partition=part.partition)

    def _create(self, topic: str, p: int) -> Partition:
        """Open a partition the metadata newly gives us, after the checks its input needs."""
        problem = topic_name_problem(topic)
        if problem is not None:
            raise ValueError(problem)
        if len(self.partitions) >= self.replica_budget:
            raise OSError(f"already {len(self.partitions)} replicas, the fd budget "
                          f"(broker/limits.replica_budget) is {self.replica_budget}")
        return self._open(topic, p)

    def _skip(self, topic: str, p: int, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"
        if self.skipped.get((topic, p)) != error:      # once per partition and error, not per version
            self.skipped[(topic, p)] = error
            self.events.emit("partition-skipped", topic=topic, partition=p, error=error[:300])
            log.error("partition %r/%s skipped: %s", topic, p, error)

    def _apply_partition(self, part: Partition, ps: PartitionState) -> None:
        r = part.replica
        me = self.config.node_id
        t = now_ms()
        if ps.leader == me and ps.leader_epoch <= part.lead_after_epoch:
            # metadata from before our re-registration (the controller fences our old incarnation and
            # bumps the epoch): leading at the old epoch with the log cut at the bad record would hand out
            # offsets the followers already hold
            log.debug("partition %r/%s: not leading epoch %s again after corruption", ps.topic, ps.partition,
                      ps.leader_epoch)
            return
        try:
            if ps.leader == me:
                err = r.become_leader(ps.leader_epoch, ps.isr, ps.replicas, ps.isr_version, t)
            elif ps.leader is not None and me in ps.replicas:
                err = r.become_follower(ps.leader_epoch, ps.leader, t, isr=ps.isr)
                if err is None:
                    r.on_isr_changed(ps.isr, ps.isr_version, t)
            else:
                err = None
                if r.role != "none" and ps.leader_epoch >= r.leader_epoch:
                    r.become_none()
        except ValueError as exc:   # e.g. leader not in the ISR: inconsistent metadata, wait for the next
            self.events.emit("metadata-rejected", partition=ps.partition, error=str(exc), **internal_topic(ps.topic))
            err = None
        if err is not None:
            log.debug("stale metadata for %s/%s: %s", ps.topic, ps.partition, err)
        self.after_change(part)
        if r.role == "follower":
            if part.fetcher is None:
                part.fetcher = Fetcher(self, part)
                part.fetcher.start()
            part.fetcher.wake()

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        md = self.metadata
        if md is None or broker_id not in md.brokers:
            return None
        b = md.brokers[broker_id]
        return b.host, b.port

    # --- ISR proposals ------------------------------------------------------------------------
    def _send_proposal(self, part: Partition, proposal: IsrProposal) -> None:
        if self._closing:
            part.replica.on_isr_proposal_failed(proposal)
            return
        task = asyncio.get_running_loop().create_task(self._alter_isr(part, proposal))
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)
        task.add_done_callback(lambda t: self.task_died(t, f"isr-proposal {part.topic}/{part.partition}"))

    def task_died(self, task: asyncio.Task, what: str) -> bool:
        """A done-callback for background tasks: one that ended in an exception is an `internal-error` event
        (never Python's "Task exception was never retrieved" at exit). True if it died that way."""
        if task.cancelled() or task.exception() is None:
            return False
        exc = task.exception()
        self.events.emit("internal-error", task=what, error=repr(exc)[:300])
        log.error("%s died: %r", what, exc, exc_info=exc)
        return True

    async def _alter_isr(self, part: Partition, proposal: IsrProposal) -> None:
        """Send an ISR proposal until the controller answers. No answer (the controller is unreachable,
        or the answer was lost) is no refusal: the controller may have applied it, so the proposal stays
        pending, the HW keeps counting the union of both ISRs (KIP-497's maximal ISR), and it is sent
        again until an answer comes or this broker stops leading with it. Dropping it instead let a
        leader commit with the smaller ISR an expansion the controller had made, whose new member was
        then elected without those records (an acknowledged write lost; the protocol rule
        truncate-below-hw showed it)."""
        r = part.replica
        logged = False
        while True:
            try:
                res = await self.controller.alter_isr(AlterIsr(proposal.topic, proposal.partition, proposal.leader_id,
                                                               proposal.leader_epoch, proposal.based_on_version,
                                                               tuple(proposal.isr)))
                break
            except ControllerError as exc:
                if not logged:           # once per proposal, not per attempt
                    logged = True
                    self.events.emit("isr-proposal-failed", partition=proposal.partition, isr=list(proposal.isr),
                                     kind=proposal.kind, error=exc.code, **internal_topic(proposal.topic))
                if self._closing or part.retired or r.pending_isr_proposal != proposal:
                    r.on_isr_proposal_failed(proposal)
                    self.after_change(part)
                    return
            await asyncio.sleep(ISR_RETRY_S)
            if self._closing or part.retired or r.pending_isr_proposal != proposal:
                return                   # answered meanwhile (metadata), or no longer leading with it
        if res.error == "NONE":
            r.on_isr_changed(res.isr, res.isr_version, now_ms())
        else:
            r.on_isr_proposal_failed(proposal)
            self.events.emit("isr-proposal-failed", partition=proposal.partition, isr=list(proposal.isr),
                             kind=proposal.kind, error=res.error, **internal_topic(proposal.topic))
            if (res.leader == self.config.node_id and res.leader_epoch == r.leader_epoch
                    and self.config.node_id in res.isr):
                r.on_isr_changed(res.isr, res.isr_version, now_ms())   # a newer ISR we had not seen yet
        self.after_change(part)

    def check_isr(self) -> None:
        t = now_ms()
        for part in self.partitions.values():
            if part.replica.role != "leader":
                continue
            proposal = part.replica.maybe_shrink_isr(t)
            if proposal is not None:
                self._send_proposal(part, proposal)
            self.after_change(part)

    # --- durability ---------------------------------------------------------------------------
    def checkpoint_all(self) -> None:
        """Write changed HW and epoch checkpoints; a disk error on one partition skips only that one."""
        for part in list(self.partitions.values()):
            self._disk_work(part, "checkpoint", lambda: self._checkpoint(part))

    def _checkpoint(self, part: Partition) -> None:
        hw = part.replica.hw
        if hw != part.checkpointed_hw:
            part.store.hw_checkpoint.write(hw)
            part.checkpointed_hw = hw
        self._write_epochs(part)

    def _write_epochs(self, part: Partition) -> None:
        """Persist the leader-epoch cache if it changed; after a failure it stays due for the next try."""
        due = part.replica.epoch_checkpoint_due()
        if due is not None:
            try:
                part.store.epoch_checkpoint.write(due)
            except OSError:
                part.replica.epoch_checkpoint_failed()
                raise

    def _write_producers(self, part: Partition, *, final: bool = False) -> None:
        """Persist a producer-table snapshot when one is due (every SNAPSHOT_EVERY records; at shutdown,
        `final`, whenever the log moved past the last one)."""
        due = part.replica.producer_snapshot_due(final=final)
        if due is not None:
            part.store.producer_snapshots.write(due.offset, due.last_epoch, due.entries)
            part.replica.producer_snapshot_written(due)

    def _disk_work(self, part: Partition, what: str, action) -> None:
        try:
            action()
        except OSError as exc:
            self.storage_failed(part, what, exc, "retrying")
        else:
            self.storage_ok(part, what)

    def storage_failed(self, part: Partition, what: str, exc: OSError, action: str) -> float:
        """Note that `what` (append, flush, checkpoint) failed on `part`: a `storage-error` event the first
        time, and again when the error changes (never once per retry). Returns how long it has failed."""
        key, error, now = (part.topic, part.partition, what), f"{what}: {exc}", time.monotonic()
        entry = self.storage_errors.get(key)
        if entry is None or entry[0] != error:
            since = now if entry is None else entry[1]
            entry = self.storage_errors[key] = [error, since, since]
            self.events.emit("storage-error", topic=part.topic, partition=part.partition, error=error[:300],
                             action=action)
            log.error("partition %r/%s: %s (%s)", part.topic, part.partition, error, action)
        return now - entry[1]

    def storage_ok(self, part: Partition, what: str) -> None:
        """`what` worked on `part`: if it had been failing, say it recovered."""
        entry = self.storage_errors.pop((part.topic, part.partition, what), None)
        if entry is not None:
            self.events.emit("storage-error", topic=part.topic, partition=part.partition, error=entry[0][:300],
                             action="resolved", failed_s=round(time.monotonic() - entry[1], 3))

    def _leader_disk_failed(self, part: Partition, what: str, exc: OSError, action: str) -> None:
        """A leader's append (taken back by the log) or its flush failed. When that has gone on for
        OFFLINE_AFTER_S since the last escalation, register again so that the controller elects a leader
        with a working disk."""
        failing = self.storage_failed(part, what, exc, action)
        entry = self.storage_errors[(part.topic, part.partition, what)]
        # entry[2] starts where the failing did, so this also waits OFFLINE_AFTER_S for the first time
        if time.monotonic() - entry[2] >= OFFLINE_AFTER_S:
            entry[2] = time.monotonic()
            self.events.emit("storage-error", topic=part.topic, partition=part.partition,
                             error=entry[0][:300], action="offline", failed_s=round(failing, 3))
            if self.rejoin is not None:
                self.rejoin("storage")

    def flush_all(self) -> None:
        for part in list(self.partitions.values()):
            self._disk_work(part, "flush", part.store.log.flush)

    # --- corruption ---------------------------------------------------------------------------
    def recover_corrupt(self, part: Partition, exc: LogCorruption) -> None:
        """Take a replica whose stored bytes failed verification out of service and recover it as a
        restart would (see the module docstring). Synchronous: nothing interleaves with it."""
        if part.retired:
            return
        key = (part.topic, part.partition)
        r = part.replica
        self.events.emit("corrupt", topic=part.topic, partition=part.partition, offset=exc.offset,
                         reason=exc.reason, where=exc.where, role=r.role, leader_epoch=r.leader_epoch,
                         leo=r.leo, hw=r.hw)
        log.error("partition %r/%s: corrupt record: %s; recovering it", part.topic, part.partition, exc)
        self._retire(part, TIMED_OUT)           # appended but not known to be replicated: indefinite
        try:
            part.store.close()          # what was appended is in our memory or page cache: keep it
        except OSError as close_exc:
            log.error("partition %r/%s: close after corruption: %s", part.topic, part.partition, close_exc)
        task = asyncio.get_running_loop().create_task(self._reopen(part.topic, part.partition, r.leader_epoch))
        self._reopening[key] = task
        task.add_done_callback(lambda t: self.task_died(t, f"reopen {part.topic}/{part.partition}"))

    async def _reopen(self, topic: str, p: int, epoch: int) -> None:
        """Open a corrupt replica again: its recovery scan (which cuts at the bad record) reads the whole
        partition, so it runs in a worker thread, never on the event loop that sends the heartbeats; then
        register again so that leadership moves. Meanwhile requests for it are answered KAFKA_STORAGE_ERROR
        (`absent`)."""
        key = (topic, p)
        try:
            store = await asyncio.to_thread(self._open_store, topic, p)
            if self._closing:
                store.close()
                return
            fresh = self._adopt(topic, p, store)
            fresh.lead_after_epoch = epoch      # never lead again at the epoch it held when corrupt
        except Exception as open_exc:   # noqa: BLE001 - reported and retried on the next metadata version
            self._skip(topic, p, open_exc)
        finally:
            self._reopening.pop(key, None)
        if self.rejoin is not None:
            self.rejoin("corrupt")

    async def quiesce(self) -> None:
        """First half of shutdown: no more ISR proposals, fetchers stopped (all at once), parked produces
        answered REQUEST_TIMED_OUT."""
        self._closing = True
        fetchers = [part.fetcher for part in self.partitions.values() if part.fetcher is not None]
        for part in self.partitions.values():
            part.purgatory.fail_all(TIMED_OUT)
        await asyncio.gather(*(f.stop() for f in fetchers), return_exceptions=True)
        await cancel_and_wait(list(self._isr_tasks))
        if self._reopening:             # a recovery scan in its thread: let it finish (it then closes)
            await asyncio.wait(list(self._reopening.values()), timeout=10.0)

    def close_storage(self) -> None:
        """Second half (synchronous, so nothing can interleave): flush every log, write the HW and epoch
        checkpoints, close the stores. A failure on one partition does not skip the others; flush and
        checkpoint failures are `storage-error` events (`_disk_work`), a failed close is logged."""
        self._closing = True
        for part in list(self.partitions.values()):
            self._disk_work(part, "flush", part.store.log.flush)
        self.checkpoint_all()
        for part in list(self.partitions.values()):
            self._disk_work(part, "producer-snapshot", lambda: self._write_producers(part, final=True))
        errors = []
        for part in self.partitions.values():
            try:
                part.store.close()
            except OSError as exc:
                errors.append(f"{part.topic}/{part.partition}: close: {exc}")
        if errors:
            log.error("shutdown: %s", "; ".join(errors))

    async def shutdown(self) -> None:
        await self.quiesce()
        self.close_storage()

    # --- requests -----------------------------------------------------------------------------
    async def produce(self, topic: str, p: int, acks: int, timeout_ms: int, values: list[bytes | None],
                      fields: BatchFields = PLAIN) -> dict[str, Any]:
        """Append as the leader and answer when `acks` says: {error, base_offset, leader_epoch, timestamp}
        (and `message` when refused). Records carry the keys, headers and producer timestamps of `fields`
        when given; without timestamps every record gets this broker's clock now (LogAppendTime), which
        `timestamp` returns. `fields.producer` (id, epoch, first sequence): an idempotent producer's batch
        (broker/replication/producers.py)."""
        part = self.partitions.get((topic, p))
        if part is None:
            return {"error": self.absent(topic, p), "base_offset": -1, "leader_epoch": -1}
        r = part.replica
        appended_at = int(time.time() * 1000)
        try:
            res = r.produce(values, acks=acks, now_ms=now_ms(), timestamp_ms=appended_at, fields=fields)
        except OSError as exc:                      # the log took the append back: certainly not written
            self._leader_disk_failed(part, "append", exc, "refused")
            return {"error": STORAGE_ERROR, "base_offset": -1, "leader_epoch": r.leader_epoch}
        except LogCorruption as exc:                # reading the log for the producers' state failed
            self.recover_corrupt(part, exc)
            return {"error": STORAGE_ERROR, "base_offset": -1, "leader_epoch": r.leader_epoch}
        if res.message:
            return {"error": _code(res.error), "base_offset": -1, "leader_epoch": res.epoch, "message": res.message}
        if res.base_offset >= 0:
            self.storage_ok(part, "append")
        self.after_change(part)
        if self.commit is not None and res.base_offset >= 0:
            try:
                await self.commit.durable(part)    # flush="always": nothing is acknowledged unflushed
            except OSError as exc:                  # appended, maybe replicated, not durable: indefinite
                self._leader_disk_failed(part, "flush", exc, "retrying")
                return {"error": TIMED_OUT, "base_offset": res.base_offset, "leader_epoch": res.epoch}
            self.storage_ok(part, "flush")
            if part.retired:                        # recovered from corruption meanwhile: outcome unknown
                return {"error": TIMED_OUT, "base_offset": res.base_offset, "leader_epoch": res.epoch}
        if res.error is not None or res.complete:
            if res.error is None and acks != 0:
                self._log_ack(part, res, acks, res.hw, res.isr)
            return {"error": _code(res.error), "base_offset": res.base_offset, "leader_epoch": res.epoch,
                    "timestamp": appended_at}
        outcome, decided = await part.purgatory.park_decided(res.last_offset, res.epoch, timeout_ms / 1000.0)
        if outcome == "NONE" and decided is not None:
            self._log_ack(part, res, acks, decided.hw, decided.isr)
        return {"error": outcome, "base_offset": res.base_offset, "leader_epoch": res.epoch, "timestamp": appended_at}

    def _log_ack(self, part: Partition, res, acks: int, hw: int, isr) -> None:
        """The `ack` event: a produce is about to be answered success, with the HW and ISR it was decided
        on and the log's flushed offset now (the protocol rules check them, broker/rules)."""
        self.events.emit("ack", partition=part.partition, **internal_topic(part.topic), base=res.base_offset,
                         last=res.last_offset,
                         epoch=res.epoch, acks=acks, hw=hw, isr=list(isr),
                         min_isr=self.repl_config.min_insync_replicas, flushed=part.store.log.flushed_offset())

    async def fetch(self, topic: str, p: int, offset: int, max_records: int, max_wait_ms: int,
                    by: FetchedBy = CONSUMER) -> dict[str, Any]:
        """A FETCH of `max_records` from `offset`, waiting up to `max_wait_ms` for records: a follower's
        (`by.replica_id` >= 0) or a consumer's."""
        replica_id, current_leader_epoch = by
        part = self.partitions.get((topic, p))
        if part is None:
            return {"error": self.absent(topic, p), "records": [], "hw": -1, "leader_epoch": -1, "log_start": 0}
        cle = current_leader_epoch if current_leader_epoch >= 0 else None
        try:
            if replica_id >= 0:
                return await self._follower_fetch(part, replica_id, offset, cle, max_records, max_wait_ms)
            return await self._consumer_fetch(part, offset, cle, max_records, max_wait_ms)
        except LogCorruption as exc:
            self.recover_corrupt(part, exc)
            return {"error": STORAGE_ERROR, "records": [], "hw": -1, "leader_epoch": -1, "log_start": 0}

    @staticmethod
    def records_within(part: Partition, offset: int, max_records: int, max_bytes: int = FETCH_MAX_BYTES) -> int:
        """`max_records`, lowered to what fits in `max_bytes` as stored (at least one record): how many a
        fetch of either protocol reads, so it reads by bytes, not by count."""
        return max(1, part.store.log.count_within(offset, max_records, max_bytes))

    async def _follower_fetch(self, part, replica_id, offset, cle, max_records, max_wait_ms) -> dict[str, Any]:
        r = part.replica
        resp = r.handle_fetch(replica_id, offset, cle, now_ms(), self.records_within(part, offset, max_records))
        self.after_change(part)
        if resp.error is None and not resp.records and max_wait_ms > 0:
            if await part.appended.wait(max_wait_ms / 1000.0):
                resp = r.handle_fetch(replica_id, offset, cle, now_ms(),
                                      self.records_within(part, offset, max_records))
                self.after_change(part)
        return {"error": _code(resp.error), "records": [replica_record(rec) for rec in resp.records],
                "hw": resp.high_watermark, "leader_epoch": resp.leader_epoch, "log_start": resp.log_start,
                "leo": resp.leader_leo}

    async def _consumer_fetch(self, part, offset, cle, max_records, max_wait_ms) -> dict[str, Any]:
        r = part.replica
        read = r.read_for_consumer(offset, self.records_within(part, offset, max_records), cle)
        if read.error is None and not read.records and max_wait_ms > 0 and offset >= read.high_watermark:
            if await part.hw_moved.wait(max_wait_ms / 1000.0):
                read = r.read_for_consumer(offset, self.records_within(part, offset, max_records), cle)
        return {"error": _code(read.error), "records": [[rec.offset, rec.epoch, rec.value] for rec in read.records],
                "hw": read.high_watermark, "leader_epoch": read.leader_epoch, "log_start": r.log.log_start()}

    def read_committed(self, topic: str, p: int, offset: int, max_records: int,
                       current_leader_epoch: int) -> tuple[str, tuple, int, int, int]:
        """A consumer read without waiting, keeping whole records (timestamps included) for the Kafka
        listener: (error, records, hw, leader_epoch, log_start). Same checks as `fetch`'s consumer path."""
        part = self.partitions.get((topic, p))
        if part is None:
            return self.absent(topic, p), (), -1, -1, -1
        cle = current_leader_epoch if current_leader_epoch >= 0 else None
        r = part.replica
        try:
            read = r.read_for_consumer(offset, max_records, cle)
        except LogCorruption as exc:
            self.recover_corrupt(part, exc)
            return STORAGE_ERROR, (), -1, -1, -1
        return _code(read.error), read.records, read.high_watermark, read.leader_epoch, r.log.log_start()

    def offsets_for_leader_epoch(self, topic: str, p: int, leader_epoch: int, current_leader_epoch: int,
                                 replica_id: int = -1) -> dict:
        part = self.partitions.get((topic, p))
        if part is None:
            return {"error": self.absent(topic, p), "leader_epoch": -1, "end_offset": -1}
        cle = current_leader_epoch if current_leader_epoch >= 0 else None
        resp = part.replica.handle_offsets_for_leader_epoch(leader_epoch, cle, replica_id if replica_id >= 0 else None)
        self.after_change(part)           # log the epoch-answer / fetch-fenced events now
        if resp.error is not None or resp.end is None:
            return {"error": _code(resp.error), "leader_epoch": -1, "end_offset": -1}
        return {"error": "NONE", "leader_epoch": resp.end.epoch, "end_offset": resp.end.end_offset}

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for (topic, p), part in sorted(self.partitions.items()):
            r = part.replica
            out.append({"topic": topic, "partition": p, "role": r.role, "leader_epoch": r.leader_epoch,
                        "leader": r.leader_id, "leo": r.leo, "hw": r.hw, "isr": sorted(r.isr),
                        "isr_version": r.isr_version, "phase": r.follower_phase,
                        "epochs": [list(e) for e in r.epoch_cache.entries()]})
        return out


ISR_RETRY_S = 0.2    # between attempts of an ISR proposal the controller did not answer


def _status(r: PartitionReplica, last: int, epoch: int) -> tuple[str, str | None, object]:
    st = r.produce_status(last, epoch)
    return st.state, (None if st.error is None else str(st.error)), st

