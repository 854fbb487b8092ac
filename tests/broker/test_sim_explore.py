"""simulator/explore.py: the seeded search over simulated schedules.

Determinism (the same seed gives the same action lists and findings; 1 worker and 2 worker processes
give the same result), the search finds the HW-truncation loss in hw mode with acks=1 within a bounded
number of schedules and finds nothing in leader-epoch mode with the safe settings, replay reproduces a
finding exactly, and the stop rules, progress callback and budget behave as documented.
"""
from __future__ import annotations

import pytest

from simulator import explore as ex
from simulator import invariants as inv
from simulator.actions import Action
from simulator.world import SimSettings, World

HW_ACKS1 = SimSettings(truncation="hw", acks=1)
SAFE = SimSettings(truncation="leader-epoch", acks=-1, min_insync_replicas=2)


def key(f: ex.Finding):
    return (f.invariant, f.text, f.seed, f.index, f.step, f.settled, f.expected, list(f.actions))


def test_the_same_seed_gives_the_same_schedules():
    for i in range(5):
        a = ex.schedule_actions(HW_ACKS1, 7, i)
        b = ex.schedule_actions(HW_ACKS1, 7, i)
        assert a == b and len(a) >= 1
        assert [str(x) for x in a] == [str(x) for x in b]      # the story lines too
    assert ex.schedule_actions(HW_ACKS1, 7, 0) != ex.schedule_actions(HW_ACKS1, 8, 0)
    assert ex.schedule_actions(HW_ACKS1, 7, 0) != ex.schedule_actions(HW_ACKS1, 7, 1)


def test_the_same_seed_gives_the_same_findings():
    r1 = ex.explore(HW_ACKS1, ex.SearchSpace(3), ex.Budget(schedules=40), keep=ex.Keep(first_per_invariant=False))
    r2 = ex.explore(HW_ACKS1, ex.SearchSpace(3), ex.Budget(schedules=40), keep=ex.Keep(first_per_invariant=False))
    assert (r1.schedules, r1.events) == (r2.schedules, r2.events) == (40, r1.events)
    assert r1.findings and [key(f) for f in r1.findings] == [key(f) for f in r2.findings]
    assert [f.index for f in r1.findings] == sorted({f.index for f in r1.findings})   # one per failing schedule


def test_one_and_two_workers_give_the_same_result():
    one = ex.explore(HW_ACKS1,
                     ex.SearchSpace(11), ex.Budget(schedules=60), keep=ex.Keep(first_per_invariant=False), workers=1)
    two = ex.explore(HW_ACKS1,
                     ex.SearchSpace(11), ex.Budget(schedules=60), keep=ex.Keep(first_per_invariant=False), workers=2)
    assert (one.schedules, one.events, one.stopped) == (two.schedules, two.events, two.stopped) == (60, one.events,
                                                                                                    "schedules")
    assert one.findings and [key(f) for f in one.findings] == [key(f) for f in two.findings]
    first1 = ex.explore(HW_ACKS1,
                        ex.SearchSpace(11), ex.Budget(schedules=500), keep=ex.Keep(stop_on_finding=True), workers=1)
    first2 = ex.explore(HW_ACKS1,
                        ex.SearchSpace(11), ex.Budget(schedules=500), keep=ex.Keep(stop_on_finding=True), workers=2)
    assert (first1.schedules, first1.events, first1.stopped) == (first2.schedules, first2.events, "finding")
    assert [key(f) for f in first1.findings] == [key(f) for f in first2.findings]
    assert first1.schedules == first1.findings[0].index + 1 == one.findings[0].index + 1


def test_hw_mode_with_acks_1_finds_a_loss_and_replay_reproduces_it():
    r = ex.explore(HW_ACKS1, ex.SearchSpace(1), ex.Budget(schedules=200), keep=ex.Keep(stop_on_finding=True))
    assert r.stopped == "finding" and len(r.findings) == 1
    f = r.findings[0]
    assert f.invariant in ("no-acked-loss", "committed-prefix-agreement")
    assert f.expected is True                                # hw mode promises neither
    assert r.schedules == f.index + 1 <= 200
    again = ex.replay(HW_ACKS1, f.actions)
    assert again is not None
    assert (again.invariant, again.text, again.step, again.settled) == (f.invariant, f.text, f.step, f.settled)
    assert again.actions == f.actions and (again.seed, again.index) == (None, -1)
    assert ex.replay(HW_ACKS1, []) is None                   # nothing happened: nothing to find


def test_hw_mode_with_acks_all_finds_a_loss_too():
    s = SimSettings(truncation="hw", acks=-1, min_insync_replicas=2)
    r = ex.explore(s, ex.SearchSpace(1), ex.Budget(schedules=300), keep=ex.Keep(stop_on_finding=True))
    assert r.findings and r.findings[0].invariant in ("no-acked-loss", "committed-prefix-agreement")


def test_leader_epoch_with_the_safe_settings_finds_nothing_in_300_schedules():
    assert inv.promises_no_loss(SAFE)
    r = ex.explore(SAFE, ex.SearchSpace(1), ex.Budget(schedules=300), keep=ex.Keep(first_per_invariant=False))
    assert (r.schedules, r.stopped, r.findings) == (300, "schedules", [])
    assert r.events > 300 * 40                               # the schedules did run (a few may end early)


def test_replay_of_an_action_that_is_not_enabled_is_no_finding():
    # n1 leads at the start, so an unclean election of n1 and a restart of a running node are illegal
    assert ex.replay(HW_ACKS1, [Action("restart", "n2")]) is None
    assert ex.replay(HW_ACKS1, [Action("deliver", msg=999)]) is None


def test_a_finding_holds_the_actions_up_to_the_violation():
    r = ex.explore(HW_ACKS1, ex.SearchSpace(1), ex.Budget(schedules=200), keep=ex.Keep(first_per_invariant=False))
    assert r.findings
    for f in r.findings[:5]:
        assert f.step == len(f.actions)
        if f.invariant == "no-acked-loss":
            assert f.settled                                 # checked only after settle()
        assert ex.schedule_actions(HW_ACKS1, 1, f.index) == f.actions


def test_first_per_invariant_keeps_one_finding_per_invariant():
    all_ = ex.explore(HW_ACKS1, ex.SearchSpace(5), ex.Budget(schedules=80), keep=ex.Keep(first_per_invariant=False))
    first = ex.explore(HW_ACKS1, ex.SearchSpace(5), ex.Budget(schedules=80))
    names = []
    for f in all_.findings:
        if f.invariant not in names:
            names.append(f.invariant)
    assert [f.invariant for f in first.findings] == names
    assert [key(f) for f in first.findings] == [key(next(g for g in all_.findings if g.invariant == n)) for n in names]
    assert len(all_.findings) > len(first.findings)


def test_progress_is_called_with_growing_counts_and_ends_at_the_result():
    calls = []
    r = ex.explore(HW_ACKS1,
                   ex.SearchSpace(2), ex.Budget(schedules=60),
                   keep=ex.Keep(first_per_invariant=False, per_invariant=2),
                   progress=lambda s, e, f: calls.append((s, e, dict(f))))
    assert [c[0] for c in calls] == [25, 50, 60]
    assert calls[-1] == (r.schedules, r.events, r.found)
    # every failing schedule counts, not just the ones kept (at most 2 per invariant here)
    assert sum(r.found.values()) > len(r.findings)
    assert all(a[1] <= b[1] for a, b in zip(calls, calls[1:]))


def test_a_budget_stops_the_search_by_the_injected_clock():
    ticks = iter(range(1000))
    r = ex.explore(SAFE, ex.SearchSpace(1), ex.Budget(seconds=2.5, clock=lambda: next(ticks)))
    # clock reads: start (0), before chunk 1 (1), before chunk 2 (2), before chunk 3 (3 >= 2.5: stop), end
    assert (r.schedules, r.stopped) == (50, "budget")


@pytest.mark.parametrize("space, budget, workers", [
    (ex.SearchSpace(1), ex.Budget(), 1), (ex.SearchSpace(1), ex.Budget(schedules=-1), 1),
    (ex.SearchSpace(1, length=0), ex.Budget(schedules=5), 1), (ex.SearchSpace(1), ex.Budget(schedules=5), 0)])
def test_bad_arguments_are_refused(space, budget, workers):
    with pytest.raises(ValueError):
        ex.explore(SAFE, space, budget, workers=workers)


def test_the_weights_cover_every_action_kind():
    from simulator.actions import KINDS
    assert set(ex.WEIGHTS) == set(KINDS)


def test_invariants_on_a_real_world_healthy_then_broken_by_hand():
    w = World(SAFE)
    for v in range(3):
        w.apply(Action("produce", "n1"))
    w.settle()
    assert [(n.replica.role, n.replica.leo, n.replica.hw) for n in w.nodes.values()] == [
        ("leader", 3, 3), ("follower", 3, 3), ("follower", 3, 3)]
    assert inv.check_settled(w) is None
    w2 = World(SAFE)
    w2.apply(Action("produce", "n1"))
    w2.settle()
    w2.acked.append(type(w2.acked[0])("v9", 1, 0, "n1"))
    assert inv.no_acked_loss(w2) == "1 of 2 acknowledged writes missing from the committed log of n1 (HW 1): v9@1"


def test_swarm_schedules_leave_out_the_drawn_fault_kinds_and_are_deterministic():
    import random
    kinds_seen = set()
    for i in range(30):
        excluded = ex.swarm_exclusions(random.Random(f"4:{i}"))
        acts = ex.schedule_actions(HW_ACKS1, 4, i, swarm=True)
        assert acts == ex.schedule_actions(HW_ACKS1, 4, i, swarm=True)
        assert not {a.kind for a in acts} & excluded
        kinds_seen |= {a.kind for a in acts}
    assert {"crash", "cut", "advance"} <= kinds_seen           # each left out only in some schedules
    one = ex.explore(HW_ACKS1,
                     ex.SearchSpace(4, swarm=True), ex.Budget(schedules=50), keep=ex.Keep(first_per_invariant=False))
    two = ex.explore(HW_ACKS1,
                     ex.SearchSpace(4, swarm=True), ex.Budget(schedules=50),
                     keep=ex.Keep(first_per_invariant=False), workers=2)
    assert [key(f) for f in one.findings] == [key(f) for f in two.findings] and one.events == two.events
    plain = ex.explore(HW_ACKS1, ex.SearchSpace(4), ex.Budget(schedules=50), keep=ex.Keep(first_per_invariant=False))
    assert [key(f) for f in plain.findings] != [key(f) for f in one.findings]   # swarm: other schedules


def test_replay_can_tell_an_impossible_list_from_a_clean_one():
    from simulator.world import SimError
    with pytest.raises(SimError):
        ex.replay(HW_ACKS1, [Action("restart", "n2")], raise_invalid=True)
    assert ex.replay(HW_ACKS1, [Action("produce", "n1")], raise_invalid=True) is None


def test_kip_279_divergence_in_five_events_kip101_mode_only():
    """A stale leader (n1, epoch 0) takes v1 while n3 leads epoch 1 and takes v2 at the same offset; n3
    crashes, n1 is elected again (epoch 2). n3 asks where epoch 1 ends; n1 answers "epoch 0 ends at 1".
    KIP-101's single round keeps v2 (divergence); KIP-279's rule (leader-epoch) truncates it."""
    acts = [Action("elect", "n3", arg=0), Action("deliver", msg=3), Action("produce", "n1"), Action("produce", "n3"),
            Action("crash", "n3")]
    got = ex.replay(SimSettings(truncation="kip-101", acks=-1), acts)
    assert got is not None and (got.invariant, got.text, got.settled) == (
        "committed-prefix-agreement", "n1 and n3 differ at offset 0 below both HWs (1, 1): v1@epoch 0 vs v2@epoch 1",
        True)
    assert ex.replay(SimSettings(truncation="leader-epoch", acks=-1), acts, raise_invalid=True) is None


def test_an_empty_epoch_entry_does_not_hide_where_an_older_epoch_started():
    """The explorer's finding in safe settings (seed 1745661662, schedule 9249, shrunk to 23 actions).
    n2 is elected for epoch 2 holding one epoch-1 record and writes nothing; n3 takes epoch 3 and n2,
    told "epoch 1 ends at 2", cuts nothing but kept its (2, 1) entry. The epoch-1 record it then
    fetched at offset 1 replaced that entry and epoch 1's start at 0, so when n1 (a stale leader of
    epoch 0 holding v1 at offset 0) was elected, n2 was told "epoch 0 ends at 1" and kept v2 at
    offset 0 where n1 has v1."""
    A = Action
    acts = [A("elect", "n3", arg=0), A("deliver", msg=3), A("produce", "n1"), A("produce", "n3"),
            A("deliver", msg=2), A("send", "n2"), A("deliver", msg=4), A("produce", "n3"), A("cut", "n2", "n3"),
            A("elect", "n2", arg=0), A("deliver", msg=5), A("deliver", msg=7), A("elect", "n3", arg=0),
            A("deliver", msg=10), A("deliver", msg=11), A("heal", "n2", "n3"), A("send", "n2"),
            A("deliver", msg=12), A("deliver", msg=13), A("send", "n2"), A("deliver", msg=14),
            A("deliver", msg=15), A("crash", "n3")]
    safe = SimSettings(replicas=3, truncation="leader-epoch", acks=-1, min_insync_replicas=2, replica_fetch_max_records=2)
    assert ex.replay(safe, acts, raise_invalid=True) is None


def test_power_losses_of_min_isr_replicas_with_eligible_leader_replicas_are_outside_the_promise():
    """The explorer's finding (swarm search, seed 1, schedule 49, shrunk): v1 (acks=all) is on all three
    replicas, unflushed; all three lose power. KIP-966 protects against fewer than min.insync.replicas
    unclean shutdowns, so this is an expected finding; two of the three power losses lose nothing."""
    s = SimSettings(truncation="leader-epoch", acks=-1, min_insync_replicas=2, flush="never",
                    eligible_leader_replicas=True)
    acts = [Action("produce", "n1"), Action("send", "n3"), Action("deliver", msg=1), Action("deliver", msg=2),
            Action("send", "n2"), Action("deliver", msg=3), Action("deliver", msg=4), Action("send", "n2"),
            Action("deliver", msg=5), Action("send", "n3"), Action("deliver", msg=7), Action("power-loss", "n1"),
            Action("power-loss", "n3"), Action("power-loss", "n2")]
    got = ex.replay(s, acts)
    assert got is not None and (got.invariant, got.text, got.expected) == (
        "no-acked-loss", "1 of 1 acknowledged writes missing from any node (no leader): v1@0", True)
    assert ex.replay(s, acts[:-1]) is None                     # two power losses: n2 still holds v1


def test_a_message_sent_before_a_power_loss_never_arrives():
    """Found in review: a fetch n3 sent before it lost power used to reach the leader afterwards (its
    connection is reset in reality), acknowledging v1 on a follower LEO n3 no longer had."""
    s = SimSettings(truncation="leader-epoch", acks=-1, min_insync_replicas=2, flush="never",
                    eligible_leader_replicas=True)
    acts = [Action("crash", "n2"), Action("restart", "n2"), Action("deliver", msg=1), Action("produce", "n1"),
            Action("send", "n3"), Action("deliver", msg=5), Action("deliver", msg=2), Action("deliver", msg=6),
            Action("send", "n3"), Action("advance", arg=1001), Action("power-loss", "n3"), Action("deliver", msg=7)]
    with pytest.raises(Exception, match="not enabled: deliver #7"):
        ex.replay(s, acts, raise_invalid=True)


def test_keep_per_invariant_bounds_the_findings_kept_but_counts_them_all():
    every = ex.explore(HW_ACKS1, ex.SearchSpace(1), ex.Budget(schedules=200), keep=ex.Keep(first_per_invariant=False))
    capped = ex.explore(HW_ACKS1,
                        ex.SearchSpace(1), ex.Budget(schedules=200),
                        keep=ex.Keep(first_per_invariant=False, per_invariant=2))
    assert capped.found == every.found and sum(every.found.values()) == len(every.findings) > 4
    by_inv: dict[str, list[int]] = {}
    for f in every.findings:
        by_inv.setdefault(f.invariant, []).append(f.index)
    assert [(f.invariant, f.index) for f in capped.findings] == \
        [(f.invariant, f.index) for f in every.findings if f.index in by_inv[f.invariant][:2]]


def test_the_cap_keeps_a_broken_promise_found_after_many_expected_findings():
    merge = ex._Merge(first_per_invariant=False, stop_on_finding=False, limit=None, keep_per_invariant=2)
    found = [ex.Finding("no-acked-loss", "lost", 1, i, expected=True) for i in range(5)]
    found.append(ex.Finding("no-acked-loss", "lost", 1, 5, expected=False))
    merge.add([(10, f) for f in found])
    assert [(f.index, f.expected) for f in merge.findings] == [(0, True), (1, True), (5, False)]
    assert (merge.found, merge.unexpected) == ({"no-acked-loss": 6}, {"no-acked-loss": 1})


@pytest.mark.parametrize("workers", [1, 2])
def test_a_budget_spent_before_the_first_chunk_still_runs_one_chunk(workers):
    ticks = iter(range(0, 100000, 1000))            # every clock read is 1000 s later: the budget is gone
    r = ex.explore(SAFE, ex.SearchSpace(1), ex.Budget(seconds=0.5, clock=lambda: next(ticks)), workers=workers)
    assert r.schedules == ex.CHUNK and r.stopped == "budget"
