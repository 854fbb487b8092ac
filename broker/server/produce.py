"""Parked requests of one partition: acks=all produces waiting for the HW (Kafka's produce purgatory)
and long-polling fetches waiting for appends or HW moves.

`ProducePurgatory.park(last_offset, epoch, timeout_s)` waits until `recheck(status_of)` finds the
produce no longer "waiting" (the replication state machine's `produce_status`), or times out with
REQUEST_TIMED_OUT. A produce whose leader lost leadership after appending cannot know whether its
records survive, so it is answered REQUEST_TIMED_OUT too (an indefinite error for clients), never
NOT_LEADER (which clients take as "certainly not written").
"""
from __future__ import annotations

import asyncio
from typing import Callable

TIMED_OUT = "REQUEST_TIMED_OUT"


class Signal:
    """Wake every current waiter once: `await wait(timeout_s)` returns True if fired, False on timeout."""

    def __init__(self) -> None:
        self._fut: asyncio.Future | None = None

    async def wait(self, timeout_s: float) -> bool:
        if self._fut is None or self._fut.done():
            self._fut = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._fut), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    def fire(self) -> None:
        if self._fut is not None and not self._fut.done():
            self._fut.set_result(None)
        self._fut = None


class ProducePurgatory:
    def __init__(self) -> None:
        self._waiting: list[tuple[int, int, asyncio.Future]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    async def park(self, last_offset: int, epoch: int, timeout_s: float) -> str:
        """Wait for the outcome: "NONE", an error code, or REQUEST_TIMED_OUT."""
        return (await self.park_decided(last_offset, epoch, timeout_s))[0]

    async def park_decided(self, last_offset: int, epoch: int, timeout_s: float) -> tuple[str, object]:
        """`park`, with what `status_of` said when it decided (None on a timeout): the broker logs the
        state an acknowledgement was decided on, not the state when the answer is sent."""
        fut = asyncio.get_running_loop().create_future()
        entry = (last_offset, epoch, fut)
        self._waiting.append(entry)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            return TIMED_OUT, None
        finally:
            try:
                self._waiting.remove(entry)
            except ValueError:
                pass

    def recheck(self, status_of: Callable[[int, int], tuple]) -> None:
        """status_of(last_offset, epoch) -> (state, error) as the state machine's ProduceStatus, or
        (state, error, decided): `decided` is handed to `park_decided`'s caller."""
        if not self._waiting:
            return
        for last, epoch, fut in list(self._waiting):
            if fut.done():
                continue
            state, error, *decided = status_of(last, epoch)
            detail = decided[0] if decided else None
            if state == "complete":
                fut.set_result(("NONE", detail))
            elif state == "failed":
                fut.set_result((TIMED_OUT if error == "NOT_LEADER" else str(error), detail))

    def fail_all(self, code: str = TIMED_OUT) -> None:
        for _last, _epoch, fut in self._waiting:
            if not fut.done():
                fut.set_result((code, None))
