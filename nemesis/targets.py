"""Targets chosen from the cluster's live state: a snapshot of the controller's metadata for the test topic.

A `ClusterView` holds each partition's leader, leader epoch, ISR and replicas as the admin client's
`describe(topic)` reports them (broker ids become node names `n<id>`); a view of the internal topic
`__consumer_offsets` tells where a consumer group's coordinator is (`coordinator_partition`). The functions below pick the
nodes a fault aims at from a view and a seeded RNG: the same seed makes the same choices in the same
state. They return None (or []) when the state offers no such target, e.g. no partition's ISR has shrunk
to one broker; the caller records the skip with its reason.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterable

from broker.groups.offsets import OFFSETS_TOPIC, partition_for


@dataclass(frozen=True)
class PartitionView:
    partition: int
    leader: str | None
    epoch: int
    isr: tuple[str, ...]
    replicas: tuple[str, ...]

    def describe(self, topic: str) -> str:
        return (f"{topic}/{self.partition}: leader {self.leader or 'none'}, epoch {self.epoch}, "
                f"ISR [{', '.join(self.isr)}]")

    def state(self) -> dict[str, Any]:
        """For the history: what the metadata said when a step applied."""
        return {"partition": self.partition, "leader": self.leader, "epoch": self.epoch, "isr": list(self.isr)}


@dataclass(frozen=True)
class ClusterView:
    partitions: dict[int, PartitionView]

    def get(self, partition: int) -> PartitionView | None:
        return self.partitions.get(partition)


def _node(broker_id: Any) -> str:
    return f"n{int(broker_id)}"


def view_of(infos: Iterable[Any]) -> ClusterView:
    """A view from describe()'s answer: objects with partition, leader (id or None), epoch, isr, replicas."""
    parts = {}
    for info in infos:
        leader = getattr(info, "leader", None)
        parts[int(info.partition)] = PartitionView(
            int(info.partition), None if leader is None else _node(leader), int(getattr(info, "epoch", -1)),
            tuple(_node(b) for b in getattr(info, "isr", ()) or ()),
            tuple(_node(b) for b in getattr(info, "replicas", ()) or ()))
    return ClusterView(parts)


def _pick(rng: random.Random, candidates: list[str]) -> str | None:
    """One of `candidates` (sorted first, so the choice depends on the seed and the set, not its order)."""
    return rng.choice(sorted(candidates)) if candidates else None


def leader(view: ClusterView, partition: int) -> str | None:
    p = view.get(partition)
    return p.leader if p is not None else None


def coordinator_partition(view: ClusterView, group: str) -> PartitionView | None:
    """The partition of the offsets topic that holds `group`, from a view of `__consumer_offsets`: Kafka's
    choice over its partition count (broker/groups/offsets.py partition_for); its leader is the group's
    coordinator. None when the view has no partition (the topic does not exist yet: no client has looked
    a coordinator up)."""
    if not view.partitions:
        return None
    return view.get(partition_for(group, len(view.partitions)))


def coordinator(view: ClusterView, group: str) -> str | None:
    """The coordinator of `group` (the leader of its offsets partition), or None: no such partition yet, or
    it has no leader."""
    p = coordinator_partition(view, group)
    return p.leader if p is not None else None


def no_coordinator(view: ClusterView, group: str) -> str:
    """Why `group` has no coordinator in a view of `__consumer_offsets`, for a skip's reason."""
    p = coordinator_partition(view, group)
    if p is None:
        return f"{OFFSETS_TOPIC} does not exist yet (no client has looked up the coordinator of {group!r})"
    return f"group {group!r} has no coordinator: {p.describe(OFFSETS_TOPIC)}"


def followers(view: ClusterView, partition: int) -> list[str]:
    """The partition's replicas other than its leader (every replica when it has none)."""
    p = view.get(partition)
    return [] if p is None else [r for r in p.replicas if r != p.leader]


def follower(view: ClusterView, partition: int, rng: random.Random, busy: Iterable[str] = ()) -> str | None:
    """A follower of `partition` that is not busy, preferring those in the ISR (they could be elected)."""
    p, busy = view.get(partition), set(busy)
    if p is None or p.leader is None:
        return None
    free = [r for r in followers(view, partition) if r not in busy]
    return _pick(rng, [r for r in free if r in p.isr]) or _pick(rng, free)


def sole_isr(view: ClusterView, rng: random.Random, busy: Iterable[str] = (),
             prefer: int | None = None) -> PartitionView | None:
    """A partition whose ISR has shrunk to its leader alone (`prefer` if it is one), its leader not busy."""
    busy = set(busy)
    shrunk = [p for p in view.partitions.values()
              if p.leader is not None and p.isr == (p.leader,) and p.leader not in busy]
    if not shrunk:
        return None
    for p in shrunk:
        if p.partition == prefer:
            return p
    return rng.choice(sorted(shrunk, key=lambda p: p.partition))


def last_copies(view: ClusterView, node: str, unavailable: Iterable[str] = ()) -> list[PartitionView]:
    """The partitions whose only in-sync copy `node` holds: it is in the ISR and no other member is, but
    for `unavailable` ones (down, or damaged and not yet back). Damaging such a broker's disk can lose
    committed records in a correct broker without KIP-966, so storage faults chosen at random spare it."""
    gone = set(unavailable) | {node}
    return [p for _, p in sorted(view.partitions.items())
            if node in p.isr and not [m for m in p.isr if m not in gone]]


def minority_size(n: int) -> int:
    return (n - 1) // 2


def majority_size(n: int) -> int:
    return n // 2 + 1


def some(brokers: list[str], size: int, rng: random.Random, busy: Iterable[str] = ()) -> list[str]:
    """`size` brokers that are not busy, chosen with the RNG; [] when fewer are free (or size is 0)."""
    free = sorted(b for b in brokers if b not in set(busy))
    if size <= 0 or len(free) < size:
        return []
    return sorted(rng.sample(free, size))


def shrunk_to_leader(view: ClusterView, partition: int, leader_node: str) -> bool:
    """Has the ISR of `partition` shrunk to `leader_node` alone, with it still leading?"""
    p = view.get(partition)
    return p is not None and p.leader == leader_node and p.isr == (leader_node,)


def fenced(view: ClusterView, partition: int, node: str) -> bool:
    """Has the controller taken `partition` away from `node` (another leader, or none, and `node` out of the
    ISR)? What fencing a silent leader (session timeout) does to its partitions."""
    p = view.get(partition)
    return p is not None and p.leader != node and node not in p.isr


def whole(view: ClusterView, nodes: Iterable[str]) -> bool:
    """Every partition has a leader, and `nodes` are back in the ISR of every partition they replicate."""
    nodes = set(nodes)
    return bool(view.partitions) and all(
        p.leader is not None and all(n in p.isr for n in nodes if n in p.replicas)
        for p in view.partitions.values())
