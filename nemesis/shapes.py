"""Partition shapes: which one-way links (src, dst) to drop, given the node names and a seeded RNG.

Every function returns a `Cut`: the dropped directed links, the nodes the shape is "about" (targets) and
the groups it made. Nodes are names such as "c0", "n1".
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

SHAPES = ("isolate", "halves", "ring", "leader", "bridge", "one-way", "controller")
# what a schedule step may say of a shape's targets: these choose their own, a bridge has one middle node
CHOOSE_OWN_TARGETS = ("ring", "leader", "controller")
ONE_TARGET = ("bridge",)


@dataclass
class Cut:
    shape: str
    drops: list[tuple[str, str]]
    targets: list[str]
    groups: list[list[str]] = field(default_factory=list)


def _between(a: list[str], b: list[str]) -> list[tuple[str, str]]:
    """Both directions between every node of a and every node of b."""
    return [(x, y) for x in a for y in b] + [(y, x) for x in a for y in b]


def isolate(nodes: list[str], isolated: list[str], shape: str = "isolate") -> Cut:
    rest = [n for n in nodes if n not in isolated]
    return Cut(shape, _between(sorted(isolated), rest), sorted(isolated), [sorted(isolated), rest])


def halves(nodes: list[str], rng: random.Random, first: list[str] | None = None) -> Cut:
    if first is None:
        shuffled = list(nodes)
        rng.shuffle(shuffled)
        first = shuffled[: len(nodes) // 2]
    a = sorted(first)
    b = [n for n in nodes if n not in a]
    return Cut("halves", _between(a, b), a, [a, b])


def ring(nodes: list[str], rng: random.Random) -> Cut:
    """Majorities ring: every node hears a majority (itself and its nearest ring neighbours), and no two
    nodes hear the same majority. Node i drops packets from every node outside its majority."""
    order = list(nodes)
    rng.shuffle(order)
    n = len(order)
    majority = n // 2 + 1
    left = (majority - 1) // 2
    drops = []
    for i, node in enumerate(order):
        hears = {order[(i + k) % n] for k in range(-left, majority - left)}
        drops += [(other, node) for other in order if other not in hears]
    return Cut("ring", sorted(drops), sorted(nodes), [order])


def bridge(nodes: list[str], rng: random.Random, middle: str | None = None) -> Cut:
    """Two halves that cannot talk to each other, and one bridge node that talks to both."""
    rest = [n for n in nodes if n != middle] if middle else list(nodes)
    rng.shuffle(rest)
    if middle is None:
        middle, rest = rest[0], rest[1:]
    a, b = sorted(rest[: len(rest) // 2]), sorted(rest[len(rest) // 2:])
    return Cut("bridge", _between(a, b), [middle], [a, [middle], b])


def one_way(nodes: list[str], sender: str) -> Cut:
    """Everything `sender` sends to the other nodes is dropped; it still receives."""
    return Cut("one-way", [(sender, n) for n in nodes if n != sender], [sender],
               [[sender], [n for n in nodes if n != sender]])


def apart(a: list[str], b: list[str], shape: str) -> Cut:
    """Both directions between group `a` and group `b`; every other link stays (packages: a leader and its
    followers, both still talking to the controller). Not one of SHAPES."""
    return Cut(shape, _between(sorted(a), sorted(b)), sorted(a), [sorted(a), sorted(b)])


def cut(shape: str, nodes: list[str], rng: random.Random, targets: list[str] | None, fallback: str,
        controller: str) -> Cut:
    """The cut of a shape that needs no live state (every shape but `leader`): aimed at `targets` where
    the shape takes them, else at `fallback` (isolate, one-way) or at the seed's choice."""
    if shape == "isolate":
        return isolate(nodes, targets or [fallback])
    if shape == "halves":
        return halves(nodes, rng, targets)
    if shape == "ring":
        return ring(nodes, rng)
    if shape == "bridge":
        return bridge(nodes, rng, targets[0] if targets else None)
    if shape == "one-way":
        senders = targets or [fallback]
        drops = sorted({d for s in senders for d in one_way(nodes, s).drops})
        return Cut("one-way", drops, sorted(senders), [sorted(senders)])
    if shape == "controller":
        return isolate(nodes, [controller], "controller")
    raise ValueError(f"unknown partition shape {shape!r} (known: {', '.join(SHAPES)})")
