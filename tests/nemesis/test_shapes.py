"""Partition shapes (nemesis/shapes.py): exactly which directed links each shape drops."""
from __future__ import annotations

import itertools
import random

import pytest

from nemesis import shapes

NODES = ["c0", "n1", "n2", "n3"]


def _hears(cut: shapes.Cut, nodes: list[str]) -> dict[str, set[str]]:
    """node -> the nodes whose packets reach it."""
    dropped = set(cut.drops)
    return {n: {m for m in nodes if m == n or (m, n) not in dropped} for n in nodes}


def test_isolate_cuts_both_directions_between_the_node_and_everyone_else():
    cut = shapes.isolate(NODES, ["n2"])
    assert sorted(cut.drops) == sorted([("n2", "c0"), ("n2", "n1"), ("n2", "n3"),
                                        ("c0", "n2"), ("n1", "n2"), ("n3", "n2")])
    assert cut.targets == ["n2"] and cut.groups == [["n2"], ["c0", "n1", "n3"]]


def test_halves_are_two_groups_with_no_link_between_them():
    cut = shapes.halves(NODES, random.Random(4))
    a, b = cut.groups
    assert len(a) == 2 and len(b) == 2 and sorted(a + b) == NODES
    assert sorted(cut.drops) == sorted([(x, y) for x in a for y in b] + [(y, x) for x in a for y in b])
    assert shapes.halves(NODES, random.Random(4)).drops == cut.drops
    fixed = shapes.halves(NODES, random.Random(0), ["n1"])
    assert fixed.groups == [["n1"], ["c0", "n2", "n3"]]


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7])
def test_majorities_ring_every_node_hears_a_majority_and_no_two_hear_the_same(n):
    nodes = ["c0"] + [f"n{i}" for i in range(1, n)]
    cut = shapes.ring(nodes, random.Random(n))
    hears = _hears(cut, nodes)
    majority = n // 2 + 1
    assert all(len(h) == majority for h in hears.values())
    if n > 3:
        assert len({frozenset(h) for h in hears.values()}) == n
    assert sorted(cut.groups[0]) == sorted(nodes)


def test_bridge_middle_talks_to_both_sides_which_cannot_talk_to_each_other():
    cut = shapes.bridge(NODES + ["n4"], random.Random(2), "n2")
    a, mid, b = cut.groups
    assert mid == ["n2"] and cut.targets == ["n2"]
    assert len(a) == 2 and len(b) == 2
    hears = _hears(cut, NODES + ["n4"])
    assert hears["n2"] == set(NODES + ["n4"])
    for x, y in itertools.product(a, b):
        assert y not in hears[x] and x not in hears[y]
    random_middle = shapes.bridge(NODES, random.Random(3))
    assert len(random_middle.targets) == 1 and random_middle.targets[0] in NODES


def test_one_way_drops_only_what_the_sender_sends():
    cut = shapes.one_way(NODES, "n3")
    assert cut.drops == [("n3", "c0"), ("n3", "n1"), ("n3", "n2")]
    hears = _hears(cut, NODES)
    assert hears["n3"] == set(NODES)
    assert all("n3" not in hears[n] for n in ("c0", "n1", "n2"))
