"""Consumer workers: poll assigned partitions and record every (offset, value) they read.

A worker owns a set of partitions and a position in each. Before its first poll of a partition, and
whenever it must reposition (OFFSET_OUT_OF_RANGE after a truncation, or after an `info` that made it a
new process), it records an `assign` to the offset it will read from next. Polls between two assigns of
one partition are therefore contiguous and increasing, as docs/formats.md promises the checker.
Repositioning goes to the log start (auto.offset.reset=earliest): re-reading is harmless, skipping is not.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from broker.client import ClientError
from workloads.decode import decode_value
from workloads.worker import ClientWorker
from workloads.clients import ConsumerClient

log = logging.getLogger(__name__)

POLL_MAX_RECORDS = 500
POLL_WAIT_MS = 100


class Position(NamedTuple):
    """Where a read starts: a topic's partition, from an offset."""
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Reading:
    """How a read is made and recorded: the history's `f` and the fetch's record and wait limits."""
    f: str = "poll"
    max_records: int = POLL_MAX_RECORDS
    max_wait_ms: int = POLL_WAIT_MS


POLL = Reading()


def poll_op(history, process: int, client: ConsumerClient, at: Position, how: Reading = POLL):
    """One recorded poll (or final-read, by `how`) from `at`. Returns (completion type, value dict or
    None, error code or None)."""
    f, (topic, partition, offset) = how.f, at
    invoke = {"partition": partition, "offset": offset}
    history.invoke(process, f, invoke)
    try:
        result = client.fetch(topic, partition, offset, max_records=how.max_records, max_wait_ms=how.max_wait_ms)
    except ClientError as exc:
        kind = "fail" if exc.definite else "info"
        history.complete(process, kind, f, dict(invoke), error=exc.code)
        return kind, None, exc.code
    except Exception as exc:  # noqa: BLE001
        log.warning("%s of partition %s at %s raised %r", f, partition, offset, exc)
        history.complete(process, "info", f, dict(invoke), error=f"exception: {type(exc).__name__}: {exc}")
        return "info", None, "exception"
    value = {"partition": partition, "offset": offset,
             # each record with the leader epoch it carries (-1: the client cannot tell): a read must
             # return the log's record, value and epoch alike (docs/formats.md, inconsistent-offset)
             "records": [[int(o), decode_value(v), int(e)] for o, e, v in result.records],
             "hw": int(result.hw), "epoch": int(result.epoch)}
    history.complete(process, "ok", f, value)
    return "ok", value, None


def assign_op(history, process: int, partition: int, offset: int) -> None:
    value = {"partition": partition, "offset": offset}
    history.invoke(process, "assign", value)
    history.complete(process, "ok", "assign", dict(value))


class ConsumerWorker(ClientWorker):
    role = "consumer"
    idle_sleep = 0.05       # seconds to back off after a round without progress or a refused poll

    def __init__(self, *, history, make_client: Callable[[], Any], topic: str, partitions: list[int],
                 stop: threading.Event, index: int):
        super().__init__(make_client=make_client, index=index)
        self.history = history
        self.topic = topic
        self.partitions = list(partitions)
        self.stop_event = stop
        self.process = history.new_process()
        self.positions: dict[int, int | None] = {p: None for p in self.partitions}  # None: must assign
        self.counts = {"ok": 0, "fail": 0, "info": 0}
        self.records_read = 0

    def _assign(self, partition: int, offset: int) -> None:
        assign_op(self.history, self.process, partition, offset)
        self.positions[partition] = offset

    def work(self, client) -> None:
        while not self.stop_event.is_set() and self.partitions:
            progressed = False
            for partition in self.partitions:
                if self.stop_event.is_set():
                    break
                if self.positions[partition] is None:
                    self._assign(partition, 0)
                offset = self.positions[partition]
                kind, value, error = poll_op(self.history, self.process, client,
                                             Position(self.topic, partition, offset))
                self.counts[kind] += 1
                if kind == "ok":
                    if value["records"]:
                        self.records_read += len(value["records"])
                        self.positions[partition] = value["records"][-1][0] + 1
                        progressed = True
                elif kind == "info":
                    # a new process starts with no positions: every partition is assigned again
                    self.process = self.history.new_process()
                    self.positions = {p: None for p in self.partitions}
                    break
                elif error == "OFFSET_OUT_OF_RANGE":
                    self.positions[partition] = None      # reposition (earliest) before the next poll
                else:
                    self.stop_event.wait(self.idle_sleep)  # no leader yet, refused: back off a little
            if not progressed:
                self.stop_event.wait(self.idle_sleep)
