"""The final phase's health wait and the `final-state` record of every partition.

A partition is recovered when it has a leader, every replica is in the ISR, and every replica reports
the same LEO with HW = LEO. `wait_recovered` polls the cluster (Admin.describe) until every partition is
recovered or a deadline passes; it never sleeps for a fixed time beyond its short poll interval.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable


def node_name(broker_id: int | None) -> str | None:
    return None if broker_id is None else f"n{broker_id}"


@dataclass
class PartitionState:
    partition: int
    leader: int | None
    epoch: int
    isr: list[int]
    replicas: list[int]
    replica_state: dict[int, tuple[int, int] | None] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        if self.leader is None or sorted(self.isr) != sorted(self.replicas):
            return False
        states = [self.replica_state.get(b) for b in self.replicas]
        if any(s is None for s in states):
            return False
        leos = {s[0] for s in states}
        return len(leos) == 1 and all(s[0] == s[1] for s in states)

    @property
    def hw(self) -> int:
        s = self.replica_state.get(self.leader) if self.leader is not None else None
        return s[1] if s else -1

    def problem(self) -> str:
        if self.leader is None:
            return "no leader"
        missing = sorted(set(self.replicas) - set(self.isr))
        if missing:
            return "not in ISR: " + ", ".join(node_name(b) for b in missing)
        silent = [node_name(b) for b in self.replicas if self.replica_state.get(b) is None]
        if silent:
            return "no answer from " + ", ".join(silent)
        return "LEO/HW differ: " + ", ".join(f"{node_name(b)} leo={s[0]} hw={s[1]}"
                                             for b, s in sorted(self.replica_state.items()) if s)


def from_info(info: Any) -> PartitionState:
    return PartitionState(info.partition, info.leader, info.epoch, list(info.isr), list(info.replicas),
                          dict(info.replica_state))


@dataclass
class WaitOutcome:
    states: dict[int, PartitionState]
    waited_s: float
    timed_out: bool
    error: str | None = None


def wait_recovered(describe: Callable[[], list[Any]], partitions: list[int], *, timeout_s: float,
                   poll_s: float = 0.25, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep,
                   should_stop: Callable[[], bool] = lambda: False) -> WaitOutcome:
    start = clock()
    states: dict[int, PartitionState] = {}
    error = None
    while True:
        try:
            states = {s.partition: s for s in map(from_info, describe())}
            error = None
        except Exception as exc:  # noqa: BLE001 - controller briefly unreachable: keep polling
            error = f"{type(exc).__name__}: {exc}"
        done = bool(states) and all(p in states and states[p].healthy for p in partitions)
        if done:
            return WaitOutcome(states, clock() - start, False)
        if clock() - start >= timeout_s:
            return WaitOutcome(states, clock() - start, True, error)
        if should_stop():
            return WaitOutcome(states, clock() - start, True, "interrupted")
        sleep(poll_s)


def final_state_value(partition: int, state: PartitionState | None, *, read_to: int | None,
                      read_covered: bool) -> dict[str, Any]:
    """The `final-state` operation's value (docs/formats.md)."""
    if state is None:
        return {"partition": partition, "recovered": False, "hw": -1, "leader": None, "epoch": -1,
                "isr": [], "replicas": {}, "read_to": read_to}
    return {
        "partition": partition,
        "recovered": bool(state.healthy and read_covered),
        "hw": state.hw,
        "leader": node_name(state.leader),
        "epoch": state.epoch,
        "isr": [node_name(b) for b in state.isr],
        "replicas": {node_name(b): ({"leo": s[0], "hw": s[1]} if s else None)
                     for b, s in sorted(state.replica_state.items())},
        "read_to": read_to,
    }
