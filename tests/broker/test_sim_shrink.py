"""simulator/shrink.py: the shrinker reaches known minimal schedules.

First on a synthetic predicate (the minimal failing list is known exactly), then on the simulator: the
KIP-101 case 1 lost write (hw truncation, acks=1) padded with noise events shrinks to a short schedule
that still loses the acknowledged write in hw mode and not in leader-epoch mode."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from simulator.shrink import ShrinkBudget, ShrinkStats, shrink, shrink_actions


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
    # readings: 0 sets the deadline at 5; the schedule itself is checked without a reading; replays at
    # 1..4; the reading 5 stops
    assert stats.out_of_budget and stats.tries == 5
    assert needs_3_7_12_with_250ms(got)
    limited = ShrinkStats()
    shrink_actions(padded(), needs_3_7_12_with_250ms, budget_s=None, max_tries=7, stats=limited)
    assert limited.out_of_budget and limited.tries == 7
    # a budget of 0 still checks the schedule and returns it as it is
    zero = ShrinkStats()
    assert shrink_actions(padded(), needs_3_7_12_with_250ms, budget_s=0, clock=lambda: 7.0,
                          stats=zero) == padded()
    assert zero.out_of_budget and zero.tries == 1


# --- on the simulator: KIP-101 case 1 padded with noise -------------------------------------------

def _kip101_padded():
    """KIP-101 case 1 (seed 000 七.1) as simulator actions, with noise events between its steps:
    n1 acknowledges v1 (acks=1); only n3 fetches it (its HW stays 0); n2 is elected and n3 follows it
    (hw truncation: n3 cuts v1); n3 is elected and leads without v1. Returns (padded, the 7 case events)."""
    from simulator.actions import Action
    from simulator.world import World, SimSettings

    world = World(SimSettings(truncation="hw", acks=1))

    def msg(kind, src, dst):
        return next(m.id for m in world.in_flight.values() if (m.kind, m.src, m.dst) == (kind, src, dst))

    case: list = []
    padded: list = []

    def do(action, essential=True):
        done = world.apply(action)
        padded.append(done)
        if essential:
            case.append(done)

    def noise(round_: int):
        do(Action("heartbeat", "n2"), False)
        do(Action("deliver", msg=msg("heartbeat", "n2", "c0")), False)
        do(Action("advance", arg=100), False)
        do(Action("cut", "n1", "c0" if round_ % 2 else "n2"), False)
        do(Action("heal", "n1", "c0" if round_ % 2 else "n2"), False)
        do(Action("heartbeat", "n3"), False)
        do(Action("deliver", msg=msg("heartbeat", "n3", "c0")), False)

    noise(0)
    do(Action("produce", "n1"))
    noise(1)
    do(Action("send", "n3"))
    do(Action("deliver", msg=msg("fetch", "n3", "n1")))
    noise(2)
    do(Action("deliver", msg=msg("fetch-answer", "n1", "n3")))
    noise(3)
    do(Action("elect", "n2", arg=0))
    noise(4)
    do(Action("deliver", msg=msg("metadata", "c0", "n3")))
    noise(5)
    do(Action("elect", "n3", arg=0))
    noise(6)
    return padded, case


def test_kip101_case_1_with_noise_shrinks_to_the_case():
    import dataclasses
    from simulator.explore import Finding, replay
    from simulator.world import SimSettings
    from simulator.story import story

    hw = SimSettings(truncation="hw", acks=1)
    le = dataclasses.replace(hw, truncation="leader-epoch")
    padded, case = _kip101_padded()
    assert len(padded) == 56 and len(case) == 7
    found = replay(hw, padded, seed="hand", index=0)
    assert found.invariant == "no-acked-loss"
    assert replay(le, padded) is None                  # leader-epoch keeps v1 on the same events

    def le_keeps_it(actions):
        return replay(le, actions) is None             # message ids agree: the modes send the same here

    stats = ShrinkStats()
    small = shrink(hw, found, budget=ShrinkBudget(None), also=le_keeps_it, stats=stats)
    # shorter than the 7 case events: n1's answer to n3's fetch is still in flight when the schedule
    # ends, and settle() delivers it before the epoch-1 metadata that makes n3 cut v1 again
    assert [a.short() for a in small.actions] == ["n1 produce", "n3 send", "deliver #1", "elect n2", "elect n3"]
    assert small.invariant == "no-acked-loss" and (small.seed, small.index) == ("hand", 0)
    assert small.text == "1 of 1 acknowledged writes missing from the committed log of n3 (HW 0): v1@0"
    assert not stats.out_of_budget
    # without the leader-epoch condition the loss of any acks=1 write to a failing leader is shorter
    trivial = shrink(hw, found, budget=ShrinkBudget(None))
    assert len(trivial.actions) < 7 and replay(le, trivial.actions) is not None
    assert story(small.actions, hw, settle=True) == [
        "1. n1 appends v1 (acks=1): acknowledged at offset 0",
        "2. n3 sends n1 a fetch from offset 0 (epoch 0)",
        "3. deliver #1: n3's fetch from 0 (epoch 0) reaches n1: HW 0",
        "4. admin election: n2 leads epoch 1, ISR {n1,n2,n3}",
        "5. admin election: n3 leads epoch 2, ISR {n1,n2,n3}",
        "6. (settle) deliver #3: metadata v5 (leader n2, epoch 1, ISR {n1,n2,n3}) reaches n1: n1 is follower "
        "of epoch 1 (n1 LEO 1->0)",
        "7. (settle) deliver #5: metadata v5 (leader n2, epoch 1, ISR {n1,n2,n3}) reaches n3: n3 is follower "
        "of epoch 1 (n3 LEO 1->0)",
    ]
    # the state column: LEO/HW per replica after each event, * the controller's leader
    assert story(small.actions, hw, state=True)[4].endswith("[n1 1/0, n2 0/0, n3* 0/0]")


def test_a_shrink_renumbers_the_messages_of_later_events():
    """In the padded schedule the noise heartbeats take ids first: n3's fetch is #5, its answer #6 and
    the epoch-1 metadata for n3 #13. Removing the heartbeats renumbers them; the shrunk schedule's
    deliveries name the ids their messages have there, so it replays as it stands."""
    from simulator.explore import replay
    from simulator.world import SimSettings
    hw = SimSettings(truncation="hw", acks=1)
    padded, case = _kip101_padded()
    assert [a.msg for a in case] == [None, None, 5, 6, None, 13, None]
    le = SimSettings(truncation="leader-epoch", acks=1)
    small = shrink(hw, replay(hw, padded), budget=ShrinkBudget(None), also=lambda acts: replay(le, acts) is None)
    told = [str(a) for a in small.actions if a.kind == "deliver"]
    assert told == ["deliver #1: n3's fetch from 0 (epoch 0) reaches n1: HW 0"]      # #5 in the padded one
    assert replay(hw, small.actions).invariant == "no-acked-loss"
    # the padded schedule with its ids left as they were does not replay once the heartbeats are gone
    kept = [a for a in padded if a.kind != "heartbeat" and not str(a).endswith("heartbeat reaches the controller")]
    assert replay(hw, kept) is None
