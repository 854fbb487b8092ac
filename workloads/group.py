"""Group consumers: subscribe to the run's topic in a consumer group, poll, commit, leave and rejoin.

A `GroupWorker` is one group member at a time. Its client (workloads/kafka_client.py
`ConfluentGroupConsumer` or `KafkaPythonGroupConsumer`, or a fake in the unit tests) subscribes; the
worker records what the group did to it and what it read and committed, as the group spec in
docs/formats.md has it:

- `group-assign` / `group-revoke` from the rebalance callbacks (group, member id, generation or -1,
  partitions; an assign's ok adds the committed offsets OffsetFetch answered, -1 none);
- one `assign` per newly assigned partition, once its start is chosen: the committed offset, or the
  log start where none is committed (the partition is paused until then, so nothing is read before);
- one `poll` per partition that returned records, from the member's position before the poll;
- every `commit`: sync (invoke, the call, its completion), async (invoke, then the completion when the
  client's callback answers, on the same process, which goes on polling meanwhile: docs/formats.md lets a
  process have several group operations open; one async commit is in flight at a time) and auto (invoke and completion written together when the client
  reports the commit it made on its own).

An `info` (an unknown outcome) makes the process that saw it a new one, as in workloads/consumer.py.
Members churn: a seeded time after its first assignment a member records the revocation of what it owns, closes its client
and a new member joins with a new client and a new process (and, with commit mode "mixed", a newly drawn
commit mode), so the group rebalances.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Callable

from broker.client import ClientError
from workloads.decode import decode_value
from workloads.worker import ClientWorker

log = logging.getLogger(__name__)

POLL_MAX_RECORDS = 500
POLL_WAIT_S = 0.1
COMMIT_INTERVAL_S = 0.25      # a sync or async commit of what was read at most this often
RETRY_S = 0.2                 # back-off after a refused OffsetFetch, seek or poll
COMMIT_MODES = ("sync", "async", "auto")
_TIMEOUTS = {"_TIMED_OUT", "_TIMED_OUT_QUEUE", "_MSG_TIMED_OUT", "KafkaTimeoutError", "REQUEST_TIMED_OUT", "TIMEOUT"}


def error_name(err: ClientError) -> str:
    """The `error` of a commit's completion: Kafka's error name, or "timeout" for any timeout."""
    return "timeout" if err.code in _TIMEOUTS else err.code


def pairs(offsets: dict[int, int]) -> list[list[int]]:
    """An offset map as the history writes it: [[p, o], ...] sorted by partition."""
    return [[int(p), int(o)] for p, o in sorted(offsets.items())]


class GroupWorker(ClientWorker):
    """One seat in the group: a member, then after a churn a new member in its place (module docstring).

    `make_client(mode)` makes a subscribed group consumer committing in `mode`; `commit` is "sync",
    "async", "auto" or "mixed" (each member draws one of the three from the seeded generator); `churn_s`
    is the mean lifetime of a member in seconds (0: never leaves)."""

    role = "group"

    def __init__(self, *, history, make_client: Callable[[str], Any], topic: str, group: str, commit: str,
                 churn_s: float, stop: threading.Event, seed: int, index: int):
        if commit not in COMMIT_MODES + ("mixed",):
            raise ValueError(f"commit must be sync, async, auto or mixed, got {commit!r}")
        self.rng = random.Random(f"{seed}/group/{index}")
        self.commit = commit
        self.mode = self._draw_mode()
        super().__init__(make_client=lambda: make_client(self.mode), index=index)
        self.history = history
        self.topic, self.group = topic, group
        self.churn_s = float(churn_s)
        self.stop_event = stop
        self.process = history.new_process()
        self._lock = threading.RLock()         # an auto-commit may be recorded from the client's own thread
        self._client = None
        self.counts = {"polls": 0, "records": 0, "commits": 0, "commit_ok": 0, "commit_fail": 0,
                       "commit_info": 0, "assigns": 0, "revokes": 0, "members": 0}
        self._reset_member()

    # --- a member's state ----------------------------------------------------------------------------
    def _draw_mode(self) -> str:
        return self.rng.choice(COMMIT_MODES) if self.commit == "mixed" else self.commit

    def _reset_member(self) -> None:
        self.positions: dict[int, int] = {}          # owned, started partitions -> next offset to read
        self.pending: list[int] = []                 # assigned, not started (paused) partitions
        self.committed_at: dict[int, int] = {}       # the last offsets this member committed (or sent)
        self.async_process: int | None = None
        self.async_inflight: dict[str, Any] | None = None   # the invoke value of the async commit out
        self.last_commit = time.monotonic()
        self.leave_at: float | None = None          # set at the first assignment (`_member`)

    def _membership(self, client) -> tuple[str, int]:
        try:
            member, generation = client.membership()
            return str(member or ""), int(generation)
        except Exception:  # noqa: BLE001
            return "", -1

    def _new_process(self) -> None:
        self.process = self.history.new_process()

    # --- the loop ------------------------------------------------------------------------------------
    def work(self, client) -> None:
        current = client
        try:
            while not self.stop_event.is_set():
                self.counts["members"] += 1
                self._member(current)
                self._leave(current)
                if self.stop_event.is_set():
                    break
                # a new member in this seat: a new client, a new process, perhaps a new commit mode
                self._new_process()
                self._reset_member()
                self.mode = self._draw_mode()
                current = self.make_client()
        finally:
            if current is not client:
                try:
                    current.close()
                except Exception:  # noqa: BLE001
                    pass

    def _hook_reports(self, client) -> None:
        """Auto-commits recorded the moment the client reports them (workloads/kafka_client.py
        set_report_hook); a client without the hook has them drained between polls."""
        hook = getattr(client, "set_report_hook", None)
        if hook is not None:
            try:
                hook(self._auto_report)
            except Exception:  # noqa: BLE001
                pass

    def _member(self, client) -> None:
        """Poll, start, read and commit until the member's time is up (`_time_to_leave`: a seeded
        lifetime counted from its first assignment, since a rebalance takes seconds and a member that left
        before it was ever given a partition would only keep the group rebalancing), or until the workload
        stops."""
        self._client = client
        self._hook_reports(client)
        while not self.stop_event.is_set() and not self._time_to_leave():
            try:
                batches = client.poll(POLL_MAX_RECORDS, POLL_WAIT_S)
            except ClientError as exc:
                log.debug("%s: poll refused: %s", self.name, exc)
                batches = {}
                self.stop_event.wait(RETRY_S)
            self._reports(client)
            for event in client.events():
                if not event.partitions:
                    continue                  # kafka-python reports an empty revocation at its first join
                if event.kind == "revoke":
                    self._revoke(client, event.partitions, event.lost)
                else:
                    self._assigned(client, event.partitions)
            if self.pending:
                self._start(client)
            for partition, records in sorted(batches.items()):
                self._poll(client, partition, records)
            if self.mode != "auto" and time.monotonic() - self.last_commit >= COMMIT_INTERVAL_S:
                self._commit(client)

    def _time_to_leave(self) -> bool:
        """Past its lifetime, and reading (some partitions started, none waiting): a member that left in
        the middle of a rebalance would only start the next one; past twice its lifetime it leaves anyway
        (a member with no partition in a group larger than the topic)."""
        if self.leave_at is None:
            return False
        now = time.monotonic()
        return (now >= self.leave_at and bool(self.positions) and not self.pending) or \
            now >= self.leave_at + self.churn_s

    def _leave(self, client) -> None:
        """The member leaves: a last commit of what it read (sync and async members), its partitions
        recorded as revoked, its client closed, and the commits its client reported meanwhile recorded."""
        if self.mode != "auto":
            self._commit(client, sync=True)
        owned = sorted(set(self.positions) | set(self.pending))
        if owned:
            self._revoke(client, owned, False)
        try:
            client.close()
        except Exception:  # noqa: BLE001
            pass
        self._reports(client)

    # --- rebalances ----------------------------------------------------------------------------------
    def _revoke(self, client, partitions: list[int], lost: bool) -> None:
        member, generation = self._membership(client)
        value = {"group": self.group, "member": member, "generation": generation, "partitions": sorted(partitions)}
        self.history.invoke(self.process, "group-revoke", value)
        done = dict(value, lost=True) if lost else dict(value)
        self.history.complete(self.process, "ok", "group-revoke", done)
        self.counts["revokes"] += 1
        for p in partitions:
            self.positions.pop(p, None)
            self.committed_at.pop(p, None)
        self.pending = [p for p in self.pending if p not in partitions]

    def _assigned(self, client, partitions: list[int]) -> None:
        self.pending = sorted(set(self.pending) | set(partitions))
        self.counts["assigns"] += 1

    def _start(self, client) -> None:
        """A group-assign of the pending partitions (OffsetFetch of their committed offsets), then an
        `assign` of each to its start, and the client told to read from there."""
        parts = list(self.pending)
        member, generation = self._membership(client)
        value = {"group": self.group, "member": member, "generation": generation, "partitions": parts}
        self.history.invoke(self.process, "group-assign", value)
        try:
            committed = client.committed(parts)
            starts = {p: (committed.get(p, -1) if committed.get(p, -1) >= 0 else client.low_watermark(p))
                      for p in parts}
        except ClientError as exc:
            kind = "fail" if exc.definite else "info"
            self.history.complete(self.process, kind, "group-assign", dict(value), error=error_name(exc))
            if kind == "info":
                self._new_process()
            self.stop_event.wait(RETRY_S)
            return                                  # still pending: asked again after the next poll
        done = dict(value, committed=pairs({p: committed.get(p, -1) for p in parts}))
        self.history.complete(self.process, "ok", "group-assign", done)
        try:
            client.start(starts)
        except ClientError as exc:
            log.warning("%s: could not start %s: %s", self.name, starts, exc)
            self.stop_event.wait(RETRY_S)
            return
        for p in parts:
            self._assign_op(p, starts[p])
            self.committed_at[p] = committed.get(p, -1)
        self.pending = []
        if self.leave_at is None and self.churn_s > 0:
            self.leave_at = time.monotonic() + self.rng.uniform(0.5, 1.5) * self.churn_s

    def _assign_op(self, partition: int, offset: int) -> None:
        value = {"partition": partition, "offset": offset}
        self.history.invoke(self.process, "assign", value)
        self.history.complete(self.process, "ok", "assign", dict(value))
        self.positions[partition] = offset

    # --- reads ---------------------------------------------------------------------------------------
    def _poll(self, client, partition: int, records: list) -> None:
        if partition not in self.positions:
            log.warning("%s: %d records of partition %d it has not started (ignored)", self.name,
                        len(records), partition)
            return
        first = records[0][0]
        if first < self.positions[partition]:
            # the client went back by itself (auto.offset.reset after an out-of-range position): the
            # member reads the partition from there next, so the history is told so first
            self._assign_op(partition, first)
        member, generation = self._membership(client)
        invoke = {"partition": partition, "offset": self.positions[partition], "group": self.group,
                  "generation": generation}
        self.history.invoke(self.process, "poll", invoke)
        try:
            hw = int(client.hw(partition))
        except ClientError:
            hw = -1
        value = dict(invoke, records=[[int(o), decode_value(v), int(e)] for o, e, v in records],
                     hw=hw, epoch=-1)
        self.history.complete(self.process, "ok", "poll", value)
        self.positions[partition] = records[-1][0] + 1
        self.counts["polls"] += 1
        self.counts["records"] += len(records)

    # --- commits -------------------------------------------------------------------------------------
    def _commit(self, client, sync: bool = False) -> None:
        """Commit the positions that moved since this member's last commit, in its mode (`sync`: a
        synchronous one whatever the mode, the last one before leaving)."""
        self.last_commit = time.monotonic()
        offsets = {p: o for p, o in self.positions.items() if self.committed_at.get(p) != o}
        if not offsets:
            return
        member, generation = self._membership(client)
        mode = "sync" if sync else self.mode
        value = {"group": self.group, "member": member, "generation": generation, "offsets": pairs(offsets),
                 "mode": mode}
        if mode == "async":
            if self.async_inflight is not None:
                return                                # one in flight at a time; the next round sends it
            self.async_process = self.process         # completed on the process that invoked it
            self.history.invoke(self.async_process, "commit", value)
            self.counts["commits"] += 1
            try:
                client.commit_async(offsets)
            except ClientError as exc:
                self._complete_commit(self.async_process, value, exc)
                return
            self.async_inflight = value
            self.committed_at.update(offsets)
            return
        self.history.invoke(self.process, "commit", value)
        self.counts["commits"] += 1
        try:
            client.commit_sync(offsets)
        except ClientError as exc:
            self._complete_commit(self.process, value, exc)
            return
        self._complete_commit(self.process, value, None)
        self.committed_at.update(offsets)

    def _complete_commit(self, process: int, value: dict, err: ClientError | None) -> None:
        if err is None:
            self.history.complete(process, "ok", "commit", dict(value))
            self.counts["commit_ok"] += 1
            return
        kind = "fail" if err.definite else "info"
        self.history.complete(process, kind, "commit", dict(value), error=error_name(err))
        self.counts[f"commit_{kind}"] += 1
        if kind == "info" and process == self.process:
            self._new_process()
        if value["mode"] != "auto":
            # refused or unknown: commit these offsets again next time
            for p, _o in value["offsets"]:
                self.committed_at.pop(p, None)

    def _auto_report(self, report, client=None) -> None:
        """An auto-commit the client made: invoke and completion written together."""
        if not report.offsets:
            return
        with self._lock:
            member, generation = self._membership(client if client is not None else self._client)
            value = {"group": self.group, "member": member, "generation": generation,
                     "offsets": pairs(report.offsets), "mode": "auto"}
            self.history.invoke(self.process, "commit", value)
            self.counts["commits"] += 1
            self._complete_commit(self.process, value, report.error)

    def _reports(self, client) -> None:
        """The commits the client reported: answers to the async commit in flight, and auto-commits
        (written as invoke and completion together)."""
        try:
            reports = client.commit_reports()
        except Exception:  # noqa: BLE001
            return
        for report in reports:
            if report.mode == "async" and self.async_inflight is not None:
                value, self.async_inflight = self.async_inflight, None
                self._complete_commit(self.async_process, value, report.error)
            elif report.mode == "auto":
                self._auto_report(report, client)
            else:
                log.debug("%s: a commit report with no commit in flight: %s", self.name, report)
