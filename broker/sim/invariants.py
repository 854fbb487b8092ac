"""The invariants the explorer checks on a simulated World (issue 19), and which settings promise them.

Owned by helper "explorer". Each invariant is a function of a `broker.sim.world.World` returning None
when it holds, else a one-line description of the violation. They read the World's attributes only
(`nodes[name].up / .replica / .log`, `controller`, `acked`) and never change the simulated state;
the two that compare the present with the past ("one-leader-per-epoch" across time and
"leader-hw-monotonic") keep what they saw in a small memo stored on the World object itself
(attribute `_invariant_memo`), so a fresh World starts with a fresh memory.

- "one-leader-per-epoch": no two live replicas lead the same epoch, and an epoch once led by a node is
  never led by another one later (a leader that crashed and its successor of the same epoch).
- "hw-within-leo": every live replica's HW lies in [log start, LEO].
- "leader-hw-monotonic": a leader's HW never goes backwards while it leads the same epoch.
- "committed-prefix-agreement": for any two live replicas, the records below both HWs are the same.
- "no-acked-loss": checked after `World.settle()` only: every acknowledged write is in the committed
  log (below the leader's HW, at its offset, with its value).

`promises(settings, actions)` names the invariants a configuration promises; a violation of any other
one is the expected finding of an unsafe configuration. `promises_no_loss(settings)` is the rule for
"no-acked-loss": leader-epoch truncation, acks=-1, min ISR >= 2, no unclean election, fetch fencing
on, the KAFKA-7128 rule on, and, for power loss, flush "always" or eligible leader replicas.

Eligible leader replicas (KIP-966) with flush "never" keep a committed write through the unclean
shutdown of fewer than min.insync.replicas of the replicas holding it, not through more: when the
leader and the follower that acknowledged a write both lose power before flushing it, no disk holds
it any more (the explorer found exactly that, an acks=all write lost after two power losses). So for a
given schedule the promise is kept only while it has fewer power losses than min.insync.replicas
(`power_losses_within_promise`; counted over the whole schedule, the conservative reading).
"""
from __future__ import annotations

from typing import Any, Callable

# The invariants checked after every event (cheap: they run some 50 times per schedule).
EVENT_INVARIANTS = ("one-leader-per-epoch", "hw-within-leo", "leader-hw-monotonic", "committed-prefix-agreement")
# Checked once per schedule, after settle().
SETTLED_INVARIANTS = ("no-acked-loss",)
# The invariants any configuration promises: the replication core's own bookkeeping.
ALWAYS_PROMISED = ("one-leader-per-epoch", "hw-within-leo", "leader-hw-monotonic")

_MEMO = "_invariant_memo"


def _memo(world: Any) -> dict:
    memo = getattr(world, _MEMO, None)
    if memo is None:
        memo = {"epoch_leader": {}, "leader_hw": {}}
        setattr(world, _MEMO, memo)
    return memo


def _live(world: Any):
    """(name, replica) of every node that is up and has a replica, in name order."""
    out = []
    for name, node in world.nodes.items():
        if node.up and node.replica is not None:
            out.append((name, node.replica))
    return out


def one_leader_per_epoch(world: Any) -> str | None:
    seen: dict[int, str] = {}
    history = _memo(world)["epoch_leader"]
    for name, r in _live(world):
        if r.role != "leader":
            continue
        epoch = r.leader_epoch
        other = seen.get(epoch)
        if other is not None:
            return f"{other} and {name} both lead epoch {epoch}"
        seen[epoch] = name
        before = history.get(epoch)
        if before is None:
            history[epoch] = name
        elif before != name:
            return f"{name} leads epoch {epoch}, which {before} led before"
    return None


def hw_within_leo(world: Any) -> str | None:
    for name, r in _live(world):
        hw, leo = r.hw, r.leo
        if hw > leo:
            return f"{name}: HW {hw} is past its LEO {leo}"
        start = r.log.log_start()
        if hw < start:
            return f"{name}: HW {hw} is below its log start {start}"
    return None


def leader_hw_monotonic(world: Any) -> str | None:
    """Uses `World.leader_hw_seen` (the highest HW each (node, epoch) had, noted by the world after every
    event, so events between two checks count too) when the world keeps it, else the memo."""
    seen = getattr(world, "leader_hw_seen", None)
    if not isinstance(seen, dict):
        seen = _memo(world)["leader_hw"]
    for name, r in _live(world):
        if r.role != "leader":
            continue
        key = (name, r.leader_epoch)
        hw = r.hw
        before = seen.get(key)
        if before is not None and hw < before:
            return f"{name}: leader HW went back from {before} to {hw} in epoch {r.leader_epoch}"
        if before is None or hw > before:
            seen[key] = hw
    return None


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
    "one-leader-per-epoch": one_leader_per_epoch,
    "hw-within-leo": hw_within_leo,
    "leader-hw-monotonic": leader_hw_monotonic,
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
    return (settings.truncation == "leader-epoch" and settings.acks == -1 and settings.min_insync_replicas >= 2
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
    """The invariants `settings` promises (for the schedule `actions`, when given: see
    `power_losses_within_promise`); a violation of another one is an expected finding."""
    out = set(ALWAYS_PROMISED)
    within = power_losses_within_promise(settings, actions)
    if promises_agreement(settings, actions) and within:
        out.add("committed-prefix-agreement")
    if promises_no_loss(settings, actions) and within:
        out.add("no-acked-loss")
    return frozenset(out)


def check_event(world: Any) -> tuple[str, str] | None:
    """The first violated per-event invariant as (name, text), or None."""
    for name in EVENT_INVARIANTS:
        text = INVARIANTS[name](world)
        if text is not None:
            return name, text
    return None


def check_settled(world: Any) -> tuple[str, str] | None:
    """After settle(): the per-event invariants, then no-acked-loss."""
    hit = check_event(world)
    if hit is not None:
        return hit
    text = no_acked_loss(world)
    return ("no-acked-loss", text) if text is not None else None
