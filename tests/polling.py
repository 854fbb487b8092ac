"""One bounded polling loop for tests that wait on a real cluster: call `predicate` until it returns a
truthy value (returned) or the deadline passes (AssertionError naming what was awaited and the last
answer or error). Errors of the types in `retry_on` mean "the cluster is changing under us": retried.
`eventually` is the quiet form for `assert eventually(...)`: True or False, no message, no retries."""
from __future__ import annotations

import time
from typing import Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition", *,
               interval: float = 0.1, retry_on: tuple[type[BaseException], ...] = (Exception,)) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except retry_on as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")


def eventually(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> bool:
    """Whether `predicate` turns truthy within `timeout` seconds (asked every `interval`, and once more
    at the deadline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
