"""The produce purgatory and wake-up signals of broker/server/produce.py (pure asyncio, no sockets)."""
from __future__ import annotations

import asyncio

from broker.server.produce import ProducePurgatory, Signal


def test_parked_produces_complete_fail_or_time_out():
    async def scenario():
        pur = ProducePurgatory()
        state = {9: ("waiting", None), 19: ("waiting", None), 29: ("waiting", None), 39: ("waiting", None)}
        tasks = {last: asyncio.create_task(pur.park(last, 3, 5.0 if last != 39 else 0.05)) for last in state}
        await asyncio.sleep(0.01)
        assert len(pur) == 4
        pur.recheck(lambda last, epoch: state[last])
        assert not any(t.done() for t in tasks.values())
        state[9] = ("complete", None)
        state[19] = ("failed", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
        state[29] = ("failed", "NOT_LEADER")       # leadership lost after the append: outcome unknown
        pur.recheck(lambda last, epoch: state[last] if epoch == 3 else ("failed", "wrong epoch"))
        return {last: await t for last, t in tasks.items()}, len(pur)

    results, left = asyncio.run(scenario())
    assert results == {9: "NONE", 19: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 29: "REQUEST_TIMED_OUT",
                       39: "REQUEST_TIMED_OUT"}
    assert left == 0


def test_signal_wakes_current_waiters_once():
    async def scenario():
        sig = Signal()
        assert await sig.wait(0.01) is False
        waiters = [asyncio.create_task(sig.wait(5.0)) for _ in range(3)]
        await asyncio.sleep(0.01)
        sig.fire()
        woken = await asyncio.gather(*waiters)
        again = await sig.wait(0.01)          # a fire before waiting does not count
        return woken, again

    assert asyncio.run(scenario()) == ([True, True, True], False)
