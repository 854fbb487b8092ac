"""Fault names and the two schedules: a seeded random one, and an explicit one read from a TOML file.

A schedule is a sequence of `Step`s (start time, fault name, optional targets / shape / topic partition,
degradation, duration). The random schedule decides everything it can from the seed alone (which fault, which node,
how a partition is cut), so the same seed and node list give the same sequence; only what the live metadata
says (a leader, a follower, a shrunk ISR) is looked up when the step starts.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from clusters.storage_faults import STORAGE_FAULTS
from nemesis.faults import KINDS, NAMES, PROCESS_KINDS, kind_of, takes
from nemesis.shapes import CHOOSE_OWN_TARGETS, ONE_TARGET, SHAPES
from nemesis.step import Step
from rundir.settings import REQUIRED, Setting, SettingError, at_line, declare, did_you_mean, header_lines, parse_table, read_toml
from broker.errors import ConfigError

FAULTS = NAMES       # fault name -> (window kind, who it targets): nemesis/faults.py
# the existing faults each package's steps are made of (what a backend must be able to inject)
PACKAGE_USES: dict[str, tuple[str, ...]] = {
    "isolate-then-kill-leader": ("partition", "kill-leader"),
    "isolate-then-power-loss-leader": ("partition", "power-loss-leader"),
    "pause-leader-until-fenced": ("pause-leader",),
    "isolate-leader-until-replaced": ("partition-leader",),
    "bounce-leader": ("kill-leader",),
    "move-leader": (),              # an ELECT_LEADER through the admin client: nothing of the backend
    "isolate-then-kill-coordinator": ("partition", "kill-coordinator"),
    "isolate-coordinator-until-replaced": ("partition-coordinator",),
}
# windows a package records that are no backend fault: a leadership move through the admin client
PACKAGE_OWN_KINDS: dict[str, tuple[str, ...]] = {"move-leader": ("elect",)}
# `aimed` draws among the packages aimed at a partition of the test topic (every workload has one); the
# coordinator's packages need a consumer group and come with the mix's coordinator family
AIMED = tuple(p for p in PACKAGE_USES if NAMES[p][1] == "leader")
# faults aimed at one topic partition (its leader, a follower, a shrunk ISR): a step may name it
PARTITION_TARGETS = ("leader", "follower", "sole-isr")
# faults aimed at the coordinator of the workload's consumer group (Aim(group=)): they choose their own
# targets, and a workload without a group has none to aim at
COORDINATOR = "coordinator"
# the default nemesis: every decision takes the next family of a seeded rotation, then a fault of it
MIX_FAMILIES: dict[str, tuple[str, ...]] = {
    "process": ("kill", "kill-leader", "kill-follower", "pause-leader", "kill-controller", "kill-majority"),
    "partition": ("partition", "partition-leader"),
    "aimed": ("isolate-then-kill-leader", "pause-leader-until-fenced", "isolate-leader-until-replaced"),
    # leadership changing hands while the leader lives on (or comes straight back): the routine of a
    # rolling restart, as common in production as any crash
    "leadership": ("move-leader", "bounce-leader"),
    "power-loss": ("power-loss-leader", "power-loss-all", "isolate-then-power-loss-leader"),
    # a broker's disk damaged while it is down (a minority at a time, never the last in-sync copy of a
    # partition: nemesis/driver.py); its recovery must find and cut the damage before it serves again
    "storage": ("corrupt-bitflip", "corrupt-truncate", "corrupt-checkpoint"),
}
# the mix's one more family when the workload has a consumer group (nemesis/driver.py adds it; the
# default nemesis of a workload without a group is MIX_FAMILIES unchanged)
COORDINATOR_FAMILY: dict[str, tuple[str, ...]] = {
    "coordinator": ("kill-coordinator", "pause-coordinator", "partition-coordinator",
                    "isolate-then-kill-coordinator", "isolate-coordinator-until-replaced"),
}
MIXES: dict[str, tuple[str, ...]] = {"aimed": AIMED,
                                     "mix": tuple(f for fs in MIX_FAMILIES.values() for f in fs)}
# corrupt faults: the storage faults (clusters/storage_faults.py) each may apply, one chosen with the step's seed
CORRUPT_HOW: dict[str, tuple[str, ...]] = {
    "corrupt-bitflip": ("bitflip",),
    "corrupt-truncate": ("truncate",),
    "corrupt-checkpoint": tuple(h for h in STORAGE_FAULTS if "checkpoint" in h),
}


def corrupt_how(fault: str, seed: int, allowed: tuple[str, ...] | None = None) -> str:
    """The storage fault a corrupt-* step applies (clusters/storage_faults.STORAGE_FAULTS), chosen with the
    seed among those the backend can apply mid-run (`allowed`, its `midrun_storage_faults()`; None: all)."""
    choices = [h for h in CORRUPT_HOW[fault] if allowed is None or h in allowed]
    if not choices:
        raise ConfigError(f"fault {fault!r}: the backend can apply none of {', '.join(CORRUPT_HOW[fault])} mid-run")
    return random.Random(seed ^ 0xC0FFEE).choice(choices)
# degrade faults: the seeded choices when a step does not set them (delay, jitter as a share of it, loss)
DEGRADE_DELAYS_MS = (25.0, 50.0, 100.0)
DEGRADE_JITTER_SHARE = 0.4
DEGRADE_LOSS_PCT = (0.0, 2.0, 5.0)
DEGRADE_FIELDS = ("delay_ms", "jitter_ms", "loss_pct")


def fault_name(raw) -> str:
    """`raw` when it names a fault; ValueError("unknown fault ...") otherwise (also the harness's check)."""
    if not isinstance(raw, str) or raw not in FAULTS:
        raise ValueError(f"unknown fault {raw!r} (known: {', '.join(FAULTS)})")
    return raw


def fault_list(faults: list[str]) -> list[str]:
    """`faults` when every name is known and `mix` (a whole rotation) stands alone; ValueError otherwise."""
    for f in faults:
        fault_name(f)
    if "mix" in faults and len(faults) > 1:
        raise ValueError("'mix' is the whole rotating mix: name it alone, or name the faults "
                         f"(got {', '.join(faults)})")
    return faults


def check_fault_names(faults: list[str], where: str = "nemesis") -> None:
    try:
        fault_list(list(faults))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def expand_faults(faults: list[str]) -> list[str]:
    """The single-window faults `faults` may inject: packages and mixes replaced by what they use (for a
    backend's preflight, which knows those names). Order kept, no repeats."""
    out: list[str] = []
    for f in faults:
        parts = expand_faults(list(MIXES[f])) if f in MIXES else PACKAGE_USES.get(f, (f,))
        out += [p for p in parts if p not in out]
    return out


def recorded_kinds(faults: list[str]) -> set[str]:
    """The history kinds (kill, pause, partition, ..., elect) the fault windows of `faults` may have."""
    kinds = {FAULTS[f][0] for f in expand_faults(faults)}
    for f in faults:
        names = MIXES.get(f, (f,))
        kinds.update(k for n in names for k in PACKAGE_OWN_KINDS.get(n, ()))
    return kinds


def aims_at_coordinator(faults: list[str]) -> list[str]:
    """The names among `faults` aimed at a consumer group's coordinator (they need a workload with a group;
    `mix` is not among them: it adds its coordinator family only when there is one)."""
    return [f for f in faults if f in FAULTS and FAULTS[f][1] == COORDINATOR]


def needs_power_loss(faults: list[str]) -> bool:
    """Whether `faults` may cut a broker's power (then its brokers run with power_loss = true)."""
    return any(k in KINDS and KINDS[k].cuts_power for k in recorded_kinds(faults))


def degradation(seed: int, given: dict | None = None) -> dict:
    """A degrade step's {delay_ms, jitter_ms, loss_pct}: the values given, the rest chosen with the seed."""
    rng = random.Random(seed ^ 0x5EED)
    delay = rng.choice(DEGRADE_DELAYS_MS)
    chosen = {"delay_ms": delay, "jitter_ms": round(delay * DEGRADE_JITTER_SHARE, 3),
              "loss_pct": rng.choice(DEGRADE_LOSS_PCT)}
    return {**chosen, **{k: float(v) for k, v in (given or {}).items() if v is not None}}


# --- random ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FaultPlan:
    """What a nemesis plays: at every interval of `interval_s` seconds a fault drawn from `faults` (names of
    FAULTS, or "mix"), or nothing with `quiet_probability`, all drawn from `seed` (same seed, same fault
    sequence); or, given a TOML `schedule` file, that file's steps instead (the seed then draws what the
    file leaves to chance; faults, interval and quiet probability are not used)."""
    faults: Sequence[str] = ()
    interval_s: float = 10.0
    seed: int = 0
    schedule: Path | str | None = None
    quiet_probability: float = 0.3


def random_steps(plan: FaultPlan, brokers: list[str], *, partitions: int = 1,
                 families: dict[str, tuple[str, ...]] | None = None) -> Iterator[Step]:
    """The endless steps of a random `plan` (its schedule file, if any, is not read here): at every interval
    k (k = 1, 2, ...) either nothing (quiet) or one fault lasting one interval. Targets of "broker" faults
    and partition shapes are drawn here from the seed. `mix` draws each fault from the next family of a
    rotation (`families`, default MIX_FAMILIES: the ones the backend can inject; their order shuffled with
    the seed every round; a quiet interval does not move it on), so a few steps meet every family."""
    families = MIX_FAMILIES if families is None else families
    faults, interval_s, quiet_probability = list(plan.faults), plan.interval_s, plan.quiet_probability
    check_fault_names(faults)
    if not faults:
        return
    if interval_s <= 0:
        raise ConfigError(f"nemesis interval must be positive, got {interval_s}")
    rng = random.Random(plan.seed)
    rotation: list[str] = []
    k = 0
    while True:
        k += 1
        quiet = rng.random() < quiet_probability
        if faults == ["mix"]:
            if not rotation:
                rotation = list(families)
                rng.shuffle(rotation)
            family = rotation[0] if quiet else rotation.pop(0)
            fault = rng.choice(families[family])
        else:
            fault = rng.choice(faults)
        broker = rng.choice(brokers)
        partition = rng.randrange(max(1, partitions))
        step_seed = rng.getrandbits(32)
        if quiet:
            continue
        yield _drawn_step(k * interval_s, fault, interval_s, broker, partition, step_seed)


def _drawn_step(at: float, fault: str, duration: float, broker: str, partition: int, step_seed: int) -> Step:
    if fault == "aimed":            # one package, chosen with the step's seed
        fault = random.Random(step_seed ^ 0xA1).choice(AIMED)
    shape = None
    targets = None
    if takes(fault, "shape"):
        shape = fault[len("partition-"):] if fault != "partition" else random.Random(step_seed).choice(SHAPES)
    elif FAULTS[fault][1] == "broker":
        targets = [broker]
    return Step.timed(at, fault, duration, step_seed, targets=targets, shape=shape, partition=partition,
                      degradation=degradation(step_seed) if takes(fault, "delay_ms") else None)


# --- file -------------------------------------------------------------------------------------------

# the fields of a [[step]]; targets, shape and partition are checked against the fault and the cluster
STEP = declare(
    Setting("at", float, REQUIRED, "seconds after the nemesis starts", min=0, finite=True,
            what="a number of seconds >= 0"),
    Setting("fault", str, REQUIRED, "a fault name (FAULTS)", parse=fault_name),
    Setting("duration", float, REQUIRED, "seconds until the fault stops", above=0, finite=True,
            what="a number of seconds > 0"),
    # checked below against the fault and the cluster, so declared without a type
    Setting("targets", object, None, "a list of node names; default: chosen when the step starts"),
    Setting("shape", object, None, "partition faults: a shape from nemesis/shapes.py"),
    Setting("partition", object, None, "leader-targeted faults: the topic partition whose leader is hit"),
    Setting("delay_ms", float, None, "degrade faults: delay of every packet (default: chosen with the seed)",
            min=0, finite=True, what="a number of milliseconds >= 0"),
    Setting("jitter_ms", float, None, "degrade faults: +- this much around the delay (default: seeded)",
            min=0, finite=True, what="a number of milliseconds >= 0"),
    Setting("loss_pct", float, None, "degrade faults: share of packets dropped (default: seeded)",
            min=0, max=100, finite=True, what="a percentage in 0..100"),
)


def load_schedule(path: Path, nodes: list[str], *, partitions: int = 1, seed: int = 0) -> list[Step]:
    """Read and validate a schedule file. `nodes` are the cluster's node names (c0, n1, ...)."""
    path = Path(path)
    text, doc = read_toml(path, ConfigError, cannot_read="{path}: cannot read schedule file: {reason}",
                          not_toml="{path}: not valid TOML: {reason}")
    unknown = set(doc) - {"step"}
    if unknown:
        key = sorted(unknown)[0]
        raise ConfigError(f"{path}: unknown top-level key {key!r} (expected [[step]] tables)"
                            f"{did_you_mean(key, ['step'])}")
    raw_steps = doc.get("step", [])
    if not isinstance(raw_steps, list) or not all(isinstance(s, dict) for s in raw_steps):
        raise ConfigError(f"{path}: 'step' must be an array of tables ([[step]])")
    if not raw_steps:
        raise ConfigError(f"{path}: no [[step]] entries")
    rng = random.Random(seed)
    lines = header_lines(text, "step")
    steps = [_parse_step(_at_line(path, lines, i), i, raw, nodes, partitions, rng.getrandbits(32))
             for i, raw in enumerate(raw_steps, start=1)]
    steps.sort(key=lambda s: (s.at, s.number))
    _check_overlaps(path, steps, lines)
    return steps


def _at_line(path: Path, lines: list[int], entry: int) -> str:
    """`path:line` of the entry's [[step]] header, or just the path when it cannot be found."""
    return at_line(path, lines[entry - 1] if 0 < entry <= len(lines) else None)


def _parse_step(path: str, i: int, raw: dict, nodes: list[str], partitions: int, step_seed: int) -> Step:
    def bad(field_name: str, message: str) -> ConfigError:
        return ConfigError(f"{path}: step {i}: field {field_name!r}: {message}")

    try:
        values = parse_table(raw, STEP, unknown="unknown field (known: {known})")
    except SettingError as exc:
        raise bad(exc.key, exc.problem) from None
    at, fault, duration = values["at"], values["fault"], values["duration"]
    if fault == "mix":
        raise bad("fault", "'mix' rotates faults in the random schedule; a step names a fault (or 'aimed')")
    if fault == "aimed":            # one package, chosen with the step's seed
        fault = random.Random(step_seed ^ 0xA1).choice(AIMED)
    given = {k: values.get(k) for k in DEGRADE_FIELDS if raw.get(k) is not None}
    wrong = sorted(k for k in given if not takes(fault, k))
    if wrong:
        raise bad(wrong[0], f"only degrade faults take {', '.join(DEGRADE_FIELDS)} (fault is {fault!r})")
    shape = _shape(raw.get("shape"), fault, step_seed, bad)
    targets = raw.get("targets")
    if targets is not None:
        _check_targets(targets, fault, shape, nodes, bad)
    partition = raw.get("partition")
    if partition is not None:
        if FAULTS[fault][1] not in PARTITION_TARGETS and shape != "leader":
            raise bad("partition", f"only faults aimed at a partition (its leader, a follower, a sole ISR member) take "
                                   f"a partition (fault is {fault!r})")
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < max(1, partitions):
            raise bad("partition", f"must be a partition number in 0..{max(1, partitions) - 1}, got {partition!r}")
    else:
        partition = random.Random(step_seed).randrange(max(1, partitions))
    return Step.timed(at, fault, duration, step_seed, i, targets=targets, shape=shape, partition=partition,
                      degradation=degradation(step_seed, given) if takes(fault, "delay_ms") else None)


def _shape(shape, fault: str, step_seed: int, bad) -> str | None:
    """A step's partition shape: the one given (it must fit the fault), the fault's own, or a seeded one;
    None for a fault without shapes."""
    if shape is not None:
        if not takes(fault, "shape"):
            raise bad("shape", f"only partition faults have a shape (fault is {fault!r})")
        if shape not in SHAPES:
            raise bad("shape", f"unknown shape {shape!r} (known: {', '.join(SHAPES)})")
        if fault != "partition" and fault != f"partition-{shape}":
            raise bad("shape", f"{shape!r} contradicts fault {fault!r}")
    if not takes(fault, "shape"):
        return None
    shape = shape or (fault[len("partition-"):] if fault != "partition" else None)
    return shape or random.Random(step_seed).choice(SHAPES)


def _check_targets(targets, fault: str, shape: str | None, nodes: list[str], bad) -> None:
    """A step's `targets`: known nodes, once each, for a fault that takes them (and a shape that does)."""
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        raise bad("targets", f"must be a non-empty list of node names, got {targets!r}")
    for t in targets:
        if t not in nodes:
            raise bad("targets", f"unknown node {t!r} (nodes: {', '.join(nodes)})")
    if len(set(targets)) != len(targets):
        raise bad("targets", f"lists a node twice: {targets!r}")
    kind = kind_of(fault)
    if FAULTS[fault][1] not in ("broker", None) or shape in CHOOSE_OWN_TARGETS:
        raise bad("targets", f"{fault!r}{' shape ' + repr(shape) if shape else ''} chooses its own targets")
    if kind is not None and kind.brokers_only and "c0" in targets:
        raise bad("targets", f"{kind.name} applies to brokers only, not the controller c0")
    if shape in ONE_TARGET and len(targets) != 1:
        raise bad("targets", f"a bridge has exactly one middle node, got {targets!r}")
    if shape is not None and len(targets) >= len(nodes):
        raise bad("targets", "a partition cannot include every node on one side")


def _check_overlaps(path: Path, steps: list[Step], lines: list[int]) -> None:
    for i, a in enumerate(steps):
        for b in steps[i + 1:]:
            if b.at >= a.at + a.duration:
                break
            if a.kind == b.kind and a.kind in KINDS and KINDS[a.kind].on == "links":
                raise ConfigError(f"{_at_line(path, lines, b.number)}: step {b.number}: field 'at': {a.kind} at {b.at:g}s overlaps the "
                                    f"{a.kind} of step {a.number} ({a.at:g}s-{a.at + a.duration:g}s); "
                                    f"{a.kind}s must not overlap")
            if a.kind in PROCESS_KINDS and b.kind in PROCESS_KINDS:
                same = set(a.targets or ()) & set(b.targets or ())
                if same or (a.targets is None and b.targets is None and
                            FAULTS[a.fault][1] == FAULTS[b.fault][1] != "broker"):
                    who = ", ".join(sorted(same)) or FAULTS[a.fault][1]
                    raise ConfigError(f"{_at_line(path, lines, b.number)}: step {b.number}: field 'targets': overlaps step {a.number} on "
                                        f"{who} ({a.at:g}s-{a.at + a.duration:g}s); one process fault per "
                                        f"node at a time")
