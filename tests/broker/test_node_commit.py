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


def test_a_failed_flush_leaves_the_partition_pending_and_the_next_durable_flushes_it(tmp_path):
    """A flush that fails (a full disk: tests/broker/test_full_disk_real.py does it for real) must not
    make the next `durable` return at once as if the records were flushed: the partition stays pending,
    the next call flushes it again, and a partition whose flush worked is not retried."""
    good = SegmentedLog.open(tmp_path / "good", flush_policy="never")
    bad = SegmentedLog.open(tmp_path / "bad", flush_policy="never")
    real_flush, failures = bad.flush, [OSError(28, "No space left on device")]

    def flaky_flush():
        if failures:
            raise failures.pop()
        return real_flush()

    parts = [SimpleNamespace(store=SimpleNamespace(log=log), retired=False) for log in (good, bad)]
    parts[1].store.log = SimpleNamespace(flush=flaky_flush)

    async def scenario():
        gc = GroupCommit()
        good.append([Record(0, 0, b"g")])
        bad.append([Record(0, 0, b"b")])

        async def mark_and_wait(part):
            gc.mark(part)
            await gc.durable(part)

        waits = await asyncio.gather(*(mark_and_wait(p) for p in parts), return_exceptions=True)
        outcome = [getattr(w, "errno", w) for w in waits]     # both waited on the one failed pass
        before = gc.flushes
        await gc.durable(parts[0])          # flushed in the failed pass: nothing to do
        await gc.durable(parts[1])          # pending again: flushed now, by a pass of its own
        return outcome, gc.flushes - before

    outcome, again = asyncio.run(scenario())
    assert outcome == [28, 28]              # one pass, one failure: both waiters told
    assert again == 1
    assert good.flushed_offset() == 1 and bad.flushed_offset() == 1
    good.close()
    bad.close()
