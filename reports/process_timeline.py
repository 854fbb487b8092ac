"""The per-process timeline: each client operation a bar on its process's lane, from invoke to completion.

`ProcessOps` collects the bars during the one pass over history.jsonl (reports/history_scan.py calls
`add` for every client completion and `finish` with the invokes still open at the end); `page_data` turns
them into what report.html embeds: a small JSON header (lanes, operation kinds, errors, fault windows,
counts) and the bars as one base64 string of variable-length integers, which
reports/templates/process_timeline.js decodes and draws on a canvas.

A bar is ok, fail or info; an invoke with no completion is "open": info, drawn to the end of the history.
The page stays small at any history size: once there are more than `max_bars` bars, consecutive
operations of one process with the same outcome whose whole span falls in one time slot are merged into
one bar (a run, which keeps its operation count and first / last history index). The slot starts at
1 ms and doubles until the bars fit again, so merging only happens where a bar would be a fraction of a
pixel at the page's normal zoom. Operations the anomaly examples name (`pinned`) are never merged, so
their `#op-<index>` links always find their own bar.

The byte format (`encode`, read back by `decode` and by the page's script), per lane in lane order:
the lane's bar count, then per bar: `code` (type + 4·run + 8·kind), start minus the previous bar's end,
length (both in microseconds), invoke index minus the previous bar's last index, completion index minus
invoke index (0 for an open bar); then a run's operation count, or a single operation's value summary:
a bit mask over VALUE_KEYS and one integer per bit set (`error` as an index into the error table).
Signed numbers are zigzag-coded; every integer is little-endian base-128.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Iterable

OK, FAIL, INFO, OPEN = 0, 1, 2, 3
TYPE_NAMES = ("ok", "fail", "info", "open")
TYPE_CODE = {"ok": OK, "fail": FAIL, "info": INFO}
MAX_BARS = 100_000
FIRST_SLOT_NS = 1_000_000  # the first merge slot (1 ms); each coarsening doubles it
MIXED_F = "*"              # the kind of a run of several operation kinds
VALUE_KEYS = ("partition", "value", "offset", "records", "hw", "epoch", "error")
KEY_BIT = {key: 1 << k for k, key in enumerate(VALUE_KEYS)}
MAX_ERRORS = 200           # distinct error texts kept; the rest show as OTHER_ERROR
MAX_ERROR_CHARS = 160
OTHER_ERROR = "(another error: see history.jsonl)"

# a bar while collecting: (start_ns, end_ns, type, f, invoke index, completion index or None, count,
#                          value summary: tuple of (key, int | str), pinned)
_Rec = tuple


@dataclass(frozen=True)
class Bar:
    """One bar of a lane: one operation, or a run of `count` operations (then `value` is empty)."""
    start_ns: int
    end_ns: int
    type: str            # ok / fail / info / open
    f: str               # the operation kind, MIXED_F for a run of several kinds
    invoke: int          # history index of the (first) invoke
    complete: int | None  # history index of the (last) completion; None when open
    count: int = 1
    value: dict[str, Any] = field(default_factory=dict)


def value_summary(op: dict[str, Any]) -> tuple:
    """The operation's value in a few fields (VALUE_KEYS order: partition, value, offset, the number of
    records a poll returned, hw, epoch, error), taken as they are; `encode` keeps the integers and the
    error text. Cheap, since it runs for most operations of a large history."""
    v = op.get("value")
    if v.__class__ is not dict:
        return (None, None, None, None, None, None, op.get("error"))
    recs = v.get("records")
    return (v.get("partition"), v.get("value"), v.get("offset"), len(recs) if recs.__class__ is list else None,
            v.get("hw"), v.get("epoch"), op.get("error"))


def summary_items(summary: tuple) -> list[tuple[str, Any]]:
    """The fields of a value summary worth showing: integers (not booleans), and the error as text."""
    out = []
    for key, x in zip(VALUE_KEYS, summary):
        if key == "error":
            if isinstance(x, str):
                out.append((key, x))
        elif x.__class__ is int:
            out.append((key, x))
    return out


class ProcessOps:
    """Client operations by process, collected in one pass; bounded to about `max_bars` bars."""

    def __init__(self, pinned: Iterable[int] = (), max_bars: int = MAX_BARS):
        self.pinned = frozenset(pinned)
        self.max_bars = max_bars
        self.limit = max_bars      # coarsen when bars pass this
        self.lanes: dict[Any, list[_Rec]] = {}
        self.bars = 0
        self.ops = 0
        self.slot_ns = 0           # 0: every operation its own bar
        self.end_ns = 0
        self.found: set[int] = set()  # pinned indexes seen on a client operation

    def add(self, process: Any, inv: dict[str, Any] | None, op: dict[str, Any]) -> None:
        """A completion `op` of `process`, with its invoke (None when the history has none)."""
        self.ops += 1
        t1, ci = op["time"], op["index"]
        if inv is None:
            t0, ii = t1, ci
        else:
            t0, ii = inv["time"], inv["index"]
        typ = TYPE_CODE[op["type"]]
        lane = self.lanes.get(process)
        if lane is None:
            lane = self.lanes[process] = []
        pinned = ii in self.pinned or ci in self.pinned
        w = self.slot_ns
        if w and lane and not pinned:
            last = lane[-1]
            if last[2] == typ and last[0] // w == t1 // w and not last[8]:
                f = op["f"]
                lane[-1] = (last[0], t1, typ, f if last[3] == f else MIXED_F, last[4], ci, last[6] + 1, (), False)
                return
        if pinned:
            self.found.update((ii, ci))
        lane.append((t0, t1, typ, op["f"], ii, ci, 1, value_summary(op), pinned))
        self.bars += 1
        if self.bars > self.limit:
            self._coarsen()

    def finish(self, pending: dict[Any, dict[str, Any]], end_ns: int) -> None:
        """The invokes with no completion (process -> invoke): open bars to the end of the history."""
        self.end_ns = max([end_ns] + [lane[-1][1] for lane in self.lanes.values() if lane])
        for process, inv in pending.items():
            self.ops += 1
            ii = inv["index"]
            pinned = ii in self.pinned
            if pinned:
                self.found.add(ii)
            self.lanes.setdefault(process, []).append(
                (inv["time"], max(self.end_ns, inv["time"]), OPEN, inv["f"], ii, None, 1, value_summary(inv), pinned))
            self.bars += 1
        if self.bars > self.limit:
            self._coarsen()

    def _coarsen(self) -> None:
        """Merge with the smallest slot (a power of two times FIRST_SLOT_NS) that leaves at most 3/4 of the
        budget, leaving room for what follows. Neighbours a, b of a lane (same outcome, neither pinned nor
        open) share a bar exactly when a's start and b's end fall in one slot, so one pass over the pairs
        tells how many bars each slot would leave. When even merging every such pair is not enough (too
        many processes or pinned operations), twice as many bars are allowed before the next try."""
        first = FIRST_SLOT_NS
        by_level = [0] * 80  # neighbour pairs by the smallest slot level that joins them
        total = 0
        for lane in self.lanes.values():
            total += len(lane)
            p0 = ptyp = None
            for t0, t1, typ, _f, _ii, _ci, _n, _v, pin in lane:
                if typ == ptyp and typ != OPEN and not pin:
                    by_level[((p0 // first) ^ (t1 // first)).bit_length()] += 1
                p0, ptyp = t0, (None if pin else typ)
        level = (self.slot_ns // first).bit_length() - 1 if self.slot_ns else -1  # pairs up to it are joined
        top = max([k for k, n in enumerate(by_level) if n] + [level + 1])
        left = total
        for k in range(level + 1, top + 1):
            left -= by_level[k]
            level = k
            if left <= self.max_bars * 3 // 4:
                break
        self.slot_ns = first << level
        self.bars = sum(merge_lane(lane, self.slot_ns) for lane in self.lanes.values())
        self.limit = self.max_bars if self.bars <= self.max_bars else self.bars * 2

    # --- results ---------------------------------------------------------------------------------------
    def processes(self) -> list[Any]:
        """The lanes in page order: by process id."""
        return sorted(self.lanes, key=lambda p: (not isinstance(p, int), p if isinstance(p, int) else str(p)))

    def bars_of(self, process: Any) -> list[Bar]:
        return [Bar(r[0], r[1], TYPE_NAMES[r[2]], r[3], r[4], r[5], r[6], dict(summary_items(r[7])))
                for r in self.lanes[process]]

    @property
    def merged(self) -> bool:
        return self.slot_ns > 0

    def counts(self) -> tuple[int, int, int]:
        """(operations drawn as their own bar, runs, operations inside runs)."""
        single = runs = inside = 0
        for lane in self.lanes.values():
            for r in lane:
                if r[6] == 1:
                    single += 1
                else:
                    runs += 1
                    inside += r[6]
        return single, runs, inside


def _mergeable(a: _Rec, b: _Rec, w: int) -> bool:
    return a[2] == b[2] and b[2] != OPEN and not a[8] and not b[8] and a[0] // w == b[1] // w


def merge_lane(lane: list[_Rec], w: int) -> int:
    """Merge, in place, neighbouring bars of one lane with the same outcome (not pinned, not open) whose
    span falls in one slot of `w` ns. Returns the lane's bar count."""
    out: list[_Rec] = []
    for r in lane:
        if out:
            last = out[-1]
            if _mergeable(last, r, w):
                out[-1] = (last[0], r[1], r[2], last[3] if last[3] == r[3] else MIXED_F, last[4], r[5],
                           last[6] + r[6], (), False)
                continue
        out.append(r)
    lane[:] = out
    return len(out)


# --- the embedded form -------------------------------------------------------------------------------------

def _uvarint(buf: bytearray, x: int) -> None:
    while x > 127:
        buf.append((x & 127) | 128)
        x >>= 7
    buf.append(x)


def _zz(x: int) -> int:
    return x * 2 if x >= 0 else -x * 2 - 1


def encode(ops: ProcessOps) -> tuple[bytes, list[str], list[str]]:
    """The bars as bytes (the format in the module docstring), with the kind table and the error table."""
    fs: dict[str, int] = {}
    errors: dict[str, int] = {}
    buf = bytearray()
    put = _uvarint
    for process in ops.processes():
        lane = ops.lanes[process]
        put(buf, len(lane))
        prev_t = prev_i = 0
        for t0, t1, typ, f, ii, ci, count, value, _pinned in lane:
            s0, s1 = t0 // 1000, t1 // 1000
            fi = fs.get(f)
            if fi is None:
                fi = fs[f] = len(fs)
            put(buf, typ + (4 if count > 1 else 0) + 8 * fi)
            put(buf, _zz(s0 - prev_t))
            put(buf, max(0, s1 - s0))
            put(buf, _zz(ii - prev_i))
            put(buf, 0 if ci is None else max(0, ci - ii))
            prev_t = max(s1, s0)
            prev_i = ii if ci is None else ci
            if count > 1:
                put(buf, count)
                continue
            items = summary_items(value)
            mask = 0
            for key, _x in items:
                mask |= KEY_BIT[key]
            put(buf, mask)
            for key, x in items:
                if key == "error":
                    x = x[:MAX_ERROR_CHARS]
                    e = errors.get(x)
                    if e is None:
                        if len(errors) < MAX_ERRORS:
                            e = errors[x] = len(errors)
                        else:
                            e = errors.setdefault(OTHER_ERROR, len(errors))
                    put(buf, e)
                else:
                    put(buf, _zz(x))
    return bytes(buf), list(fs), list(errors)


def decode(data: bytes, lanes: list[Any], fs: list[str], errors: list[str]) -> dict[Any, list[Bar]]:
    """`encode`'s bytes back into bars (times in whole microseconds, as ns): the reference the page's
    script follows, used by the tests."""
    pos = 0

    def uv() -> int:
        nonlocal pos
        x = shift = 0
        while True:
            b = data[pos]
            pos += 1
            x |= (b & 127) << shift
            shift += 7
            if b < 128:
                return x

    def zz() -> int:
        x = uv()
        return x // 2 if x % 2 == 0 else -(x + 1) // 2

    out: dict[Any, list[Bar]] = {}
    for process in lanes:
        bars = out[process] = []
        prev_t = prev_i = 0
        for _ in range(uv()):
            code = uv()
            s0 = prev_t + zz()
            s1 = s0 + uv()
            ii = prev_i + zz()
            d = uv()
            typ = code & 3
            ci = None if typ == OPEN else ii + d
            prev_t, prev_i = s1, (ii if ci is None else ci)
            count, value = 1, {}
            if code & 4:
                count = uv()
            else:
                mask = uv()
                for k, key in enumerate(VALUE_KEYS):
                    if mask >> k & 1:
                        value[key] = errors[uv()] if key == "error" else zz()
            bars.append(Bar(s0 * 1000, s1 * 1000, TYPE_NAMES[typ], fs[code >> 3], ii, ci, count, value))
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes left over")
    return out


@dataclass
class PageData:
    meta: dict[str, Any]   # the JSON header (data-meta)
    ops_b64: str           # the bars (data-ops)
    note: str              # what the page says when operations share bars; "" when none do
    links: set[int]        # history indexes with their own bar: the examples' `#op-<index>` targets

    @property
    def embedded_bytes(self) -> int:
        return len(self.ops_b64)


def page_data(ops: ProcessOps, faults: list, fault_anchors: dict[int, str]) -> PageData:
    """What report.html embeds. `faults`: reports.history_scan.FaultWindow list (the same windows the
    latency timeline shades); `fault_anchors`: position in that list -> the fault list row's id, for the
    windows that have one."""
    data, fs, errors = encode(ops)
    end_us = ops.end_ns // 1000
    windows = []
    for i, w in enumerate(faults):
        windows.append({"start": int(w.start_s * 1e6), "stop": int(w.stop_s * 1e6), "fault": str(w.fault),
                        "label": w.label, "open": w.stop_index is None, "detail": str(w.detail or ""),
                        "anchor": fault_anchors.get(i)})
        end_us = max(end_us, int(w.stop_s * 1e6))
    single, runs, inside = ops.counts()
    meta = {"lanes": ops.processes(), "fs": fs, "errors": errors, "keys": list(VALUE_KEYS), "end": end_us,
            "faults": windows, "ops": ops.ops, "bars": single + runs, "single": single, "runs": runs,
            "slot_us": ops.slot_ns // 1000}
    note = ""
    if runs:
        note = (f"Showing {single:,} of {ops.ops:,} operations as their own bars; the other {inside:,} are "
                f"drawn as {runs:,} run{'' if runs == 1 else 's'}: neighbouring operations of one process with the same outcome within "
                f"one {fmt_slot(ops.slot_ns)} slot share a bar (hover it for how many and their history "
                f"indexes). This keeps the page to about {ops.max_bars:,} bars; every operation an anomaly "
                "example names has its own.")
    return PageData(meta, base64.b64encode(data).decode("ascii"), note, set(ops.found))


def fmt_slot(ns: int) -> str:
    return f"{ns / 1e6:g} ms" if ns < 1_000_000_000 else f"{ns / 1e9:g} s"
