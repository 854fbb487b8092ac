"""One streaming pass over history.jsonl: time buckets, latencies, a sample of operations, fault windows.

The report never holds the whole history. It reads the file once, line by line, and keeps
- per time bucket and operation kind, the number of ok / fail / info completions (throughput);
- per time bucket and operation kind, every latency, to take exact p50 / p95 / p99 at the end;
- a bounded sample of completed operations for the timeline (a few ok per bucket, more fail / info);
- the nemesis fault windows (start completion to stop completion with the same id);
- the `final-state` operations;
- the history lines that anomaly examples refer to, with a little context and the matching
  invoke / completion, so the report can show and link them;
- when given a collector (`ops`, e.g. reports/process_timeline.py's ProcessOps), every client operation:
  `ops.add(process, invoke, completion)` per completion, then `ops.finish(open invokes, end_ns)`.
The bucket width is chosen from the history's last timestamp (read from the file's tail first).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rundir import formats as runformat
from rundir.formats import FormatError
from reports.jsonfast import DecodeError, loads

NICE_BUCKETS_S = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600)
MAX_BUCKETS = 240
QUANTILES = (0.5, 0.95, 0.99)


@dataclass
class FaultWindow:
    id: Any
    fault: str
    targets: list[str]
    start_s: float
    stop_s: float
    start_index: int
    stop_index: int | None  # None: the history ended with the fault still active
    detail: str = ""

    @property
    def label(self) -> str:
        targets = ",".join(str(t) for t in self.targets)
        return f"{self.fault} {targets}".strip()


@dataclass
class SamplePoint:
    t_s: float
    latency_s: float
    type: str
    f: str
    index: int
    process: Any
    error: str | None


@dataclass
class HistorySummary:
    lines: int = 0
    torn_lines: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    bucket_s: float = 1.0
    nbuckets: int = 1
    # f -> type -> per-bucket completion counts
    counts: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    # f -> per-bucket (p50, p95, p99) in seconds, or None for an empty bucket
    latency: dict[str, list[tuple[float, float, float] | None]] = field(default_factory=dict)
    latency_overall: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    points: list[SamplePoint] = field(default_factory=list)
    sampled_from: int = 0  # completions the sample was drawn from
    faults: list[FaultWindow] = field(default_factory=list)
    nemesis_ops: list[dict[str, Any]] = field(default_factory=list)
    final_states: list[dict[str, Any]] = field(default_factory=list)
    excerpt: dict[int, dict[str, Any]] = field(default_factory=dict)
    op_times: dict[int, float] = field(default_factory=dict)  # index -> seconds, for wanted indexes
    unfinished: int = 0  # client invokes with no completion


def _tail_time_ns(path: Path) -> int:
    """The `time` of the last parseable line, read from the end of the file."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        chunk = 1 << 16
        while True:
            start = max(0, size - chunk)
            fh.seek(start)
            data = fh.read(size - start)
            lines = data.split(b"\n")
            if start > 0:
                lines = lines[1:]  # possibly cut in half
            for raw in reversed(lines):
                if not raw.strip():
                    continue
                try:
                    obj = loads(raw)
                except DecodeError:
                    continue
                if isinstance(obj, dict) and isinstance(obj.get("time"), int):
                    return obj["time"]
            if start == 0 or chunk > (1 << 24):
                return 0
            chunk *= 8


def choose_bucket_s(duration_s: float) -> float:
    for b in NICE_BUCKETS_S:
        if duration_s / b <= MAX_BUCKETS:
            return b
    return NICE_BUCKETS_S[-1] * max(1, round(duration_s / MAX_BUCKETS / NICE_BUCKETS_S[-1]))


def _missing_field(op: Any, path: Path, line_no: int) -> FormatError:
    if not isinstance(op, dict):
        return FormatError(path, line_no, "expected a JSON object")
    for name, kind in (("index", int), ("time", int), ("process", (int, str)), ("type", str), ("f", str)):
        if name not in op:
            return FormatError(path, line_no, f"missing field '{name}'")
        if not isinstance(op[name], kind) or isinstance(op[name], bool):
            return FormatError(path, line_no, f"field '{name}' has the wrong type: {op[name]!r}")
    if op["type"] not in runformat.OP_TYPES:
        return FormatError(path, line_no, f"field 'type' must be one of {', '.join(runformat.OP_TYPES)}, "
                                          f"got {op['type']!r}")
    return FormatError(path, line_no, "malformed operation")


def _percentiles(values: list[int]) -> tuple[float, float, float]:
    """Nearest-rank percentiles (the smallest value with at least q of the values at or below it), seconds."""
    values.sort()
    n = len(values)
    return tuple(values[max(0, math.ceil(q * n) - 1)] / 1e9 for q in QUANTILES)  # type: ignore[return-value]


def scan_history(path: Path, *, wanted: set[int] | frozenset[int] = frozenset(), context: int = 2,
                 max_points: int = 6000, ops: Any = None) -> HistorySummary:
    """Read history.jsonl once and summarise it (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise FormatError(path, None, "file is missing")
    summary = HistorySummary()
    end_ns = _tail_time_ns(path)
    _choose_buckets(summary, end_ns)
    tally = _Tally(_Wanted.around(wanted, context), max_points)
    _read(path, summary, tally, ops)
    summary.unfinished = len(tally.pending) + sum(len(q) for q in tally.group_pending.values())
    if ops is not None:
        ops.finish(tally.pending, end_ns)
    _close_faults(summary, tally.open_faults)
    _fold_counts(summary, tally.counts)
    _fold_latencies(summary, tally.lats)
    return summary


def _choose_buckets(summary: HistorySummary, end_ns: int) -> None:
    """The history's duration (its last timestamp) and the time buckets it is cut into."""
    summary.duration_s = end_ns / 1e9
    bucket_s = choose_bucket_s(summary.duration_s)
    summary.bucket_s, summary.nbuckets = bucket_s, max(1, end_ns // int(bucket_s * 1e9) + 1)


@dataclass
class _Wanted:
    """The history lines to keep for the report's excerpts: those anomaly examples refer to (`core`), the
    lines around them, and the completions still to come of referenced invokes (by process)."""
    core: set[int]
    lines: set[int]
    completion_of: set[Any] = field(default_factory=set)

    @classmethod
    def around(cls, wanted: set[int] | frozenset[int], context: int) -> _Wanted:
        core = set(wanted)
        lines: set[int] = set()
        for i in core:
            lines.update(range(i - context, i + context + 1))
        return cls(core, lines)

    def keep(self, op: dict[str, Any], summary: HistorySummary, pending: dict[Any, dict[str, Any]]) -> None:
        """A wanted line: keep it; a referenced one brings its invoke / completion along."""
        idx = op["index"]
        summary.excerpt[idx] = op
        summary.op_times[idx] = op["time"] / 1e9
        if idx in self.core:
            if op["type"] == "invoke":
                self.completion_of.add(op["process"])
            else:
                inv = pending.get(op["process"])
                if inv is not None:
                    summary.excerpt[inv["index"]] = inv

    def keep_completion(self, op: dict[str, Any], summary: HistorySummary) -> None:
        """The completion of a referenced invoke."""
        self.completion_of.discard(op["process"])
        summary.excerpt[op["index"]] = op
        summary.op_times[op["index"]] = op["time"] / 1e9


@dataclass
class _Tally:
    """What the pass accumulates besides the summary itself."""
    wanted: _Wanted
    max_points: int
    counts: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (f, type) -> per bucket
    lats: dict[str, list[list[int]]] = field(default_factory=dict)  # f -> per bucket, latencies in ns
    pending: dict[Any, dict[str, Any]] = field(default_factory=dict)  # process -> its open invoke
    # (process, f) -> its open group operations' invokes, oldest first (rundir/formats.py GROUP_FS)
    group_pending: dict[tuple[Any, str], list[dict[str, Any]]] = field(default_factory=dict)
    open_faults: dict[Any, dict[str, Any]] = field(default_factory=dict)  # fault id -> its start


def _read(path: Path, summary: HistorySummary, tally: _Tally, ops: Any) -> None:
    """The pass itself: every line once, in order; client completions are counted, timed and sampled here
    (the hot path), the other processes' lines handed to _other_line."""
    nb = summary.nbuckets
    bucket_ns, last_b = int(summary.bucket_s * 1e9), nb - 1
    wanted, counts, lats, pending = tally.wanted, tally.counts, tally.lats, tally.pending
    want, want_completion = wanted.lines, wanted.completion_of
    ok_quota, bad_quota = _quotas(tally.max_points, nb)
    ok_taken, bad_taken = [0] * nb, [0] * nb
    points, completions, line_no = summary.points, 0, 0
    with path.open("rb") as fh:
        for raw in fh:
            line_no += 1
            try:
                op = loads(raw)
                idx, t, process, typ, f = op["index"], op["time"], op["process"], op["type"], op["f"]
                b = t // bucket_ns
            except DecodeError as exc:
                _unreadable(raw, exc, summary, path, line_no)
                continue
            except (KeyError, TypeError):
                raise _missing_field(op, path, line_no) from None
            if b > last_b:
                b = last_b
            elif b < 0:
                b = 0
            if idx in want:
                wanted.keep(op, summary, pending)
            if process.__class__ is not int:
                _other_line(op, summary, tally, path, line_no)
                continue
            if typ == "invoke":
                _opened(tally, process, f, op)
                continue
            c = counts.get((f, typ))
            if c is None:       # checked before the line is used anywhere: a bad type is a format error
                c = counts[(f, typ)] = _new_counts(op, nb, path, line_no)
            inv = _completed(tally, process, f)
            if ops is not None:
                ops.add(process, inv, op)
            if want_completion and process in want_completion:
                wanted.keep_completion(op, summary)
            c[b] += 1
            completions += 1
            if inv is None:
                continue
            lat = t - inv["time"]
            lf = lats.get(f)
            if lf is None:
                lf = lats[f] = [[] for _ in range(nb)]
            lf[b].append(lat)
            if typ == "ok":
                if ok_taken[b] < ok_quota:
                    ok_taken[b] += 1
                    points.append(SamplePoint(t / 1e9, lat / 1e9, typ, f, idx, process, None))
            elif bad_taken[b] < bad_quota:
                bad_taken[b] += 1
                points.append(SamplePoint(t / 1e9, lat / 1e9, typ, f, idx, process, op.get("error")))
    summary.lines = line_no - len(summary.torn_lines)
    summary.sampled_from = completions


GROUP_FS = frozenset(runformat.GROUP_FS)


def _opened(tally: _Tally, process: Any, f: str, op: dict[str, Any]) -> None:
    """An invoke of `process`: its open client operation, or one more of its open group operations (those
    may overlap its polls: an async commit answered while the member polls on)."""
    if f in GROUP_FS:
        tally.group_pending.setdefault((process, f), []).append(op)
    else:
        tally.pending[process] = op


def _completed(tally: _Tally, process: Any, f: str) -> dict[str, Any] | None:
    """The invoke a completion of `process` closes: its open client operation's, or for a group operation
    the oldest open invoke of its `f` (checkers/ingest.py pairs those by their partitions too; for the
    charts' latencies the order of one process's is close enough)."""
    if f not in GROUP_FS:
        return tally.pending.pop(process, None)
    group_pending = tally.group_pending
    queue = group_pending.get((process, f))
    if not queue:
        return None
    inv = queue.pop(0)
    if not queue:
        del group_pending[(process, f)]
    return inv


def _quotas(max_points: int, nb: int) -> tuple[int, int]:
    """How many ok, and how many fail / info, completions each bucket gives the sample."""
    return max(2, int(max_points * 0.7) // nb), max(4, int(max_points * 0.5) // nb)


def _unreadable(raw: bytes, exc: DecodeError, summary: HistorySummary, path: Path, line_no: int) -> None:
    """A line that is not JSON: the torn tail of a crashed writer and blank lines are skipped (the torn
    ones noted); anything else is a format error."""
    if not raw.endswith(b"\n"):
        summary.torn_lines.append(line_no)
        return
    if not raw.strip():
        return
    raise FormatError(path, line_no, f"not valid JSON ({exc})") from None


def _new_counts(op: dict[str, Any], nb: int, path: Path, line_no: int) -> list[int]:
    """The per-bucket counts of a (f, type) met for the first time; the type must be a completion's."""
    if op["type"] not in runformat.COMPLETIONS:
        raise _missing_field(op, path, line_no)
    return [0] * nb


def _other_line(op: dict[str, Any], summary: HistorySummary, tally: _Tally, path: Path, line_no: int) -> None:
    """A line of a process that is no client: the nemesis's (fault windows), the harness's (final states)."""
    process = op["process"]
    if process == runformat.NEMESIS_PROCESS:
        _nemesis(op, summary, tally.open_faults, summary.faults)
    elif process == runformat.HARNESS_PROCESS:
        if op["f"] == runformat.FINAL_STATE_F and isinstance(op.get("value"), dict):
            summary.final_states.append(op["value"])
    elif not isinstance(process, (int, str)) or isinstance(process, bool):
        raise _missing_field(op, path, line_no)


def _close_faults(summary: HistorySummary, open_faults: dict[Any, dict[str, Any]]) -> None:
    """A fault never stopped is shaded to the end of the history; the windows in start order."""
    faults = summary.faults
    for wid, o in open_faults.items():
        faults.append(FaultWindow(wid, o["fault"], o["targets"], o["t"], summary.duration_s, o["index"], None,
                                  o["detail"]))
    faults.sort(key=lambda w: (w.start_s, str(w.id)))


def _fold_counts(summary: HistorySummary, counts: dict[tuple[str, str], list[int]]) -> None:
    for (f, typ), c in counts.items():
        summary.counts.setdefault(f, {})[typ] = c
        summary.totals.setdefault(f, {})[typ] = sum(c)


def _fold_latencies(summary: HistorySummary, lats: dict[str, list[list[int]]]) -> None:
    """Each bucket's percentiles, and the whole run's."""
    for f, per_bucket in lats.items():
        everything: list[int] = []
        series: list[tuple[float, float, float] | None] = []
        for values in per_bucket:
            if values:
                everything.extend(values)
                series.append(_percentiles(values))
            else:
                series.append(None)
        summary.latency[f] = series
        if everything:
            summary.latency_overall[f] = _percentiles(everything)


def _nemesis(op: dict[str, Any], summary: HistorySummary, open_faults: dict, faults: list) -> None:
    value = op.get("value") if isinstance(op.get("value"), dict) else {}
    summary.nemesis_ops.append(op)
    if op["type"] == "invoke":
        return
    phase, wid = value.get("phase"), value.get("id")
    targets = value.get("targets") or []
    if not isinstance(targets, list):
        targets = [targets]
    t_s = op["time"] / 1e9
    if phase == "start":
        open_faults[wid] = {"t": t_s, "index": op["index"], "fault": str(value.get("fault", op["f"])),
                            "targets": [str(x) for x in targets], "detail": str(value.get("detail", ""))}
    elif phase == "stop":
        o = open_faults.pop(wid, None)
        if o is not None:
            faults.append(FaultWindow(wid, o["fault"], o["targets"], o["t"], t_s, o["index"], op["index"],
                                      o["detail"]))
