"""asyncio helpers for a clean, bounded shutdown.

Python 3.11's asyncio.wait_for can swallow a cancellation that arrives just as the awaited thing
completes (fixed in 3.12), after which a loop keeps running as if never cancelled; and on timeout it
waits, unbounded, for the cancelled inner awaitable to finish. `cancel_and_wait` therefore cancels again
until every task is done, and gives up after a deadline instead of hanging; `bounded` runs one awaitable
with a hard deadline (a task that ignores cancellation is abandoned, never awaited forever).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Task], timeout_s: float = 3.0) -> set[asyncio.Task]:
    """Cancel `tasks` (repeatedly) until they are done or `timeout_s` passed; return those still running."""
    pending = {t for t in tasks if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pending and loop.time() < deadline:
        for t in pending:
            t.cancel()
        _done, pending = await asyncio.wait(pending, timeout=min(0.2, max(deadline - loop.time(), 0.01)))
    return pending


async def bounded(aw: Awaitable, timeout_s: float, what: str) -> bool:
    """Await `aw` for at most `timeout_s` (+ a short cancellation grace); False if it had to be abandoned.
    Its exception, if any, is logged, not raised: shutdown steps must not stop the steps after them."""
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        still = await cancel_and_wait([task], 0.5)
        log.warning("shutdown: %s did not finish within %.1fs%s", what, timeout_s,
                    " and ignores cancellation (abandoned)" if still else " (cancelled)")
        return False
    if not task.cancelled() and task.exception() is not None:
        log.warning("shutdown: %s failed: %r", what, task.exception())
    return True


def run(coro, *, leftover_grace_s: float = 1.0):
    """Like asyncio.run, but leftover tasks get a bounded grace period at the end instead of an unbounded wait."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            leftovers = [t for t in asyncio.all_tasks(loop) if not t.done()]
            if leftovers:
                loop.run_until_complete(cancel_and_wait(leftovers, leftover_grace_s))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
