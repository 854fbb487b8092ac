"""Fault packages: several steps aimed at the cluster's live state, each step its own fault window.

A package reads the controller's metadata (nemesis/targets.py), starts a fault, waits (bounded) until the
metadata shows the state it is after, then takes the next step; every start and stop is recorded like a
single fault's (value `name` the package, `package` its number in the run, `step` the step). A state not
reached within its bound ends the package early, every fault it started undone, with the reason in the
stop's detail and in the nemesis stats (`skipped`). The driver (nemesis/driver.py `_Play`) provides `ctx`:

    ctx.view() -> (ClusterView | None, why)      ctx.start(step, kind, targets, extra, note) -> fault
    ctx.can_elect() -> bool (the admin client can move a leader)
    ctx.wait(test, bound_s) -> (ok, view, s)     ctx.stop(fault, note)    ctx.hold(s)    ctx.skip(reason)
    ctx.recover(nodes)    ctx.busy()    ctx.nodes (c0 first)    ctx.topic    ctx.isr_wait_s    ctx.fence_wait_s

`wait`, `hold` and `recover` raise `Stopped` when the nemesis stops; its stop() then undoes what is active.
"""
from __future__ import annotations

import random
from typing import Any, NamedTuple

from nemesis import shapes, targets


class Stopped(Exception):
    """The nemesis is stopping: the package ends where it is (stop() undoes its faults)."""


def _leader_of(ctx: Any, step: Any) -> tuple[Any, Any]:
    """(view of the step's partition, its leader) or (None, None) after recording why it cannot apply."""
    view, why = ctx.view()
    p = step.partition or 0
    if view is None:
        ctx.skip(why)
        return None, None
    part = view.get(p)
    if part is None or part.leader is None:
        ctx.skip(f"{ctx.topic}/{p} has no leader")
        return None, None
    if part.leader in ctx.busy():
        ctx.skip(f"the leader of {ctx.topic}/{p}, {part.leader}, is already faulted")
        return None, None
    return part, part.leader


def isolate_then_down_leader(ctx: Any, step: Any, down: str) -> None:
    """Cut the leader of the step's partition off from its followers (both ways; both still reach the
    controller), wait until its ISR has shrunk to the leader alone, then `down` it (kill or power-loss)
    for the step's duration; heal, restart, wait for the ISR to fill again."""
    part, leader = _leader_of(ctx, step)
    if part is None:
        return
    followers = [r for r in part.replicas if r != leader]
    if not followers:
        return ctx.skip(f"{ctx.topic}/{part.partition} has no follower to cut off")
    cut = shapes.apart([leader], followers, "followers")
    isolate = ctx.start("isolate-followers", "partition", cut.targets,
                        {"shape": cut.shape, "groups": cut.groups, "drops": [list(d) for d in cut.drops],
                         "partition": part.partition, "state": part.state()},
                        f"{leader} cut off from its followers: {part.describe(ctx.topic)}")
    ok, view, waited = ctx.wait(lambda v: targets.shrunk_to_leader(v, part.partition, leader), ctx.isr_wait_s)
    now = view.get(part.partition) if view is not None else None
    if not ok:
        seen = now.describe(ctx.topic) if now is not None else "no metadata"
        ctx.stop(isolate, f"ISR did not shrink to [{leader}] within {ctx.isr_wait_s:g} s ({seen}): {down} skipped")
        ctx.skip(f"ISR of {ctx.topic}/{part.partition} did not shrink to [{leader}] within {ctx.isr_wait_s:g} s")
        return ctx.recover([leader, *followers])
    kill = ctx.start(f"{down}-leader", down, [leader], {"partition": part.partition, "state": now.state()},
                     f"ISR shrank to [{leader}] after {waited:.1f} s: {now.describe(ctx.topic)}")
    ctx.hold(step.duration)
    ctx.stop(isolate, "")           # the followers are back, out of the ISR, with the leader down
    ctx.stop(kill, "")
    ctx.recover([leader, *followers])


def pause_leader_until_fenced(ctx: Any, step: Any) -> None:
    """SIGSTOP the leader of the step's partition until the controller has fenced it (session timeout: the
    partition led by another replica, or by none, and the old leader out of its ISR), then SIGCONT it: it
    wakes as a zombie that still believes it leads."""
    part, leader = _leader_of(ctx, step)
    if part is None:
        return
    pause = ctx.start("pause-leader", "pause", [leader], {"partition": part.partition, "state": part.state()},
                      part.describe(ctx.topic))
    _hold_until(ctx, pause, part, lambda v: targets.fenced(v, part.partition, leader), FENCED)


class Until(NamedTuple):
    """What a held window waits for, in its stop notes' words: the state hoped for, what ending the window
    without it does, and what the leader was not (before the partition's name) in the skip's reason."""
    done: str
    undone: str
    missed: str


FENCED = Until("fenced", "resumed", "not fenced from")
REPLACED = Until("replaced", "healed", "not replaced as leader of")


def _hold_until(ctx: Any, window: Any, part: Any, test, until: Until) -> None:
    """Hold `window` until the metadata passes `test` (at most the fence wait), stop it saying which way it
    went, skip the package when it did not, and wait for the partition's leader (`part`, the view the
    package aimed at) to rejoin."""
    leader, (done, undone, missed) = part.leader, until
    ok, view, waited = ctx.wait(test, ctx.fence_wait_s)
    now = view.get(part.partition) if view is not None else None
    seen = now.describe(ctx.topic) if now is not None else "no metadata"
    if ok:
        ctx.stop(window, f"{done} after {waited:.1f} s: {seen}")
    else:
        ctx.stop(window, f"not {done} within {ctx.fence_wait_s:g} s ({seen}): {undone}")
        ctx.skip(f"{leader} {missed} {ctx.topic}/{part.partition} within {ctx.fence_wait_s:g} s")
    ctx.recover([leader])


def isolate_leader_until_replaced(ctx: Any, step: Any) -> None:
    """Cut the leader of the step's partition off from every other node (clients still reach it) until the
    controller has elected another leader, then heal: for that while two brokers take writes for the
    partition, and the old one hears of its successor only when healed."""
    part, leader = _leader_of(ctx, step)
    if part is None:
        return
    cut = shapes.isolate(ctx.nodes, [leader], "leader")
    iso = ctx.start("isolate-leader", "partition", cut.targets,
                    {"shape": cut.shape, "groups": cut.groups, "drops": [list(d) for d in cut.drops],
                     "partition": part.partition, "state": part.state()}, part.describe(ctx.topic))
    _hold_until(ctx, iso, part, lambda v: targets.leader(v, part.partition) not in (None, leader), REPLACED)


def bounce_leader(ctx: Any, step: Any) -> None:
    """SIGKILL the leader of the step's partition and restart it at once, well inside the controller's
    session timeout: the new process registers while the metadata still names its previous incarnation
    leader, so the controller must tell the two apart (a new broker epoch) and the restarted broker must
    not act on the leadership it had before it registered."""
    part, leader = _leader_of(ctx, step)
    if part is None:
        return
    kill = ctx.start("bounce-leader", "kill", [leader], {"partition": part.partition, "state": part.state()},
                     part.describe(ctx.topic))
    ctx.hold(BOUNCE_DOWN_S)
    ctx.stop(kill, f"restarted after {BOUNCE_DOWN_S:g} s")
    ctx.recover([leader])


def move_leader(ctx: Any, step: Any) -> None:
    """A controlled leadership move, as a rolling restart's controlled shutdown or a preferred-leader
    election makes, under load: ask the controller to make another ISR member the leader of the step's
    partition (chosen with the step's seed), then wait until the metadata shows it leading. The old leader
    hears of it only from the metadata, while produces it appended wait for a HW its followers no longer
    move: what it answers them must not claim they failed."""
    if not ctx.can_elect():
        return ctx.skip("the admin client of this cluster cannot move a leader (ELECT_LEADER)")
    part, leader = _leader_of(ctx, step)
    if part is None:
        return
    others = sorted(r for r in part.isr if r != leader)
    if not others:
        return ctx.skip(f"the ISR of {ctx.topic}/{part.partition} is {part.isr}: no other member to lead")
    new = random.Random(step.seed).choice(others)
    move = ctx.start("move-leader", "elect", [new], {"partition": part.partition, "state": part.state(),
                                                     "from": leader},
                     f"{leader} to {new}: {part.describe(ctx.topic)}")
    ok, view, waited = ctx.wait(lambda v: targets.leader(v, part.partition) not in (None, leader), ctx.fence_wait_s)
    now = view.get(part.partition) if view is not None else None
    seen = now.describe(ctx.topic) if now is not None else "no metadata"
    ctx.stop(move, f"{'moved' if ok else 'not moved'} after {waited:.1f} s: {seen}")
    if not ok:
        ctx.skip(f"the leadership of {ctx.topic}/{part.partition} did not leave {leader} within {ctx.fence_wait_s:g} s")
    ctx.recover([leader])


# how long bounce-leader keeps the leader down: far below any session timeout, so the restart is what the
# controller sees first
BOUNCE_DOWN_S = 0.2


PLAYS = {
    "isolate-then-kill-leader": lambda ctx, step: isolate_then_down_leader(ctx, step, "kill"),
    "isolate-then-power-loss-leader": lambda ctx, step: isolate_then_down_leader(ctx, step, "power-loss"),
    "pause-leader-until-fenced": pause_leader_until_fenced,
    "isolate-leader-until-replaced": isolate_leader_until_replaced,
    "bounce-leader": bounce_leader,
    "move-leader": move_leader,
}
