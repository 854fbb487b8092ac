"""The protocol rules themselves: what one partition's event rows must never show, and who promises it.

`PartitionRules.feed(row)` first checks the row against what earlier rows established (each check below
names the rule it decides), then folds the row into that knowledge. Nothing here does I/O: the rows come
from an adapter (a run's event logs, or the simulator).

What the state remembers per broker node: its role and leader epoch (from `role` rows), its HW and LEO
(from `recovered`, `hw-change` and `truncate`), and the end of what it acknowledged as leader (from `ack`).
Per partition: which node claimed the leadership of each epoch, the highest HW any leader has had, and
the controller's ISR and ELR by ISR version and the leader it elected for each epoch.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Iterable

from broker.config_keys import rule_keys
from broker.rules.names import (ACK_ABOVE_HW, ACK_BEFORE_FLUSH, ACK_BELOW_MIN_ISR, ACK_UNDECIDED, ACKED_NOT_DURABLE,
                                DAMAGED_RECORD_KEPT, ELECTION_OUTSIDE_ISR, EPOCH_NOT_INCREASING, EPOCH_OUTLIVED_RESTART,
                                EPOCH_TWO_LEADERS, FLUSHED_PAST_TRUNCATION, FOLLOWER_HW_AHEAD, HW_ABOVE_LEO,
                                HW_REPORTED_AHEAD, ISR_JOIN_LAGGING, LEADER_HW_DECREASE, LEADER_NOT_ELECTED,
                                READ_UNCOMMITTED, REPORTED_BEFORE_FLUSH, STALE_EPOCH_SERVED, TRUNCATE_BELOW_HW)

SUMMARIES: dict[str, str] = {
    HW_ABOVE_LEO: "a replica's high watermark passed its own log end offset",
    LEADER_HW_DECREASE: "a leader's high watermark went back while it led one epoch",
    FOLLOWER_HW_AHEAD: "a follower's high watermark passed every HW its leaders had had",
    ACK_ABOVE_HW: "an acks=all produce was acknowledged before the HW passed its last offset",
    ACK_BELOW_MIN_ISR: "an acks=all produce was acknowledged while the ISR was below min.insync.replicas",
    ACKED_NOT_DURABLE: "records a leader acknowledged were gone from its log after it restarted",
    ACK_BEFORE_FLUSH: "with flush=always, a produce was acknowledged before its records were fsynced",
    EPOCH_TWO_LEADERS: "two brokers led the same leader epoch of a partition",
    LEADER_NOT_ELECTED: "a broker led an epoch the controller did not elect it for",
    EPOCH_OUTLIVED_RESTART: "a broker led, after restarting, an epoch the controller elected before the restart",
    ELECTION_OUTSIDE_ISR: "the controller elected a leader from outside the ISR (and ELR)",
    EPOCH_NOT_INCREASING: "an election did not raise the partition's leader epoch",
    TRUNCATE_BELOW_HW: "a follower truncated its log below its own high watermark",
    ISR_JOIN_LAGGING: "a leader proposed a follower for the ISR before it caught up to the HW and its epoch",
    STALE_EPOCH_SERVED: "a leader served a follower request carrying another leader epoch (KIP-320)",
    READ_UNCOMMITTED: "a consumer read a record at or above the high watermark",
    HW_REPORTED_AHEAD: "a consumer was told of a high watermark above every HW a leader had had",
    REPORTED_BEFORE_FLUSH: "with flush=always, a follower told its leader of records it had not fsynced",
    FLUSHED_PAST_TRUNCATION: "a log still counted records as flushed after a truncation removed them",
    ACK_UNDECIDED: "a producer was told a write succeeded that no leader had decided to acknowledge",
    DAMAGED_RECORD_KEPT: "a broker reopened its log past a record a storage fault had damaged",
}
RULES: tuple[str, ...] = tuple(SUMMARIES)

# the event names the rules read (an adapter may drop every other line)
EVENTS_READ = frozenset({"start", "recovered", "role", "hw-change", "truncate", "ack", "follower-served",  # brokers
                         "isr-expand-proposed", "leo-reported",
                         "isr-change", "leader-change", "elect-leader", "partition-state"})   # controller

# rules decided only by comparing rows of different processes by their timestamps: sound only when every
# process read one clock (the local and Docker backends); with `RuleSettings.same_clock` False they are
# skipped and not promised (read-uncommitted then keeps its half that needs no clock: a poll's own HW)
CLOCK_RULES = frozenset({FOLLOWER_HW_AHEAD, EPOCH_OUTLIVED_RESTART, HW_REPORTED_AHEAD,
                         # a storage fault's `damaged` row is stamped on the history's clock
                         DAMAGED_RECORD_KEPT})


# What the rules need to know about the run: the keys broker/config_keys.py marks `rules` (with a test
# run's defaults: the safe configuration), the producers' acks, and what the run may do to its brokers.
RuleSettings = make_dataclass("RuleSettings", [
    *[(k.name, k.setting.type, field(default=k.run_default)) for k in rule_keys()],
    ("acks", object, field(default="all")),          # 0, 1 or "all" (broker/config_keys.parse_acks)
    ("power_loss", bool, field(default=False)),      # the run may cut power (a power-loss fault or a simulated one)
    ("storage_faults", bool, field(default=False)),  # the run damages data files on purpose (corrupt-* faults)
    ("same_clock", bool, field(default=True)),       # every process's `ts` comes from one clock (CLOCK_RULES)
], frozen=True, namespace={"__module__": __name__})


def promised(settings: RuleSettings) -> frozenset[str]:
    """The rules a configuration promises. A violation of another rule is reported but does not fail a
    run (as an acks=1 cluster's lost write is the configuration's, not the broker's, fault)."""
    out = set(RULES) - {ELECTION_OUTSIDE_ISR, TRUNCATE_BELOW_HW, ACKED_NOT_DURABLE, STALE_EPOCH_SERVED,
                        ACK_BEFORE_FLUSH, REPORTED_BEFORE_FLUSH}
    if settings.flush == "always":
        out |= {ACK_BEFORE_FLUSH, REPORTED_BEFORE_FLUSH}
    if settings.fetch_fencing:
        out.add(STALE_EPOCH_SERVED)
    if not settings.unclean_leader_election:
        out.add(ELECTION_OUTSIDE_ISR)
    power_safe = settings.flush == "always" or not settings.power_loss
    # below its own HW a follower holds only committed records, which every clean leader has, when the
    # leader's answer is trusted (leader epochs, KIP-320 fencing) and no disk lost a flushed-as-committed tail
    if (settings.truncation == "leader-epoch" and not settings.unclean_leader_election
            and settings.fetch_fencing and power_safe and not settings.storage_faults):
        out.add(TRUNCATE_BELOW_HW)
    if power_safe and not settings.storage_faults:
        out.add(ACKED_NOT_DURABLE)
    if not settings.same_clock:
        out -= CLOCK_RULES
    return frozenset(out)


@dataclass(frozen=True)
class Violation:
    kind: str
    partition: int
    node: str
    ts: int
    epoch: int | None
    detail: str
    evidence: tuple[dict, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "partition": self.partition, "node": self.node, "ts": self.ts,
                "epoch": self.epoch, "detail": self.detail, "evidence": [dict(e) for e in self.evidence]}


@dataclass
class _Node:
    role: str = "none"
    epoch: int = -1
    hw: int | None = None            # None: not known since the node (re)started
    leo: int | None = None
    acked_end: int = 0               # one past the last offset it acknowledged as leader, still expected
    last: Any = None                 # its latest row, for a violation's evidence (or a function giving it)
    started: dict | None = None      # its latest `start` row (this incarnation's)
    damaged: bool = False            # its data files were damaged on purpose and it has not recovered since
    damaged_at: int | None = None    # the first offset of this partition whose record was damaged since
    damage_row: dict | None = None   # the `damaged` row that said so


@dataclass
class _Controller:
    isr: tuple[int, ...] | None = None
    elr: tuple[int, ...] = ()
    version: int | None = None
    before: tuple[tuple[int, ...], tuple[int, ...]] | None = None   # ISR, ELR before `version`'s change
    last_epoch: int | None = None
    elected: dict[int, int | None] = field(default_factory=dict)    # epoch -> broker id
    elected_row: dict[int, dict] = field(default_factory=dict)      # epoch -> its leader-change row
    unclean_ok: bool = False         # an admin unclean election was just granted
    seen: bool = False


def _id(node: str) -> int | None:
    """Broker id of a node name ("n3" -> 3); None for others."""
    return int(node[1:]) if node[:1] == "n" and node[1:].isdigit() else None


def _ev(row: dict) -> dict:
    """A row as evidence: without the adapter's bookkeeping keys."""
    return {k: v for k, v in row.items() if k not in ("src", "seq")}


class PartitionRules:
    """Feed one partition's rows in time order; `feed` and `finish` return the violations found."""

    def __init__(self, partition: int, settings: RuleSettings | None = None, *, sends: bool = True):
        self.partition = partition
        # with `sends` False the ok sends are judged elsewhere (`undecided_sends` over a whole partition, or
        # its DataFrame form in checkers/anomalies/protocol.py): `sent` rows and the acks' ranges are not
        # kept, and `ack_judged` says whether ack-undecided may judge this partition
        self.track_sends = sends
        self.settings = settings or RuleSettings()
        self.nodes: dict[str, _Node] = {}
        self.ctl = _Controller()
        self.claims: dict[int, dict[str, dict]] = {}     # epoch -> {node: its first role row as leader}
        self.leader_hw = 0                               # the highest HW any leader has had
        self.leader_hw_row: dict | None = None
        self._clock = self.settings.same_clock
        self.decided = _Ranges()                         # every offset some leader logged an `ack` for
        # the ok sends (`sent` rows) whose offset no `ack` has covered yet, in arrival order: a send's row may
        # come just before its leader's `ack` (the broker logs it just before it answers), so most leave
        # at once and the state stays as small as the acks in flight, not as the history
        self.undecided: dict[int, dict] = {}
        self._by_offset: dict[int, list[int]] = {}
        self._sends = 0                                  # ok sends seen (judged at the end)

    # --- the checks ---------------------------------------------------------------------------

    def feed(self, row: dict) -> list[Violation]:
        src, event = row.get("src"), row.get("event")
        found: list[Violation] = []
        if src == "broker":
            node = self.nodes.get(row["node"])
            if node is None:
                node = self.nodes[row["node"]] = _Node()
            handler = _BROKER.get(event)
            if handler is not None:
                handler(self, row, node, found)
            node.last = row
        elif src == "controller":
            handler = _CONTROLLER.get(event)
            if handler is not None:
                self.ctl.seen = True
                handler(self, row, found)
        elif src == "client" and event == "read":
            self._read(row, found)
        elif src == "client" and event == "sent" and self.track_sends:
            offset = row.get("offset")
            if isinstance(offset, int):
                self._sends += 1
                if offset not in self.decided:
                    self.undecided[self._sends] = row
                    self._by_offset.setdefault(offset, []).append(self._sends)
        elif src == "nemesis" and event == "damaged":
            # a storage fault damaged this broker's files while it was down: the recovery that reads them
            # may cut what it acknowledged (the disk's loss, not the broker's; the other copies keep it)
            node = self.nodes.get(row["node"])
            if node is None:
                node = self.nodes[row["node"]] = _Node()
            node.damaged = True
            offset = row.get("damaged_offset")
            if (row.get("damaged_partition") == self.partition and isinstance(offset, int)
                    and (node.damaged_at is None or offset < node.damaged_at)):
                node.damaged_at, node.damage_row = offset, row
        return found

    def finish(self) -> list[Violation]:
        """The rules decided at the end. leader-not-elected: every leadership a broker took must be one the
        controller gave it (a broker may log its role before the controller's line has the same timestamp).
        ack-undecided: every ok send's offset must be one a leader logged an `ack` for, at any time (the
        broker logs it just before it answers, so a send's row may come first); judged only where every
        broker the controller elected has logs here, so a missing log never looks like a missing ack."""
        found: list[Violation] = []
        if not self.ctl.seen:
            return found
        if self._sends and self.ack_judged():
            found += undecided_sends(self.partition, self.undecided.values(), self.decided)
        for epoch, claimants in sorted(self.claims.items()):
            elected = self.ctl.elected.get(epoch, "none")
            for node, row in claimants.items():
                if elected != _id(node):
                    who = "no election" if elected == "none" else f"the controller elected {_name(elected)}"
                    found.append(self._v(LEADER_NOT_ELECTED, row, epoch,
                                         f"{node} led epoch {epoch}, but {who} for that epoch"))
        return found

    # --- what quiet rows leave behind ---------------------------------------------------------------
    # The rows a produce logs per record and replica (`hw-change`, `ack`, `leo-reported`) are most of a
    # run's lines, and almost none breaks a rule. checkers/quiet_rows.py shows column-wise which of them
    # cannot break one (a superset of the conditions of `_hw_change`, `_ack` and `_leo_reported`), feeds the
    # others here, and folds each run of quiet rows in with these two methods: the state those handlers
    # would have left.

    def node(self, name: str) -> "_Node":
        """A broker node's state, new if no row has named it yet (as `feed` makes it)."""
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = _Node()
        return node

    def fold(self, name: str, last: Any, *, hw: int | None = None, leo: int | None = None,
             acked_end: int | None = None, leader_hw: tuple[int, Any] | None = None) -> None:
        """Rows of broker `name` that broke no rule, `last` the latest: its latest `hw-change` set its HW
        (`hw`) and, the latest with one, its LEO (`leo`); its acks reached `acked_end`; and `leader_hw` is
        (the highest HW its `hw-change` rows set while it leads, the row that first set it). The two rows
        may be given as functions that return them: the state only shows them as a violation's evidence."""
        node = self.node(name)
        node.last = last
        if hw is not None:
            node.hw = hw
        if leo is not None:
            node.leo = leo
        if acked_end is not None:
            node.acked_end = max(node.acked_end, acked_end)
        if leader_hw is not None and node.role == "leader" and leader_hw[0] > self.leader_hw:
            self.leader_hw, self.leader_hw_row = leader_hw

    def ack_judged(self) -> bool:
        """Whether ack-undecided judges this partition: the controller's log is here, and so is the log of
        every broker it elected (a missing log must never look like a missing ack)."""
        elected = {f"n{b}" for b in self.ctl.elected.values() if b is not None}
        return self.ctl.seen and elected <= set(self.nodes)

    def _v(self, kind: str, row: dict, epoch: int | None, detail: str, *more: Any) -> Violation:
        # a remembered row may be a function that reads it (`fold`): only a violation's evidence needs it
        evidence = tuple(_ev(r() if callable(r) else r) for r in (*more, row) if r is not None)
        return Violation(kind, self.partition, row.get("node", "?"), int(row.get("ts") or 0), epoch, detail, evidence)

    # broker rows

    def _start(self, row: dict, node: _Node, found: list) -> None:
        self.nodes[row["node"]] = fresh = _Node(acked_end=node.acked_end, damaged=node.damaged,
                                                damaged_at=node.damaged_at, damage_row=node.damage_row)
        fresh.last = fresh.started = row

    def _recovered(self, row: dict, node: _Node, found: list) -> None:
        leo, hw = row.get("leo"), row.get("hw")
        if isinstance(leo, int) and isinstance(hw, int) and hw > leo:
            found.append(self._v(HW_ABOVE_LEO, row, node.epoch,
                                 f"{row['node']} reopened its log with HW {hw}, past its LEO {leo}"))
        if isinstance(leo, int) and node.acked_end > leo and not node.damaged:
            found.append(self._v(ACKED_NOT_DURABLE, row, node.epoch,
                                 f"{row['node']} reopened its log with LEO {leo}, below offset {node.acked_end - 1} "
                                 f"it had acknowledged", node.last))
        if self._clock and isinstance(leo, int) and node.damaged_at is not None and leo > node.damaged_at:
            # recovery cuts the log at the first record failing its checks (length, CRC, dense offsets): a
            # record the disk damaged at offset k leaves at most k records
            found.append(self._v(DAMAGED_RECORD_KEPT, row, node.epoch,
                                 f"{row['node']} reopened its log with LEO {leo}, keeping offset {node.damaged_at} "
                                 f"whose record a storage fault had damaged", node.damage_row))
        node.acked_end = min(node.acked_end, leo) if isinstance(leo, int) else node.acked_end
        node.role, node.leo, node.hw = "none", leo if isinstance(leo, int) else None, hw if isinstance(hw, int) else None
        node.damaged, node.damaged_at, node.damage_row = False, None, None

    def _role(self, row: dict, node: _Node, found: list) -> None:
        role, epoch = row.get("role"), row.get("epoch")
        node.role = role
        node.epoch = epoch if isinstance(epoch, int) else node.epoch
        if role != "leader" or not isinstance(epoch, int):
            return
        claimants = self.claims.setdefault(epoch, {})
        if row["node"] not in claimants:
            for other, first in claimants.items():
                found.append(self._v(EPOCH_TWO_LEADERS, row, epoch,
                                     f"{row['node']} and {other} both led epoch {epoch}", first))
                break
            claimants[row["node"]] = row
        if node.hw is not None and node.hw > self.leader_hw:
            self.leader_hw, self.leader_hw_row = node.hw, row
        elected = self.ctl.elected_row.get(epoch)
        if (self._clock and node.started is not None and elected is not None
                and elected.get("leader") == _id(row["node"]) and elected["ts"] < node.started["ts"]):
            found.append(self._v(EPOCH_OUTLIVED_RESTART, row, epoch,
                                 f"{row['node']} restarted and led epoch {epoch}, which the controller had "
                                 f"elected it for before the restart", elected, node.started))

    def _hw_change(self, row: dict, node: _Node, found: list) -> None:
        old, new, leo = row.get("old"), row.get("new"), row.get("leo")
        if not isinstance(new, int):
            return
        if isinstance(leo, int) and new > leo:
            found.append(self._v(HW_ABOVE_LEO, row, node.epoch,
                                 f"{row['node']} set its HW to {new}, past its LEO {leo}"))
        if node.role == "leader" and isinstance(old, int) and new < old:
            found.append(self._v(LEADER_HW_DECREASE, row, node.epoch,
                                 f"{row['node']} leads epoch {node.epoch} and its HW went back from {old} to {new}"))
        if (node.role == "follower" and self._clock and isinstance(old, int) and new > old
                and new > self.leader_hw):
            found.append(self._v(FOLLOWER_HW_AHEAD, row, node.epoch,
                                 f"{row['node']} follows in epoch {node.epoch} and set its HW to {new}; no leader "
                                 f"had an HW above {self.leader_hw} by then", self.leader_hw_row))
        node.hw = new
        if isinstance(leo, int):
            node.leo = leo
        if node.role == "leader" and new > self.leader_hw:
            self.leader_hw, self.leader_hw_row = new, row

    def _truncate(self, row: dict, node: _Node, found: list) -> None:
        to, why = row.get("to"), row.get("why")
        if not isinstance(to, int):
            return
        if why == "recovery" and node.acked_end > to and not node.damaged:
            found.append(self._v(ACKED_NOT_DURABLE, row, node.epoch,
                                 f"{row['node']}'s recovery cut its log to {to}, below offset {node.acked_end - 1} "
                                 f"it had acknowledged", node.last))
        flushed, start = row.get("flushed"), row.get("log_start")
        if isinstance(flushed, int) and flushed > max(to, start if isinstance(start, int) else 0):
            found.append(self._v(FLUSHED_PAST_TRUNCATION, row, node.epoch,
                                 f"{row['node']} cut its log to {to} ({why}) and still counted it flushed up to "
                                 f"{flushed}"))
        if why != "recovery" and node.hw is not None and to < node.hw:
            found.append(self._v(TRUNCATE_BELOW_HW, row, node.epoch,
                                 f"{row['node']} cut its log to {to} ({why}), below its HW {node.hw}", node.last))
        node.leo = to
        if node.hw is not None and node.hw > to and why != "recovery":
            node.hw = to
        node.acked_end = min(node.acked_end, to)

    def _follower_served(self, row: dict, node: _Node, found: list) -> None:
        asked_with, replica = row.get("request_epoch"), row.get("replica")
        if node.role != "leader":
            return
        who = f"n{replica}" if isinstance(replica, int) else "a follower"
        what = "a fetch" if row.get("request") == "fetch" else "an OffsetsForLeaderEpoch request"
        if isinstance(asked_with, int) and asked_with != node.epoch:
            found.append(self._v(STALE_EPOCH_SERVED, row, node.epoch,
                                 f"{row['node']} leads epoch {node.epoch} and served {what} of {who} "
                                 f"carrying epoch {asked_with}"))
        elif asked_with is None and isinstance(replica, int):
            # a broker's follower always says its epoch (KIP-320); without one nothing can be fenced
            found.append(self._v(STALE_EPOCH_SERVED, row, node.epoch,
                                 f"{row['node']} leads epoch {node.epoch} and served {what} of {who} "
                                 f"carrying no leader epoch"))

    def _leo_reported(self, row: dict, node: _Node, found: list) -> None:
        leo, flushed = row.get("leo"), row.get("flushed")
        if self.settings.flush == "always" and isinstance(leo, int) and isinstance(flushed, int) and leo > flushed:
            found.append(self._v(REPORTED_BEFORE_FLUSH, row, row.get("epoch"),
                                 f"{row['node']} told its leader its LEO was {leo} with its log flushed only "
                                 f"below {flushed} (flush=always)"))

    def _isr_expand(self, row: dict, node: _Node, found: list) -> None:
        leo, hw, start = row.get("replica_leo"), row.get("hw"), row.get("epoch_start")
        if not isinstance(leo, int):
            return
        short = []
        if isinstance(hw, int) and leo < hw:
            short.append(f"the HW {hw}")
        if self.settings.isr_join_requires_epoch_start and isinstance(start, int) and leo < start:
            short.append(f"the start of its epoch at {start}")
        if short:
            found.append(self._v(ISR_JOIN_LAGGING, row, node.epoch,
                                 f"{row['node']} proposed n{row.get('replica')} for the ISR with its LEO at {leo}, "
                                 f"short of {' and '.join(short)}"))

    def _ack(self, row: dict, node: _Node, found: list) -> None:
        last, acks, hw, isr = row.get("last"), row.get("acks"), row.get("hw"), row.get("isr")
        if not isinstance(last, int):
            return
        epoch = row.get("epoch")
        if acks == -1:
            if isinstance(hw, int) and last >= hw:
                found.append(self._v(ACK_ABOVE_HW, row, epoch,
                                     f"{row['node']} acknowledged offsets up to {last} (acks=all) with its HW at {hw}"))
            min_isr = row.get("min_isr", self.settings.min_insync_replicas)
            if isinstance(isr, list) and isinstance(min_isr, int) and len(isr) < min_isr:
                found.append(self._v(ACK_BELOW_MIN_ISR, row, epoch,
                                     f"{row['node']} acknowledged offset {last} (acks=all) with ISR {isr}, "
                                     f"below min.insync.replicas {min_isr}"))
        flushed = row.get("flushed")
        if self.settings.flush == "always" and isinstance(flushed, int) and last >= flushed:
            found.append(self._v(ACK_BEFORE_FLUSH, row, epoch,
                                 f"{row['node']} acknowledged offsets up to {last} with its log flushed below "
                                 f"{flushed} (flush=always)"))
        node.acked_end = max(node.acked_end, last + 1)
        if not self.track_sends:
            return
        first, last = ack_span(row)
        self.decided.add(first, last + 1)
        if self._by_offset:                              # the sends this ack decides leave the undecided
            span = range(first, last + 1)
            covered = ([o for o in span if o in self._by_offset] if len(span) < len(self._by_offset)
                       else [o for o in self._by_offset if first <= o <= last])
            for offset in covered:
                for key in self._by_offset.pop(offset):
                    del self.undecided[key]

    # controller rows

    def _isr_change(self, row: dict, found: list) -> None:
        ctl = self.ctl
        version = row.get("version")
        ctl.before = (ctl.isr or (), ctl.elr)
        ctl.isr, ctl.elr = tuple(row.get("isr") or ()), tuple(row.get("elr") or ())
        ctl.version = version if isinstance(version, int) else None

    def _leader_change(self, row: dict, found: list) -> None:
        ctl = self.ctl
        leader, epoch, version = row.get("leader"), row.get("epoch"), row.get("version")
        if isinstance(epoch, int):
            if ctl.last_epoch is not None and epoch <= ctl.last_epoch:
                found.append(self._v(EPOCH_NOT_INCREASING, row, epoch,
                                     f"the controller elected {_name(leader)} in epoch {epoch}, not above "
                                     f"the previous epoch {ctl.last_epoch}"))
            self._elected(epoch, leader, row)
        # the ISR the leader was chosen from: the one before this change's own isr-change (same version)
        if isinstance(version, int) and ctl.version == version:
            chosen_from = ctl.before
        elif isinstance(version, int) and ctl.isr is not None:
            chosen_from = (ctl.isr, ctl.elr)
        else:
            chosen_from = None
        if leader is not None and chosen_from is not None and ctl.isr is not None and not ctl.unclean_ok:
            isr, elr = chosen_from
            if leader not in isr and leader not in elr:
                found.append(self._v(ELECTION_OUTSIDE_ISR, row, epoch,
                                     f"the controller elected {_name(leader)} for epoch {epoch} from ISR "
                                     f"{list(isr)}" + (f" and ELR {list(elr)}" if elr else "")))
        ctl.unclean_ok = False
        ctl.isr, ctl.elr = tuple(row.get("isr") or ctl.isr or ()), tuple(row.get("elr") or ctl.elr)
        if isinstance(version, int):
            ctl.version = version

    def _partition_state(self, row: dict, found: list) -> None:
        """The controller's restored state at its start: in force from now on, whatever its log showed
        last (a change saved just before a SIGKILL was never logged). Its leader holds its epoch by an
        election the log may have missed, so it counts as elected; it is not an election itself."""
        ctl = self.ctl
        version, leader, epoch = row.get("version"), row.get("leader"), row.get("epoch")
        ctl.isr, ctl.elr = tuple(row.get("isr") or ()), tuple(row.get("elr") or ())
        ctl.before = None
        ctl.version = version if isinstance(version, int) else None
        ctl.unclean_ok = False
        if isinstance(epoch, int) and leader is not None:
            self._elected(epoch, leader, row)
        elif isinstance(epoch, int):
            ctl.last_epoch = epoch if ctl.last_epoch is None else max(ctl.last_epoch, epoch)

    def _elected(self, epoch: int, leader: Any, row: dict) -> None:
        """The controller gave `epoch` to `leader` (the first row saying so is kept)."""
        ctl = self.ctl
        ctl.last_epoch = epoch if ctl.last_epoch is None else max(ctl.last_epoch, epoch)
        ctl.elected.setdefault(epoch, leader)
        ctl.elected_row.setdefault(epoch, row)

    def _elect_leader(self, row: dict, found: list) -> None:
        self.ctl.unclean_ok = bool(row.get("unclean")) and row.get("how") == "unclean"

    # client rows

    def _read(self, row: dict, found: list) -> None:
        offset, hw, reported = row.get("offset"), row.get("hw"), row.get("reported_hw")
        if self._clock and self.nodes and isinstance(reported, int) and reported > self.leader_hw:
            found.append(self._v(HW_REPORTED_AHEAD, row, row.get("epoch"),
                                 f"a poll was told the HW is {reported}; no leader had an HW above "
                                 f"{self.leader_hw} by then", self.leader_hw_row))
        if not isinstance(offset, int):
            return
        if isinstance(hw, int) and hw >= 0 and offset >= hw:
            found.append(self._v(READ_UNCOMMITTED, row, row.get("epoch"),
                                 f"a poll returned offset {offset} with the HW it reported at {hw}"))
        elif self._clock and self.nodes and offset >= self.leader_hw:
            found.append(self._v(READ_UNCOMMITTED, row, row.get("epoch"),
                                 f"a poll returned offset {offset}; no leader had an HW above "
                                 f"{self.leader_hw} by then", self.leader_hw_row))


class _Ranges:
    """A set of offsets kept as sorted, disjoint [start, end) ranges: a leader's acks cover runs of
    offsets, so the ranges stay as few as the gaps between them, however long the history."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        if start >= end:
            return
        starts, ends = self.starts, self.ends
        if ends and ends[-1] >= start and starts[-1] <= start:      # the usual case: extends the last range
            ends[-1] = max(ends[-1], end)
            return
        i = bisect.bisect_left(ends, start)                         # the first range ending at or after start
        j = bisect.bisect_right(starts, end)                        # past the last range starting at or before end
        if i < j:                                                   # merge ranges i .. j-1 with [start, end)
            start, end = min(start, starts[i]), max(end, ends[j - 1])
        starts[i:j] = [start]
        ends[i:j] = [end]

    def __contains__(self, offset: int) -> bool:
        i = bisect.bisect_right(self.starts, offset) - 1
        return i >= 0 and offset < self.ends[i]


def ack_span(row: dict) -> tuple[int, int] | None:
    """The offsets [first, last] an `ack` row says its leader decided to acknowledge (None: it names no
    last offset). A `base` above `last`, or none, leaves the last alone. The DataFrame form:
    checkers/anomalies/protocol.py `_ack_spans`."""
    last, base = row.get("last"), row.get("base")
    if type(last) is not int:         # a bool is no offset (as the Spark engine's `long` column reads it)
        return None
    return (base if type(base) is int and base <= last else last), last


def undecided_detail(offset: int) -> str:
    """ack-undecided's detail (checkers/anomalies/protocol.py writes the same text with columns)."""
    return f"a producer was told offset {offset} succeeded; no leader logged an acknowledgement of it"


def undecided_sends(partition: int, sends: Iterable[dict], decided: "_Ranges") -> list[Violation]:
    """ack-undecided over a partition's ok sends (`sent` rows, in time order) and the offsets its leaders
    acknowledged: one violation per send no ack covers, in the sends' order. Only for a partition
    `PartitionRules.ack_judged` judges."""
    return [Violation(ACK_UNDECIDED, partition, row.get("node", "?"), int(row.get("ts") or 0), row.get("epoch"),
                      undecided_detail(row["offset"]), (_ev(row),))
            for row in sends if row["offset"] not in decided]


def decided_ranges(spans: Iterable[tuple[int, int]]) -> "_Ranges":
    """The offsets covered by acks' [first, last] spans, as ranges."""
    ranges = _Ranges()
    for first, last in sorted(spans):
        ranges.add(first, last + 1)
    return ranges


def _name(broker: Any) -> str:
    return "no leader" if broker is None else f"n{broker}"


_BROKER = {"start": PartitionRules._start, "recovered": PartitionRules._recovered, "role": PartitionRules._role,
           "hw-change": PartitionRules._hw_change, "truncate": PartitionRules._truncate, "ack": PartitionRules._ack,
           "follower-served": PartitionRules._follower_served, "isr-expand-proposed": PartitionRules._isr_expand,
           "leo-reported": PartitionRules._leo_reported}
_CONTROLLER = {"isr-change": PartitionRules._isr_change, "leader-change": PartitionRules._leader_change,
               "elect-leader": PartitionRules._elect_leader, "partition-state": PartitionRules._partition_state}


def run(partition: int, rows: Iterable[dict], settings: RuleSettings | None = None) -> list[Violation]:
    """Every violation in one partition's rows (already in time order)."""
    rules = PartitionRules(partition, settings)
    found: list[Violation] = []
    for row in rows:
        found += rules.feed(row)
    return found + rules.finish()
