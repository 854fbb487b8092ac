"""Shared pacing of client operations: a rate limiter and a source of unique values.

`RateLimiter` spaces operations evenly at `rate` per second across every thread that shares it (each
acquire reserves the next slot). `ValueSource` hands out integers unique across the whole run (hence
unique per partition, as docs/formats.md requires).
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Callable


class RateLimiter:
    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] | None = None):
        if rate <= 0:
            raise ValueError(f"rate must be above 0, got {rate}")
        self.interval = 1.0 / rate
        self._clock = clock
        self._sleep = sleep
        self._next = clock()
        self._lock = threading.Lock()

    def acquire(self, stop: threading.Event | None = None) -> bool:
        """Wait for the next slot. Returns False (without waiting it out) when `stop` gets set."""
        with self._lock:
            now = self._clock()
            slot = max(now, self._next)
            # never let a long stall build up a burst larger than one second's worth of operations
            self._next = max(slot, now - 1.0) + self.interval
        delay = slot - self._clock()
        if delay > 0:
            if self._sleep is not None:
                self._sleep(delay)
            elif stop is not None:
                if stop.wait(delay):
                    return False
            else:
                time.sleep(delay)
        return not (stop is not None and stop.is_set())


class ValueSource:
    """Thread-safe counter of values 0, 1, 2, ... (unique across partitions too)."""

    def __init__(self, start: int = 0):
        self._counter = itertools.count(start)
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            return next(self._counter)
