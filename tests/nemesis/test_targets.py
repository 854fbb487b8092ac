"""Targets from a metadata snapshot (nemesis/targets.py): the leader, a follower, the sole member of a shrunk
ISR, a minority and a majority, and the states packages wait for."""
from __future__ import annotations

import random
from types import SimpleNamespace

from nemesis import targets as T


def info(partition, leader, isr, replicas=(1, 2, 3), epoch=4):
    return SimpleNamespace(partition=partition, leader=leader, epoch=epoch, isr=list(isr), replicas=list(replicas))


SNAPSHOT = [info(0, 1, [1, 2, 3]), info(1, 2, [2]), info(2, None, [3], epoch=9), info(3, 3, [3, 1])]


def test_the_view_names_brokers_as_nodes():
    v = T.view_of(SNAPSHOT)
    assert v.get(1) == T.PartitionView(1, "n2", 4, ("n2",), ("n1", "n2", "n3"))
    assert v.get(2).leader is None and v.get(7) is None
    assert v.get(0).describe("hw") == "hw/0: leader n1, epoch 4, ISR [n1, n2, n3]"
    assert v.get(1).state() == {"partition": 1, "leader": "n2", "epoch": 4, "isr": ["n2"]}


def test_leader_and_followers():
    v = T.view_of(SNAPSHOT)
    assert T.leader(v, 0) == "n1" and T.leader(v, 2) is None and T.leader(v, 5) is None
    assert T.followers(v, 0) == ["n2", "n3"]
    # a follower in the ISR first: partition 3's ISR is [n3, n1], so n1 (n2 is out of it)
    assert {T.follower(v, 3, random.Random(s)) for s in range(30)} == {"n1"}
    assert {T.follower(v, 0, random.Random(s)) for s in range(30)} == {"n2", "n3"}
    assert T.follower(v, 0, random.Random(1), busy=["n2", "n3"]) is None
    assert T.follower(v, 3, random.Random(1), busy=["n1"]) == "n2"       # out of the ISR, but free
    assert T.follower(v, 2, random.Random(1)) is None                    # no leader, no follower


def test_the_same_seed_picks_the_same_follower_whatever_the_order_of_the_answer():
    a = T.view_of(SNAPSHOT)
    b = T.view_of([info(0, 1, [3, 2, 1], replicas=(3, 1, 2))])
    assert [T.follower(a, 0, random.Random(s)) for s in range(20)] == [T.follower(b, 0, random.Random(s))
                                                                       for s in range(20)]


def test_sole_isr_member():
    v = T.view_of(SNAPSHOT)
    # partition 1 is led by n2 alone; partition 2's last ISR member n3 is not leading: not a target
    assert T.sole_isr(v, random.Random(0)).partition == 1
    assert T.sole_isr(v, random.Random(0), busy=["n2"]) is None
    assert T.sole_isr(T.view_of([info(0, 1, [1, 2])]), random.Random(0)) is None
    two = T.view_of([info(0, 1, [1]), info(1, 2, [2]), info(2, 3, [3, 1])])
    assert {T.sole_isr(two, random.Random(s)).partition for s in range(30)} == {0, 1}
    assert {T.sole_isr(two, random.Random(s), prefer=1).partition for s in range(10)} == {1}
    assert {T.sole_isr(two, random.Random(s), prefer=2).partition for s in range(30)} == {0, 1}


def test_minority_and_majority():
    assert [T.minority_size(n) for n in (1, 2, 3, 4, 5)] == [0, 0, 1, 1, 2]
    assert [T.majority_size(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    brokers = ["n1", "n2", "n3", "n4", "n5"]
    picks = [T.some(brokers, 3, random.Random(s)) for s in range(30)]
    assert all(len(p) == 3 and p == sorted(p) and set(p) <= set(brokers) for p in picks)
    assert len({tuple(p) for p in picks}) > 3
    assert picks == [T.some(list(reversed(brokers)), 3, random.Random(s)) for s in range(30)]
    assert T.some(brokers, 3, random.Random(1), busy=["n1", "n2", "n3"]) == []          # only two free
    assert set(T.some(brokers, 2, random.Random(1), busy=["n1", "n2", "n3"])) == {"n4", "n5"}
    assert T.some(brokers, 0, random.Random(1)) == []


def test_the_states_packages_wait_for():
    v = T.view_of(SNAPSHOT)
    assert T.shrunk_to_leader(v, 1, "n2") and not T.shrunk_to_leader(v, 0, "n1")
    assert not T.shrunk_to_leader(v, 1, "n1") and not T.shrunk_to_leader(v, 9, "n1")
    # fenced: the partition taken away from the node (another leader or none) and the node out of the ISR
    assert T.fenced(v, 1, "n1") and not T.fenced(v, 0, "n1") and not T.fenced(v, 3, "n1")
    assert T.fenced(v, 2, "n1") and not T.fenced(v, 2, "n3")
    assert not T.whole(v, [])                                      # partition 2 has no leader
    # n1 replicates only partition 0, where it is in the ISR
    led = T.view_of([info(0, 1, [1, 2, 3]), info(1, 2, [2, 3], replicas=(2, 3))])
    assert T.whole(led, ["n1", "n2", "n3"])
    assert not T.whole(T.view_of([info(0, 1, [1, 2])]), ["n3"])
    assert not T.whole(T.view_of([]), [])


def test_last_copies():
    v = T.view_of(SNAPSHOT)
    # n2 alone in partition 1's ISR; n3 alone in partition 2's (leaderless); partition 3's ISR is [n3, n1]
    assert [p.partition for p in T.last_copies(v, "n2")] == [1]
    assert [p.partition for p in T.last_copies(v, "n3")] == [2]
    assert T.last_copies(v, "n1") == []
    # with n3 down, n1 holds partition 3's only available in-sync copy
    assert [p.partition for p in T.last_copies(v, "n1", unavailable=["n3"])] == [3]
    assert [p.partition for p in T.last_copies(v, "n1", unavailable=["n2", "n3"])] == [0, 3]
