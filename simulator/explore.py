"""The seeded search over simulated fault schedules (issue 19): `explore`, `replay`, `Finding`, `ExploreResult`;
`explore` searches a `SearchSpace` (seed, schedule length, swarm) within a `Budget` (schedules, seconds, clock),
keeping findings by `Keep` (the stop rules).

A schedule is a run of one fresh `World(settings)`: `length` times, the
legal actions (`World.enabled()`) are grouped by kind, a kind is drawn with the weights of `WEIGHTS`
(among the kinds that have a legal action now), then one action of that kind uniformly, and it is
applied. After every event the per-event invariants of simulator/invariants.py are checked; after the
last one `World.settle()` heals the cluster and the settled checks run (no-acked-loss). The first
violation ends the schedule and becomes a `Finding` holding the actions up to it, so
`replay(settings, finding.actions)` reports it again.

Determinism: schedule i of seed s draws only from `random.Random(f"{s}:{i}")`, so a schedule depends
on (settings, seed, i) alone. With `workers` > 1 the schedule indices are cut into fixed chunks handed
to worker processes; the results are merged in schedule order and the stop rules are applied during
the merge, so the schedules, events and findings are the same for any worker count when the search
is bounded by `Budget.schedules` (a time budget, `Budget.seconds`, only decides how many schedules run).
The clock (`Budget.clock`, default time.monotonic) is read for the budget and `elapsed_s` only, never by a
schedule.

Weights (`WEIGHTS`, relative, per kind; a kind with no legal action does not count):
- message traffic dominates so that replication actually progresses: deliver 30, send 16, produce 12;
- controller traffic: heartbeat 6, metadata 5, alter-isr 4, expire 3;
- clock: advance 6 (ISR shrinks and session expiry need time to pass);
- faults are rarer, so that the cluster often gets back to work between them: restart 4, crash 2,
  power-loss 1.5, drop 2, duplicate 1, cut 1.5, heal 3, elect 1.5, flush 2, checkpoint 2, damage 1.5.
Unknown kinds (a newer world.py) get `DEFAULT_WEIGHT`.

Swarm testing (`SearchSpace.swarm`, off by default so that the default schedules stay as they are): each
schedule first draws, from its own generator, which of the fault kinds of `SWARM_KINDS` it uses (each
kept with probability 1/2); the other kinds never occur in it. A schedule without drops or crashes
gets further with the faults it does have, so sequences that need several faults of a few kinds in a
row turn up more often (Groce et al., "Swarm testing", ISSTA 2012).
"""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from simulator import actions as A
from simulator import invariants as inv
from simulator.world import SimError, World

WEIGHTS: dict[str, float] = {
    A.DELIVER: 30, A.SEND: 16, A.PRODUCE: 12,
    A.HEARTBEAT: 6, A.METADATA: 5, A.ALTER_ISR: 4, A.EXPIRE: 3,
    A.ADVANCE: 6,
    A.RESTART: 4, A.CRASH: 2, A.POWER_LOSS: 1.5, A.DROP: 2, A.DUPLICATE: 1, A.CUT: 1.5, A.HEAL: 3,
    A.ELECT: 1.5, A.FLUSH: 2, A.CHECKPOINT: 2, A.DAMAGE: 1.5,
}
DEFAULT_WEIGHT = 2.0
SWARM_KINDS = (A.DROP, A.DUPLICATE, A.CRASH, A.POWER_LOSS, A.CUT, A.ELECT, A.EXPIRE, A.FLUSH, A.CHECKPOINT, A.ADVANCE,
               A.DAMAGE)
CHUNK = 25                      # schedules per unit of work handed to a worker process


@dataclass
class Finding:
    """A violated invariant: its name, the one-line violation, where it came from (seed and schedule
    index; None / -1 for a replay) and the actions that lead to it. `step` is the number of events
    applied when it was seen (len(actions), or that plus "settle" for a settled check: `settled`);
    `expected` says the configuration does not promise this invariant for this schedule
    (invariants.promises(settings, actions))."""
    invariant: str
    text: str
    seed: Any
    index: int
    actions: list = field(default_factory=list)
    step: int = 0
    settled: bool = False
    expected: bool = False

    def describe(self) -> str:
        where = "after settle" if self.settled else f"after event {self.step}"
        tag = " (expected: not promised by these settings)" if self.expected else ""
        return f"{self.invariant} {where}: {self.text}{tag}"


@dataclass
class ExploreResult:
    schedules: int              # schedules run (in order: 0 .. schedules-1)
    events: int                 # events applied in them (settle not counted)
    findings: list[Finding]
    elapsed_s: float
    stopped: str = ""           # why the search ended: "schedules", "budget", "finding", "all-invariants"
    found: dict[str, int] = field(default_factory=dict)   # failing schedules per invariant (all, kept or not)
    unexpected: dict[str, int] = field(default_factory=dict)   # of those, the ones the settings promised


def _pick(rng: random.Random, enabled: Sequence[Any], excluded: frozenset[str] = frozenset()) -> Any:
    """Kind by weight among the kinds present (and not excluded), then an action of that kind uniformly
    (both draws from rng). None when every enabled action is of an excluded kind."""
    groups: dict[str, list] = {}
    for a in enabled:
        if a.kind in excluded:
            continue
        g = groups.get(a.kind)
        if g is None:
            groups[a.kind] = [a]
        else:
            g.append(a)
    total = 0.0
    for kind in groups:
        total += WEIGHTS.get(kind, DEFAULT_WEIGHT)
    if not groups:
        return None
    x = rng.random() * total
    chosen = None
    for kind, g in groups.items():
        chosen = g
        x -= WEIGHTS.get(kind, DEFAULT_WEIGHT)
        if x < 0:
            break
    assert chosen is not None
    return chosen[0] if len(chosen) == 1 else chosen[rng.randrange(len(chosen))]


def _applied(world: Any, action: Any, result: Any) -> Any:
    """The action as applied (with the world's story text when it gives one)."""
    if result is not None and getattr(result, "kind", None) == action.kind:
        return result
    return action


def swarm_exclusions(rng: random.Random) -> frozenset[str]:
    """The fault kinds a swarm schedule leaves out (drawn first from the schedule's generator)."""
    return frozenset(k for k in SWARM_KINDS if rng.random() < 0.5)


def run_schedule(settings: Any, seed: Any, index: int, length: int = 50,
                 swarm: bool = False) -> tuple[int, Finding | None, list]:
    """Schedule `index` of `seed`: (events applied, the finding or None, the actions applied)."""
    rng = random.Random(f"{seed}:{index}")
    excluded = swarm_exclusions(rng) if swarm else frozenset()
    world = World(settings)
    actions: list = []
    check = inv.check_event
    for _ in range(length):
        enabled = world.enabled()
        if not enabled:
            break
        action = _pick(rng, enabled, excluded)
        if action is None:
            break
        actions.append(_applied(world, action, world.apply(action)))
        hit = check(world)
        if hit is not None:
            return len(actions), Finding(hit[0], hit[1], seed, index, actions, len(actions), False,
                                         hit[0] not in inv.promises(settings, actions)), actions
    world.settle()
    hit = inv.check_settled(world)
    if hit is not None:
        return len(actions), Finding(hit[0], hit[1], seed, index, actions, len(actions), True,
                                     hit[0] not in inv.promises(settings, actions)), actions
    return len(actions), None, actions


def schedule_actions(settings: Any, seed: Any, index: int, length: int = 50, swarm: bool = False) -> list:
    """The actions schedule `index` of `seed` applies (up to its finding, if any)."""
    return run_schedule(settings, seed, index, length, swarm)[2]


def replay(settings: Any, actions: Sequence[Any], *, seed: Any = None, index: int = -1,
           raise_invalid: bool = False) -> Finding | None:
    """Apply `actions` exactly on a fresh World, checking the per-event invariants after each; then
    settle and run the settled checks. The first violation is returned as a Finding (None: all held).
    An action that is not enabled when its turn comes makes the list invalid: None as well, or, with
    raise_invalid, the world's SimError (to tell "clean" from "not possible here")."""
    errors = (SimError,)
    world = World(settings)
    done: list = []
    for action in actions:
        try:
            result = world.apply(action)
        except errors:
            if raise_invalid:
                raise
            return None
        done.append(_applied(world, action, result))
        hit = inv.check_event(world)
        if hit is not None:
            return Finding(hit[0], hit[1], seed, index, done, len(done), False,
                           hit[0] not in inv.promises(settings, done))
    world.settle()
    hit = inv.check_settled(world)
    if hit is not None:
        return Finding(hit[0], hit[1], seed, index, done, len(done), True,
                       hit[0] not in inv.promises(settings, done))
    return None


@dataclass(frozen=True)
class SearchSpace:
    """The schedules a search draws from: schedule i of `seed` (its own generator), `length` events at
    most each, with swarm testing or not (module docstring)."""
    seed: Any
    length: int = 50
    swarm: bool = False


@dataclass(frozen=True)
class Budget:
    """How long a search may run: `schedules` schedules, or `seconds` read on `clock` (whichever comes
    first; at least one of them must be given). The clock is read for this and `elapsed_s` only."""
    schedules: int | None = None
    seconds: float | None = None
    clock: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Keep:
    """Which findings a search keeps, and when they end it.

    first_per_invariant: keep only the first finding (in schedule order) of each invariant, and stop
    once every invariant has one; False keeps every failing schedule. stop_on_finding: stop at the
    first finding (time to first failure). per_invariant: with first_per_invariant False, keep at most
    this many findings of each invariant (the first ones, so memory stays bounded on a long search;
    the result's `found` still counts them all)."""
    first_per_invariant: bool = True
    stop_on_finding: bool = False
    per_invariant: int | None = None


def _run_chunk(settings: Any, space: SearchSpace, start: int, stop: int,
               stop_on_finding: bool) -> list[tuple[int, Finding | None]]:
    """Schedules [start, stop): (events, finding) each; with stop_on_finding it ends at the first finding
    (the merge would cut there anyway)."""
    out = []
    seed = space.seed
    for i in range(start, stop):
        try:
            events, finding, _ = run_schedule(settings, seed, i, space.length, space.swarm)
        except Exception as exc:          # a simulator bug: name the schedule so it can be replayed
            raise RuntimeError(f"explore: schedule {i} of seed {seed!r} failed: {type(exc).__name__}: {exc}") from exc
        out.append((events, finding))
        if finding is not None and stop_on_finding:
            break
    return out


class _Merge:
    """Folds chunk results in schedule order and applies the stop rules (the same for any worker count)."""

    def __init__(self, first_per_invariant: bool, stop_on_finding: bool, limit: int | None,
                 keep_per_invariant: int | None = None):
        self.first_per_invariant, self.stop_on_finding, self.limit = first_per_invariant, stop_on_finding, limit
        self.keep = keep_per_invariant
        self.found: dict[str, int] = {}
        self.unexpected: dict[str, int] = {}
        self.schedules = self.events = 0
        self.findings: list[Finding] = []
        self.seen: set[str] = set()
        self.stopped = ""

    def add(self, results: list[tuple[int, Finding | None]]) -> bool:
        """Returns True when the search is over."""
        for events, finding in results:
            if self.stopped:
                return True
            self.schedules += 1
            self.events += events
            keep_it = False
            if finding is not None:
                name = finding.invariant
                self.found[name] = self.found.get(name, 0) + 1
                if not finding.expected:
                    self.unexpected[name] = self.unexpected.get(name, 0) + 1
                # the cap counts expected and unexpected findings apart: a promise broken late in a
                # search full of expected findings is still kept
                same_kind = (self.found[name] - self.unexpected.get(name, 0) if finding.expected
                             else self.unexpected[name])
                keep_it = ((self.keep is None or same_kind <= self.keep)
                           and not (self.first_per_invariant and name in self.seen))
            if keep_it:
                self.findings.append(finding)
                self.seen.add(finding.invariant)
                if self.stop_on_finding:
                    self.stopped = "finding"
                elif self.first_per_invariant and self.seen >= set(inv.INVARIANTS):
                    self.stopped = "all-invariants"
            if self.limit is not None and self.schedules >= self.limit and not self.stopped:
                self.stopped = "schedules"
        return bool(self.stopped)


def explore(settings: Any, space: SearchSpace, budget: Budget, *, keep: Keep = Keep(), workers: int = 1,
            progress: Callable[[int, int, list], None] | None = None) -> ExploreResult:
    """Run schedules 0, 1, 2, ... of `space` until the `budget` is spent, keeping findings by `keep`.

    progress(schedules, events, found) is called in this process after each chunk of schedules, `found`
    being the failing schedules so far per invariant (every one, kept or not: what the result's `found`
    will say).
    """
    schedules = budget.schedules
    if schedules is None and budget.seconds is None:
        raise ValueError("explore: give the budget schedules or seconds")
    if schedules is not None and schedules < 0:
        raise ValueError(f"explore: schedules must be >= 0, got {schedules}")
    if space.length < 1:
        raise ValueError(f"explore: length must be >= 1, got {space.length}")
    if workers < 1:
        raise ValueError(f"explore: workers must be >= 1, got {workers}")
    search = _Search(settings, space, budget, keep, progress)
    if schedules == 0:
        return ExploreResult(0, 0, [], budget.clock() - search.t0, "schedules")
    if workers == 1:
        search.run_here()
    else:
        search.run_in_workers(workers)
    merge = search.merge
    return ExploreResult(merge.schedules, merge.events, merge.findings, budget.clock() - search.t0,
                         merge.stopped or "budget", dict(merge.found), dict(merge.unexpected))


class _Search:
    """One search under way: what it runs, its budget (the deadline starts when it is made) and the merge
    of the chunks done so far."""

    def __init__(self, settings: Any, space: SearchSpace, budget: Budget, keep: Keep,
                 progress: Callable[[int, int, list], None] | None):
        self.settings, self.space, self.keep, self.progress = settings, space, keep, progress
        self.clock = budget.clock
        self.schedules = budget.schedules
        self.t0 = self.clock()
        self.deadline = None if budget.seconds is None else self.t0 + budget.seconds
        self.merge = _Merge(keep.first_per_invariant, keep.stop_on_finding, budget.schedules, keep.per_invariant)

    def chunks(self):
        """(start, stop) of each chunk of schedules, in order (without end when only time bounds the search)."""
        schedules, start = self.schedules, 0
        while schedules is None or start < schedules:
            stop = start + CHUNK if schedules is None else min(start + CHUNK, schedules)
            yield start, stop
            start = stop

    def report(self) -> None:
        if self.progress is not None:
            self.progress(self.merge.schedules, self.merge.events, dict(self.merge.found))

    def run_here(self) -> None:
        """The chunks one after the other in this process."""
        merge, deadline, clock = self.merge, self.deadline, self.clock
        for start, stop in self.chunks():
            if deadline is not None and clock() >= deadline and merge.schedules > 0:   # at least one chunk
                merge.stopped = "budget"
                break
            done = merge.add(_run_chunk(self.settings, self.space, start, stop, self.keep.stop_on_finding))
            self.report()
            if done:
                break

    def run_in_workers(self, workers: int) -> None:
        """The chunks in `workers` processes, at most two per worker in flight, merged in schedule order."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        merge, deadline, clock, chunks = self.merge, self.deadline, self.clock, self.chunks()
        # fork is fast and safe while this is the only thread; with others (a progress display) use forkserver
        method = "fork" if threading.active_count() == 1 else "forkserver"
        ctx = multiprocessing.get_context(method)
        pending: list = []                       # futures in schedule order
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            try:
                exhausted = False
                while True:
                    while not exhausted and len(pending) < 2 * workers and (
                            deadline is None or clock() < deadline or (merge.schedules == 0 and not pending)):
                        nxt = next(chunks, None)
                        if nxt is None:
                            exhausted = True
                            break
                        pending.append(pool.submit(_run_chunk, self.settings, self.space, nxt[0], nxt[1],
                                                   self.keep.stop_on_finding))
                    if not pending:
                        if not exhausted:
                            merge.stopped = merge.stopped or "budget"
                        break
                    head = pending.pop(0)
                    if deadline is not None and not head.done() and merge.schedules > 0:
                        # past the deadline, unfinished work is abandoned: the result is the prefix done so far
                        remaining = deadline - clock()
                        if remaining <= 0:
                            head.cancel()
                            merge.stopped = merge.stopped or "budget"
                            break
                        try:
                            results = head.result(timeout=remaining)
                        except TimeoutError:
                            merge.stopped = merge.stopped or "budget"
                            break
                    else:
                        results = head.result()
                    done = merge.add(results)
                    self.report()
                    if done:
                        break
            finally:
                for f in pending:
                    f.cancel()
