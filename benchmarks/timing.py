"""Shared by the throughput benchmarks: run N worker threads to their end and time them."""
from __future__ import annotations

import threading
import time
from typing import Callable


def run_workers(n: int, worker: Callable[[int], None]) -> float:
    """Start `worker(k)` for k in 0..n-1 in threads, join them all; the seconds from start to last join."""
    t_start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - t_start
