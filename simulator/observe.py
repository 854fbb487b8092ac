"""The simulator's adapter of the protocol rules (broker/rules): the world's events as rule rows.

A `World` hands its observer what a broker's and the controller's logs would say: each replica's
state-machine events as its shell drains them, the controller's events, an `ack` row for each
acknowledged produce (with the HW and ISR the state machine decided it on, as the broker logs it), a
`start` plus `recovered` row for each restart, a `damaged` row for each storage fault, a `sent`
row for each write the client is told succeeded, and a `read` row for each simulated consumer poll (a
consumer polls every leader after every event, from just below its HW). Rows are stamped with an event counter, so the rules that
compare processes by time see the simulation's exact order. The explorer reads `pending` after every
event (simulator/invariants.py): the first violation of a rule the settings promise is its finding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from broker.config_keys import rule_keys
from broker.rules import PartitionRules, RuleSettings, Violation, promised

CONTROLLER_NODE = "c0"


@dataclass(frozen=True, slots=True)
class Acked:
    """An acknowledged produce as the broker logs it: the batch (first and last offset, leader epoch), the
    acks it was answered under, and what the answer was decided on: the HW, the ISR, min.insync.replicas
    and the offset the log is fsynced below."""
    base: int
    last: int
    epoch: int
    acks: int
    hw: int
    isr: Iterable[int]
    min_isr: int
    flushed: int


def rule_settings(settings: Any) -> RuleSettings:
    """The rule settings of simulator settings (simulator/world.SimSettings). A simulation may cut power
    whenever flush is not "always", so durability is promised only then (per schedule the explorer
    decides with `invariants.promises`)."""
    return RuleSettings(**{k.name: getattr(settings, k.sim_name, k.run_default) for k in rule_keys()},
                        acks=settings.acks, power_loss=settings.flush != "always", storage_faults=False,
                        same_clock=True)


class RuleObserver:
    """Feeds one partition's rules; `pending` holds the violations of promised rules found so far."""

    def __init__(self, settings: Any, partition: int = 0):
        rs = rule_settings(settings)
        self.partition = partition
        self.rules = PartitionRules(partition, rs)
        self.promised = promised(rs)
        self.pending: list[Violation] = []
        self._ts = 0
        self._finished = False

    def _row(self, src: str, node: str, event: str, fields: dict) -> None:
        self._ts += 1
        row = dict(fields)
        row.update(ts=self._ts, node=node, src=src, seq=self._ts, event=event, partition=self.partition)
        for v in self.rules.feed(row):
            if v.kind in self.promised:
                self.pending.append(v)

    def replica_events(self, node: str, events: Iterable[Any], flushed: int | None = None) -> None:
        """A replica's drained events; `flushed`: what its log counts as fsynced now, which the shell adds
        to a `truncate` line (the broker does so with flush "always")."""
        for ev in events:
            fields = ev.fields()
            if flushed is not None and ev.name == "truncate":
                fields["flushed"] = flushed
            self._row("broker", node, ev.name, fields)

    def leo_reported(self, node: str, leo: int, flushed: int, epoch: int) -> None:
        """A follower's fetch from offset `leo` (its LEO, as the leader counts it) with its log fsynced
        below `flushed`."""
        self._row("broker", node, "leo-reported", {"leo": leo, "flushed": flushed, "epoch": epoch})

    def controller_events(self, events: Iterable[dict]) -> None:
        for e in events:
            self._row("controller", CONTROLLER_NODE, e["event"], {k: v for k, v in e.items() if k != "event"})

    def ack(self, node: str, acked: Acked) -> None:
        """`node` acknowledged a produce (its `ack` line)."""
        a = acked
        self._row("broker", node, "ack", {"base": a.base, "last": a.last, "epoch": a.epoch, "acks": a.acks,
                                          "hw": a.hw, "isr": list(a.isr), "min_isr": a.min_isr,
                                          "flushed": a.flushed})

    def read(self, offset: int, hw: int, epoch: int) -> None:
        """A consumer's poll returned records up to `offset`, with the leader's HW `hw`."""
        self._row("client", "client", "read", {"offset": offset, "hw": hw, "reported_hw": hw, "epoch": epoch})

    def damaged(self, node: str, offset: int | None = None) -> None:
        """A storage fault struck the down broker `node` at `offset` (the first offset whose record it
        damaged): its next recovery may cut what it acknowledged, and must cut that record."""
        fields = {} if offset is None else {"damaged_partition": self.partition, "damaged_offset": offset}
        self._row("nemesis", node, "damaged", fields)

    def sent(self, offset: int, value: str, epoch: int) -> None:
        """A producer was told its write `value` succeeded at `offset`."""
        self._row("client", "client", "sent", {"offset": offset, "value": value, "epoch": epoch})

    def restart(self, node: str, leo: int, hw: int) -> None:
        self._row("broker", node, "start", {})
        self._row("broker", node, "recovered", {"leo": leo, "hw": hw})

    def finish(self) -> None:
        """The rules decided at the end (leader-not-elected): after the schedule settles; once."""
        if not self._finished:
            self._finished = True
            self.pending += [v for v in self.rules.finish() if v.kind in self.promised]
