"""Structured node event log: one JSON object per line, flushed per line (docs/formats.md "Node event logs").

Every line has `ts` (wall-clock nanoseconds, time.time_ns()), `node` (e.g. "n1") and `event`
(`leader-change`, `isr-change`, `truncate`, `hw-change`, `role`, `fenced`, plus process life-cycle events
such as `start`, `recovery`, `stop`), then the event's own fields. Lines are written whole under a
lock, so a SIGKILL leaves at most a torn last line, which the readers of the format skip.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, TextIO


# Every event name a broker or the controller writes, each documented in docs/formats.md ("Node event
# logs"). Scenario `assert` steps accept only these; tests/broker/test_node_eventlog.py checks the list
# against the names the source emits and the docs' table.
EVENT_NAMES = frozenset({
    # replication (broker/replication/events.py)
    "leader-change", "isr-change", "truncate", "hw-change", "role", "fetch-fenced", "stale-fetch-served",
    "follower-served", "isr-expand-proposed",
    "epoch-query", "epoch-answer", "producers-loaded",
    # broker process and storage (broker/server)
    "ack", "leo-reported", "start", "stop", "registered", "re-register", "recovered", "corrupt", "storage-error", "flush",
    "partition-skipped", "partition-deleted", "metadata-error", "metadata-rejected", "isr-proposal-failed", "internal-error",
    # consumer groups (broker/groups, broker/server/coordinator.py)
    "group-member-joined", "group-rebalance", "group-generation", "group-stable", "group-member-removed",
    "group-unloaded", "group-load", "group-coordinator-resigned", "offset-commit", "offset-commit-refused",
    "offsets-topic-created",
    # controller (broker/controller)
    "listening", "fenced", "unfenced", "topic-created", "topic-deleted", "partitions-added", "topic-error", "unclean-shutdown", "elect-leader",
    "partition-state",
    "elect-refused", "stall", "fatal",
})

# The fields each event may carry besides `ts`, `node` and `event` (docs/formats.md), so a scenario
# `assert` cannot match on a misspelt field and pass vacuously with `count = 0`;
# tests/broker/test_node_eventlog.py checks every field the source writes is listed.
EVENT_FIELDS: dict[str, frozenset[str]] = {name: frozenset(fields.split()) for name, fields in {
    "leader-change": "topic partition leader epoch isr elr version",
    "partition-state": "topic partition leader epoch isr elr version",
    "isr-change": "topic partition isr version elr",
    "truncate": "topic partition from to why bytes_cut reason flushed log_start",
    "hw-change": "partition old new leo topic",
    "ack": "partition base last epoch acks hw isr min_isr flushed topic",
    "leo-reported": "partition leo flushed epoch leader topic",
    "role": "partition role epoch topic",
    "fetch-fenced": "partition replica request request_epoch leader_epoch error topic",
    "stale-fetch-served": "partition replica request request_epoch leader_epoch topic",
    "follower-served": "partition replica request request_epoch topic",
    "isr-expand-proposed": "partition replica replica_leo hw epoch_start topic",
    "epoch-query": "partition leader epoch current_epoch error answer_epoch answer_end truncate_to topic",
    "epoch-answer": "partition replica epoch answer_epoch answer_end topic",
    "producers-loaded": "topic partition snapshot replayed producers why rejected",
    "start": "version host port truncation flush power_loss min_insync_replicas clean_shutdown brokers topics restored",
    "stop": "version reason clean_shutdown_marker stuck_tasks",
    "registered": "broker broker_epoch host port clean_shutdown",
    "re-register": "reason",
    "recovered": "topic partition leo hw checkpoint_hw epochs",
    "corrupt": "topic partition offset reason where role leader_epoch leo hw",
    "storage-error": "topic partition error why file action failed_s",
    "flush": "partitions",
    "partition-skipped": "topic partition error",
    "partition-deleted": "topic partition",
    "metadata-error": "version error",
    "metadata-rejected": "partition error topic",
    "isr-proposal-failed": "partition isr kind error topic",
    "internal-error": "task api error",
    "group-member-joined": "group generation state member client_id",
    "group-rebalance": "group generation state why",
    "group-generation": "group generation state leader members protocol",
    "group-stable": "group generation state leader assigned",
    "group-member-removed": "group generation state member why",
    "group-unloaded": "group generation state",
    "group-load": "offsets_partition epoch end records undecodable groups ms",
    "group-coordinator-resigned": "offsets_partition epoch groups",
    "offset-commit": "group member generation group_generation offsets_partition base error offsets",
    "offset-commit-refused": "group member generation group_generation error",
    "offsets-topic-created": "answer partitions replication_factor",
    "listening": "host port",
    "fenced": "broker broker_epoch why",
    "unfenced": "broker broker_epoch",
    "topic-created": "topic partitions replication_factor configs",
    "partitions-added": "topic partitions before",
    "topic-deleted": "topic partitions",
    "topic-error": "topic error message",
    "unclean-shutdown": "broker partitions",
    "elect-leader": "topic partition requested unclean leader how",
    "elect-refused": "topic partition requested unclean error message",
    "stall": "ms",
    "fatal": "error",
}.items()}


class EventLog:
    def __init__(self, path: str | Path | None, node: str, *, echo: TextIO | None = None):
        self.node = node
        self._lock = threading.Lock()
        self._fh: TextIO | None = None
        self._echo = echo
        if path is not None:
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", buffering=1, encoding="utf-8")

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"ts": time.time_ns(), "node": self.node, "event": event}
        entry.update(fields)
        line = json.dumps(entry, separators=(",", ":"), default=_jsonable) + "\n"
        with self._lock:
            if self._fh is not None:
                self._fh.write(line)
                self._fh.flush()
            if self._echo is not None:
                self._echo.write(line)
                self._echo.flush()
        return entry

    def sync(self) -> None:
        """fsync the log (at clean shutdown)."""
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return str(obj)
