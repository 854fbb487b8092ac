"""What the explorer checks on a simulated World, and which settings promise it.

Two sources, one vocabulary of findings (the name of the rule or invariant broken):
- the protocol rules of broker/rules (the same rule code the checker runs on a real run's event logs),
  fed by the world's observer (simulator/observe.py) as a broker's and the controller's logs would be:
  watermarks (hw-above-leo, leader-hw-decrease, follower-hw-ahead), acknowledgements (ack-above-hw,
  ack-below-min-isr, acked-not-durable), elections and epochs (epoch-two-leaders, leader-not-elected,
  election-outside-isr, epoch-not-increasing), truncation (truncate-below-hw), reads (read-uncommitted).
  The observer reports only the rules the settings promise; each is checked after every event.
- the state invariants, which read the whole simulated state where no single log can:
  "committed-prefix-agreement" (for any two live replicas, the records below both HWs are the same;
  after every event) and "no-acked-loss" (after `World.settle()`: every acknowledged write is in the
  committed log, below the leader's HW at its offset with its value).

`promises(settings, actions)` names what a configuration promises for a schedule; a violation of
anything else is the expected finding of an unsafe configuration. `promises_no_loss(settings)` is the
rule for "no-acked-loss": leader-epoch truncation, acks=all, min ISR >= 2, no unclean election, fetch
fencing on, the KAFKA-7128 rule on, and, for power loss, flush "always" or eligible leader replicas.

Eligible leader replicas (KIP-966) with flush "never" keep a committed write through the unclean
shutdown of fewer than min.insync.replicas of the replicas holding it, not through more: when the
leader and the follower that acknowledged a write both lose power before flushing it, no disk holds
it any more (the explorer found exactly that, an acks=all write lost after two power losses). So for a
given schedule the promise is kept only while it has fewer power losses than min.insync.replicas
(`power_losses_within_promise`; counted over the whole schedule, the conservative reading).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from broker.config_keys import parse_acks
from broker.rules import RULES
from broker.rules import promised as rules_promised
from simulator.observe import rule_settings

# The state invariants checked after every event (cheap: they run some 50 times per schedule), after
# the protocol rules (no-acked-loss is checked once per schedule, after settle()).
STATE_INVARIANTS = ("committed-prefix-agreement",)
EVENT_INVARIANTS = RULES + STATE_INVARIANTS


def _live(world: Any):
    """(name, replica) of every node that is up and has a replica, in name order."""
    out = []
    for name, node in world.nodes.items():
        if node.up and node.replica is not None:
            out.append((name, node.replica))
    return out


def protocol_rules(world: Any) -> tuple[str, str] | None:
    """The first promised protocol rule the world's events broke (simulator/observe.py), as (rule, text)."""
    pending = world.observer.pending
    if not pending:
        return None
    v = pending[0]
    return v.kind, v.detail


def _records(log: Any, end: int) -> list:
    """Records [log start, end) of a log; MemoryLog's list directly when it has one (the hot path)."""
    held = getattr(log, "_records", None)
    if isinstance(held, list):
        return held[:end]
    return log.read(0, end)


def committed_prefix_agreement(world: Any) -> str | None:
    live = _live(world)
    for i in range(len(live)):
        a_name, a = live[i]
        for b_name, b in live[i + 1:]:
            upto = min(a.hw, b.hw)
            if upto <= 0:
                continue
            ra, rb = _records(a.log, upto), _records(b.log, upto)
            if ra == rb:
                continue
            for off in range(upto):
                x = ra[off] if off < len(ra) else None
                y = rb[off] if off < len(rb) else None
                if x != y:
                    return (f"{a_name} and {b_name} differ at offset {off} below both HWs "
                            f"({a.hw}, {b.hw}): {_show(x)} vs {_show(y)}")
    return None


def _show(record: Any) -> str:
    if record is None:
        return "nothing"
    value = record.value.decode(errors="replace") if isinstance(record.value, bytes) else str(record.value)
    return f"{value}@epoch {record.epoch}"


def _field(item: Any, name: str, index: int) -> Any:
    """An acked write's field, whether World keeps it as an object or a tuple (value, offset, ...)."""
    if hasattr(item, name):
        return getattr(item, name)
    if isinstance(item, dict):
        return item[name]
    return item[index]


def _as_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _committed_log(world: Any):
    """(name, records below HW) of the replica the controller names leader, if it is up and leads."""
    controller = world.controller
    for p in controller.partitions():
        leader = p.leader
        if leader is None:
            return None
        for name, r in _live(world):
            if r.broker_id == leader and r.role == "leader":
                return name, _records(r.log, r.hw)
        return None
    return None


def no_acked_loss(world: Any) -> str | None:
    """After settle(): each acknowledged write is at its offset below the leader's HW. With no leader
    (nothing could be elected) each must still be on some node's disk at its offset."""
    acked = list(world.acked)
    if not acked:
        return None
    committed = _committed_log(world)
    lost = []
    for item in acked:
        value, offset = _as_bytes(_field(item, "value", 0)), _field(item, "offset", 1)
        if committed is not None:
            records = committed[1]
            ok = offset < len(records) and records[offset].value == value
        else:
            ok = False
            for node in world.nodes.values():
                rec = node.log.read(offset, 1) if offset < node.log.leo() else []
                if rec and rec[0].value == value:
                    ok = True
                    break
        if not ok:
            lost.append(f"{value.decode(errors='replace')}@{offset}")
    if not lost:
        return None
    where = f"the committed log of {committed[0]} (HW {len(committed[1])})" if committed else "any node (no leader)"
    more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
    return f"{len(lost)} of {len(acked)} acknowledged writes missing from {where}: {', '.join(lost[:3])}{more}"


INVARIANTS: dict[str, Callable[[Any], str | None]] = {
    "committed-prefix-agreement": committed_prefix_agreement,
    "no-acked-loss": no_acked_loss,
}


def _power_loss_safe(settings: Any, actions: Any = None) -> bool:
    """Power losses cannot cost committed records: flush "always" (nothing unflushed), eligible leader
    replicas (bounded by `power_losses_within_promise`), or -- for a given schedule -- no power loss in
    it at all (a crash keeps the whole log, so flush "never" behaves as "always")."""
    if settings.flush == "always" or settings.eligible_leader_replicas:
        return True
    return actions is not None and not any(getattr(a, "kind", None) == "power-loss" for a in actions)


def promises_no_loss(settings: Any, actions: Any = None) -> bool:
    """Whether the configuration (for the schedule `actions`, when given) promises that no acknowledged
    write is lost once the cluster heals."""
    return (settings.truncation == "leader-epoch" and parse_acks(settings.acks) == "all" and settings.min_insync_replicas >= 2
            and not settings.unclean_leader_election and settings.fetch_fencing
            and getattr(settings, "isr_join_requires_epoch_start", True) and _power_loss_safe(settings, actions))


def promises_agreement(settings: Any, actions: Any = None) -> bool:
    """Whether committed prefixes must agree: what no-loss needs except acks and min ISR, which only
    decide when a write is acknowledged, not what is committed."""
    return (settings.truncation == "leader-epoch" and not settings.unclean_leader_election
            and settings.fetch_fencing and getattr(settings, "isr_join_requires_epoch_start", True)
            and _power_loss_safe(settings, actions))


def power_losses_within_promise(settings: Any, actions: Any = None) -> bool:
    """Whether a schedule's power losses stay within what the settings protect against: any number with
    flush "always" (nothing unflushed to lose), fewer than min.insync.replicas with flush "never" and
    eligible leader replicas (module docstring). Without actions: True."""
    if actions is None or settings.flush == "always":
        return True
    losses = sum(1 for a in actions if getattr(a, "kind", None) == "power-loss")
    return losses < settings.min_insync_replicas


def promises(settings: Any, actions: Any = None) -> frozenset[str]:
    """The rules and invariants `settings` promises (for the schedule `actions`, when given: see
    `power_losses_within_promise`); a violation of another one is an expected finding."""
    power = settings.flush != "always" and (actions is None
                                           or any(getattr(a, "kind", None) == "power-loss" for a in actions))
    out = set(rules_promised(replace(rule_settings(settings), power_loss=power)))
    within = power_losses_within_promise(settings, actions)
    if promises_agreement(settings, actions) and within:
        out.add("committed-prefix-agreement")
    if promises_no_loss(settings, actions) and within:
        out.add("no-acked-loss")
    return frozenset(out)


def check_event(world: Any) -> tuple[str, str] | None:
    """The first broken promised rule, else the first violated state invariant, as (name, text), or None."""
    hit = protocol_rules(world)
    if hit is not None:
        return hit
    for name in STATE_INVARIANTS:
        text = INVARIANTS[name](world)
        if text is not None:
            return name, text
    return None


def check_settled(world: Any) -> tuple[str, str] | None:
    """After settle(): the rules decided at the end, the per-event checks, then no-acked-loss."""
    world.observer.finish()
    hit = check_event(world)
    if hit is not None:
        return hit
    text = no_acked_loss(world)
    return ("no-acked-loss", text) if text is not None else None
