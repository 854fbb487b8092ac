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

RULE_EVENTS: dict[str, frozenset[str]] = {name: frozenset(events.split()) for name, events in {
    "hw-above-leo": "hw-change.leo",
    "leader-hw-decrease": "role hw-change",
    "follower-hw-ahead": "role hw-change",
    "ack-above-hw": "ack",
    "ack-below-min-isr": "ack",
    "acked-not-durable": "ack recovered",
    "ack-before-flush": "ack",
    "epoch-two-leaders": "role",
    "leader-not-elected": "role leader-change",
    "epoch-outlived-restart": "start role leader-change",
    "election-outside-isr": "leader-change.version",
    "epoch-not-increasing": "leader-change",
    "truncate-below-hw": "truncate hw-change",
    "isr-join-lagging": "isr-expand-proposed",
    "stale-epoch-served": "role follower-served",
    # a poll above its own reported HW needs the history alone (the leaders' HWs are its second half)
    "read-uncommitted": "",
    "hw-reported-ahead": "role hw-change",
    "reported-before-flush": "leo-reported",
    "flushed-past-truncation": "truncate",
    "ack-undecided": "ack leader-change",
    "damaged-record-kept": "recovered",
}.items()}

assert set(RULE_EVENTS) == set(RULES), "broker/rules/evidence.py: name the event types of every rule"
