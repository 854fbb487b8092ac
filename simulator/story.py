"""A schedule told as a numbered story: one line per event, in Kafka's terms.

`story(actions)` numbers the actions' story lines (`Action.text`, filled in by `World.apply`: what
happened and what came of it, e.g. "n1 appends v1 (acks=1): acknowledged at offset 0", "deliver #2:
n1's answer to n3's fetch from 0 (1 records, HW 0) reaches n3: n3 LEO 0->1, HW 0"). Actions without a
line (a bare list) are replayed on a fresh World first when `settings` is given, so the lines say what
came of them; otherwise their short form is used ("deliver #2"). With `state=True` each line ends with
the replicas' state after the event: "[n1* 1/0, n2 0/0, n3 -]" (LEO/HW, * the controller's leader,
- down). With `settle=True` (and `settings`) the story goes on with the steps of the end-of-schedule
`World.settle()` that cut a log or changed the leader, marked "(settle)": where a lost write is
finally gone, e.g. "4. (settle) deliver #1: metadata v5 (leader n2, epoch 1, ...) reaches n1: n1 is
follower of epoch 1 (n1 LEO 1->0)".
"""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["story"]


def story(actions: Sequence[Any], settings: Any = None, *, state: bool = False, settle: bool = False) -> list[str]:
    """Numbered lines "1. ...", one per action (see the module docstring). With `settings` and
    `settle=True` the story goes on with what the end-of-schedule `World.settle()` did that changed a
    log or the leader (marked "(settle)", with the LEO changes it made), which is where an
    acknowledged write is finally lost."""
    acts = list(actions)
    states: list[str] = []
    tail: list[str] = []
    if settings is not None and (state or settle or any(not getattr(a, "text", "") for a in acts)):
        from simulator.world import World
        world = World(settings)
        told = []
        for a in acts:
            told.append(world.apply(a))
            states.append(_state(world))
        acts = told
        if settle:
            tail = _settled(world)
    width = len(str(len(acts) + len(tail)))
    lines = []
    for i, a in enumerate(acts):
        text = getattr(a, "text", "") or (a.short() if hasattr(a, "short") else str(a))
        line = f"{i + 1:>{width}}. {text}"
        if state and states:
            line += f"  {states[i]}"
        lines.append(line)
    for k, text in enumerate(tail):
        lines.append(f"{len(acts) + k + 1:>{width}}. (settle) {text}")
    return lines


def _settled(world: Any) -> list[str]:
    """The settle() events that changed a log (with the LEO changes) or the controller's leader."""
    from simulator.world import World
    start = len(world.history)
    world.settle()
    again = World(world.settings)
    for a in world.history[:start]:
        again.apply(a)
    out = []
    for a in world.history[start:]:
        leos = {name: n.log.leo() for name, n in again.nodes.items()}
        leader = again.leader()
        done = again.apply(a)
        cut = [f"{name} LEO {leos[name]}->{n.log.leo()}" for name, n in again.nodes.items()
               if n.log.leo() < leos[name]]
        if cut:
            out.append(f"{done} ({', '.join(cut)})")
        elif again.leader() != leader:
            out.append(str(done))
    return out


def _state(world: Any) -> str:
    leader = world.leader()
    parts = []
    for name, n in world.nodes.items():
        mark = "*" if name == leader else ""
        if n.up and n.replica is not None:
            parts.append(f"{name}{mark} {n.log.leo()}/{n.replica.hw}")
        else:
            parts.append(f"{name}{mark} -")
    return "[" + ", ".join(parts) + "]"
