"""A schedule told as a numbered story: one line per event, in Kafka's terms.

`story(actions)` numbers the actions' story lines (`Action.text`, filled in by `World.apply`: what
happened and what came of it, e.g. "n1 appends v1 (acks=1): acknowledged at offset 0", "deliver #2:
n1's answer to n3's fetch from 0 (1 records, HW 0) reaches n3: n3 LEO 0->1, HW 0"). Actions without a
line (a bare list) are replayed on a fresh World first when `settings` is given, so the lines say what
came of them; otherwise their short form is used ("deliver #2"). With `state=True` each line ends with
the replicas' state after the event: "[n1* 1/0, n2 0/0, n3 -]" (LEO/HW, * the controller's leader,
- down).
"""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["story"]


def story(actions: Sequence[Any], settings: Any = None, *, state: bool = False) -> list[str]:
    """Numbered lines "1. ...", one per action (see the module docstring)."""
    acts = list(actions)
    states: list[str] = []
    if settings is not None and (state or any(not getattr(a, "text", "") for a in acts)):
        from broker.sim.world import World
        world = World(settings)
        told = []
        for a in acts:
            told.append(world.apply(a))
            states.append(_state(world))
        acts = told
    width = len(str(len(acts)))
    lines = []
    for i, a in enumerate(acts):
        text = getattr(a, "text", "") or (a.short() if hasattr(a, "short") else str(a))
        line = f"{i + 1:>{width}}. {text}"
        if state and states:
            line += f"  {states[i]}"
        lines.append(line)
    return lines


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
