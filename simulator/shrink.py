"""Shrinking a failing schedule: the smallest action list that still fails the same invariant.

`shrink(settings, finding)` reduces a `Finding` from `simulator.explore` with `shrink_actions`, whose
only notion of "still failing" is a predicate `fails(actions) -> bool`; for a finding that predicate is
"`explore.replay(settings, actions)` reports the finding's invariant" (a replay that meets an action
not enabled at that point is no failure: the candidate is invalid). The passes, repeated until a whole
round changes nothing or the budget is spent:

1. remove chunks, ddmin style: the schedule is cut into n chunks (n = 2, 4, 8, ...), each chunk's
   removal is tried, and a removal that still fails is kept (n then drops back by one);
2. remove single events, one at a time from the end (what remains is 1-minimal: no single event can go);
3. merge adjacent clock advances into one (`advance 200` + `advance 300` -> `advance 500`);
4. shorten each advance: the smallest amount (binary search down to 1 ms) that still fails.

Message ids are handed out in order, so a removal renumbers the later messages: `shrink` names each
message by the event that created it (`apply_tracked`) and rewrites deliver / drop / duplicate for each
candidate. Everything is deterministic: the candidates are tried in a fixed order, so the same finding shrinks to
the same schedule, unless the time budget (`budget_s`, the only use of a clock here, read through the
injectable `clock`) or `max_tries` cuts it short (`shrink` takes both as a `ShrinkBudget`). Results of
`fails` are cached per candidate.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

__all__ = ["shrink", "shrink_actions", "ShrinkBudget", "ShrinkStats"]


@dataclasses.dataclass
class ShrinkStats:
    tries: int = 0                   # distinct candidates replayed
    kept: int = 0                    # candidates that still failed and became the current schedule
    rounds: int = 0
    out_of_budget: bool = False


def _is_advance(action: Any) -> bool:
    return getattr(action, "kind", None) == "advance"


def _advance_ms(action: Any) -> int:
    return int(getattr(action, "arg"))


def _with_ms(action: Any, ms: int) -> Any:
    if any(f.name == "text" for f in dataclasses.fields(action)):
        return dataclasses.replace(action, arg=ms, text="")      # the old story line named the old amount
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

    def test(candidate: list[Any], budgeted: bool = True) -> bool:
        key = tuple(candidate)
        if key in cache:
            return cache[key]
        if budgeted and ((deadline is not None and clock() >= deadline)
                         or (max_tries is not None and stats.tries >= max_tries)):
            raise TimeoutError("shrink: out of budget")   # caught below: the shrink stops where it is
        stats.tries += 1
        cache[key] = bool(fails(list(candidate)))
        return cache[key]

    current = list(actions)
    if not test(current, budgeted=False):              # the schedule itself is checked whatever the budget
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
    except TimeoutError:
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


@dataclasses.dataclass(frozen=True)
class _Step:
    """One event of the schedule being shrunk: its index in the original schedule (which names the
    messages it created, see `_Renumber`) and, for an advance, the (possibly shortened) amount."""
    index: int
    kind: str
    arg: int | None


class _Renumber:
    """Message ids are handed out in order (`World._send`), so removing an event renumbers every later
    message and a later `deliver #12` would name another message or none. A message is therefore
    named by where it came from in the original schedule: (index of the event that created it, kind,
    source, destination, n-th such one of that event); `concrete(steps)` replays a candidate on a fresh
    World, maps each deliver / drop / duplicate to the id its message has now, and returns the plain
    action list, or None when an event is not enabled (or its message was never created)."""

    def __init__(self, settings, actions: Sequence[Any]):
        from simulator.world import World
        self.settings, self.World = settings, World
        self.original = list(actions)
        self.origin: dict[int, tuple] = {}
        world = World(settings)
        for j, action in enumerate(self.original):
            for key, mid in self._apply(world, j, action):
                self.origin[mid] = key

    @staticmethod
    def _apply(world, j: int, action) -> list[tuple[tuple, int]]:
        return apply_tracked(world, j, action)

    def concrete(self, steps: Sequence[_Step]) -> list[Any] | None:
        world = self.World(self.settings)
        now: dict[tuple, int] = {}
        out = []
        for step in steps:
            action = self.original[step.index]
            if step.kind == "advance":
                action = dataclasses.replace(action, arg=step.arg, text="")
            elif action.msg is not None:
                key = self.origin.get(action.msg)
                if key is None or key not in now:
                    return None
                action = dataclasses.replace(action, msg=now[key], text="")
            if not world.is_enabled(action):
                return None
            for key, mid in self._apply(world, step.index, action):
                now[key] = mid
            out.append(dataclasses.replace(action, text=""))
        return out


def apply_tracked(world, j: int, action) -> list[tuple[tuple, int]]:
    """Apply `action` (event number `j` of its schedule) to `world`; returns (origin, id) for each message
    it created that is still in flight, origin = (j, kind, source, destination, n-th such one). Two
    replays of one schedule (after removals, or in another truncation mode) name a message alike."""
    first = world.next_msg_id
    world.apply(action)
    made, seen = [], {}
    for mid in range(first, world.next_msg_id):
        m = world.in_flight.get(mid)
        if m is None:
            continue
        kind = (m.kind, m.src, m.dst)
        seen[kind] = seen.get(kind, 0) + 1
        made.append(((j,) + kind + (seen[kind],), mid))
    return made


def _explore_replay(settings, actions):
    from simulator.explore import replay
    return replay(settings, actions)


@dataclasses.dataclass(frozen=True)
class ShrinkBudget:
    """How much shrinking one finding may cost: `seconds` of wall time and `tries` distinct candidates
    replayed (None: no limit of that kind)."""
    seconds: float | None = 30
    tries: int | None = None


def shrink(settings, finding, *, budget: ShrinkBudget = ShrinkBudget(), also: Callable[[list[Any]], bool] | None = None,
           stats: ShrinkStats | None = None, replay: Callable | None = None):
    """`finding` with its actions shrunk within `budget`: the smallest schedule found whose replay under
    `settings` fails the same invariant (and, when given, satisfies `also(actions)`, e.g. "the leader-epoch
    replay of it is clean"). Message ids are renumbered for each candidate (`_Renumber`). `replay` defaults
    to `simulator.explore.replay`. The returned Finding keeps invariant, seed and index and takes the
    shrunk schedule (with the world's story lines) and the text of its replay."""
    from simulator.world import World
    replay = replay or _explore_replay
    renumber = _Renumber(settings, finding.actions)
    last: dict[tuple, tuple[list[Any], Any]] = {}

    def fails(steps: list[_Step]) -> bool:
        actions = renumber.concrete(steps)
        if actions is None:
            return False
        got = replay(settings, actions)
        if got is None or got.invariant != finding.invariant:
            return False
        if also is not None and not also(actions):
            return False
        last[tuple(steps)] = (actions, got)
        return True

    steps = [_Step(j, a.kind, a.arg if a.kind == "advance" else None) for j, a in enumerate(finding.actions)]
    shrunk = shrink_actions(steps, fails, budget_s=budget.seconds, max_tries=budget.tries, stats=stats)
    actions, got = last[tuple(shrunk)]
    told = World(settings).run(actions).history          # the same actions with their story lines
    keep = {f.name for f in dataclasses.fields(finding)} - {"invariant", "seed", "index", "actions"}
    return dataclasses.replace(finding, actions=list(told),
                               **{k: getattr(got, k) for k in keep if hasattr(got, k)})
