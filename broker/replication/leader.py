"""What a leader keeps about its partition: ISR, remote followers, pending ISR change, and the HW rule.

Seeds 000 五 / 001 / 003: the leader stores every follower's LEO ("remote LEO", the follower's last
fetch offset) and sets the partition HW to the minimum LEO over itself and the replicas that count:
the ISR members and any replica caught up within replica_lag_time_max_ms (so the HW never passes a
replica about to join the ISR). The leader's HW never moves backwards while it stays leader.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from broker.replication.messages import IsrProposal


@dataclass
class RemoteReplica:
    """What a leader knows about one follower (Kafka's Replica state on the leader's broker)."""
    broker_id: int
    leo: int | None = None                  # = the follower's last fetch offset; None until it fetches
    last_caught_up_ms: int | None = None    # last time it was known to have everything the leader had
    last_fetch_leader_leo: int = 0          # leader LEO at its previous fetch
    last_fetch_ms: int | None = None

    def is_caught_up(self, leader_leo: int, now_ms: int, lag_max_ms: int) -> bool:
        if self.leo is not None and self.leo == leader_leo:
            return True
        return self.last_caught_up_ms is not None and now_ms - self.last_caught_up_ms <= lag_max_ms

    def update_fetch(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        """Kafka's lastCaughtUpTime: caught up now if it asked for everything the leader has;
        caught up as of its previous fetch if it now asks for everything the leader had then."""
        if fetch_offset >= leader_leo:
            self._caught_up_at(now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo and self.last_fetch_ms is not None:
            self._caught_up_at(self.last_fetch_ms)
        self.leo = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms

    def _caught_up_at(self, t: int) -> None:
        self.last_caught_up_ms = t if self.last_caught_up_ms is None else max(self.last_caught_up_ms, t)


@dataclass
class LeaderState:
    epoch: int
    epoch_start_offset: int                 # LEO at election = first offset of this epoch (KAFKA-7415)
    isr: frozenset[int]
    isr_version: int
    replicas: tuple[int, ...]
    remotes: dict[int, RemoteReplica] = field(default_factory=dict)
    pending: IsrProposal | None = None      # sent to the controller, not yet answered

    def maximal_isr(self) -> frozenset[int]:
        """ISR to count for the HW while a change is in flight (KIP-497): the union of the current and
        the proposed ISR, so neither a pending shrink nor a pending expansion lets the HW run ahead."""
        if self.pending is None:
            return self.isr
        return self.isr | frozenset(self.pending.isr)

    def hw_candidate(self, my_id: int, leader_leo: int, now_ms: int, lag_max_ms: int) -> int:
        """min LEO over the leader and the replicas that count (see the module docstring)."""
        counted = self.maximal_isr()
        hw = leader_leo
        for rid, r in self.remotes.items():
            if rid == my_id:
                continue
            if rid in counted or r.is_caught_up(leader_leo, now_ms, lag_max_ms):
                hw = min(hw, r.leo if r.leo is not None else -1)
        return hw

    def out_of_sync(self, my_id: int, leader_leo: int, now_ms: int, lag_max_ms: int) -> list[int]:
        """ISR followers that have not been caught up within lag_max_ms (never the leader)."""
        out = []
        for rid in sorted(self.isr):
            if rid == my_id:
                continue
            r = self.remotes.get(rid)
            if r is None or not r.is_caught_up(leader_leo, now_ms, lag_max_ms):
                out.append(rid)
        return out
