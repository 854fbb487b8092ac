"""Group commit for flush="always": every append is fsynced before it is acknowledged, and the appends
made during one event-loop pass share one flush per partition.

The storage is opened with flush policy "never" and this module flushes instead: `mark(part)` after an
append, then `await durable(part)` before answering the producer (leader) or sending the next fetch
(follower; that fetch is what tells the leader our LEO). The flush runs as the next loop callback, so
requests that arrived together while the loop was busy (typically: waiting for a slow fsync) are
flushed together: under load many appends share one fsync instead of queueing one fsync each.
"""
from __future__ import annotations

import asyncio


class GroupCommit:
    def __init__(self) -> None:
        self._dirty: dict[int, object] = {}
        self._barrier: asyncio.Future | None = None
        self.flushes = 0                 # number of flush passes, for tests and curiosity

    def mark(self, part) -> None:
        """`part` has appended records that are not yet durable; schedule a flush pass."""
        self._dirty[id(part)] = part
        self._schedule()

    def _schedule(self) -> None:
        if self._barrier is None:
            loop = asyncio.get_running_loop()
            self._barrier = loop.create_future()
            loop.call_soon(self._flush)

    async def durable(self, part) -> None:
        """Return once every record `part` appended so far is flushed (at once if nothing is pending).
        Raises the disk error of a failed flush pass; the part then stays pending, so the next call
        flushes it again (it is never taken for durable because one attempt failed)."""
        if id(part) in self._dirty:
            self._schedule()
            await asyncio.shield(self._barrier)

    def _flush(self) -> None:
        barrier, self._barrier = self._barrier, None
        dirty, self._dirty = self._dirty, {}
        self.flushes += 1
        failure: BaseException | None = None
        for part in dirty.values():
            if part.retired:                # a retired replica (corruption) was flushed at its close
                continue
            try:
                part.store.log.flush()
            except OSError as exc:          # a disk error: still not durable, so pending again (the next
                failure = failure or exc    # mark or durable flushes it), never silently dropped
                self._dirty.setdefault(id(part), part)
            except Exception as exc:        # noqa: BLE001 - not the disk (a closed log at shutdown): fail
                failure = failure or exc    # the waiters, do not retry
        if failure is not None:    # the waiting requests fail rather than ack unflushed data
            barrier.set_exception(failure)
            barrier.exception()     # mark retrieved: it may have no waiter (acks=0)
            return
        barrier.set_result(None)
