"""Group commit (broker/server/commit.py): appends of one event-loop pass share one flush per partition,
and nothing waiting on `durable` returns before that flush ran. Uses real SegmentedLogs."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.records import Record
from broker.server.commit import GroupCommit
from broker.storage import SegmentedLog


def test_one_flush_per_pass_and_durable_waits_for_it(tmp_path):
    logs = [SegmentedLog.open(tmp_path / f"p{i}", flush_policy="never") for i in range(2)]
    parts = [SimpleNamespace(store=SimpleNamespace(log=log), retired=False) for log in logs]

    async def scenario():
        gc = GroupCommit()
        seen = []

        async def append_and_wait(part, offset):
            part.store.log.append([Record(offset, 0, b"v%d" % offset)])
            gc.mark(part)
            await gc.durable(part)
            seen.append((offset, part.store.log.flushed_offset()))

        await asyncio.gather(append_and_wait(parts[0], 0), append_and_wait(parts[1], 0))
        first = gc.flushes
        await asyncio.gather(*(append_and_wait(parts[0], o) for o in (1,)))
        await gc.durable(parts[1])            # nothing pending: returns at once, no flush
        return first, gc.flushes, seen

    first, total, seen = asyncio.run(scenario())
    assert (first, total) == (1, 2)
    assert sorted(seen) == [(0, 1), (0, 1), (1, 2)]     # each waiter saw its record flushed
    assert [log.flushed_offset() for log in logs] == [2, 1]
    for log in logs:
        log.close()
