"""Shrinking a failing schedule: the smallest action list that still fails the same invariant.

`shrink(settings, finding)` reduces a `Finding` from `broker.sim.explore` with `shrink_actions`, whose
only notion of "still failing" is a predicate `fails(actions) -> bool`; for a finding that predicate is
"`explore.replay(settings, actions)` reports the finding's invariant" (a replay that meets an action
not enabled at that point is no failure: the candidate is invalid). The passes, repeated until a whole
round changes nothing or the budget is spent:

1. remove chunks, ddmin style: the schedule is cut into n chunks (n = 2, 4, 8, ...), each chunk's
   removal is tried, and a removal that still fails is kept (n then drops back by one);
2. remove single events, one at a time from the end (what remains is 1-minimal: no single event can go);
3. merge adjacent clock advances into one (`advance 200` + `advance 300` -> `advance 500`);
4. shorten each advance: the smallest amount (binary search down to 1 ms) that still fails.

Everything is deterministic: the candidates are tried in a fixed order, so the same finding shrinks to
the same schedule, unless the time budget (`budget_s`, the only use of a clock here, read through the
injectable `clock`) or `max_tries` cuts it short. Results of `fails` are cached per candidate.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

__all__ = ["shrink", "shrink_actions", "ShrinkStats"]


@dataclasses.dataclass
class ShrinkStats:
    tries: int = 0                   # distinct candidates replayed
    kept: int = 0                    # candidates that still failed and became the current schedule
    rounds: int = 0
    out_of_budget: bool = False


class _Budget(Exception):
    pass


def _is_advance(action: Any) -> bool:
    return getattr(action, "kind", None) == "advance"


def _advance_ms(action: Any) -> int:
    return int(getattr(action, "arg"))


def _with_ms(action: Any, ms: int) -> Any:
    return dataclasses.replace(action, arg=ms)


def shrink_actions(actions: Sequence[Any], fails: Callable[[list[Any]], bool], *, budget_s: float | None = 30,
                   max_tries: int | None = None, clock: Callable[[], float] = time.monotonic,
                   stats: ShrinkStats | None = None) -> list[Any]:
    """The smallest list found that `fails` (see the module docstring). `actions` must fail itself (else
    ValueError). Advances are actions with `kind == "advance"` and an integer `arg` (milliseconds),
    rebuilt with `dataclasses.replace`; any other objects are only removed, never changed."""
    stats = stats if stats is not None else ShrinkStats()
    deadline = None if budget_s is None else clock() + budget_s
    cache: dict[tuple, bool] = {}

    def test(candidate: list[Any]) -> bool:
        key = tuple(candidate)
        if key in cache:
            return cache[key]
        if (deadline is not None and clock() > deadline) or (max_tries is not None and stats.tries >= max_tries):
            raise _Budget()
        stats.tries += 1
        cache[key] = bool(fails(list(candidate)))
        return cache[key]

    current = list(actions)
    if not test(current):
        raise ValueError("shrink: the schedule to shrink does not fail")
    try:
        while True:
            stats.rounds += 1
            before = list(current)
            current = _remove_chunks(current, test, stats)
            current = _remove_singles(current, test, stats)
            current = _merge_advances(current, test, stats)
            current = _shorten_advances(current, test, stats)
            if current == before:
                break
    except _Budget:
        stats.out_of_budget = True
    return current


def _remove_chunks(current: list[Any], test, stats: ShrinkStats) -> list[Any]:
    n = 2
    while len(current) >= 2 and n <= len(current):
        size = -(-len(current) // n)              # ceil
        removed = False
        for start in range(0, len(current), size):
            candidate = current[:start] + current[start + size:]
            if candidate and test(candidate):
                current = candidate
                stats.kept += 1
                n = max(n - 1, 2)
                removed = True
                break
        if not removed:
            if n >= len(current):
                break
            n = min(n * 2, len(current))
    return current


def _remove_singles(current: list[Any], test, stats: ShrinkStats) -> list[Any]:
    i = len(current) - 1
    while i >= 0 and len(current) > 1:
        candidate = current[:i] + current[i + 1:]
        if test(candidate):
            current = candidate
            stats.kept += 1
            i = min(i, len(current)) - 1
        else:
            i -= 1
    return current


def _merge_advances(current: list[Any], test, stats: ShrinkStats) -> list[Any]:
    i = 0
    while i + 1 < len(current):
        a, b = current[i], current[i + 1]
        if _is_advance(a) and _is_advance(b):
            candidate = current[:i] + [_with_ms(a, _advance_ms(a) + _advance_ms(b))] + current[i + 2:]
            if test(candidate):
                current = candidate
                stats.kept += 1
                continue                            # the merged advance may merge with the next one
        i += 1
    return current


def _shorten_advances(current: list[Any], test, stats: ShrinkStats) -> list[Any]:
    for i, action in enumerate(current):
        if not _is_advance(action) or _advance_ms(action) <= 1:
            continue
        lo, hi = 1, _advance_ms(action)             # hi fails; find the smallest failing amount in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            candidate = current[:i] + [_with_ms(action, mid)] + current[i + 1:]
            if test(candidate):
                hi = mid
            else:
                lo = mid + 1
        if hi != _advance_ms(action):
            current = current[:i] + [_with_ms(action, hi)] + current[i + 1:]
            stats.kept += 1
    return current


def shrink(settings, finding, *, budget_s: float | None = 30, also: Callable[[list[Any]], bool] | None = None,
           max_tries: int | None = None, stats: ShrinkStats | None = None):
    """`finding` with its actions shrunk: the smallest schedule found whose replay under `settings` fails
    the same invariant (and, when given, satisfies `also(actions)`, e.g. "the leader-epoch replay of it
    is clean"). The returned Finding keeps invariant, seed and index and takes the text of the shrunk
    schedule's replay."""
    from broker.sim.explore import replay

    last: dict[tuple, Any] = {}

    def fails(actions: list[Any]) -> bool:
        got = replay(settings, actions)
        if got is None or got.invariant != finding.invariant:
            return False
        if also is not None and not also(actions):
            return False
        last[tuple(actions)] = got
        return True

    shrunk = shrink_actions(list(finding.actions), fails, budget_s=budget_s, max_tries=max_tries, stats=stats)
    got = last.get(tuple(shrunk))
    text = got.text if got is not None else finding.text
    return dataclasses.replace(finding, actions=list(shrunk) if isinstance(finding.actions, list) else tuple(shrunk),
                               text=text)
