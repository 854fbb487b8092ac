"""One partition replica's replication state machine: leader, follower, truncation, HW, ISR.

Pure: no sockets, clocks, files, threads or randomness. Time comes in as `now_ms`; I/O is the shell's
job: it sends `next_follower_request()` to the leader, hands the answer back, persists `hw`,
`epoch_checkpoint_due()` and `producer_snapshot_due()`, sends ISR proposals to the controller and logs
`drain_events()`.

Seed rules and where they live here:
- leader LEO/HW on produce (000 六.2, 五.3): `produce` appends, then `_maybe_increment_hw`.
- fetch on the leader (000 二.2, 六.2): `handle_fetch` reads, sets remote LEO = fetch offset BEFORE
  answering, recomputes HW = min LEO over leader + counted replicas (leader.py), answers with the HW.
- follower LEO/HW (000 二.1, 三): `append_as_follower` appends, then HW = min(leader HW, own LEO).
- HW on leadership / ISR shrink (000 五.1-2): `become_leader`, `on_isr_changed`.
- truncation (000 七, 八; KIP-101/279): `become_follower`, `on_epoch_response`, truncation.py.
- leader-epoch cache (000 八, 002): epoch_cache.py; entries added by `become_leader` (KAFKA-7415)
  and by appends of records with a newer epoch.
- KIP-320 fencing of follower requests (`_follower_request_check`), switchable with
  `config.fetch_fencing` (off: a pre-2.1 broker that serves a zombie fetcher, KAFKA-6880).
- KIP-966's strict HW rule (`config.strict_min_isr_hw`): `_maybe_increment_hw`.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Iterable, Sequence

from broker.records import Log, Record
from broker.replication import truncation
from broker.replication.config import ReplicationConfig
from broker.replication.epoch_cache import EpochCache, EpochEndOffset
from broker.replication.errors import ErrorCode, check_leader_epoch
from broker.replication.events import (
    EpochAnswer, EpochQuery, Event, FetchFenced, FollowerServed, HwChange, IsrChange, IsrExpandProposed,
    LeaderChange, ProducersLoaded, RoleChange,
    StaleFetchServed, Truncate,
)
from broker.replication.leader import LeaderState, RemoteReplica
from broker.replication.producers import (
    APPEND, DUPLICATE, MAX_SEQUENCE, SNAPSHOT_EVERY, BatchMeta, ProducerStates, Snapshot, last_sequence,
)
from broker.replication.messages import (
    PLAIN, BatchFields, ConsumerRead, EpochRequest, EpochResponse, FetchRequest, FetchResponse, FollowerRequest,
    IsrProposal, ProduceResult, ProduceStatus,
)
from broker.errors import StateError

LEADER, FOLLOWER, NONE = "leader", "follower", "none"
# follower phases
TRUNCATING, FETCHING, FENCED = "truncating", "fetching", "fenced"

ACKS_ALL = -1


@dataclass(frozen=True)
class Checkpoints:
    """What a replica's checkpoint files held at start-up: the HW, the leader-epoch entries [(epoch, start
    offset)] and the newest producer-table snapshot (None: none). NO_CHECKPOINTS: a new replica's."""
    hw: int = 0
    epoch_entries: Iterable[tuple[int, int]] = ()
    producer_snapshot: Snapshot | None = None


NO_CHECKPOINTS = Checkpoints()


class PartitionReplica:
    """The replica of one partition on one broker.

    Construct it at start-up from what survived on disk: the log (possibly missing an unflushed
    tail) and its `checkpoints`: the HW (clamped to the log), the leader-epoch entries (entries
    starting at or past the log end are dropped, as Kafka does on recovery) and the newest
    producer-table snapshot, if any (used when the table is first needed, if it still fits the log).
    The role is "none" until the controller says `become_leader` or `become_follower`.
    """

    def __init__(self, topic: str, partition: int, broker_id: int, log: Log, config: ReplicationConfig,
                 *, checkpoints: Checkpoints = NO_CHECKPOINTS):
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.log = log
        self.config = config
        self.role = NONE
        self.leader_epoch = -1
        self.leader_id: int | None = None
        self.epoch_cache = EpochCache(checkpoints.epoch_entries)
        loaded_version = self.epoch_cache.version       # what the checkpoint already holds
        self.epoch_cache.truncate_from_end(log.leo())
        self._rebuild_missing_epochs()
        self._hw = min(max(checkpoints.hw, log.log_start()), log.leo())
        self._events: list[Event] = []
        self._saved_epoch_version = loaded_version       # recovery changes are due for a checkpoint
        self._leader: LeaderState | None = None
        self._unsent_proposal: IsrProposal | None = None
        self._phase: str | None = None
        self._query_epoch: int | None = None
        self._follower_isr: tuple[int, ...] = ()
        # KIP-841: brokers the controller has fenced; the leader does not propose them for the ISR (the
        # controller would refuse, and a zombie fetcher would be proposed again every fetch round)
        self._fenced_brokers: frozenset[int] = frozenset()
        # leader: follower requests already logged as fetch-fenced / stale-fetch-served in this epoch
        self._logged_requests: set[tuple] = set()
        # follower: the last refused OffsetsForLeaderEpoch logged (a refusal is retried every back-off)
        self._last_query_refusal: tuple | None = None
        # idempotent producers (KIP-98): built before the first idempotent batch is judged, from the newest
        # snapshot on disk that still fits the log plus the records after it, else from the whole log
        self.producers = ProducerStates()
        self._snapshot = checkpoints.producer_snapshot  # the newest snapshot on disk not made wrong by a truncation
        self._producers_loaded_once = False

    # --- read-only views ------------------------------------------------------------------------

    @property
    def leo(self) -> int:
        return self.log.leo()

    @property
    def hw(self) -> int:
        return self._hw

    @property
    def isr(self) -> frozenset[int]:
        """The ISR as this replica knows it (the leader's committed ISR; for a follower, what the
        controller last said)."""
        return self._leader.isr if self._leader else frozenset(self._follower_isr)

    @property
    def isr_version(self) -> int:
        return self._leader.isr_version if self._leader else -1

    @property
    def pending_isr_proposal(self) -> IsrProposal | None:
        return self._leader.pending if self._leader else None

    @property
    def follower_phase(self) -> str | None:
        """"truncating" (waiting for OffsetsForLeaderEpoch), "fetching", "fenced" (our leader epoch is
        stale: wait for the controller), or None when not a follower."""
        return self._phase

    @property
    def epoch_start_offset(self) -> int | None:
        """Leader only: the first offset of the current epoch (the LEO at election)."""
        return self._leader.epoch_start_offset if self._leader else None

    def remote_leo(self, replica_id: int) -> int | None:
        """Leader only: the follower's LEO as the leader knows it (its last fetch offset)."""
        if self._leader is None or replica_id not in self._leader.remotes:
            return None
        return self._leader.remotes[replica_id].leo

    def drain_events(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    def epoch_checkpoint_due(self) -> list[tuple[int, int]] | None:
        """The epoch entries if they changed since the last call (persist them), else None."""
        if self.epoch_cache.version == self._saved_epoch_version:
            return None
        self._saved_epoch_version = self.epoch_cache.version
        return self.epoch_cache.entries()

    def epoch_checkpoint_failed(self) -> None:
        """The entries `epoch_checkpoint_due` returned could not be written: they are due again."""
        self._saved_epoch_version = -1

    def snapshot(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "broker": self.broker_id,
                "role": self.role, "epoch": self.leader_epoch, "leader": self.leader_id,
                "leo": self.leo, "hw": self.hw, "isr": sorted(self.isr), "epochs": self.epoch_cache.entries(),
                "phase": self._phase}

    # --- role changes (from the controller) -----------------------------------------------------

    def become_leader(self, epoch: int, isr: Iterable[int], replicas: Iterable[int], isr_version: int,
                      now_ms: int) -> ErrorCode | None:
        """Take leadership of `epoch`. Returns FENCED_LEADER_EPOCH (and changes nothing) for a stale
        epoch; the same epoch again while leader only updates the ISR."""
        isr_set = frozenset(isr)
        if epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if self.role == LEADER and epoch == self.leader_epoch:
            self.on_isr_changed(isr_set, isr_version, now_ms)
            return None
        if self.broker_id not in isr_set:
            raise ValueError(f"partition {self.partition}: become_leader with ISR {sorted(isr_set)} "
                             f"that lacks this broker {self.broker_id}")
        leo = self.leo
        replicas_t = tuple(replicas)
        self.role, self.leader_epoch, self.leader_id = LEADER, epoch, self.broker_id
        self._phase, self._query_epoch, self._follower_isr = None, None, ()
        self.epoch_cache.assign(epoch, leo)                     # KAFKA-7415: the epoch starts here
        state = LeaderState(epoch=epoch, epoch_start_offset=leo, isr=isr_set, isr_version=isr_version,
                            replicas=replicas_t)
        for rid in sorted(set(replicas_t) | isr_set):
            if rid != self.broker_id:
                state.remotes[rid] = RemoteReplica(
                    rid, leo=None, last_caught_up_ms=now_ms if rid in isr_set else None,
                    last_fetch_leader_leo=leo, last_fetch_ms=now_ms)
        self._leader, self._unsent_proposal = state, None
        self._logged_requests = set()
        self._events.append(RoleChange(self.partition, LEADER, epoch))
        self._events.append(LeaderChange(self.partition, self.broker_id, epoch, tuple(sorted(isr_set))))
        self._maybe_increment_hw(now_ms)
        return None

    def become_follower(self, epoch: int, leader_id: int, now_ms: int,
                        isr: Iterable[int] = ()) -> ErrorCode | None:
        """Follow `leader_id` in `epoch`. "hw" truncates to the HW now; "leader-epoch"/"kip-101" keep
        the log and first ask the leader where our latest epoch ends (see `next_follower_request`).
        Returns FENCED_LEADER_EPOCH for a stale epoch; the same epoch and leader again is a no-op."""
        if epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if (self.role == FOLLOWER and epoch == self.leader_epoch and leader_id == self.leader_id
                and self._phase != FENCED):
            return None
        if leader_id == self.broker_id:
            raise ValueError(f"partition {self.partition}: become_follower of itself ({leader_id})")
        self.role, self.leader_epoch, self.leader_id = FOLLOWER, epoch, leader_id
        self._leader, self._unsent_proposal = None, None
        self._follower_isr = tuple(sorted(isr))
        self._last_query_refusal = None
        self._events.append(RoleChange(self.partition, FOLLOWER, epoch))
        self._events.append(LeaderChange(self.partition, leader_id, epoch, self._follower_isr))
        self._query_epoch = None if self.config.truncation == "hw" else truncation.first_query_epoch(self.epoch_cache)
        if self._query_epoch is None:
            # "hw" mode, or nothing to ask about (no epochs: empty log): the HW is all we know.
            self._truncate(self.hw, "hw")
            self._phase = FETCHING
        else:
            self._phase = TRUNCATING
        return None

    def become_none(self) -> None:
        """Stop replicating (partition moved away / shutting down); the log is kept."""
        self.role, self._leader, self._unsent_proposal = NONE, None, None
        self._phase, self._query_epoch = None, None
        self._events.append(RoleChange(self.partition, NONE, self.leader_epoch))

    def set_fenced_brokers(self, broker_ids: Iterable[int]) -> None:
        """The brokers the controller currently fences (from the metadata): not proposed for the ISR
        until they are live again (KIP-841)."""
        self._fenced_brokers = frozenset(broker_ids)

    # --- leader: produce ------------------------------------------------------------------------

    def produce(self, values: Sequence[bytes | None], *, acks: int, now_ms: int, timestamp_ms: int | None = None,
                fields: BatchFields = PLAIN) -> ProduceResult:
        """Append `values` as the leader. acks=0/1 complete on append; acks=-1 (all) is refused with
        NOT_ENOUGH_REPLICAS when |ISR| < min_insync_replicas, else completes when the HW passes the
        last offset (see `produce_status`). Each record may carry a key, headers and its producer's
        timestamp (CreateTime) in `fields`; without `fields.timestamps` every record gets `timestamp_ms`
        (else now_ms). `fields.producer` = (producer id, producer epoch, first sequence) makes it an
        idempotent producer's batch (producers.py): refused out of sequence or from a fenced epoch, and a
        retry of a batch already in the log is answered with that batch's offsets (`duplicate`) instead of
        being appended again."""
        keys, headers, timestamps, producer = fields.keys, fields.headers, fields.timestamps, fields.producer
        if acks not in (0, 1, ACKS_ALL):
            raise ValueError(f"produce: acks must be 0, 1 or -1 (all), got {acks!r}")
        if not values:
            raise ValueError("produce: no values")
        for name, given in (("keys", keys), ("headers", headers), ("timestamps", timestamps)):
            if given is not None and len(given) != len(values):
                raise ValueError(f"produce: {len(given)} {name} for {len(values)} values")
        if self.role != LEADER or self._leader is None:
            return ProduceResult(ErrorCode.NOT_LEADER, epoch=self.leader_epoch)
        if acks == ACKS_ALL and len(self._leader.isr) < self.config.min_insync_replicas:
            return ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS, epoch=self.leader_epoch)
        base = self.leo
        ts = now_ms if timestamp_ms is None else timestamp_ms
        epoch = self.leader_epoch
        if producer is not None:
            verdict = self._judge(producer, len(values))
            if verdict.action == DUPLICATE:
                return self._outcome(verdict.batch.first_offset, verdict.batch.last_offset, acks, duplicate=True)
            if verdict.action != APPEND:
                return ProduceResult(ErrorCode(verdict.error), epoch=epoch, message=verdict.message)
        if headers is None and keys is None and producer is None:   # plain records (the native client's; most Kafka clients')
            if timestamps is None:
                records = [Record(base + i, epoch, v, None, ts) for i, v in enumerate(values)]
            else:
                records = [Record(base + i, epoch, v, None, t) for i, (v, t) in enumerate(zip(values, timestamps))]
        else:       # each field's column first, so that one comprehension builds every kind of record
            n = len(values)
            pid, pepoch, first_seq = producer if producer is not None else (-1, -1, None)
            seqs = repeat(-1, n) if first_seq is None else (
                range(first_seq, first_seq + n) if first_seq + n <= MAX_SEQUENCE + 1
                else (last_sequence(first_seq, i + 1) for i in range(n)))    # wraps past 2**31 - 1
            records = [Record(base + i, epoch, v, k, t, h, pid, pepoch, s) for i, (v, k, t, h, s) in enumerate(zip(
                values, keys if keys else repeat(None, n), timestamps if timestamps is not None else repeat(ts, n),
                (tuple(h) for h in headers) if headers is not None else repeat((), n), seqs))]
        self.log.append(records)
        self._note_epochs(records)
        if producer is not None:             # one batch: noted without looking at each record
            self.producers.note_batch(producer[0], producer[1], BatchMeta(
                records[0].sequence, records[-1].sequence, records[0].offset, records[-1].offset))
        self._maybe_increment_hw(now_ms)
        return self._outcome(base, base + len(records) - 1, acks)

    def _outcome(self, first: int, last: int, acks: int, *, duplicate: bool = False) -> ProduceResult:
        """The answer for records at first..last now in the log: complete for acks 0/1, else as far as
        `produce_status` says (a `duplicate` is an idempotent retry of records appended before)."""
        if acks != ACKS_ALL:
            return ProduceResult(None, first, last, self.leader_epoch, complete=True, hw=self.hw,
                                 isr=tuple(sorted(self._leader.isr)), duplicate=duplicate)
        status = self.produce_status(last, self.leader_epoch)
        return ProduceResult(status.error, first, last, self.leader_epoch, complete=status.state == "complete",
                             hw=status.hw, isr=status.isr, duplicate=duplicate)

    def _judge(self, producer: tuple[int, int, int], count: int):
        if not self.producers.loaded:
            self.load_producers()
        pid, pepoch, first_seq = producer
        return self.producers.check(pid, pepoch, first_seq, count)

    def load_producers(self) -> None:
        """(Re)build the idempotent producers' table: the snapshot plus the records after it if it fits
        the log, else the whole log. A `producers-loaded` event says which, and why a snapshot was not used."""
        snap, rejected = self._snapshot, None
        if snap is not None:
            rejected = self._snapshot_misfit(snap)
            if rejected is not None:
                self._snapshot = snap = None
        if snap is not None:
            self.producers.restore(snap.entries)
            replayed = self.producers.replay(self._chunks(snap.offset))
        else:
            replayed = self.producers.rebuild(self._chunks(self.log.log_start()))
        self._events.append(ProducersLoaded(self.partition, snap.offset if snap else None, replayed,
                                            len(self.producers),
                                            "truncation" if self._producers_loaded_once else "opened", rejected))
        self._producers_loaded_once = True

    def _snapshot_misfit(self, snap: Snapshot) -> str | None:
        """Why `snap` cannot be the start of this log's table, or None when it can."""
        start, leo = self.log.log_start(), self.leo
        if not start <= snap.offset <= leo:
            return f"snapshot offset {snap.offset} is outside the log {start}..{leo}"
        epoch = self._epoch_before(snap.offset)
        if snap.offset > start and epoch != snap.last_epoch:
            return (f"the record at offset {snap.offset - 1} is of epoch {epoch}, the snapshot was taken "
                    f"after one of epoch {snap.last_epoch}")
        return None

    def _epoch_before(self, offset: int) -> int:
        """The leader epoch of the record at `offset` - 1 (-1 when the log holds none there): what a
        snapshot at `offset` is fenced by."""
        before = self.log.read(offset - 1, 1) if offset > self.log.log_start() else []
        return before[0].epoch if before else -1

    def producer_snapshot_due(self, *, final: bool = False) -> Snapshot | None:
        """A snapshot of the producer table to persist: every SNAPSHOT_EVERY records appended since the
        last one, and at shutdown (`final`) whenever the log moved past it. None while the table is not
        loaded (nothing in it that the log does not already say). Call `producer_snapshot_written` once
        it is on disk."""
        if not self.producers.loaded:
            return None
        leo, last = self.leo, self._snapshot.offset if self._snapshot is not None else self.log.log_start()
        if leo == last or (not final and leo - last < SNAPSHOT_EVERY):
            return None
        return Snapshot(leo, self._epoch_before(leo), self.producers.export())

    def producer_snapshot_written(self, snap: Snapshot) -> None:
        """`snap` (from `producer_snapshot_due`) is on disk: a reload may start from it."""
        if snap.offset <= self.leo:
            self._snapshot = snap

    def produce_status(self, last_offset: int, epoch: int) -> ProduceStatus:
        """Where a parked acks=all produce stands (Kafka's checkEnoughReplicasReachOffset)."""
        if self.role != LEADER or self._leader is None or self.leader_epoch != epoch:
            return ProduceStatus("failed", ErrorCode.NOT_LEADER)
        if self.hw > last_offset:
            if len(self._leader.isr) >= self.config.min_insync_replicas:
                return ProduceStatus("complete", hw=self.hw, isr=tuple(sorted(self._leader.isr)))
            return ProduceStatus("failed", ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return ProduceStatus("waiting")

    # --- leader: serving followers and consumers --------------------------------------------------

    def handle_fetch(self, replica_id: int, fetch_offset: int, current_leader_epoch: int | None, now_ms: int,
                     max_records: int | None = None) -> FetchResponse:
        """A follower's fetch (seed 000 二.2): read, set its remote LEO = fetch_offset, update its
        caught-up time, maybe propose adding it to the ISR, recompute the HW, answer with the HW.
        The request's leader epoch is checked only with `config.fetch_fencing` (KIP-320)."""
        error = self._follower_request_check(replica_id, "fetch", current_leader_epoch)
        if error is not None:
            return FetchResponse(error, leader_epoch=self.leader_epoch)
        assert self._leader is not None
        remote = self._leader.remotes.get(replica_id)
        leo, start = self.leo, self.log.log_start()
        if remote is None:
            return FetchResponse(ErrorCode.NOT_ASSIGNED_REPLICA, high_watermark=self.hw,
                                 leader_epoch=self.leader_epoch, leader_leo=leo, log_start=start)
        if fetch_offset < start or fetch_offset > leo:
            return FetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark=self.hw,
                                 leader_epoch=self.leader_epoch, leader_leo=leo, log_start=start)
        limit = self.config.replica_fetch_max_records if max_records is None else max_records
        records = tuple(self.log.read(fetch_offset, limit))
        remote.update_fetch(fetch_offset, leo, now_ms)
        self._maybe_expand_isr(remote)
        self._maybe_increment_hw(now_ms)
        return FetchResponse(None, records, self.hw, self.leader_epoch, leo, start)

    def end_offset_for_epoch(self, requested_epoch: int) -> EpochEndOffset:
        """OffsetsForLeaderEpoch: (largest epoch <= requested we know, where it ends: the next epoch's
        start offset, or our LEO for the latest epoch); UNDEFINED when we know no epoch at all."""
        return self.epoch_cache.end_offset_for(requested_epoch, self.leo)

    def handle_offsets_for_leader_epoch(self, requested_epoch: int, current_leader_epoch: int | None,
                                        replica_id: int | None = None) -> EpochResponse:
        """The leader's side of OffsetsForLeaderEpoch, with KIP-320 fencing when `config.fetch_fencing`.
        `replica_id` (the asking broker, None if unknown) only goes into the events."""
        error = self._follower_request_check(replica_id, "epoch", current_leader_epoch)
        if error is not None:
            return EpochResponse(error, None, self.leader_epoch)
        end = self.end_offset_for_epoch(requested_epoch)
        self._events.append(EpochAnswer(self.partition, replica_id, requested_epoch, end.epoch, end.end_offset))
        return EpochResponse(None, end, self.leader_epoch)

    def read_for_consumer(self, offset: int, max_records: int, current_leader_epoch: int | None = None) -> ConsumerRead:
        """A client read from the leader: records in [offset, HW), at most max_records. The client's
        leader epoch is always checked (`fetch_fencing` is about follower requests only)."""
        error = self._leader_check(current_leader_epoch)
        if error is not None:
            return ConsumerRead(error, leader_epoch=self.leader_epoch)
        if offset < self.log.log_start() or offset > self.leo:
            return ConsumerRead(ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark=self.hw, leader_epoch=self.leader_epoch)
        n = min(max_records, self.hw - offset)
        records = tuple(self.log.read(offset, n)) if n > 0 else ()
        return ConsumerRead(None, records, self.hw, self.leader_epoch)

    # --- leader: ISR ------------------------------------------------------------------------------

    def isr_shrink_due(self, now_ms: int) -> bool:
        """Would `maybe_shrink_isr(now_ms)` propose a shrink? (A question only: nothing changes.)"""
        st = self._leader
        if self.role != LEADER or st is None or st.pending is not None:
            return False
        return bool(st.out_of_sync(self.broker_id, self.leo, now_ms, self.config.replica_lag_time_max_ms))

    def maybe_shrink_isr(self, now_ms: int) -> IsrProposal | None:
        """Propose removing ISR followers not caught up for replica_lag_time_max_ms (never the
        leader). None when nothing to remove, not leader, or a proposal is already in flight."""
        st = self._leader
        if self.role != LEADER or st is None or st.pending is not None:
            return None
        out = st.out_of_sync(self.broker_id, self.leo, now_ms, self.config.replica_lag_time_max_ms)
        if not out:
            return None
        proposal = self._propose(tuple(sorted(st.isr - set(out))), "shrink")
        self._unsent_proposal = None      # handed to the caller right here
        return proposal

    def take_isr_proposal(self) -> IsrProposal | None:
        """An ISR proposal made inside another call (an expansion during `handle_fetch`) that has not
        been handed out yet. The shell sends it to the controller and reports back with
        `on_isr_changed` or `on_isr_proposal_failed`."""
        p, self._unsent_proposal = self._unsent_proposal, None
        return p

    def on_isr_changed(self, isr: Iterable[int], version: int, now_ms: int) -> None:
        """The controller committed ISR `isr` at `version` (ours or its own change). Older versions
        are ignored. Recomputes the HW (the ISR may have shrunk, seed 000 五.2)."""
        st = self._leader
        if self.role != LEADER or st is None:
            self._follower_isr = tuple(sorted(isr))
            return
        isr_set = frozenset(isr)
        if version <= st.isr_version:
            return
        if self.broker_id not in isr_set:
            raise ValueError(f"partition {self.partition}: ISR {sorted(isr_set)} at version {version} "
                             f"lacks its leader {self.broker_id}")
        st.isr, st.isr_version, st.pending = isr_set, version, None
        self._unsent_proposal = None
        for rid in isr_set - {self.broker_id} - st.remotes.keys():
            st.remotes[rid] = RemoteReplica(rid, last_fetch_leader_leo=self.leo, last_fetch_ms=now_ms)
        self._events.append(IsrChange(self.partition, tuple(sorted(isr_set)), version))
        self._maybe_increment_hw(now_ms)

    def on_isr_proposal_failed(self, proposal: IsrProposal) -> None:
        """The controller rejected the proposal (stale version or epoch) or it timed out."""
        if self._leader is not None and self._leader.pending == proposal:
            self._leader.pending = None
        if self._unsent_proposal == proposal:
            self._unsent_proposal = None

    # --- follower -------------------------------------------------------------------------------

    def next_follower_request(self) -> FollowerRequest | None:
        """What to send to the leader next: an EpochRequest while truncating, else a FetchRequest
        from our LEO. None when not a follower or fenced (wait for the controller)."""
        if self.role != FOLLOWER or self.leader_id is None:
            return None
        if self._phase == TRUNCATING:
            assert self._query_epoch is not None
            return EpochRequest(self.leader_id, self.broker_id, self._query_epoch, self.leader_epoch)
        if self._phase == FETCHING:
            return FetchRequest(self.leader_id, self.broker_id, self.leo, self.leader_epoch,
                                self.config.replica_fetch_max_records)
        return None

    def on_epoch_response(self, request: EpochRequest, response: EpochResponse) -> bool:
        """Apply the leader's OffsetsForLeaderEpoch answer (truncation.py). Returns False when the
        answer is stale (we moved on since the request) and was ignored."""
        if (self.role != FOLLOWER or self._phase != TRUNCATING or request.leader_id != self.leader_id
                or request.current_leader_epoch != self.leader_epoch or request.requested_epoch != self._query_epoch):
            return False
        if response.error is not None or response.end is None:
            refusal = (request.requested_epoch, self.leader_epoch, str(response.error))
            if refusal != self._last_query_refusal:      # UNKNOWN_LEADER_EPOCH / NOT_LEADER repeat each back-off
                self._last_query_refusal = refusal
                self._events.append(EpochQuery(self.partition, request.leader_id, request.requested_epoch,
                                               self.leader_epoch, str(response.error) if response.error else None,
                                               None, None, None))
            if response.error == ErrorCode.FENCED_LEADER_EPOCH:
                self._phase = FENCED
            return True                   # UNKNOWN_LEADER_EPOCH / NOT_LEADER: ask again later
        self._last_query_refusal = None
        step = truncation.after_epoch_answer(self.config.truncation, self.epoch_cache, self.leo, self.hw, response.end)
        leo_before = self.leo
        if step.truncate_to is not None:
            self._truncate(step.truncate_to, step.why)
        cut_to = self.leo if self.leo < leo_before else None
        self._events.append(EpochQuery(self.partition, request.leader_id, request.requested_epoch, self.leader_epoch,
                                       None, response.end.epoch, response.end.end_offset, cut_to))
        if step.ask_again_epoch is None:
            self._phase, self._query_epoch = FETCHING, None
        else:
            self._query_epoch = step.ask_again_epoch
        return True

    def on_fetch_response(self, request: FetchRequest, response: FetchResponse) -> bool:
        """Apply the leader's answer to our fetch. Returns False when stale and ignored."""
        if (self.role != FOLLOWER or self._phase != FETCHING or request.leader_id != self.leader_id
                or request.current_leader_epoch != self.leader_epoch or request.fetch_offset != self.leo):
            return False
        if response.error == ErrorCode.FENCED_LEADER_EPOCH:
            self._phase = FENCED
        elif response.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if response.leader_leo < self.leo:
                # The leader's log is shorter than ours (it was elected with less): cut to its end.
                self._truncate(response.leader_leo, "offset-out-of-range")
        elif response.error is None:
            self.append_as_follower(response.records, response.high_watermark)
        return True

    def append_as_follower(self, records: Sequence[Record], leader_hw: int) -> None:
        """Append the leader's records (seed 000 二.1), add an epoch entry for each epoch change (a
        newer epoch: see `_note_epochs`), then HW = min(leader HW, own LEO) (seed 000 三)."""
        if self.role != FOLLOWER:
            raise StateError(f"partition {self.partition}: append_as_follower while {self.role}")
        if records:
            self.log.append(list(records))
            self._note_epochs(records)
            if self.producers.loaded:
                self.producers.append(records)
        self._set_hw(min(leader_hw, self.leo))

    # --- internals ------------------------------------------------------------------------------

    def _leader_check(self, current_leader_epoch: int | None) -> ErrorCode | None:
        if self.role != LEADER or self._leader is None:
            return ErrorCode.NOT_LEADER
        return check_leader_epoch(current_leader_epoch, self.leader_epoch)

    def _follower_request_check(self, replica_id: int | None, request: str,
                                current_leader_epoch: int | None) -> ErrorCode | None:
        """KIP-320 for a follower's fetch or OffsetsForLeaderEpoch: refuse another epoch (fetch-fenced),
        or, with fetch_fencing off, serve it anyway (stale-fetch-served). Each distinct request is
        logged once per leadership (see events.py)."""
        if self.role != LEADER or self._leader is None:
            return ErrorCode.NOT_LEADER
        error = check_leader_epoch(current_leader_epoch, self.leader_epoch)
        if error is None:
            self._note_served(replica_id, request, current_leader_epoch)
            return None
        assert current_leader_epoch is not None
        if self.config.fetch_fencing:
            key = (replica_id, request, current_leader_epoch, str(error))
            if key not in self._logged_requests:
                self._logged_requests.add(key)
                self._events.append(FetchFenced(self.partition, replica_id, request, current_leader_epoch,
                                                self.leader_epoch, str(error)))
            return error
        key = (replica_id, request, current_leader_epoch, None)
        if key not in self._logged_requests:
            self._logged_requests.add(key)
            self._events.append(StaleFetchServed(self.partition, replica_id, request, current_leader_epoch,
                                                 self.leader_epoch))
        self._note_served(replica_id, request, current_leader_epoch)
        return None

    def _note_served(self, replica_id: int | None, request: str, current_leader_epoch: int | None) -> None:
        """Log the first serving of each (replica, request, epoch) of this leadership (follower-served)."""
        key = (replica_id, request, current_leader_epoch, "served")
        if key not in self._logged_requests:
            self._logged_requests.add(key)
            self._events.append(FollowerServed(self.partition, replica_id, request, current_leader_epoch))

    def _note_epochs(self, records: Sequence[Record]) -> None:
        """A record whose epoch differs from the latest entry's starts that epoch (Kafka assigns per
        batch). Normally the epoch is newer; an older one happens only after a leader's empty epoch
        (a KAFKA-7415 entry at our LEO) and then replaces that entry."""
        latest = self.epoch_cache.latest_epoch()
        for r in records:
            if r.epoch != latest:
                self.epoch_cache.assign(r.epoch, r.offset)
                latest = r.epoch

    def _maybe_increment_hw(self, now_ms: int) -> None:
        assert self._leader is not None
        if self.config.strict_min_isr_hw and len(self._leader.isr) < self.config.min_insync_replicas:
            return                        # KIP-966: no commit below min.insync.replicas (committed ISR)
        candidate = self._leader.hw_candidate(self.broker_id, self.leo, now_ms, self.config.replica_lag_time_max_ms)
        if candidate > self._hw:
            self._set_hw(candidate)

    def _maybe_expand_isr(self, remote: RemoteReplica) -> None:
        st = self._leader
        assert st is not None
        if (st.pending is not None or remote.broker_id in st.isr or remote.broker_id not in st.replicas
                or remote.broker_id in self._fenced_brokers):
            return
        leo = remote.leo if remote.leo is not None else -1
        if leo < self.hw:
            return
        if self.config.isr_join_requires_epoch_start and leo < st.epoch_start_offset:
            return                        # KAFKA-7128: not yet past the start of our epoch
        self._events.append(IsrExpandProposed(self.partition, remote.broker_id, leo, self.hw, st.epoch_start_offset))
        self._propose(tuple(sorted(st.isr | {remote.broker_id})), "expand")

    def _propose(self, isr: tuple[int, ...], kind: str) -> IsrProposal:
        st = self._leader
        assert st is not None and self.broker_id in isr
        proposal = IsrProposal(self.topic, self.partition, self.broker_id, self.leader_epoch, isr,
                               st.isr_version, kind)  # type: ignore[arg-type]
        st.pending = proposal
        self._unsent_proposal = proposal
        return proposal

    def _set_hw(self, new: int) -> None:
        if new != self._hw:
            self._events.append(HwChange(self.partition, self._hw, new, self.leo))
            self._hw = new

    def _truncate(self, offset: int, why: str) -> None:
        old = self.leo
        if offset >= old:
            # Nothing to cut, but an epoch entry at our LEO names an epoch that wrote nothing here (we
            # led it and appended nothing before losing it). Kept, it would sit after the records we
            # are about to fetch from an older epoch, and assigning those would drop the older epoch's
            # true start: drop it now, as Kafka's truncateTo does.
            self.epoch_cache.truncate_from_end(old)
            return
        self.log.truncate_to(offset)
        self.epoch_cache.truncate_from_end(offset)
        if self._snapshot is not None and self._snapshot.offset > offset:
            self._snapshot = None       # the shell deletes the files past `offset` on the Truncate event
        if self.producers.loaded:
            if self.config.producer_state_rebuilt_after_truncation:
                self.producers.truncate(offset)
            else:   # the planted KAFKA-5435 effect: the table is emptied yet believed complete
                self.producers.forget_all()
        self._events.append(Truncate(self.partition, old, offset, why))
        if self._hw > offset:
            self._set_hw(offset)

    def _rebuild_missing_epochs(self) -> None:
        """If the log holds records of epochs newer than the checkpointed entries (the checkpoint was
        lost or is behind), rebuild those entries by scanning the log."""
        last = self.log.last_epoch()
        latest = self.epoch_cache.latest_epoch()
        if last is None or (latest is not None and last <= latest):
            return
        start = self.epoch_cache.latest_entry().start_offset if latest is not None else self.log.log_start()
        for chunk in self._chunks(start):
            self._note_epochs(chunk)

    def _chunks(self, start: int):
        """The log from `start` to its end, read 4,096 records at a time."""
        pos = start
        while pos < self.log.leo():
            chunk = self.log.read(pos, 4096)
            if not chunk:
                return
            yield chunk
            pos = chunk[-1].offset + 1
