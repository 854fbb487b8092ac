"""The two "hold until" packages (nemesis/packages.py) over a scripted context: the notes their windows
stop with and the reason a package that never saw its state is skipped with. The real counterpart, on a
local cluster, is tests/nemesis/test_packages_local.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from nemesis import packages
from nemesis.targets import ClusterView, PartitionView

BEFORE = PartitionView(1, "n2", 4, ("n2", "n3", "n1"), ("n1", "n2", "n3"))
AFTER = PartitionView(1, "n3", 5, ("n3", "n1"), ("n1", "n2", "n3"))


class Scripted:
    """A package context whose wait answers `ok` with the view `after` after 2.5 s."""

    topic, nodes, fence_wait_s = "hw", ["c0", "n1", "n2", "n3"], 9.0

    def __init__(self, ok: bool, after: ClusterView | None):
        self.ok, self.after = ok, after
        self.calls: list[tuple] = []

    def view(self):
        return ClusterView({1: BEFORE}), ""

    def busy(self):
        return set()

    def start(self, name, kind, targets, extra, note):
        self.calls.append(("start", name, kind, list(targets)))
        return name

    def wait(self, test, bound_s):
        assert bound_s == self.fence_wait_s
        return self.ok, self.after, 2.5

    def stop(self, window, note):
        self.calls.append(("stop", window, note))

    def skip(self, reason):
        self.calls.append(("skip", reason))

    def recover(self, nodes):
        self.calls.append(("recover", list(nodes)))


SEEN = "hw/1: leader n3, epoch 5, ISR [n3, n1]"


@pytest.mark.parametrize("package, window, words", [
    (packages.pause_leader_until_fenced, "pause-leader", ("fenced", "resumed", "not fenced from")),
    (packages.isolate_leader_until_replaced, "isolate-leader", ("replaced", "healed", "not replaced as leader of")),
])
def test_a_hold_stops_saying_which_way_it_went(package, window, words):
    done, undone, missed = words
    ok = Scripted(True, ClusterView({1: AFTER}))
    package(ok, SimpleNamespace(partition=1))
    assert ok.calls[1:] == [("stop", window, f"{done} after 2.5 s: {SEEN}"), ("recover", ["n2"])]

    missing = Scripted(False, None)
    package(missing, SimpleNamespace(partition=1))
    assert missing.calls[1:] == [
        ("stop", window, f"not {done} within 9 s (no metadata): {undone}"),
        ("skip", f"n2 {missed} hw/1 within 9 s"),
        ("recover", ["n2"]),
    ]
