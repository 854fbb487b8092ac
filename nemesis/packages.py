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

Most packages aim at the leader of a partition of the test topic; the coordinator's aim at the leader of
the workload's group's partition of `__consumer_offsets` (`ctx.group`; `ctx.view(topic)` and
`ctx.wait(test, bound_s, topic)` read that topic's metadata). A package names what it aims at with an
`Aimed`: the leader's record `partition` and `state`, the coordinator's `group`, `offsets_partition` and
`state`.
"""
from __future__ import annotations

import random
from typing import Any, Callable, NamedTuple

from broker.groups.offsets import OFFSETS_TOPIC
from nemesis import shapes, targets


class Stopped(Exception):
    """The nemesis is stopping: the package ends where it is (stop() undoes its faults)."""


class Aimed(NamedTuple):
    """What a package aims at: `role` (the step names' word: leader, coordinator), the topic whose
    metadata it reads (None: the test topic), how it finds the partition and node, `find(ctx, step)` ->
    (partition view, node) or (None, None) after recording why, and the history fields naming them,
    `fields(ctx, part)`."""
    role: str
    topic: str | None
    find: Callable[[Any, Any], tuple[Any, Any]]
    fields: Callable[[Any, Any], dict[str, Any]]

    def name(self, ctx: Any) -> str:
        return self.topic or ctx.topic

    def view(self, ctx: Any):
        return ctx.view() if self.topic is None else ctx.view(self.topic)

    def wait(self, ctx: Any, test, bound_s: float):
        return ctx.wait(test, bound_s) if self.topic is None else ctx.wait(test, bound_s, self.topic)


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


def _coordinator_of(ctx: Any, _step: Any) -> tuple[Any, Any]:
    """(view of the group's offsets partition, its leader: the coordinator) or (None, None) after recording
    why: the offsets topic does not exist yet, its partition has no leader, or the coordinator is faulted."""
    view, why = ctx.view(OFFSETS_TOPIC)
    if view is None:
        ctx.skip(why)
        return None, None
    part = targets.coordinator_partition(view, ctx.group)
    if part is None or part.leader is None:
        ctx.skip(targets.no_coordinator(view, ctx.group))
        return None, None
    if part.leader in ctx.busy():
        ctx.skip(f"the coordinator of group {ctx.group!r}, {part.leader}, is already faulted")
        return None, None
    return part, part.leader


LEADER = Aimed("leader", None, _leader_of, lambda ctx, part: {"partition": part.partition})
COORDINATOR = Aimed("coordinator", OFFSETS_TOPIC, _coordinator_of,
                    lambda ctx, part: {"group": ctx.group, "offsets_partition": part.partition})


def isolate_then_down_leader(ctx: Any, step: Any, down: str, aim: Aimed = LEADER) -> None:
    """Cut the leader of the step's partition (with COORDINATOR: of the group's offsets partition, the
    coordinator) off from its followers (both ways; both still reach the controller), wait until its ISR
    has shrunk to the leader alone, then `down` it (kill or power-loss) for the step's duration; heal,
    restart, wait for the ISR to fill again."""
    part, leader = aim.find(ctx, step)
    if part is None:
        return
    topic = aim.name(ctx)
    followers = [r for r in part.replicas if r != leader]
    if not followers:
        return ctx.skip(f"{topic}/{part.partition} has no follower to cut off")
    cut = shapes.apart([leader], followers, "followers")
    isolate = ctx.start("isolate-followers", "partition", cut.targets,
                        {"shape": cut.shape, "groups": cut.groups, "drops": [list(d) for d in cut.drops],
                         **aim.fields(ctx, part), "state": part.state()},
                        f"{leader} cut off from its followers: {part.describe(topic)}")
    ok, view, waited = aim.wait(ctx, lambda v: targets.shrunk_to_leader(v, part.partition, leader), ctx.isr_wait_s)
    now = view.get(part.partition) if view is not None else None
    if not ok:
        seen = now.describe(topic) if now is not None else "no metadata"
        ctx.stop(isolate, f"ISR did not shrink to [{leader}] within {ctx.isr_wait_s:g} s ({seen}): {down} skipped")
        ctx.skip(f"ISR of {topic}/{part.partition} did not shrink to [{leader}] within {ctx.isr_wait_s:g} s")
        return ctx.recover([leader, *followers])
    kill = ctx.start(f"{down}-{aim.role}", down, [leader], {**aim.fields(ctx, part), "state": now.state()},
                     f"ISR shrank to [{leader}] after {waited:.1f} s: {now.describe(topic)}")
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


def _hold_until(ctx: Any, window: Any, part: Any, test, until: Until, aim: Aimed = LEADER) -> None:
    """Hold `window` until the metadata passes `test` (at most the fence wait), stop it saying which way it
    went, skip the package when it did not, and wait for the partition's leader (`part`, the view the
    package aimed at) to rejoin."""
    leader, (done, undone, missed) = part.leader, until
    topic = aim.name(ctx)
    ok, view, waited = aim.wait(ctx, test, ctx.fence_wait_s)
    now = view.get(part.partition) if view is not None else None
    seen = now.describe(topic) if now is not None else "no metadata"
    if ok:
        ctx.stop(window, f"{done} after {waited:.1f} s: {seen}")
    else:
        ctx.stop(window, f"not {done} within {ctx.fence_wait_s:g} s ({seen}): {undone}")
        ctx.skip(f"{leader} {missed} {topic}/{part.partition} within {ctx.fence_wait_s:g} s")
    ctx.recover([leader])


def isolate_leader_until_replaced(ctx: Any, step: Any, aim: Aimed = LEADER) -> None:
    """Cut the leader of the step's partition (with COORDINATOR: the group's coordinator) off from every
    other node (clients still reach it) until the controller has elected another leader, then heal: for
    that while two brokers take writes for the partition (two coordinators answer the group), and the old
    one hears of its successor only when healed."""
    part, leader = aim.find(ctx, step)
    if part is None:
        return
    cut = shapes.isolate(ctx.nodes, [leader], aim.role)
    iso = ctx.start(f"isolate-{aim.role}", "partition", cut.targets,
                    {"shape": cut.shape, "groups": cut.groups, "drops": [list(d) for d in cut.drops],
                     **aim.fields(ctx, part), "state": part.state()}, part.describe(aim.name(ctx)))
    _hold_until(ctx, iso, part, lambda v: targets.leader(v, part.partition) not in (None, leader), REPLACED, aim)


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
    "isolate-then-kill-coordinator": lambda ctx, step: isolate_then_down_leader(ctx, step, "kill", COORDINATOR),
    "isolate-coordinator-until-replaced": lambda ctx, step: isolate_leader_until_replaced(ctx, step, COORDINATOR),
}
