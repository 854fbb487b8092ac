"""The evidence a run directory holds, declared: its formats, and what its backend could not provide.

A run directory carries evidence of several sorts (docs/formats.md, "test.json: evidence"):

    history        history.jsonl: every operation, the final reads among them
    replica-dumps  replicas/<node>/p<partition>.jsonl: every replica's log after the run
    event-logs     nodes/<node>/broker.log: the brokers' and the controller's event lines

test.json's `evidence` section says which of them the run holds, in which format, and for the event logs
which event types its brokers write; a backend that cannot provide one says why (an external cluster has
no replica dumps and no event logs of ours). The checker reads the section to tell three things apart
(`Status`): a family it checked; one that does not apply to this kind of cluster (`not-applicable`, the
verdict covers the rest); and one whose evidence this run's format cannot hold (`not-checked`: a run
written before its brokers wrote `ack` lines). Evidence that should be there and is not (a dump missing
on the local backend) is neither: it is an input problem, and the verdict is unknown. So is evidence
damaged after the run: the harness records the size of every event log and replica dump it collected
(`collected`, `collected_files`), and a file that no longer has that size (an event log cut short by a
copy that did not finish) is named, and its families are unknown.

A run directory without the section was written before formats were versioned (or by another tool that
did not say): `declared` is False, what it holds is read off its files, and `legacy_event_types` says
which event types its logs hold, by the lines present.

The versions in FORMATS change whenever the format of that evidence changes; tests/checkers/
compat_corpus/ keeps a run directory of every format, each of which must check to its original verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from rundir import formats as rf

HISTORY = "history"
REPLICA_DUMPS = "replica-dumps"
EVENT_LOGS = "event-logs"
EVIDENCE = (HISTORY, REPLICA_DUMPS, EVENT_LOGS)

# the format of each sort of evidence this code writes; 0 is a run directory that declared none
FORMATS: dict[str, int] = {HISTORY: 1, REPLICA_DUMPS: 1, EVENT_LOGS: 1}

# what each anomaly family (rundir/kinds.py Kind.family) reads; the protocol family's rules also need
# their own event types (broker/rules/evidence.py RULE_EVENTS)
FAMILY_EVIDENCE: dict[str, tuple[str, ...]] = {
    "values": (HISTORY,), "offsets": (HISTORY,), "ordering": (HISTORY,), "watermarks": (HISTORY,),
    "divergence": (REPLICA_DUMPS,), "protocol": (EVENT_LOGS, HISTORY),
}

# the statuses of a kind in results.json (`anomalies.<kind>.status`)
CHECKED = "checked"
NOT_APPLICABLE = "not-applicable"      # the backend cannot provide its evidence: out of scope, said so
NOT_CHECKED = "not-checked"            # the run's format cannot hold its evidence: an older run, said so
MISSING = "missing"                    # its evidence should be there and is not: the verdict is unknown
# the run's workload records nothing the kind reads (keys without the keyed workload): there was nothing
# to check, and the run never set out to check it, so it is no gap in the verdict's scope either
NOT_EXERCISED = "not-exercised"
STATUSES = (CHECKED, NOT_APPLICABLE, NOT_CHECKED, MISSING, NOT_EXERCISED)

SECTION = "evidence"                   # test.json's key


@dataclass(frozen=True)
class Evidence:
    """What a run directory says it holds (or, undeclared, what it is taken to hold)."""

    declared: bool                                         # test.json has an evidence section
    formats: dict[str, int] = field(default_factory=dict)  # evidence -> format version (0: undeclared)
    event_types: frozenset[str] | None = None              # the event types its logs hold (None: undeclared)
    absent: dict[str, str] = field(default_factory=dict)   # evidence the backend cannot provide -> why
    # the files the harness collected -> their size in bytes then (path relative to the run directory)
    collected: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The test.json section (what `declare` writes)."""
        out: dict[str, Any] = {"formats": dict(self.formats), "absent": dict(self.absent)}
        if self.event_types is not None:
            out["event_types"] = sorted(self.event_types)
        if self.collected:
            out["collected"] = dict(sorted(self.collected.items()))
        return out

    def with_collected(self, sizes: dict[str, int]) -> "Evidence":
        """The same declaration with the sizes of the files collected at the end of the run."""
        return Evidence(self.declared, dict(self.formats), self.event_types, dict(self.absent), dict(sizes))


# the files whose size the harness records when it has collected them: the event logs and replica dumps
COLLECTED_GLOBS: dict[str, str] = {EVENT_LOGS: f"{rf.NODES_DIR}/*/{rf.BROKER_LOG}",
                                   REPLICA_DUMPS: f"{rf.REPLICAS_DIR}/*/p*.jsonl"}   # rf.replica_dump_path


def collected_files(run_dir: Path | str) -> dict[str, int]:
    """Every event log and replica dump in `run_dir` -> its size in bytes (test.json `evidence.collected`)."""
    root = Path(run_dir)
    return {f.relative_to(root).as_posix(): f.stat().st_size
            for pattern in COLLECTED_GLOBS.values() for f in sorted(root.glob(pattern)) if f.is_file()}


def collected_evidence(path: str) -> str | None:
    """Which evidence a collected file is (EVENT_LOGS or REPLICA_DUMPS), by its place in the run directory."""
    rel = PurePosixPath(path)
    if len(rel.parts) != 3 or ".." in rel.parts or rel.is_absolute():
        return None
    return next((name for name, pattern in COLLECTED_GLOBS.items() if rel.match(pattern)), None)


def declare(event_types: frozenset[str] | set[str] | None, absent: dict[str, str] | None = None) -> Evidence:
    """What this code's harness writes for a backend: every evidence in today's format except `absent`
    (evidence -> why the backend cannot provide it); `event_types`: the event types its brokers write."""
    absent = dict(absent or {})
    unknown = set(absent) - set(EVIDENCE)
    if unknown:
        raise ValueError(f"unknown evidence {sorted(unknown)} (known: {', '.join(EVIDENCE)})")
    formats = {e: v for e, v in FORMATS.items() if e not in absent}
    return Evidence(True, formats, None if EVENT_LOGS in absent else frozenset(event_types or ()), absent)


def parse(test: dict[str, Any]) -> Evidence:
    """A test.json document's evidence: its section, or (none) what an older run directory is taken to
    hold: everything, but for replica dumps its cluster says it could not make (`no_replica_dumps`, which
    external runs wrote before the section existed) and event logs of an external cluster.
    Raises ValueError naming the field for a malformed section (`parse_in`: the run directory's FormatError)."""
    sec = test.get(SECTION)
    if sec is None:
        cluster = test.get("cluster") if isinstance(test.get("cluster"), dict) else {}
        absent = {}
        why = cluster.get("no_replica_dumps")
        if isinstance(why, str) and why:
            absent[REPLICA_DUMPS] = why
        if cluster.get("backend") == "external":
            absent[EVENT_LOGS] = "the external backend has no access to the brokers' event logs"
        return Evidence(False, {e: 0 for e in EVIDENCE if e not in absent}, None, absent)
    if not isinstance(sec, dict):
        raise ValueError(f"field '{SECTION}' must be an object")
    formats = sec.get("formats", {})
    if not isinstance(formats, dict):
        raise ValueError(f"field '{SECTION}.formats' must be an object")
    for name, version in formats.items():
        if name not in EVIDENCE:
            raise ValueError(f"field '{SECTION}.formats': unknown evidence {name!r} (known: {', '.join(EVIDENCE)})")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise ValueError(f"field '{SECTION}.formats.{name}' must be a format version (an integer >= 0)")
        if version > FORMATS[name]:
            raise ValueError(f"field '{SECTION}.formats.{name}': format {version} is newer than this checker "
                                f"reads (up to {FORMATS[name]}): upgrade highwater")
    absent = sec.get("absent", {})
    if not isinstance(absent, dict) or not all(isinstance(v, str) and v for v in absent.values()):
        raise ValueError(f"field '{SECTION}.absent' must map evidence names to why each is absent")
    for name in absent:
        if name not in EVIDENCE:
            raise ValueError(f"field '{SECTION}.absent': unknown evidence {name!r} (known: {', '.join(EVIDENCE)})")
        if name in formats:
            raise ValueError(f"field '{SECTION}': {name!r} is both in 'formats' and in 'absent'")
    types = sec.get("event_types")
    if types is not None and (not isinstance(types, list) or not all(isinstance(t, str) for t in types)):
        raise ValueError(f"field '{SECTION}.event_types' must be a list of event names")
    if EVENT_LOGS in formats and types is None:
        raise ValueError(f"field '{SECTION}.event_types' is missing: which event types do the event logs hold?")
    collected = sec.get("collected", {})
    if not isinstance(collected, dict):
        raise ValueError(f"field '{SECTION}.collected' must map file paths to their sizes in bytes")
    for name, size in collected.items():
        if collected_evidence(name) is None:
            raise ValueError(f"field '{SECTION}.collected': {name!r} is neither an event log nor a replica dump "
                             f"({', '.join(COLLECTED_GLOBS.values())})")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"field '{SECTION}.collected.{name}' must be a size in bytes (an integer >= 0)")
    # evidence neither held nor said absent: not in the run (a tool that wrote only some of it)
    for name in EVIDENCE:
        if name not in formats and name not in absent:
            absent[name] = "the run directory does not declare it"
    return Evidence(True, {k: int(v) for k, v in formats.items()}, frozenset(types) if types is not None else None,
                    dict(absent), dict(collected))


def parse_in(test: dict[str, Any], path: Any) -> Evidence:
    """`parse`, a malformed section raised as the run directory's FormatError naming `path` (test.json)."""
    try:
        return parse(test)
    except ValueError as exc:
        raise rf.FormatError(path, None, str(exc)) from None


@dataclass(frozen=True)
class Status:
    """One anomaly kind's coverage in a run: `status` (STATUSES) and, unless checked, why."""

    status: str
    reason: str | None = None
    evidence: str | None = None      # the evidence it lacked


def family_status(ev: Evidence, family: str, missing: dict[str, str]) -> Status:
    """A family's status from what the run declares and what ingest found `missing` (evidence -> the
    problem's message): out of scope first, then missing input, else checked."""
    for need in FAMILY_EVIDENCE.get(family, (HISTORY,)):
        if need in ev.absent:
            return Status(NOT_APPLICABLE, ev.absent[need], need)
    for need in FAMILY_EVIDENCE.get(family, (HISTORY,)):
        if need in missing:
            return Status(MISSING, missing[need], need)
    return Status(CHECKED)


def rule_status(ev: Evidence, needs: frozenset[str], have: frozenset[str] | None) -> Status:
    """A protocol rule's status once its family is checked: `needs` its event types (broker/rules
    RULE_EVENTS); `have` the event types the run's logs hold, when the run declared none (read off the
    lines present). A declared run's event types are what its brokers write, so a rule needing another is
    out of this format; an undeclared run's are what its lines show."""
    if ev.event_types is not None:
        # a declared format holds every field of the event types it declares (broker/eventlog.py)
        types = ev.event_types | {n for n in needs if n.partition(".")[0] in ev.event_types}
    else:
        types = have
    if types is None or not needs:
        return Status(CHECKED)
    if ev.event_types is None and not types:
        return Status(NOT_CHECKED, "the run directory holds no event logs", EVENT_LOGS)
    lacking = sorted(needs - types)
    if not lacking:
        return Status(CHECKED)
    names = " or ".join(f"`{t.partition('.')[0]}` lines with `{t.partition('.')[2]}`" if "." in t else f"`{t}` lines"
                        for t in lacking)
    if ev.event_types is not None:
        why = f"the run's brokers write no {names} (event-log format {ev.formats.get(EVENT_LOGS, 0)})"
    else:
        why = f"the run's event logs, of a format written before formats were declared, hold no {names}"
    return Status(NOT_CHECKED, why, EVENT_LOGS)
