"""The single-process reference checker: the rules of docs/formats.md written as plainly as possible.

For tests (cross-checked against the Spark checker) and benchmarks only. Its output lists every kind
of the registry (rundir/kinds.py), as the Spark checker's does. It reads the same columnar
tables as the Spark checker and holds everything in Python dictionaries, so it needs memory in
proportion to the history (roughly 1 KB per send); it is not meant for histories larger than memory.

`analyze` reads the run once into a `Run` (`load`), then runs each anomaly family of FAMILIES on it: a
family is one function `(run, out)` that adds its kinds' findings to a `Findings`; the protocol rules
run last, on the event logs (checkers/protocol_trace.py). A new family is one more function here.
"""
from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow.dataset as ds

from rundir import kinds
from checkers import explain, loss_shape, protocol_trace, totals

K = kinds
K_GROUP_FS = ("group-assign", "group-revoke", "commit", "committed")   # rundir/formats.py GROUP_FS
OPS_COLUMNS = ["index", "time", "process", "type", "f", "partition", "value", "offset", "epoch", "hw", "error",
               "invoke_index", "invoke_time", "fault", "phase", "fault_id", "key"]
REPLICA_COLUMNS = ["node", "partition", "offset", "epoch", "value", "crc_ok"]

def _batches(col_dir: Path, table: str, columns: list[str]) -> Iterator[dict[str, list]]:
    d = ds.dataset(str(Path(col_dir) / table), format="parquet")
    for b in d.to_batches(columns=columns, batch_size=262_144):
        yield {c: b.column(c).to_pylist() for c in columns}


def _rows(col_dir: Path, table: str, columns: list[str]) -> Iterator[tuple]:
    for b in _batches(col_dir, table, columns):
        yield from zip(*(b[c] for c in columns))


def _top(items: list[tuple[Any, dict]], n: int) -> list[dict]:
    """The first n examples, taking every partition's first before any partition's second (the keys
    start with the partition): examples from all the partitions a kind touched (checkers/anomalies/engine.py
    orders the Spark checker's the same way)."""
    items.sort(key=lambda kv: kv[0])
    rank: dict[Any, int] = defaultdict(int)
    ranked = []
    for key, e in items:
        rank[key[0]] += 1
        ranked.append((rank[key[0]], key, e))
    ranked.sort(key=lambda t: (t[0], t[1]))
    return [e for _, _, e in ranked[:n]]


def _nested_sets() -> defaultdict:
    return defaultdict(set)


@dataclass
class Run:
    """A run's history, replica metadata and final logs, as the reference families read them."""

    col_dir: Path
    final_state: dict[int, dict] = field(default_factory=dict)
    meta: dict[tuple[str, int], dict] = field(default_factory=dict)            # (node, p) -> leo, hw
    nodes_by_part: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    sends: dict[tuple[int, Any], dict] = field(default_factory=dict)           # (p, value) -> send completion
    keyed_sends: list[dict] = field(default_factory=list)                     # every send completion with a key
    ok_sends_by_proc: dict[tuple[str, int], list] = field(default_factory=lambda: defaultdict(list))
    acks_by_part: dict[int, list[dict]] = field(default_factory=lambda: defaultdict(list))  # every ok send
    observations: list[dict] = field(default_factory=list)                    # poll / final-read ok: hw seen
    assigns: dict[tuple[str, int], list] = field(default_factory=lambda: defaultdict(list))
    windows: dict[int, list] = field(default_factory=dict)                    # fault id -> [start, stop] time
    op_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    completions: list[tuple[str, str, int]] = field(default_factory=list)     # (f, type, time): send/poll
    partitions: set[int] = field(default_factory=set)
    end_time: int | None = None                                               # the history's last time
    final_reads: dict[int, dict[int, set]] = field(default_factory=lambda: defaultdict(_nested_sets))
    poll_reads: dict[tuple[str, int], list] = field(default_factory=lambda: defaultdict(list))
    at_offset: dict[tuple[int, int], list] = field(default_factory=lambda: defaultdict(list))  # observations
    compared_src: dict[str, set] = field(default_factory=dict)   # source -> partitions whose epochs compare
    final_log: dict[int, dict[int, set]] = field(default_factory=dict)        # p -> offset -> values (< hw)
    final_values: dict[int, dict[Any, set]] = field(default_factory=dict)     # p -> value -> offsets
    reason: dict[int, str | None] = field(default_factory=dict)               # p -> why no final log (None)


class Findings:
    """What the families found: per kind its count, its (sort key, example) pairs and extra fields, and
    each finding's (kind, partition, time, weight) for the totals (checkers/totals.py)."""

    def __init__(self) -> None:
        self.found: dict[str, list] = defaultdict(list)
        self.counts: dict[str, int] = defaultdict(int)
        self.extra: dict[str, dict] = defaultdict(dict)
        self.timed: list[tuple[str, int, int | None, int]] = []
        self.lost_by_part: dict[int, int] = defaultdict(int)

    def add(self, kind: str, key: tuple, example: dict, n: int = 1, time: int | None = None) -> None:
        self.counts[kind] += n
        self.found[kind].append((key, example))
        self.timed.append((kind, example["partition"], time, n))


# ---- reading the run ----------------------------------------------------------------------------

def load(col_dir: Path | str) -> Run:
    """The run's tables read once: final state and replica metadata, operations, reads, final logs."""
    run = Run(Path(col_dir))
    _final_tables(run)
    _operations(run)
    _reads(run)
    _final_logs(run)
    return run


def _final_tables(run: Run) -> None:
    for p, rec, hw, leader, epoch in _rows(run.col_dir, "final_state",
                                           ["partition", "recovered", "hw", "leader", "epoch"]):
        run.final_state[p] = {"recovered": rec, "hw": hw, "leader": leader, "epoch": epoch}
    for node, p, leo, hw in _rows(run.col_dir, "replica_meta", ["node", "partition", "leo", "hw"]):
        run.meta[(node, p)] = {"leo": leo, "hw": hw}
        run.nodes_by_part[p].append(node)
    for p in run.nodes_by_part:
        run.nodes_by_part[p].sort()
    run.partitions = set(run.final_state) | set(run.nodes_by_part)


def _window(run: Run, typ: str, phase: str, fid: Any, time: int) -> None:
    if typ != "invoke" and fid is not None:
        w = run.windows.setdefault(fid, [None, None])
        if phase == "start" and w[0] is None:
            w[0] = time
        elif phase == "stop":
            w[1] = time


def _operations(run: Run) -> None:
    for (index, time, process, typ, f, p, value, offset, epoch, hw, error, inv_i, inv_t,
         _fault, phase, fid, key) in _rows(run.col_dir, "ops", OPS_COLUMNS):
        if time is not None and (run.end_time is None or time > run.end_time):
            run.end_time = time
        if process == "nemesis":
            _window(run, typ, phase, fid, time)
            continue
        if process == "harness" or f not in ("send", "poll", "assign", "final-read", *K_GROUP_FS):
            continue
        if f in K_GROUP_FS:             # counted; they name no partition (group_parts holds theirs)
            if typ != "invoke":
                run.op_counts.setdefault(f, {"ok": 0, "fail": 0, "info": 0})[typ] += 1
            continue
        run.partitions.add(p)
        if typ == "invoke":
            continue
        run.op_counts.setdefault(f, {"ok": 0, "fail": 0, "info": 0})[typ] += 1
        if f in ("send", "poll"):
            run.completions.append((f, typ, time))
        if f == "send":
            run.sends[(p, value)] = {"type": typ, "index": index, "time": time, "process": process,
                                     "offset": offset, "epoch": epoch, "invoke_index": inv_i, "error": error}
            if key is not None:     # every one, as the Spark family reads them (--lenient may keep two)
                run.keyed_sends.append({"partition": p, "key": key, "value": value, "type": typ, "index": index,
                                        "time": time, "invoke_index": inv_i})
            if typ == "ok":
                run.ok_sends_by_proc[(process, p)].append((index, time, value, offset, epoch))
                run.acks_by_part[p].append({"offset": offset, "value": value, "epoch": epoch, "index": index,
                                            "time": time, "process": process, "invoke_index": inv_i,
                                            "invoke_time": inv_t})
        elif f in ("poll", "final-read") and typ == "ok":
            run.observations.append({"partition": p, "epoch": epoch, "hw": hw, "index": index, "time": time,
                                     "process": process, "invoke_index": inv_i, "f": f})
        elif f == "assign" and typ == "ok":
            run.assigns[(process, p)].append((index, offset, time))


def _reads(run: Run) -> None:
    # per partition: observations without a leader epoch (-1) among ok sends, polls, final reads in [0, hw)
    unknown_epochs: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    fs = run.final_state
    for index, process, f, p, offset, value, time, pos, epoch in _rows(
            run.col_dir, "reads", ["index", "process", "f", "partition", "offset", "value", "time", "pos", "epoch"]):
        run.partitions.add(p)
        run.at_offset[(p, offset)].append((index, pos, f, value, time, process, epoch))
        if epoch < 0 and f == "poll":
            unknown_epochs[p][1] += 1
        elif epoch < 0 and p in fs and 0 <= offset < fs[p]["hw"]:
            unknown_epochs[p][2] += 1
        if f == "final-read":
            run.final_reads[p][offset].add(value)
        else:
            run.poll_reads[(process, p)].append((index, pos, offset, value, time))
    for (p, v), s in run.sends.items():
        if s["type"] == "ok":
            run.at_offset[(p, s["offset"])].append((s["index"], -1, "send", v, s["time"], s["process"], s["epoch"]))
            if not explain.known_epoch(s["epoch"]):
                unknown_epochs[p][0] += 1
    # the epochs compared, decided as the Spark engine does
    compared = explain.epoch_sources({p: tuple(unknown_epochs[p]) for p in run.partitions})
    run.compared_src = {"send": compared["acks"], "poll": compared["polls"],
                        "final-read": compared["acks"] | compared["polls"]}


def _final_logs(run: Run) -> None:
    """Which partitions have a final committed log (their final reads cover [0, hw)), and its values."""
    for p in sorted(run.partitions):
        fs = run.final_state.get(p)
        if fs is None:
            run.reason[p] = "no final-state"
            continue
        if not fs["recovered"]:
            run.reason[p] = "not recovered"
            continue
        hw = fs["hw"]
        log = {o: vs for o, vs in run.final_reads.get(p, {}).items() if 0 <= o < hw}
        if len(log) != hw:
            run.reason[p] = "final reads do not cover [0, hw)"
            continue
        run.reason[p] = None
        run.final_log[p] = log
        fv: dict[Any, set] = defaultdict(set)
        for o, vs in log.items():
            for v in vs:
                fv[v].add(o)
        run.final_values[p] = fv


# ---- the families -------------------------------------------------------------------------------

def values(run: Run, out: Findings) -> None:
    """lost-write, failed-write-present (and the loss shape), duplicate, dirty-read, aborted-read."""
    _sent_values(run, out)
    _loss_shape(run, out)
    for p, fv in run.final_values.items():
        for v, offs in fv.items():
            if len(offs) > 1:
                s = run.sends.get((p, v))
                out.add(K.DUPLICATE.name, (p, v), {
                    "partition": p, "value": v, "offsets": sorted(offs)[:10], "count": len(offs),
                    "index": s["index"] if s else None,
                    "send": None if s is None else {"type": s["type"], "index": s["index"], "offset": s["offset"]}})
    _read_values(run, out)


def _sent_values(run: Run, out: Findings) -> None:
    for (p, v), s in run.sends.items():
        if p not in run.final_log:
            continue
        present = v in run.final_values[p]
        if s["type"] == "ok" and not present:
            out.lost_by_part[p] += 1
            out.add(K.LOST_WRITE.name, (p, s["index"]), {
                "partition": p, "value": v, "offset": s["offset"], "epoch": s["epoch"], "index": s["index"],
                "time": s["time"], "process": s["process"], "invoke_index": s["invoke_index"],
                "final_values_at_offset": sorted(run.final_log[p].get(s["offset"], ()))}, time=s["time"])
        elif s["type"] == "fail" and present:
            out.add(K.FAILED_WRITE_PRESENT.name, (p, s["index"]), {
                "partition": p, "value": v, "index": s["index"], "time": s["time"], "process": s["process"],
                "invoke_index": s["invoke_index"], "error": s["error"],
                "final_offsets": sorted(run.final_values[p][v])[:10]}, time=s["time"])


def _loss_shape(run: Run, out: Findings) -> None:
    """Where the lost writes fall in each acknowledged sequence (checkers/loss_shape.py)."""
    sequences: dict[int, list] = defaultdict(list)
    for (p, v), s in run.sends.items():
        if s["type"] == "ok" and p in run.final_log:
            sequences[p].append((s["offset"], s["index"], v not in run.final_values[p]))
    shapes = {p: loss_shape.classify(lost for _o, _i, lost in sorted(seq)) for p, seq in sequences.items()}
    out.extra[K.LOST_WRITE.name] = {"loss_shape": loss_shape.as_json(shapes)}


def _read_values(run: Run, out: Findings) -> None:
    per_value: dict[tuple[int, Any], list] = defaultdict(list)
    for (proc, p), lst in run.poll_reads.items():
        for i, pos, o, v, t in lst:
            per_value[(p, v)].append((i, pos, o, t, proc))
    for (p, v), reads in per_value.items():
        s = run.sends.get((p, v))
        first = min(reads)
        base = {"partition": p, "value": v, "offset": first[2], "index": first[0], "time": first[3],
                "process": first[4], "reads": len(reads),
                "send": None if s is None else {"type": s["type"], "index": s["index"], "offset": s["offset"]}}
        if p in run.final_log and v not in run.final_values[p]:
            out.add(K.DIRTY_READ.name, (p, first[0], first[1]), dict(base), n=len(reads), time=first[3])
        if s is not None and s["type"] == "fail":
            ex = dict(base)
            ex["error"] = s["error"]
            out.add(K.ABORTED_READ.name, (p, first[0], first[1]), ex, n=len(reads), time=first[3])


def offsets(run: Run, out: Findings) -> None:
    """inconsistent-offset: a record is its value and its leader epoch, so an offset whose observations
    differ in either is inconsistent (the epochs checkers/explain.epoch_sources says are compared)."""
    for (p, o), obs in run.at_offset.items():
        vals = {x[3] for x in obs}
        compared_epochs = {x[6] for x in obs if explain.known_epoch(x[6]) and p in run.compared_src[x[2]]}
        if len(vals) > 1 or len(compared_epochs) > 1:
            obs.sort(key=lambda x: (x[0], x[1]))
            epochs, seen = explain.offset_observations(obs)
            out.add(K.INCONSISTENT_OFFSET.name, (p, o), {
                "partition": p, "offset": o, "values": sorted(vals)[:10], "epochs": epochs,
                "index": obs[0][0], "observations": seen}, time=obs[0][4])


def ordering(run: Run, out: Findings) -> None:
    """nonmonotonic-send, realtime-order, poll-skip and nonmonotonic-poll."""
    for (proc, p), lst in run.ok_sends_by_proc.items():
        lst.sort()
        for a, b in zip(lst, lst[1:]):
            if b[3] < a[3]:
                out.add(K.NONMONOTONIC_SEND.name, (p, b[0]), {
                    "partition": p, "process": proc, "index": b[0],
                    "earlier": {"index": a[0], "time": a[1], "value": a[2], "offset": a[3], "epoch": a[4]},
                    "later": {"index": b[0], "time": b[1], "value": b[2], "offset": b[3], "epoch": b[4]}},
                    time=b[1])
    _realtime_order(run, out)
    _poll_order(run, out)


def _realtime_order(run: Run, out: Findings) -> None:
    for p, acks in run.acks_by_part.items():
        events = [(a["index"], 1, a) for a in acks]                    # completion: becomes visible
        events += [(a["invoke_index"], 0, a) for a in acks if a["invoke_index"] is not None]  # compare here
        events.sort(key=lambda e: (e[0], e[1]))
        best: tuple | None = None    # (offset, index, time, process, value, epoch) of the highest offset so far
        for _key, is_completion, a in events:
            if is_completion:
                mark = (a["offset"], a["index"], a["time"], a["process"], a["value"], a["epoch"])
                if best is None or mark > best:
                    best = mark
            elif best is not None and best[0] >= a["offset"]:
                out.add(K.REALTIME_ORDER.name, (p, a["index"]), {
                    "partition": p, **a,
                    "previous": {"index": best[1], "time": best[2], "process": best[3], "value": best[4],
                                 "offset": best[0], "epoch": best[5]}}, time=a["time"])


def _poll_order(run: Run, out: Findings) -> None:
    for key in set(run.poll_reads) | set(run.assigns):
        proc, p = key
        events = [(i, -1, "assign", o, None, t) for i, o, t in run.assigns.get(key, [])]
        events += [(i, pos, "read", o, v, t) for i, pos, o, v, t in run.poll_reads.get(key, [])]
        events.sort(key=lambda e: (e[0], e[1]))
        prev = None
        for i, pos, what, o, v, t in events:
            if what == "assign":
                prev = (i, what, o - 1, None, t, o)
                continue
            if prev is not None:
                p_off = prev[2]
                previous = {"kind": prev[1], "index": prev[0], "time": prev[4],
                            "offset": prev[5] if prev[1] == "assign" else p_off, "value": prev[3]}
                ex = {"partition": p, "process": proc, "index": i, "time": t, "offset": o, "value": v,
                      "previous": previous}
                if o > p_off + 1:
                    ex["gap"] = o - p_off - 1
                    out.add(K.POLL_SKIP.name, (p, i, pos), ex, time=t)
                elif o <= p_off:
                    out.add(K.NONMONOTONIC_POLL.name, (p, i, pos), ex, time=t)
            prev = (i, what, o, v, t, None)


def divergence(run: Run, out: Findings) -> None:
    """divergence: replicas holding different records at one offset; committed where two replicas whose
    checkpointed HW is above the offset disagree."""
    by_offset: dict[tuple[int, int], dict[str, tuple]] = defaultdict(dict)
    for node, p, o, epoch, v, crc in _rows(run.col_dir, "replicas", REPLICA_COLUMNS):
        by_offset[(p, o)][node] = (v, epoch, crc)
    committed_n = 0
    for (p, o), recs in by_offset.items():
        if len(set(recs.values())) > 1:
            committed_recs = {r for n, r in recs.items() if run.meta.get((n, p), {}).get("hw", 0) > o}
            committed = len(committed_recs) > 1
            committed_n += committed
            out.add(K.DIVERGENCE.name, (p, o), {"partition": p, "offset": o, "committed": committed})
    name = K.DIVERGENCE.name
    out.extra[name] = {"committed": committed_n, "residual": out.counts[name] - committed_n}


def watermarks(run: Run, out: Findings) -> None:
    """hw-regression (the same leader epoch) and hw-regression-cross-epoch (another, or unknown)."""
    by_part: dict[int, list] = defaultdict(list)
    for ob in run.observations:
        by_part[ob["partition"]].append((ob["index"], 1, ob))           # completion: becomes visible
        by_part[ob["partition"]].append((ob["invoke_index"], 0, ob))    # invocation: compare here
    for p, events in by_part.items():
        events.sort(key=lambda e: (e[0], e[1]))
        best_epoch: dict[Any, tuple] = {}
        best_any: tuple | None = None
        for _key, is_completion, ob in events:
            mark = (ob["hw"], ob["index"], ob["epoch"], ob["time"], ob["process"])
            if is_completion:
                if ob["epoch"] not in best_epoch or mark > best_epoch[ob["epoch"]]:
                    best_epoch[ob["epoch"]] = mark
                if best_any is None or mark > best_any:
                    best_any = mark
                continue
            # epoch -1: unknown (docs/formats.md), so never compared as the same epoch
            same = best_epoch.get(ob["epoch"]) if ob["epoch"] is not None and ob["epoch"] >= 0 else None
            kind = prev = None
            if same is not None and same[0] > ob["hw"]:
                kind, prev = K.HW_REGRESSION.name, same
            elif best_any is not None and best_any[0] > ob["hw"]:
                kind, prev = K.HW_REGRESSION_CROSS_EPOCH.name, best_any
            if kind:
                out.add(kind, (p, ob["index"]), {
                    "partition": p, "epoch": ob["epoch"], "hw": ob["hw"], "index": ob["index"], "time": ob["time"],
                    "process": ob["process"], "invoke_index": ob["invoke_index"], "f": ob["f"],
                    "previous": {"hw": prev[0], "index": prev[1], "epoch": prev[2], "time": prev[3], "process": prev[4]}},
                    time=ob["time"])


def keys(run: Run, out: Findings) -> None:
    """key-reorder: per key, in a partition with a final log, a send whose record is in the final log
    below the record of a send of its key acknowledged before it was invoked (a value's place: its lowest
    offset there). The events of a key in index order: each acknowledged send present in the final log
    becomes visible at its completion, and each present send compares at its invoke with the highest
    offset visible by then (then the highest index)."""
    by_key: dict[tuple[int, int], list] = defaultdict(list)
    for s in run.keyed_sends:
        p, v = s["partition"], s["value"]
        if p not in run.final_log or v not in run.final_values[p]:
            continue
        placed = dict(s, foff=min(run.final_values[p][v]))
        if s["type"] == "ok":
            by_key[(p, s["key"])].append((s["index"], 1, placed))
        if s["invoke_index"] is not None:
            by_key[(p, s["key"])].append((s["invoke_index"], 0, placed))
    for (p, key), events in by_key.items():
        events.sort(key=lambda e: (e[0], e[1]))
        best: tuple | None = None        # (final offset, index, value, time) of the highest so far
        for _at, is_completion, s in events:
            if is_completion:
                mark = (s["foff"], s["index"], s["value"], s["time"])
                best = mark if best is None or mark > best else best
            elif best is not None and best[0] > s["foff"]:
                out.add(K.KEY_REORDER.name, (p, s["index"]), {
                    "partition": p, "key": key, "value": s["value"], "offset": s["foff"], "type": s["type"],
                    "index": s["index"], "time": s["time"], "invoke_index": s["invoke_index"],
                    "previous": {"value": best[2], "offset": best[0], "index": best[1], "time": best[3]}},
                    time=s["time"])


GROUP_COLUMNS = ["index", "time", "process", "type", "f", "group", "member", "generation", "partition", "offset",
                 "invoke_index", "mode"]


def _group_inputs(run: Run) -> tuple[list[dict], dict[tuple[str, int, Any], list[tuple]]]:
    """The group_parts rows in history order, and per (group, partition, value) every poll read of it by
    the group's members as (index, pos, time, process, offset), in history order."""
    path = run.col_dir / "group_parts"
    parts = ([dict(zip(GROUP_COLUMNS, r)) for r in _rows(run.col_dir, "group_parts", GROUP_COLUMNS)]
             if path.is_dir() else [])
    parts.sort(key=lambda r: r["index"])
    seen: dict[tuple[str, int, Any], list[tuple]] = defaultdict(list)
    for group, f, p, offset, value, index, pos, time, process in _rows(
            run.col_dir, "reads", ["group", "f", "partition", "offset", "value", "index", "pos", "time", "process"]):
        if group is not None and f == "poll" and value is not None:
            seen[(group, p, value)].append((index, pos, time, process, offset))
    for reads in seen.values():
        reads.sort()
    return parts, seen


class _AckedCommits:
    """A (group, partition)'s acked commits in completion order, with the running best: the one with the
    highest (offset, index) so far."""

    def __init__(self, acked: list[dict]):
        self.at = [a["index"] for a in acked]          # acked is in history order
        self.best: list[dict] = []
        for a in acked:
            prev = self.best[-1] if self.best else None
            self.best.append(a if prev is None or (a["offset"], a["index"]) > (prev["offset"], prev["index"]) else prev)

    def before(self, at: int) -> dict | None:
        """The best acked commit completed before history index `at` (None: none)."""
        i = bisect.bisect_left(self.at, at)
        return self.best[i - 1] if i else None


def groups(run: Run, out: Findings) -> None:
    """The consumer-group kinds, each as docs/formats.md states it, over the group operations and the
    members' polls: committed-regression, group-resume-mismatch, lost-by-group, commit-beyond-log,
    assignment-overlap, group-reread."""
    parts, seen = _group_inputs(run)
    if not parts and not seen:
        return
    out = _GroupFindings(out)
    acked: dict[tuple[str, int], list[dict]] = defaultdict(list)
    commits: dict[tuple[str, int, int], list[dict]] = defaultdict(list)   # (g, p, offset) -> its completions
    finals: dict[tuple[str, int], dict] = {}                           # the last committed ok
    for r in parts:
        gp = (r["group"], r["partition"])
        if r["f"] == "commit" and r["type"] != "invoke":
            commits[(*gp, r["offset"])].append(r)
            if r["type"] == "ok":
                acked[gp].append(r)
        if r["f"] == "committed" and r["type"] == "ok":
            finals[gp] = r
    best = {gp: _AckedCommits(xs) for gp, xs in acked.items()}
    _committed_regression(parts, best, out)
    _resume_mismatch(run, parts, best, commits, out)
    _lost_by_group(run, finals, seen, out)
    _commit_beyond_log(run, acked, finals, out)
    _assignment_overlap(parts, out)
    for (g, p, v), reads in seen.items():
        if len(reads) > 1:
            last, first = reads[-1], reads[0]
            out.add(K.GROUP_REREAD.name, (p, last[0], last[1], g), {
                "group": g, "partition": p, "value": v, "offset": first[4], "reads": len(reads), "index": last[0],
                "time": last[2], "process": last[3],
                "first": {"index": first[0], "time": first[2], "process": first[3], "offset": first[4]}},
                time=last[2])


class _GroupFindings:
    """A Findings for the group kinds that writes each example's fields in its kind's declared order."""

    def __init__(self, out: Findings):
        self.out = out

    def add(self, kind: str, key: tuple, example: dict, time: int | None = None) -> None:
        self.out.add(kind, key, {n: example[n] for n in K.BY_NAME[kind].example_fields}, time=time)


def _previous(a: dict) -> dict:
    return {n: a[n] for n in ("offset", "index", "time", "process", "member", "generation")}


def _committed_regression(parts: list[dict], acked: dict, out: Findings) -> None:
    for r in parts:
        if r["f"] not in ("committed", "group-assign") or r["type"] != "ok":
            continue
        acks = acked.get((r["group"], r["partition"]))
        best = acks.before(r["invoke_index"]) if acks else None
        if best is not None and best["offset"] > r["offset"]:
            out.add(K.COMMITTED_REGRESSION.name, (r["partition"], r["index"], r["group"]), {
                "group": r["group"], "partition": r["partition"], "offset": r["offset"], "f": r["f"],
                "index": r["index"], "time": r["time"], "invoke_index": r["invoke_index"], "process": r["process"],
                "previous": _previous(best)}, time=r["time"])


def _resume_mismatch(run: Run, parts: list[dict], acked: dict, commits: dict, out: Findings) -> None:
    """For each group-assign ok with an expectation: the first poll record its process read from the
    partition after it, before the process's next group-assign or group-revoke invoke naming it; a
    mismatch unless a commit in flight across the assign has that offset."""
    ends: dict[tuple[str, str, int], list[int]] = defaultdict(list)     # (process, group, p) -> owner ends
    for r in parts:
        if r["f"] in ("group-assign", "group-revoke") and r["type"] == "invoke":
            ends[(r["process"], r["group"], r["partition"])].append(r["index"])
    firsts = run_group_firsts(run)
    for r in parts:
        if r["f"] != "group-assign" or r["type"] != "ok":
            continue
        g, p, proc = r["group"], r["partition"], r["process"]
        acks = acked.get((g, p))
        best = acks.before(r["invoke_index"]) if acks else None
        if best is None:
            continue
        own_ends = ends.get((proc, g, p), [])
        j = bisect.bisect_right(own_ends, r["index"])
        until = own_ends[j] if j < len(own_ends) else None
        polls = firsts.get((proc, g, p), [])
        k = bisect.bisect_right(polls, (r["index"], float("inf")))
        poll = polls[k] if k < len(polls) and (until is None or polls[k][0] < until) else None
        if poll is None or poll[1] == best["offset"]:
            continue
        if any((c["invoke_index"] < r["index"] or (c["mode"] == "auto" and c["process"] != proc))
               and (c["type"] == "info" or (c["type"] == "ok" and c["index"] > r["invoke_index"]))
               for c in commits.get((g, p, poll[1]), [])):
            continue        # a commit in flight across the assign (an auto-commit is recorded once answered)
        out.add(K.GROUP_RESUME_MISMATCH.name, (p, poll[0], g), {
            "group": g, "partition": p, "member": r["member"], "generation": r["generation"], "offset": poll[1],
            "expected": best["offset"], "index": poll[0], "time": poll[2], "process": proc,
            "assign": {"index": r["index"], "time": r["time"], "invoke_index": r["invoke_index"],
                       "committed": r["offset"]}}, time=poll[2])


def run_group_firsts(run: Run) -> dict[tuple[str, str, int], list[tuple]]:
    """(process, group, partition) -> (poll index, its first record's offset, time) of each group poll
    that returned records, in history order."""
    firsts: dict[tuple[str, str, int], list[tuple]] = defaultdict(list)
    for group, f, p, offset, index, pos, time, process in _rows(
            run.col_dir, "reads", ["group", "f", "partition", "offset", "index", "pos", "time", "process"]):
        if group is not None and f == "poll" and pos == 0:
            firsts[(process, group, p)].append((index, offset, time))
    for xs in firsts.values():
        xs.sort()
    return firsts


def _lost_by_group(run: Run, finals: dict, seen: dict, out: Findings) -> None:
    for (g, p), fc in finals.items():
        if p not in run.final_log:
            continue
        for o, vs in run.final_log[p].items():
            if o >= fc["offset"]:
                continue
            for v in vs:
                if v is not None and (g, p, v) not in seen:
                    out.add(K.LOST_BY_GROUP.name, (p, o, g, v), {
                        "group": g, "partition": p, "offset": o, "value": v, "committed": fc["offset"],
                        "index": fc["index"], "time": fc["time"]}, time=fc["time"])


def _commit_beyond_log(run: Run, acked: dict, finals: dict, out: Findings) -> None:
    rows = [dict(a, f="commit") for xs in acked.values() for a in xs]
    rows += [dict(fc, f="committed", member=None, generation=None) for fc in finals.values()]
    for r in rows:
        p = r["partition"]
        if p not in run.final_log:
            continue
        hw = run.final_state[p]["hw"]
        if r["offset"] > hw:
            out.add(K.COMMIT_BEYOND_LOG.name, (p, r["index"], r["group"]), {
                "group": r["group"], "partition": p, "offset": r["offset"], "hw": hw, "f": r["f"], "index": r["index"],
                "time": r["time"], "process": r["process"], "member": r["member"], "generation": r["generation"]},
                time=r["time"])


def _assignment_overlap(parts: list[dict], out: Findings) -> None:
    by_gen: dict[tuple[str, int, int], list[dict]] = defaultdict(list)
    for r in parts:
        if (r["f"] == "group-assign" and r["type"] == "ok" and r["generation"] is not None and r["generation"] >= 0
                and r["member"]):
            by_gen[(r["group"], r["generation"], r["partition"])].append(r)
    for (g, n, p), rs in by_gen.items():
        first = rs[0]                       # parts are in history order
        second = next((r for r in rs if r["member"] != first["member"]), None)
        if second is None:
            continue
        out.add(K.ASSIGNMENT_OVERLAP.name, (p, second["index"], g), {
            "group": g, "generation": n, "partition": p, "members": sorted({r["member"] for r in rs}),
            "member": second["member"], "index": second["index"], "time": second["time"], "process": second["process"],
            "first": {n2: first[n2] for n2 in ("member", "index", "time", "process")}}, time=second["time"])

# the history and replica families, each `(run, out)`, in the order of rundir/kinds.py's families
FAMILIES: tuple[Callable[[Run, Findings], None], ...] = (values, divergence, offsets, ordering, watermarks, keys,
                                                          groups)


# ---- the result ---------------------------------------------------------------------------------

def analyze(col_dir: Path | str, examples: int = 10, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every kind's findings; the protocol kinds only with `facts` (checkers/protocol_trace.run_facts)."""
    run = load(col_dir)
    out = Findings()
    for family in FAMILIES:
        family(run, out)
    anomalies = _anomalies(run, out, examples)
    axis = totals.TimeAxis(run.end_time)
    tot = totals.Totals(axis)
    for kind, p, t, n in out.timed:
        tot.add(kind, p, t, n)
    for kind in anomalies:
        anomalies[kind].update(tot.for_kind(kind))
    if facts is not None:
        found = protocol_trace.findings(protocol_trace.check_reference(run.col_dir, facts), facts, examples)
        protocol_trace.attach(anomalies, found, tot)
    return {"anomalies": anomalies, "time_axis": axis.as_json(), **_summary(run, out)}


def _anomalies(run: Run, out: Findings, n: int) -> dict[str, dict]:
    """Every registered kind (rundir/kinds.py), found or not, with its first n examples explained."""
    examples = {kind: _top(items, n) for kind, items in out.found.items()}
    for e in examples.get(K.POLL_SKIP.name, []):
        e["skipped"] = explain.skipped(e["offset"], e["gap"], run.final_log.get(e["partition"], {}))
    offs, vals = explain.wanted_keys(examples)
    rows = []
    if offs or vals:
        for node, p, o, epoch, v, crc in _rows(run.col_dir, "replicas", REPLICA_COLUMNS):
            if (p, o) in offs or (p, v) in vals:
                rows.append((node, p, o, epoch, v, crc))
    explain.attach(examples, explain.ReplicaIndex(rows, dict(run.nodes_by_part), run.meta))
    return {kind: {"count": out.counts[kind], "examples": examples.get(kind, []), **out.extra.get(kind, {})}
            for kind in kinds.NAMES}


def _summary(run: Run, out: Findings) -> dict[str, Any]:
    """The partitions, the acknowledged writes no final log could show (unseen), and the statistics."""
    intervals = [(s, e if e is not None else float("inf")) for s, e in run.windows.values() if s is not None]
    avail = {"in_fault": {"ok": 0, "total": 0}, "outside_fault": {"ok": 0, "total": 0}}
    for _f, typ, t in run.completions:
        where = "in_fault" if any(s <= t <= e for s, e in intervals) else "outside_fault"
        avail[where]["total"] += 1
        avail[where]["ok"] += typ == "ok"
    acked: dict[int, int] = defaultdict(int)
    unseen: dict[int, list] = defaultdict(list)
    for (p, v), s in run.sends.items():
        if s["type"] == "ok":
            acked[p] += 1
            if p not in run.final_log:
                unseen[p].append(v)
    parts_out = []
    for p in sorted(run.partitions):
        fs = run.final_state.get(p, {})
        parts_out.append({"partition": p, "recovered": run.reason[p] is None, "reason": run.reason[p],
                          "hw": fs.get("hw"), "leader": fs.get("leader"), "epoch": fs.get("epoch"),
                          "acked": acked.get(p, 0),
                          "committed": len(run.final_log[p]) if p in run.final_log else None,
                          "lost": out.lost_by_part.get(p, 0)})
    unseen_parts = sorted(p for p in run.partitions if run.reason[p] is not None)
    shown = {p: sorted(unseen.get(p, []))[:explain.UNSEEN_VALUES_SHOWN] for p in unseen_parts}
    return {
        "unseen": {"count": sum(len(v) for v in unseen.values()), "partitions": unseen_parts,
                   "values": explain.unseen_values(shown),
                   "details": [{"partition": p, "reason": run.reason[p], "acked": len(unseen.get(p, [])),
                                "values": shown[p]} for p in unseen_parts]},
        "partitions": parts_out,
        "stats": {"ops": {f: run.op_counts[f] for f in sorted(run.op_counts)}, "availability": avail,
                  "fault_windows": len(intervals)},
    }
