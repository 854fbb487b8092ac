"""The event types each protocol rule needs: what a run's event logs must hold for the rule to be checked.

A rule without one of these can only be silent or wrong (ack-undecided, without `ack` lines, would call
every acknowledged send undecided; read-uncommitted, with `role` lines but no `hw-change`, would take every
leader's HW for 0), so the checker runs a rule only over runs whose logs hold all of its types
(rundir/evidence.py `rule_status`), and names the others "not checked". A type a rule reads only as a
second source of what it needs (hw-above-leo's `recovered` beside `hw-change`) is not listed. A need
written `event.field` is that event with that field (brokers logged `hw-change` without its `leo` before
2026-11-27, and the controller's `leader-change` without its ISR `version`). The
history rows a rule also reads (`read` for polls, `sent` for ok sends, `damaged` for storage faults) come
with every history and are not listed. tests/broker/test_rule_evidence.py checks that the types named
here are the ones the adapters keep (EVENTS_READ), each needed by some rule, and that a rule whose type a
run lacks is not checked.
"""
from __future__ import annotations

from broker.rules.catalogue import RULES
from broker.rules.names import (ACK_ABOVE_HW, ACK_BEFORE_FLUSH, ACK_BELOW_MIN_ISR, ACK_UNDECIDED, ACKED_NOT_DURABLE,
                                DAMAGED_RECORD_KEPT, ELECTION_OUTSIDE_ISR, EPOCH_NOT_INCREASING, EPOCH_OUTLIVED_RESTART,
                                EPOCH_TWO_LEADERS, FLUSHED_PAST_TRUNCATION, FOLLOWER_HW_AHEAD, HW_ABOVE_LEO,
                                HW_REPORTED_AHEAD, ISR_JOIN_LAGGING, LEADER_HW_DECREASE, LEADER_NOT_ELECTED,
                                READ_UNCOMMITTED, REPORTED_BEFORE_FLUSH, STALE_EPOCH_SERVED, TRUNCATE_BELOW_HW)

RULE_EVENTS: dict[str, frozenset[str]] = {name: frozenset(events.split()) for name, events in {
    HW_ABOVE_LEO: "hw-change.leo",
    LEADER_HW_DECREASE: "role hw-change",
    FOLLOWER_HW_AHEAD: "role hw-change",
    ACK_ABOVE_HW: "ack",
    ACK_BELOW_MIN_ISR: "ack",
    ACKED_NOT_DURABLE: "ack recovered",
    ACK_BEFORE_FLUSH: "ack",
    EPOCH_TWO_LEADERS: "role",
    LEADER_NOT_ELECTED: "role leader-change",
    EPOCH_OUTLIVED_RESTART: "start role leader-change",
    ELECTION_OUTSIDE_ISR: "leader-change.version",
    EPOCH_NOT_INCREASING: "leader-change",
    TRUNCATE_BELOW_HW: "truncate hw-change",
    ISR_JOIN_LAGGING: "isr-expand-proposed",
    STALE_EPOCH_SERVED: "role follower-served",
    # a poll above its own reported HW needs the history alone (the leaders' HWs are its second half)
    READ_UNCOMMITTED: "",
    HW_REPORTED_AHEAD: "role hw-change",
    REPORTED_BEFORE_FLUSH: "leo-reported",
    FLUSHED_PAST_TRUNCATION: "truncate",
    ACK_UNDECIDED: "ack leader-change",
    DAMAGED_RECORD_KEPT: "recovered",
}.items()}

assert set(RULE_EVENTS) == set(RULES), "broker/rules/evidence.py: name the event types of every rule"
