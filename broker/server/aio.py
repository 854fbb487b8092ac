"""asyncio helpers for a clean, bounded shutdown.

Python 3.11's asyncio.wait_for can swallow a cancellation that arrives just as the awaited thing
completes (fixed in 3.12), after which a loop keeps running as if never cancelled. `cancel_and_wait`
therefore cancels again until every task is done, and gives up after a deadline instead of hanging.
"""
from __future__ import annotations

import asyncio
from typing import Iterable


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
