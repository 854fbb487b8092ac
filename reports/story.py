"""Plain-language stories for the checker's examples, told from the run's own files.

A `Timeline` holds what happened around the operations: the nemesis fault windows (nemesis.jsonl, with
their ids, targets and partition shape), and from the node event logs (nodes/<node>/broker.log, read by
`reports.broker_events`) each partition's leader changes and ISR changes (the controller's log when there
is one), truncations, and broker starts and stops. History times are nanoseconds since the run started;
broker events carry wall-clock `ts`, placed on the same axis with test.json's `start_wall_ns` (the harness
takes it just before it opens the history). Without `start_wall_ns` broker events have no common clock
with the history, so stories then use them only where no time is compared (who led an epoch).

`tell(kind, example, timeline)` returns a `Story`: sentences as segments of text, some of them links to
the report's anchors `#fault-<id>` (a fault window) and `#leader-p<partition>-e<epoch>` (a leader change).
A story says only what the files show: a fact a file lacks (a torn or missing log, an example field the
checker did not write) is left out, so the story gets shorter, never wrong. Only the examples shown are
told; each lookup starts with a binary search in lists built once per run.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from rundir import formats as runformat
from rundir import kinds
from reports.broker_events import BrokerEvents, read_broker_events
from reports.jsonfast import dumps_compact

MAX_EVENTS = 3  # leader changes / truncations / faults named in one sentence before "and N more"


# --- the story ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Segment:
    text: str
    href: str | None = None  # "#fault-3", "#leader-p0-e2"; None for plain text


@dataclass
class Story:
    segments: list[Segment] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    @property
    def links(self) -> list[str]:
        return [s.href for s in self.segments if s.href]


def fault_anchor(fault_id: Any) -> str:
    return f"#fault-{fault_id}"


def leader_anchor(partition: int, epoch: Any) -> str:
    return f"#leader-p{partition}-e{epoch}"


# --- the timeline ---------------------------------------------------------------------------------------

@dataclass
class Fault:
    id: Any
    fault: str
    targets: list[str]
    start_s: float
    stop_s: float | None  # None: never stopped in the files
    drops: list[tuple[str, str]] = field(default_factory=list)  # partition faults: (from, to) links cut
    groups: list[list[str]] = field(default_factory=list)       # partition faults: the sides, when logged

    def window(self) -> str:
        if self.stop_s is None:
            return f"from {self.start_s:.2f} s"
        return f"{self.start_s:.2f}–{self.stop_s:.2f} s"

    def active_at(self, t: float) -> bool:
        return self.start_s <= t and (self.stop_s is None or t <= self.stop_s)

    def overlaps(self, a: float, b: float) -> bool:
        return self.start_s <= b and (self.stop_s is None or self.stop_s >= a)

    def involves(self, node: str) -> bool:
        return node in self.targets or any(node in d for d in self.drops)

    def cut_off(self, node: str) -> list[str]:
        """The nodes this partition cut `node` off from (either direction), in first-mention order."""
        out: dict[str, None] = {}
        for a, b in self.drops:
            if a == node:
                out[b] = None
            elif b == node:
                out[a] = None
        return list(out)


@dataclass
class LeaderChange:
    t: float
    leader: str | None
    epoch: Any
    isr: list[str]


@dataclass
class Truncation:
    t: float
    node: str
    from_offset: Any
    to_offset: Any
    why: Any


@dataclass
class PartitionTimeline:
    leaders: list[LeaderChange] = field(default_factory=list)    # by time
    isr: list[tuple[float, list[str]]] = field(default_factory=list)  # by time
    truncations: list[Truncation] = field(default_factory=list)  # by time
    _leader_t: list[float] = field(default_factory=list)
    _isr_t: list[float] = field(default_factory=list)
    _trunc_t: list[float] = field(default_factory=list)
    _by_epoch: dict[Any, LeaderChange] = field(default_factory=dict)  # the first change to each epoch


@dataclass
class Timeline:
    faults: list[Fault] = field(default_factory=list)  # by start time
    partitions: dict[int, PartitionTimeline] = field(default_factory=dict)
    starts: dict[str, list[float]] = field(default_factory=dict)  # node -> times it (re)started
    aligned: bool = True  # broker event times are on the history's axis

    # lookups ------------------------------------------------------------------------------------------
    def part(self, p: Any) -> PartitionTimeline:
        return self.partitions.get(p) if isinstance(p, int) and p in self.partitions else PartitionTimeline()

    def leader_of(self, p: Any, epoch: Any) -> LeaderChange | None:
        """The leader change that began `epoch` (the first one logged for it)."""
        if epoch is None or isinstance(epoch, (dict, list)):
            return None
        return self.part(p)._by_epoch.get(epoch)

    def leader_at(self, p: Any, t: float) -> LeaderChange | None:
        if not self.aligned:
            return None
        pt = self.part(p)
        i = bisect.bisect_right(pt._leader_t, t)
        return pt.leaders[i - 1] if i else None

    def isr_at(self, p: Any, t: float) -> list[str] | None:
        if not self.aligned:
            return None
        pt = self.part(p)
        i = bisect.bisect_right(pt._isr_t, t)
        return pt.isr[i - 1][1] if i else None

    def leaders_between(self, p: Any, a: float, b: float | None) -> list[LeaderChange]:
        """Leader changes with a < t <= b (b None: to the end)."""
        if not self.aligned:
            return []
        pt = self.part(p)
        lo = bisect.bisect_right(pt._leader_t, a)
        hi = len(pt.leaders) if b is None else bisect.bisect_right(pt._leader_t, b)
        return pt.leaders[lo:hi]

    def truncations_of(self, p: Any, offset: Any, a: float, b: float | None = None) -> list[Truncation]:
        """Truncations with a < t <= b that cut the record at `offset` (to <= offset < from)."""
        if not self.aligned or not _is_int(offset):
            return []
        out: list[Truncation] = []
        pt = self.part(p)
        for tr in pt.truncations[bisect.bisect_right(pt._trunc_t, a):]:
            if b is not None and tr.t > b:
                break
            to, frm = tr.to_offset, tr.from_offset
            if to.__class__ is int and to <= offset and (frm.__class__ is not int or offset < frm):
                out.append(tr)
        return out

    def _fault_index(self) -> tuple[list[Fault], list[float], float, list[int]]:
        """Built once: the faults' start times (they are sorted by start), the longest stopped window, and
        the positions of the windows never stopped."""
        if getattr(self, "_findex", (None,))[0] is not self.faults or self._findex[1] != len(self.faults):
            ordered = sorted(self.faults, key=lambda f: f.start_s)
            longest = max((f.stop_s - f.start_s for f in ordered if f.stop_s is not None), default=0.0)
            self._findex = (self.faults, len(self.faults), ordered, [f.start_s for f in ordered], longest,
                            [i for i, f in enumerate(ordered) if f.stop_s is None])
        return self._findex[2], self._findex[3], self._findex[4], self._findex[5]

    def faults_between(self, a: float, b: float) -> list[Fault]:
        """Fault windows overlapping [a, b] (bounds included), in start order."""
        ordered, starts, longest, never_stopped = self._fault_index()
        hi = bisect.bisect_right(starts, b)
        lo = bisect.bisect_left(starts, a - longest)  # a stopped window starting before this ended before a
        early = [ordered[i] for i in never_stopped if i < lo]
        return early + [f for f in ordered[lo:hi] if f.overlaps(a, b)]

    def faults_at(self, t: float) -> list[Fault]:
        return self.faults_between(t, t)

    def restart_before(self, node: str, a: float, b: float) -> float | None:
        """The last time `node` (re)started in (a, b], if its log says so."""
        if not self.aligned:
            return None
        starts = (self.starts.get(node) or [])[1:]  # the first start is the run's, not a restart
        i = bisect.bisect_right(starts, b)
        if i and starts[i - 1] > a:
            return starts[i - 1]
        return None


def faults_from_nemesis(ops: Iterable[dict[str, Any]]) -> list[Fault]:
    """Fault windows: from a `start` completion to the `stop` completion with the same id."""
    open_: dict[Any, Fault] = {}
    out: list[Fault] = []
    for op in ops:
        value = op.get("value") if isinstance(op, dict) else None
        if not isinstance(value, dict) or op.get("type") == "invoke" or not _is_int(op.get("time")):
            continue
        wid, phase, t = value.get("id"), value.get("phase"), op["time"] / 1e9
        if wid is None:
            continue
        if phase == "start":
            targets = value.get("targets") or []
            targets = [str(x) for x in (targets if isinstance(targets, list) else [targets])]
            drops_raw = value.get("drops", value.get("drop")) or []
            drops = [(str(d[0]), str(d[1])) for d in drops_raw if isinstance(d, list) and len(d) == 2]
            groups = [[str(n) for n in g] for g in (value.get("groups") or []) if isinstance(g, list)]
            open_[wid] = Fault(wid, str(value.get("fault") or op.get("f") or "fault"), targets, t, None,
                               drops, groups)
        elif phase == "stop" and wid in open_:
            f = open_.pop(wid)
            f.stop_s = t
            out.append(f)
    out.extend(open_.values())
    out.sort(key=lambda f: (f.start_s, str(f.id)))
    return out


def timeline_from(broker: BrokerEvents, nemesis_ops: Iterable[dict[str, Any]], aligned: bool) -> Timeline:
    """A Timeline from event logs already read (reports.load does that once per report)."""
    tl = Timeline(faults=faults_from_nemesis(nemesis_ops), aligned=aligned)
    for p, pe in broker.partitions.items():
        pt = PartitionTimeline()
        for t, leader, epoch, isr in pe.leaders:
            pt.leaders.append(LeaderChange(t, None if leader is None else str(leader), epoch,
                                           [str(n) for n in isr]))
        # the ISR over time: every ISR change, and the ISR a leader change installs
        isr = [(t, [str(n) for n in members]) for t, members, _v in pe.isr]
        isr += [(lc.t, lc.isr) for lc in pt.leaders if lc.isr]
        pt.isr = sorted(isr, key=lambda x: x[0])
        for t, node, frm, to, why in pe.truncations:
            pt.truncations.append(Truncation(t, str(node), frm, to, why))
        pt.truncations.sort(key=lambda tr: tr.t)
        pt._trunc_t = [tr.t for tr in pt.truncations]
        pt._leader_t = [lc.t for lc in pt.leaders]
        for lc in pt.leaders:
            if not isinstance(lc.epoch, (dict, list)):
                pt._by_epoch.setdefault(lc.epoch, lc)
        pt._isr_t = [t for t, _ in pt.isr]
        tl.partitions[p] = pt
    for t, node, kind in broker.lifecycle:
        if kind == "start":
            tl.starts.setdefault(str(node), []).append(t)
    return tl


def load_timeline(run_dir: Path) -> Timeline:
    """Read a run directory's timeline: test.json, nemesis.jsonl, the node event logs (all optional)."""
    run_dir = Path(run_dir)
    start = None
    if (run_dir / runformat.TEST_JSON).is_file():
        try:
            test = runformat.load_json(run_dir / runformat.TEST_JSON)
        except runformat.FormatError:
            test = None
        if isinstance(test, dict) and _is_int(test.get("start_wall_ns")):
            start = test["start_wall_ns"]
    ops: list[dict[str, Any]] = []
    if (run_dir / runformat.NEMESIS).is_file():
        ops = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.NEMESIS, lenient=True)]
    duration = max((op["time"] for op in ops if _is_int(op.get("time"))), default=0) / 1e9
    broker = read_broker_events(run_dir, start, max(duration, 1.0))
    return timeline_from(broker, ops, aligned=start is not None)


# --- telling ---------------------------------------------------------------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def _h(v: Any) -> Any:
    """A value usable as a dict key: a JSON list or object becomes its compact text."""
    return dumps_compact(v) if isinstance(v, (dict, list)) else v


def _secs_ns(ns: Any) -> float | None:
    return ns / 1e9 if _is_int(ns) else None


def _op_time(s: float) -> str:
    return f"{s:.3f} s"


def _ev_time(s: float) -> str:
    return f"{s:.2f} s"


def _nodes(names: Iterable[Any]) -> str:
    return ", ".join(str(n) for n in names)


def _value(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return dumps_compact(v)
    return "null" if v is None else str(v)


class _Teller:
    """Builds one story: sentences of segments, helpers for the phrases every kind uses."""

    def __init__(self, tl: Timeline, partition: Any):
        self.tl = tl
        self.p = partition
        self.segments: list[Segment] = []
        self.named_faults: set[str] = set()

    def add(self, text: str, href: str | None = None) -> None:
        if text:
            self.segments.append(Segment(text, href))

    def sentence(self, *parts: Any) -> None:
        """Add parts (str or Segment) as one sentence, separated from the previous by a space."""
        if self.segments:
            self.add(" ")
        for part in parts:
            if isinstance(part, Segment):
                self.segments.append(part)
            elif part:
                self.add(part)

    def story(self) -> Story:
        return Story(_merge(self.segments))

    # phrases -----------------------------------------------------------------------------------------
    def fault(self, f: Fault, subject: str | None = None) -> Segment:
        self.named_faults.add(str(f.id))
        return Segment(f"{_describe(f, subject)} ({f.window()})", fault_anchor(f.id))

    def fault_list(self, faults: list[Fault], subject: str | None = None, skip_named: bool = False) -> list:
        if skip_named:
            faults = [f for f in faults if str(f.id) not in self.named_faults]
        out: list[Any] = []
        for n, f in enumerate(faults[:MAX_EVENTS]):
            if n:
                out.append(" and " if n == len(faults[:MAX_EVENTS]) - 1 and len(faults) <= MAX_EVENTS else ", ")
            out.append(self.fault(f, subject))
        if len(faults) > MAX_EVENTS:
            out.append(f" and {len(faults) - MAX_EVENTS} more fault{'s' if len(faults) - MAX_EVENTS > 1 else ''}")
        return out

    def leader_link(self, lc: LeaderChange, text: str) -> Segment:
        return Segment(text, leader_anchor(self.p, lc.epoch)) if _is_int(self.p) else Segment(text)

    def epoch_phrase(self, epoch: Any) -> list:
        """'epoch 0 (leader n1)', the leader linked, or just 'epoch 0'."""
        if epoch is None:
            return []
        lc = self.tl.leader_of(self.p, epoch)
        if lc is None or lc.leader is None:
            return [f"epoch {epoch}"]
        return [f"epoch {epoch} (", self.leader_link(lc, f"leader {lc.leader}"), ")"]

    def led_at(self, t: float) -> list:
        """'n1 led partition 0 in epoch 2' at time t, if the logs say."""
        lc = self.tl.leader_at(self.p, t)
        if lc is None:
            return []
        if lc.leader is None:
            return [self.leader_link(lc, f"partition {self.p} had no leader (epoch {lc.epoch})")]
        return [self.leader_link(lc, f"{lc.leader} led partition {self.p} in epoch {lc.epoch}")]

    def during(self, t: float, subject: str | None) -> list:
        faults = self.tl.faults_at(t)
        return [", during "] + self.fault_list(faults, subject) if faults else []

    def changes(self, changes: list[LeaderChange], wrote: tuple[Any, Any, Any] | None = None) -> list:
        """'n2 became leader in epoch 1 at 6.20 s (during ...); ...' for a few changes.

        wrote: (epoch, value, offset) of the record that now holds the offset, to say who wrote it.
        """
        if not changes:
            return []
        shown = changes[:MAX_EVENTS]
        if wrote is not None:  # always name the epoch whose leader wrote the record now at the offset
            writer = [lc for lc in changes if lc.epoch == wrote[0]]
            if writer and writer[0] not in shown:
                shown = shown[:MAX_EVENTS - 1] + writer[:1]
        out: list[Any] = []
        for n, lc in enumerate(shown):
            if n:
                out.append("; ")
            if lc.leader is None:
                text = f"partition {self.p} was left without a leader (epoch {lc.epoch}) at {_ev_time(lc.t)}"
            else:
                text = f"{lc.leader} became leader in epoch {lc.epoch} at {_ev_time(lc.t)}"
            out.append(self.leader_link(lc, text))
            if wrote is not None and lc.epoch == wrote[0] and lc.leader is not None:
                out.append(f" and wrote {_value(wrote[1])} at offset {wrote[2]}")
            new = [f for f in self.tl.faults_at(lc.t) if str(f.id) not in self.named_faults]
            if new:
                out += [", during "] + self.fault_list(new, lc.leader)
        if len(changes) > len(shown):
            more = len(changes) - len(shown)
            out.append(f" ({more} more leader change{'s' if more > 1 else ''})")
        return out

    def truncations(self, truncs: list[Truncation], after: float) -> list:
        if not truncs:
            return []
        out: list[Any] = []
        for n, tr in enumerate(truncs[:MAX_EVENTS]):
            if n:
                out.append("; ")
            why = f" ({tr.why})" if tr.why is not None else ""
            out.append(f"{tr.node} truncated its log from {tr.from_offset} to {tr.to_offset} at "
                       f"{_ev_time(tr.t)}{why}")
            ended = [f for f in self.tl.faults if f.stop_s is not None and after < f.stop_s <= tr.t
                     and f.involves(tr.node)]
            restarted = self.tl.restart_before(tr.node, after, tr.t)
            if ended:
                f = ended[-1]
                end = {"partition": "the partition healed", "pause": "it resumed"}.get(f.fault, "its restart")
                out += [", after ", Segment(f"{end} at {_ev_time(f.stop_s)}", fault_anchor(f.id))]
            elif restarted is not None:
                out.append(f", after restarting at {_ev_time(restarted)}")
        if len(truncs) > MAX_EVENTS:
            out.append(f" and {len(truncs) - MAX_EVENTS} more truncations")
        return out


def _describe(f: Fault, subject: str | None) -> str:
    if f.fault == "partition":
        peers = f.cut_off(subject) if subject else []
        alone = not f.groups or any(g == [subject] for g in f.groups)  # not a whole side of the partition
        if peers and alone:
            return f"a partition cutting {subject} off from {_nodes(peers)}"
        if f.groups:
            return "a partition " + " | ".join(_nodes(g) for g in f.groups)
        if f.drops:
            pairs: dict[frozenset, tuple[str, str]] = {}
            for a, b in f.drops:
                pairs.setdefault(frozenset((a, b)), (a, b))
            both = {k for k in pairs if sum(1 for a, b in f.drops if frozenset((a, b)) == k) > 1}
            return "a partition dropping " + ", ".join(
                f"{a}↔{b}" if k in both else f"{a}→{b}" for k, (a, b) in pairs.items())
        return f"a partition of {_nodes(f.targets)}" if f.targets else "a partition"
    name = f.fault.replace("-", " ")
    return f"the {name} of {_nodes(f.targets)}" if f.targets else f"a {name}"


def _merge(segments: list[Segment]) -> list[Segment]:
    """Adjacent plain segments joined, so the story is a short list."""
    out: list[Segment] = []
    for s in segments:
        if out and s.href is None and out[-1].href is None:
            out[-1] = Segment(out[-1].text + s.text)
        else:
            out.append(s)
    return out


def _end(parts: list) -> list:
    return parts + ["."]


# --- per kind -------------------------------------------------------------------------------------------

def _final_record(ex: dict[str, Any]) -> tuple[Any, Any] | None:
    """(value, epoch) of the record now at a lost write's offset, when the replicas agree on it."""
    finals = ex.get("final_values_at_offset")
    replicas = ex.get("replicas") if isinstance(ex.get("replicas"), dict) else {}
    records = {(_h(r["at_offset"].get("value")), _h(r["at_offset"].get("epoch"))) for r in replicas.values()
               if isinstance(r, dict) and isinstance(r.get("at_offset"), dict)}
    if isinstance(finals, list) and len(finals) == 1:
        match = {rec for rec in records if rec[0] == _h(finals[0])}
        if len(match) == 1:
            return match.pop()
        return (finals[0], None)
    if len(records) == 1:
        return records.pop()
    return None


def _holders(ex: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Replicas that hold the example's value somewhere (value_at set) and those that hold it nowhere."""
    replicas = ex.get("replicas") if isinstance(ex.get("replicas"), dict) else {}
    has, lacks = [], []
    for node, r in sorted(replicas.items()):
        if isinstance(r, dict) and "value_at" in r:
            (lacks if r["value_at"] is None else has).append(str(node))
    return has, lacks


def _lost_write(tl: Timeline, ex: dict[str, Any]) -> Story:
    p, v, off, epoch = ex.get("partition"), ex.get("value"), ex.get("offset"), ex.get("epoch")
    t = _secs_ns(ex.get("time"))
    s = _Teller(tl, p)
    leader = tl.leader_of(p, epoch)
    subject = leader.leader if leader is not None else None
    first = [f"Value {_value(v)} was acknowledged"]
    if off is not None:
        first.append(f" at offset {off}")
    if epoch is not None:
        first += [" in "] + s.epoch_phrase(epoch)
    if t is not None:
        first.append(f" at {_op_time(t)}")
        first += s.during(t, subject)
        isr = tl.isr_at(p, t)
        if isr:
            first.append(f"; the ISR was {_nodes(isr)}")
    s.sentence(*_end(first))
    if t is None:
        t = -1.0
    rec = _final_record(ex)
    writer = tl.leader_of(p, rec[1]) if rec is not None else None
    until = writer.t if writer is not None and writer.t > t else None  # up to the epoch that wrote the offset
    changes = tl.leaders_between(p, t, until) if t >= 0 else []
    if epoch is not None and _is_int(epoch):
        changes = [lc for lc in changes if not _is_int(lc.epoch) or lc.epoch > epoch]
    last_epoch = rec[1] if rec is not None and _is_int(rec[1]) else None
    if last_epoch is not None:
        changes = [lc for lc in changes if not _is_int(lc.epoch) or lc.epoch <= last_epoch]
    wrote = (rec[1], rec[0], off) if rec is not None and rec[1] is not None else None
    told_write = False
    if changes:
        parts = s.changes(changes, wrote)
        told_write = wrote is not None and any(lc.epoch == wrote[0] and lc.leader for lc in changes)
        s.sentence(*_end(["Then "] + parts))
    truncs = tl.truncations_of(p, off, t) if t >= 0 else []
    if truncs:
        s.sentence(*_end(s.truncations(truncs, t)))
    tail: list[Any] = []
    if rec is not None and not told_write and off is not None:
        tail.append(f"Offset {off} now holds {_value(rec[0])}" + (f" (epoch {rec[1]})" if rec[1] is not None else ""))
    replicas = ex.get("replicas") if isinstance(ex.get("replicas"), dict) else {}
    if off is not None and replicas and all(isinstance(r, dict) and "at_offset" in r and r["at_offset"] is None
                                            for r in replicas.values()):
        tail.append(f"No replica has a record at offset {off} now")
    has, lacks = _holders(ex)
    if has or lacks:
        if not has:
            tail.append(f"{'no' if tail else 'No'} replica holds {_value(v)}")
        elif lacks:
            tail.append(f"{'in' if tail else 'In'} the replica dumps {_nodes(has)} still "
                        f"hold{'s' if len(has) == 1 else ''} {_value(v)} and {_nodes(lacks)} "
                        f"do{'es' if len(lacks) == 1 else ''} not")
        else:
            tail.append(f"{'every' if tail else 'Every'} replica still holds {_value(v)}, but not in the final log")
    if tail:
        s.sentence("; ".join(tail) + ".")
    return s.story()


def _divergence(tl: Timeline, ex: dict[str, Any]) -> Story:
    p, off = ex.get("partition"), ex.get("offset")
    replicas = ex.get("replicas") if isinstance(ex.get("replicas"), dict) else {}
    s = _Teller(tl, p)
    groups: dict[tuple, list[str]] = {}
    for node, r in sorted(replicas.items()):
        if not isinstance(r, dict) or "record" not in r:
            continue  # not the documented {record, hw, leo}: say nothing about this replica
        rec = r["record"]
        key = ("none",) if not isinstance(rec, dict) else (
            _h(rec.get("value")), _h(rec.get("epoch")), rec.get("crc_ok", True) is not False)
        groups.setdefault(key, []).append(str(node))
    parts: list[Any] = [f"At offset {off} of partition {p}" if off is not None else f"At one offset of partition {p}"]
    if not groups:
        parts.append(" the replicas disagree")
    descr = []
    for key, nodes in groups.items():
        verb = "holds" if len(nodes) == 1 else "hold"
        if key == ("none",):
            descr.append(f"{_nodes(nodes)} {verb} no record")
        else:
            crc = "" if key[2] is not False else ", bad CRC"
            descr.append(f"{_nodes(nodes)} {verb} {_value(key[0])} (epoch {key[1]}{crc})")
    if descr:
        parts.append(", " + " while ".join([", ".join(descr[:-1]), descr[-1]] if len(descr) > 1 else descr))
    committed = ex.get("committed")
    if committed is True:
        parts.append(", below the HW of replicas that disagree")
    elif committed is False:
        parts.append(", above some replica's HW")
    s.sentence(*_end(parts))
    epochs = sorted({k[1] for k in groups if k != ("none",) and _is_int(k[1])})
    told = []
    for e in epochs:
        lc = tl.leader_of(p, e)
        if lc is None or lc.leader is None:
            continue
        part: list[Any] = [s.leader_link(lc, f"{lc.leader} became leader in epoch {e}"
                                             + (f" at {_ev_time(lc.t)}" if tl.aligned else ""))]
        if tl.aligned:
            new = [f for f in tl.faults_at(lc.t) if str(f.id) not in s.named_faults]
            if new:
                part += [", during "] + s.fault_list(new, lc.leader)
        told.append(part)
    if told:
        joined: list[Any] = []
        for n, part in enumerate(told):
            joined += (["; "] if n else []) + part
        s.sentence(*_end(joined))
    truncs = tl.truncations_of(p, off, -1.0)
    if truncs:
        s.sentence(*_end(s.truncations(truncs, -1.0)))
    return s.story()


def _inconsistent_offset(tl: Timeline, ex: dict[str, Any]) -> Story:
    p, off = ex.get("partition"), ex.get("offset")
    s = _Teller(tl, p)
    obs = [o for o in _list(ex.get("observations")) if isinstance(o, dict)]
    first_seen: dict[Any, dict[str, Any]] = {}
    for o in obs:
        first_seen.setdefault(_h(o.get("value")), o)
    verbs = {"send": "acknowledged", "poll": "read by a poll", "final-read": "read by the final read"}
    descr = []
    for value, o in first_seen.items():
        t = _secs_ns(o.get("time"))
        descr.append(f"{_value(value)} {verbs.get(str(o.get('source')), 'seen')}"
                     + (f" at {_op_time(t)}" if t is not None else ""))
    values = ex.get("values") if isinstance(ex.get("values"), list) else list(first_seen)
    head = (f"Offset {off} of partition {p} showed {len(values)} values" if off is not None
            else "One offset showed several values")
    s.sentence(head + (": " + "; ".join(descr) if descr else "") + ".")
    # between the first sightings of the values: where one value gave way to another
    times = sorted(t for t in (_secs_ns(o.get("time")) for o in first_seen.values()) if t is not None)
    if len(times) >= 2:
        a, b = times[0], times[-1]
        _meanwhile(tl, s, p, a, b)
        truncs = tl.truncations_of(p, off, a, b)
        if truncs:
            s.sentence(*_end(s.truncations(truncs, a)))
    replicas = ex.get("replicas") if isinstance(ex.get("replicas"), dict) else {}
    recs = {(_h(r.get("value")), _h(r.get("epoch"))) for r in replicas.values() if isinstance(r, dict)}
    if replicas and len(recs) == 1 and all(isinstance(r, dict) for r in replicas.values()):
        value, epoch = recs.pop()
        s.sentence(f"Every replica now holds {_value(value)} there"
                   + (f" (epoch {epoch})." if epoch is not None else "."))
    return s.story()


def _dirty_read(tl: Timeline, ex: dict[str, Any]) -> Story:
    p, v, off = ex.get("partition"), ex.get("value"), ex.get("offset")
    t = _secs_ns(ex.get("time"))
    s = _Teller(tl, p)
    lc = tl.leader_at(p, t) if t is not None else None
    first: list[Any] = [f"A poll read {_value(v)}" + (f" at offset {off}" if off is not None else "")]
    if t is not None:
        first.append(f" at {_op_time(t)}")
        led = s.led_at(t)
        if led:
            first += [", when "] + led
        first += s.during(t, lc.leader if lc else None)
    s.sentence(*_end(first))
    send = ex.get("send") if isinstance(ex.get("send"), dict) else None
    if send is not None:
        outcome = {"ok": "was acknowledged", "fail": "failed", "info": "ended with an unknown outcome (info)"}
        if send.get("type") in outcome:
            s.sentence(f"Its send {outcome[send['type']]}"
                       + (f" at offset {send['offset']}" if send.get("offset") is not None else "") + ".")
    elif "send" in ex:
        s.sentence(f"No send of {_value(v)} is in the history.")
    if t is not None:
        changes = tl.leaders_between(p, t, None)[:MAX_EVENTS]
        if changes:
            s.sentence(*_end(["Later "] + s.changes(changes)))
        truncs = tl.truncations_of(p, off, t)
        if truncs:
            s.sentence(*_end(s.truncations(truncs, t)))
    has, lacks = _holders(ex)
    if lacks and not has:
        s.sentence(f"No replica holds {_value(v)} now.")
    elif has:
        s.sentence(f"{_nodes(has)} still hold{'s' if len(has) == 1 else ''} {_value(v)}, outside the final log.")
    return s.story()


def _meanwhile(tl: Timeline, s: _Teller, p: Any, a: float, b: float) -> None:
    """'In between ran <faults>, and <leader changes>.' for the time between two operations."""
    faults = tl.faults_between(a, b)
    changes = tl.leaders_between(p, a, b)
    if not faults and not changes:
        return
    parts: list[Any] = ["In between "]
    if faults:
        parts += ["ran "] + s.fault_list(faults)
    if changes:
        parts += ([", and "] if faults else []) + s.changes(changes)
    s.sentence(*_end(parts))


def _between_story(tl: Timeline, s: _Teller, p: Any, a: float | None, b: float | None, offset: Any) -> None:
    """Faults, leader changes and truncations of the offset between two operations."""
    if a is None or b is None or b < a:
        return
    _meanwhile(tl, s, p, a, b)
    truncs = tl.truncations_of(p, offset, a, b) if offset is not None else []
    if truncs:
        s.sentence(*_end(s.truncations(truncs, a)))


def _op_phrase(s: _Teller, op: dict[str, Any], what: str) -> list:
    parts: list[Any] = [what]
    if op.get("offset") is not None:
        parts.append(f" at offset {op['offset']}")
    if op.get("epoch") is not None:
        parts += [" in "] + s.epoch_phrase(op["epoch"])
    t = _secs_ns(op.get("time"))
    if t is not None:
        parts.append(f" at {_op_time(t)}")
    return parts


def _nonmonotonic_send(tl: Timeline, ex: dict[str, Any]) -> Story:
    p = ex.get("partition")
    s = _Teller(tl, p)
    earlier = ex.get("earlier") if isinstance(ex.get("earlier"), dict) else {}
    later = ex.get("later") if isinstance(ex.get("later"), dict) else {}
    who = f"process {ex['process']}" if ex.get("process") is not None else "one producer"
    lower = dict(later)
    lower.pop("offset", None)
    s.sentence(*_end([f"On partition {p}, {who} had {_value(earlier.get('value'))} acknowledged"]
                     + _op_phrase(s, earlier, "")[1:]
                     + [f", then {_value(later.get('value'))}"]
                     + ([f" at the lower offset {later['offset']}"] if later.get("offset") is not None else [])
                     + _op_phrase(s, lower, "")[1:]))
    _between_story(tl, s, p, _secs_ns(earlier.get("time")), _secs_ns(later.get("time")), later.get("offset"))
    return s.story()


def _realtime_order(tl: Timeline, ex: dict[str, Any]) -> Story:
    """A (`previous`) acknowledged, then B invoked and acknowledged at an offset at or below A's; what ran
    between the two acknowledgements."""
    p = ex.get("partition")
    s = _Teller(tl, p)
    prev = ex.get("previous") if isinstance(ex.get("previous"), dict) else {}
    first: list[Any] = [f"On partition {p}, "]
    if prev:
        who = f"process {prev['process']}" if prev.get("process") is not None else "a producer"
        first += [f"{who} had {_value(prev.get('value'))} acknowledged"] + _op_phrase(s, prev, "")[1:] + ["; "]
    who = f"process {ex['process']}" if ex.get("process") is not None else "a producer"
    first.append(f"{who}{' then' if prev else ''} sent {_value(ex.get('value'))}")
    invoked = _secs_ns(ex.get("invoke_time"))
    if invoked is not None:
        first.append(f" (invoked at {_op_time(invoked)})")
    first.append(" and had it acknowledged")
    off, prev_off = ex.get("offset"), prev.get("offset")
    if off is not None:
        how = ""
        if _is_int(off) and _is_int(prev_off) and off <= prev_off:
            how = "the same " if off == prev_off else "the lower "
        first.append(f" at {how}offset {off}")
    later = {k: v for k, v in ex.items() if k in ("epoch", "time")}
    s.sentence(*_end(first + _op_phrase(s, later, "")[1:]))
    _between_story(tl, s, p, _secs_ns(prev.get("time")), _secs_ns(ex.get("time")), off)
    return s.story()


def _key_reorder(tl: Timeline, ex: dict[str, Any]) -> Story:
    """A (`previous`) of one key acknowledged, then B of the same key sent and found below A in the final
    log; what ran between A's acknowledgement and B's completion."""
    p, key = ex.get("partition"), ex.get("key")
    s = _Teller(tl, p)
    prev = ex.get("previous") if isinstance(ex.get("previous"), dict) else {}
    first: list[Any] = [f"On partition {p}, key {_value(key)}'s value {_value(prev.get('value'))} was acknowledged"]
    first += _op_phrase(s, {"time": prev.get("time")}, "")[1:]
    first.append(f"; then its value {_value(ex.get('value'))} was sent")
    outcome = ex.get("type")
    if outcome is not None:
        first.append(f" (outcome {outcome})")
    first.append(f", yet the final log holds it at offset {_value(ex.get('offset'))}, below the first one's "
                 f"offset {_value(prev.get('offset'))}")
    s.sentence(*_end(first))
    _between_story(tl, s, p, _secs_ns(prev.get("time")), _secs_ns(ex.get("time")), ex.get("offset"))
    return s.story()


# --- consumer groups (rundir/kinds.py GROUP_KINDS): the stories name the group, its members and their
# generations, and what the data partition's faults and leaders did between the two operations compared


def _group_of(ex: dict[str, Any]) -> str:
    return f"group {_value(ex.get('group'))}" if ex.get("group") is not None else "the group"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _member(m: Any, generation: Any = None) -> str:
    who = f"member {_value(m)}" if m not in (None, "") else "a member"
    return who + (f" (generation {generation})" if _is_int(generation) and generation >= 0 else "")


def _committed_offset(o: Any) -> str:
    return "none" if o == -1 else f"offset {_value(o)}"


def _committed_regression(tl: Timeline, ex: dict[str, Any]) -> Story:
    """The acknowledged commit (`previous`), then an observation of the committed offset below it."""
    p = ex.get("partition")
    s = _Teller(tl, p)
    prev = ex.get("previous") if isinstance(ex.get("previous"), dict) else {}
    first: list[Any] = [f"On partition {p}, {_group_of(ex)}'s commit of offset {_value(prev.get('offset'))}"]
    if prev.get("member") not in (None, ""):
        first.append(f" by {_member(prev.get('member'), prev.get('generation'))}")
    first.append(" was acknowledged")
    t0 = _secs_ns(prev.get("time"))
    if t0 is not None:
        first.append(f" at {_op_time(t0)}")
    how = ("the group's committed offsets, read" if ex.get("f") == runformat.COMMITTED_F
           else "the committed offset handed to a member with its assignment, fetched")
    first.append(f"; {how} after that")
    t1 = _secs_ns(ex.get("time"))
    if t1 is not None:
        first.append(f" (answered at {_op_time(t1)})")
    first.append(f", said {_committed_offset(ex.get('offset'))}")
    s.sentence(*_end(first))
    _between_story(tl, s, p, t0, t1, None)
    return s.story()


def _group_resume_mismatch(tl: Timeline, ex: dict[str, Any]) -> Story:
    """The assignment, the commit it should have resumed from, and the member's first records."""
    p = ex.get("partition")
    s = _Teller(tl, p)
    assign = ex.get("assign") if isinstance(ex.get("assign"), dict) else {}
    t0, t1 = _secs_ns(assign.get("time")), _secs_ns(ex.get("time"))
    first: list[Any] = [_cap(f"{_member(ex.get('member'), ex.get('generation'))} of {_group_of(ex)}")]
    first.append(f" was assigned partition {p}")
    if t0 is not None:
        first.append(f" at {_op_time(t0)}")
    first.append(f"; the group's highest acknowledged commit was offset {_value(ex.get('expected'))}")
    if assign.get("committed") is not None:
        first.append(f", and the assignment came with committed {_committed_offset(assign.get('committed'))}")
    s.sentence(*_end(first))
    second: list[Any] = [f"Its first records came from offset {_value(ex.get('offset'))}"]
    if t1 is not None:
        second.append(f" at {_op_time(t1)}")
    got, want = ex.get("offset"), ex.get("expected")
    if _is_int(got) and _is_int(want):
        n = abs(got - want)
        second.append(f": {n} record{'s' if n != 1 else ''} " + ("skipped" if got > want else "read again"))
    s.sentence(*_end(second))
    _between_story(tl, s, p, t0, t1, None)
    return s.story()


def _lost_by_group(tl: Timeline, ex: dict[str, Any]) -> Story:
    p = ex.get("partition")
    s = _Teller(tl, p)
    parts: list[Any] = [f"{_cap(_group_of(ex))}'s final committed offset for partition {p} is "
                        f"{_value(ex.get('committed'))}"]
    t = _secs_ns(ex.get("time"))
    if t is not None:
        parts.append(f" (read at {_op_time(t)})")
    parts.append(f", yet the final log's record at offset {_value(ex.get('offset'))} (value "
                 f"{_value(ex.get('value'))}), below it, was never returned to any member of the group")
    s.sentence(*_end(parts))
    return s.story()


def _commit_beyond_log(tl: Timeline, ex: dict[str, Any]) -> Story:
    p = ex.get("partition")
    s = _Teller(tl, p)
    t = _secs_ns(ex.get("time"))
    if ex.get("f") == runformat.COMMITTED_F:
        parts: list[Any] = [f"{_cap(_group_of(ex))}'s final committed offset for partition {p}"]
        if t is not None:
            parts.append(f" (read at {_op_time(t)})")
        parts.append(f" is {_value(ex.get('offset'))}")
    else:
        parts = [f"On partition {p}, {_group_of(ex)}'s commit of offset {_value(ex.get('offset'))}"]
        if ex.get("member") not in (None, ""):
            parts.append(f" by {_member(ex.get('member'), ex.get('generation'))}")
        parts.append(" was acknowledged")
        if t is not None:
            parts.append(f" at {_op_time(t)}")
    parts.append(f", above the partition's final high watermark {_value(ex.get('hw'))}: the group claims records "
                 f"the log does not hold")
    s.sentence(*_end(parts))
    led = s.led_at(t) if t is not None else []
    if led:
        lc = tl.leader_at(p, t)
        s.sentence(*_end(["At that time "] + led + s.during(t, lc.leader if lc else None)))
    return s.story()


def _assignment_overlap(tl: Timeline, ex: dict[str, Any]) -> Story:
    p = ex.get("partition")
    s = _Teller(tl, p)
    first = ex.get("first") if isinstance(ex.get("first"), dict) else {}
    t0, t1 = _secs_ns(first.get("time")), _secs_ns(ex.get("time"))
    parts: list[Any] = [f"In generation {_value(ex.get('generation'))} of {_group_of(ex)}, "
                        f"{_member(first.get('member'))} was assigned partition {p}"]
    if t0 is not None:
        parts.append(f" at {_op_time(t0)}")
    parts.append(f", and {_member(ex.get('member'))} was assigned it too")
    if t1 is not None:
        parts.append(f" at {_op_time(t1)}")
    members = [m for m in _list(ex.get("members")) if m is not None]
    if len(members) > 2:
        parts.append(f" (members assigned it in that generation: {', '.join(_value(m) for m in members)})")
    s.sentence(*_end(parts))
    _between_story(tl, s, p, t0, t1, None)
    return s.story()


def _group_reread(tl: Timeline, ex: dict[str, Any]) -> Story:
    p = ex.get("partition")
    s = _Teller(tl, p)
    first = ex.get("first") if isinstance(ex.get("first"), dict) else {}
    t0, t1 = _secs_ns(first.get("time")), _secs_ns(ex.get("time"))
    parts: list[Any] = [f"The members of {_group_of(ex)} read value {_value(ex.get('value'))} (offset "
                        f"{_value(ex.get('offset'))} of partition {p}) {_value(ex.get('reads'))} times"]
    if t0 is not None:
        parts.append(f", first at {_op_time(t0)}" + (f" by process {first['process']}" if first.get("process") else ""))
    if t1 is not None:
        parts.append(f", last at {_op_time(t1)}" + (f" by process {ex['process']}" if ex.get("process") else ""))
    parts.append(" (at-least-once: counted, allowed)")
    s.sentence(*_end(parts))
    _between_story(tl, s, p, t0, t1, None)
    return s.story()


def _poll_order(tl: Timeline, ex: dict[str, Any], kind: str) -> Story:
    p = ex.get("partition")
    s = _Teller(tl, p)
    prev = ex.get("previous") if isinstance(ex.get("previous"), dict) else {}
    who = f"Process {ex['process']}" if ex.get("process") is not None else "A consumer"
    t = _secs_ns(ex.get("time"))
    parts: list[Any] = [f"{who} read offset {ex.get('offset')} (value {_value(ex.get('value'))})"]
    if t is not None:
        parts.append(f" at {_op_time(t)}")
    pt = _secs_ns(prev.get("time"))
    if prev.get("kind") == "assign":
        parts.append(f" after being assigned partition {p} at offset {prev.get('offset')}")
    elif prev:
        parts.append(f" right after offset {prev.get('offset')} (value {_value(prev.get('value'))})")
    if pt is not None and prev:
        parts.append(f", read at {_op_time(pt)}")
    skipped = [x for x in _list(ex.get("skipped")) if isinstance(x, dict)]
    if kind == kinds.POLL_SKIP.name and skipped:
        shown = ", ".join(f"{x.get('offset')}" + (f" ({x['value']})" if x.get("value") is not None else "")
                          for x in skipped[:5])
        parts.append(f"; skipped offsets {shown}" + (" …" if len(skipped) > 5 else ""))
    s.sentence(*_end(parts))
    _between_story(tl, s, p, pt, t, ex.get("offset"))
    return s.story()


def _hw_regression(tl: Timeline, ex: dict[str, Any]) -> Story:
    p = ex.get("partition")
    s = _Teller(tl, p)
    prev = ex.get("previous") if isinstance(ex.get("previous"), dict) else {}
    what = "A final read" if ex.get("f") == "final-read" else "A poll"
    who = f" by process {ex['process']}" if ex.get("process") is not None else ""
    t, pt = _secs_ns(ex.get("time")), _secs_ns(prev.get("time"))
    parts: list[Any] = [f"{what}{who}"]
    if t is not None:
        parts.append(f" at {_op_time(t)}")
    parts.append(f" saw HW {ex.get('hw')}")
    if ex.get("epoch") is not None:
        parts += [" in "] + s.epoch_phrase(ex.get("epoch"))
    if prev:
        pwho = f" by process {prev['process']}" if prev.get("process") is not None else ""
        parts.append(f", below HW {prev.get('hw')} seen{pwho}")
        if pt is not None:
            parts.append(f" at {_op_time(pt)}")
        if prev.get("epoch") is not None:
            parts += [" in "] + s.epoch_phrase(prev.get("epoch"))
    s.sentence(*_end(parts))
    _between_story(tl, s, p, pt, t, None)
    return s.story()


def _generic(tl: Timeline, ex: dict[str, Any], kind: str) -> Story:
    p = ex.get("partition")
    s = _Teller(tl, p)
    t = _secs_ns(ex.get("time"))
    about = []
    if ex.get("value") is not None:
        about.append(f"value {_value(ex['value'])}")
    if ex.get("offset") is not None:
        about.append(f"offset {ex['offset']}")
    head = f"The {kind} concerns " + (", ".join(about) + " of " if about else "") + f"partition {p}"
    parts: list[Any] = [head]
    if t is not None:
        parts.append(f"; its operation completed at {_op_time(t)}")
        led = s.led_at(t)
        if led:
            parts += [", when "] + led
        lc = tl.leader_at(p, t)
        parts += s.during(t, lc.leader if lc else None)
    s.sentence(*_end(parts))
    return s.story()


MAX_EVIDENCE = 4   # evidence rows named in a protocol finding's story
# fields an evidence row's list leaves out: said otherwise (node, event, time) or the same for every row
_EVIDENCE_SKIP = ("ts", "node", "event", "time", "partition", "topic")
# the order its fields are named in (whatever the key order of results.json), then any others by name
_EVIDENCE_ORDER = ("role", "leader", "epoch", "base", "last", "acks", "old", "new", "leo", "from", "to", "why",
                   "offset", "hw", "checkpoint_hw", "isr", "elr", "version", "min_isr")
NOT_PROMISED = "(not promised by this configuration: reported, not failing)"


def _evidence_row(s: _Teller, row: dict[str, Any]) -> list:
    """'n1 ack at 1.230 s (base=0, last=2, ...)': one log line (or a consumer's read) of the evidence."""
    event = str(row.get("event") or "event")
    t = _secs_ns(row.get("time"))
    keys = sorted((str(k) for k in row if k not in _EVIDENCE_SKIP),
                  key=lambda k: (_EVIDENCE_ORDER.index(k) if k in _EVIDENCE_ORDER else len(_EVIDENCE_ORDER), k))
    fields = ", ".join(f"{k}={_value(row[k])}" for k in keys)
    text = (f"{row.get('node', '?')} {event}" + (f" at {_op_time(t)}" if t is not None else "")
            + (f" ({fields})" if fields else ""))
    epoch = row.get("epoch")
    if event == "leader-change" and _is_int(epoch) and _is_int(s.p):
        return [Segment(text, leader_anchor(s.p, epoch))]
    return [text]


def _protocol(tl: Timeline, ex: dict[str, Any], kind: str) -> Story:
    """A broken protocol rule (broker/rules, from the node event logs): when and what (the rule's own
    detail, which names who), the leader and the faults at that time, the evidence rows with their times,
    and whether this configuration promised the rule."""
    p = ex.get("partition")
    s = _Teller(tl, p)
    t = _secs_ns(ex.get("time"))
    node, detail = ex.get("node"), ex.get("detail")
    what = str(detail) if isinstance(detail, str) and detail else f"{node or 'a node'} broke the rule {kind}"
    if isinstance(node, str) and node != "client" and node not in what:
        what += f" ({node}'s log)"
    s.sentence((f"At {_op_time(t)} on partition {p}, " if t is not None else f"On partition {p}, ") + what + ".")
    epoch = ex.get("epoch")
    lc = tl.leader_at(p, t) if t is not None else None
    if t is not None:
        led, faults = s.led_at(t), tl.faults_at(t)
        if led:
            s.sentence(*_end(["At that time "] + led + s.during(t, lc.leader if lc else None)))
        elif faults:
            s.sentence(*_end(["It happened during "] + s.fault_list(faults)))
    if _is_int(epoch) and (lc is None or lc.epoch != epoch):
        phrase = s.epoch_phrase(epoch)
        if len(phrase) > 1:     # only when the logs say who led it
            s.sentence(*_end(["The rule was broken in "] + phrase))
    rows = [r for r in _list(ex.get("evidence")) if isinstance(r, dict)]
    if rows:
        parts: list[Any] = ["Evidence: "]
        for n, row in enumerate(rows[:MAX_EVIDENCE]):
            parts += (["; "] if n else []) + _evidence_row(s, row)
        if len(rows) > MAX_EVIDENCE:
            parts.append(f"; and {len(rows) - MAX_EVIDENCE} more")
        s.sentence(*_end(parts))
    if ex.get("promised") is False:
        s.sentence(NOT_PROMISED)
    return s.story()


def page_teller(run: Any) -> Callable[[str, Any], Story | None]:
    """For the report: stories from a loaded reports.load.Run (its broker events and nemesis operations,
    no file read again), whose links are kept only where the page has the anchor; others become text."""
    start = run.test.get("start_wall_ns") if isinstance(run.test, dict) else None
    tl = timeline_from(run.broker, run.history.nemesis_ops, aligned=_is_int(start))
    anchors = {fault_anchor(w.id) for w in run.history.faults}
    anchors |= {"#" + str(row["anchor"]) for row in run.broker.table if row.get("anchor")}

    def teller(kind: str, example: Any) -> Story | None:
        story = tell(kind, example, tl)
        if story is None:
            return None
        return Story(_merge([s if s.href is None or s.href in anchors else Segment(s.text) for s in story.segments]))
    return teller


TELLERS = {
    kinds.LOST_WRITE.name: _lost_write,
    kinds.DIVERGENCE.name: _divergence,
    kinds.INCONSISTENT_OFFSET.name: _inconsistent_offset,
    kinds.DIRTY_READ.name: _dirty_read,
    kinds.ABORTED_READ.name: _dirty_read,
    kinds.NONMONOTONIC_SEND.name: _nonmonotonic_send,
    kinds.HW_REGRESSION.name: _hw_regression,
    kinds.HW_REGRESSION_CROSS_EPOCH.name: _hw_regression,
    kinds.REALTIME_ORDER.name: _realtime_order,
    kinds.KEY_REORDER.name: _key_reorder,
    kinds.COMMITTED_REGRESSION.name: _committed_regression,
    kinds.GROUP_RESUME_MISMATCH.name: _group_resume_mismatch,
    kinds.LOST_BY_GROUP.name: _lost_by_group,
    kinds.COMMIT_BEYOND_LOG.name: _commit_beyond_log,
    kinds.ASSIGNMENT_OVERLAP.name: _assignment_overlap,
    kinds.GROUP_REREAD.name: _group_reread,
}


def tell(kind: str, example: Any, timeline: Timeline) -> Story | None:
    """The story of one checker example, or None when the example is not an object with a partition."""
    if not isinstance(example, dict) or "partition" not in example:
        return None
    if kind in (kinds.POLL_SKIP.name, kinds.NONMONOTONIC_POLL.name):
        return _poll_order(timeline, example, kind)
    if kind in kinds.PROTOCOL_NAMES:
        return _protocol(timeline, example, kind)
    fn = TELLERS.get(kind)
    return fn(timeline, example) if fn is not None else _generic(timeline, example, kind)
