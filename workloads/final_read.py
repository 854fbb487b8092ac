"""Final reads: in the final phase, read every partition from offset 0 up to its high watermark.

Reads are ordinary client operations (`f` = "final-read", int process ids) made in chunks, each chunk an
invoke and a completion like a poll. A failed or unknown chunk is retried (a bounded number of times, a
new process after an `info`); the result says how far each partition was read.

The group workload adds one more final operation, `committed` (`final_committed`): an OffsetFetch of
the group's committed offsets for every partition, from a client that never joins the group, retried
the same way.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from broker.client import ClientError
from workloads.consumer import Position, Reading, poll_op


@dataclass
class FinalRead:
    partition: int
    read_to: int          # next offset not read: [0, read_to) was read
    hw: int               # the partition's HW as the last successful chunk reported it
    records: int          # records read
    covered: bool         # read_to >= hw (and at least `target` when one was given)
    error: str | None = None


@dataclass(frozen=True)
class ReadPlan:
    """How final reads go: records per chunk, and how often and how long a failed chunk is retried
    (`deadline`: a time.monotonic() past which no chunk starts)."""
    chunk: int = 1000
    max_attempts: int = 20
    backoff_s: float = 0.2
    deadline: float | None = None


def final_read_partition(history, client, topic: str, partition: int, plan: ReadPlan = ReadPlan(),
                         target: int | None = None) -> FinalRead:
    """Read `partition` from offset 0 up to its HW (and at least `target`), a chunk at a time."""
    process = history.new_process()
    offset, hw, records, attempts, last_error = 0, -1, 0, 0, None
    how = Reading("final-read", plan.chunk, 0)
    while True:
        if plan.deadline is not None and time.monotonic() > plan.deadline:
            last_error = last_error or "deadline"
            break
        kind, value, error = poll_op(history, process, client, Position(topic, partition, offset), how)
        if kind == "ok":
            hw = value["hw"]
            if value["records"]:
                records += len(value["records"])
                offset = value["records"][-1][0] + 1
                attempts = 0
                continue
            if offset >= hw:
                break
            last_error = f"empty read at {offset} below hw {hw}"
        else:
            last_error = error
            if kind == "info":
                process = history.new_process()
        attempts += 1
        if attempts >= plan.max_attempts:
            break
        time.sleep(plan.backoff_s)
    goal = max(hw, target or 0)
    covered = hw >= 0 and offset >= goal
    return FinalRead(partition, offset, hw, records, covered, None if covered else last_error)


def final_reads(history, make_client: Callable[[], Any], topic: str, partitions: list[int],
                plan: ReadPlan = ReadPlan(), targets: dict[int, int] | None = None) -> dict[int, FinalRead]:
    """Every partition's final read, through one client, each up to its target where `targets` has one."""
    client = make_client()
    try:
        return {p: final_read_partition(history, client, topic, p, plan, (targets or {}).get(p))
                for p in partitions}
    finally:
        try:
            client.close()
        except Exception:  # noqa: BLE001
            pass


def final_committed(history, make_reader: Callable[[], Any], group: str, topic: str, partitions: list[int],
                    plan: ReadPlan = ReadPlan(), deadline: float | None = None) -> dict[int, int] | None:
    """The group's committed offsets of `partitions`, recorded as a `committed` op (invoke, then ok with
    `offsets` [[p, o], ...], -1 where none is committed; fail or info with the error, then retried).
    `make_reader()` gives a workloads/kafka_client.py OffsetsReader. Returns the offsets, None if no
    attempt succeeded."""
    process = history.new_process()
    parts = sorted(int(p) for p in partitions)
    value = {"group": group, "partitions": parts}
    deadline = plan.deadline if deadline is None else deadline
    reader = None
    try:
        for attempt in range(plan.max_attempts):
            if attempt and deadline is not None and time.monotonic() > deadline:
                break
            history.invoke(process, "committed", dict(value))
            try:
                if reader is None:
                    reader = make_reader()
                got = reader.committed(group, topic, parts)
            except ClientError as exc:
                kind = "fail" if exc.definite else "info"
                history.complete(process, kind, "committed", dict(value), error=exc.code)
            except Exception as exc:  # noqa: BLE001
                history.complete(process, "info", "committed", dict(value),
                                 error=f"exception: {type(exc).__name__}: {exc}")
                kind = "info"
            else:
                offsets = {p: int(got.get(p, -1)) for p in parts}
                history.complete(process, "ok", "committed",
                                 dict(value, offsets=[[p, o] for p, o in sorted(offsets.items())]))
                return offsets
            if kind == "info":
                process = history.new_process()
            time.sleep(plan.backoff_s)
        return None
    finally:
        if reader is not None:
            try:
                reader.close()
            except Exception:  # noqa: BLE001
                pass
