"""The single-process reference checker: the rules of docs/formats.md written as plainly as possible.

For tests (cross-checked against the Spark checker) and benchmarks only. Its output lists every kind
of the registry (rundir/kinds.py), as the Spark checker's does. It reads the same columnar
tables as the Spark checker and holds everything in Python dictionaries, so it needs memory in
proportion to the history (roughly 1 KB per send); it is not meant for histories larger than memory.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

import pyarrow.dataset as ds

from rundir import kinds
from checkers import explain, loss_shape, protocol_trace, totals

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


def analyze(col_dir: Path | str, examples: int = 10, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every kind's findings; the protocol kinds only with `facts` (checkers/protocol_trace.run_facts)."""
    col_dir = Path(col_dir)
    N = examples

    # ---- final state and replica metadata -----------------------------------------------------
    final_state: dict[int, dict] = {}
    for p, rec, hw, leader, epoch in _rows(col_dir, "final_state", ["partition", "recovered", "hw", "leader", "epoch"]):
        final_state[p] = {"recovered": rec, "hw": hw, "leader": leader, "epoch": epoch}
    meta: dict[tuple[str, int], dict] = {}
    nodes_by_part: dict[int, list[str]] = defaultdict(list)
    for node, p, leo, hw in _rows(col_dir, "replica_meta", ["node", "partition", "leo", "hw"]):
        meta[(node, p)] = {"leo": leo, "hw": hw}
        nodes_by_part[p].append(node)
    for p in nodes_by_part:
        nodes_by_part[p].sort()

    # ---- operations -----------------------------------------------------------------------------
    sends: dict[tuple[int, int], dict] = {}          # (partition, value) -> send completion
    ok_sends_by_proc: dict[tuple[str, int], list] = defaultdict(list)
    acks_by_part: dict[int, list[dict]] = defaultdict(list)   # realtime-order: every ok send
    observations: list[dict] = []                     # poll / final-read ok: hw observations
    assigns: dict[tuple[str, int], list] = defaultdict(list)
    windows: dict[int, list] = {}                     # fault id -> [start time, stop time]
    op_counts: dict[str, dict[str, int]] = {}
    completions: list[tuple[str, str, int]] = []      # (f, type, time) of send/poll completions
    partitions: set[int] = set(final_state) | set(nodes_by_part)
    end_time: int | None = None                       # the history's last time (any line)
    cols = ["index", "time", "process", "type", "f", "partition", "value", "offset", "epoch", "hw", "error",
            "invoke_index", "invoke_time", "fault", "phase", "fault_id"]
    for (index, time, process, typ, f, p, value, offset, epoch, hw, error, inv_i, inv_t,
         fault, phase, fid) in _rows(col_dir, "ops", cols):
        if time is not None and (end_time is None or time > end_time):
            end_time = time
        if process == "nemesis":
            if typ != "invoke" and fid is not None:
                w = windows.setdefault(fid, [None, None])
                if phase == "start" and w[0] is None:
                    w[0] = time
                elif phase == "stop":
                    w[1] = time
            continue
        if process == "harness" or f not in ("send", "poll", "assign", "final-read"):
            continue
        partitions.add(p)
        if typ == "invoke":
            continue
        op_counts.setdefault(f, {"ok": 0, "fail": 0, "info": 0})[typ] += 1
        if f in ("send", "poll"):
            completions.append((f, typ, time))
        if f == "send":
            sends[(p, value)] = {"type": typ, "index": index, "time": time, "process": process,
                                 "offset": offset, "epoch": epoch, "invoke_index": inv_i, "error": error}
            if typ == "ok":
                ok_sends_by_proc[(process, p)].append((index, time, value, offset, epoch))
                acks_by_part[p].append({"offset": offset, "value": value, "epoch": epoch, "index": index,
                                        "time": time, "process": process, "invoke_index": inv_i,
                                        "invoke_time": inv_t})
        elif f in ("poll", "final-read") and typ == "ok":
            observations.append({"partition": p, "epoch": epoch, "hw": hw, "index": index, "time": time,
                                 "process": process, "invoke_index": inv_i, "f": f})
        elif f == "assign" and typ == "ok":
            assigns[(process, p)].append((index, offset, time))

    # ---- reads ----------------------------------------------------------------------------------
    final_reads: dict[int, dict[int, set]] = defaultdict(lambda: defaultdict(set))   # p -> offset -> values
    poll_reads: dict[tuple[str, int], list] = defaultdict(list)
    at_offset: dict[tuple[int, int], list] = defaultdict(list)   # (p, offset) -> observations
    # per partition: observations without a leader epoch (-1) among ok sends, polls, final reads in [0, hw)
    unknown_epochs: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for index, process, f, p, offset, value, time, pos, epoch in _rows(
            col_dir, "reads", ["index", "process", "f", "partition", "offset", "value", "time", "pos", "epoch"]):
        partitions.add(p)
        at_offset[(p, offset)].append((index, pos, f, value, time, process, epoch))
        if epoch < 0 and f == "poll":
            unknown_epochs[p][1] += 1
        elif epoch < 0 and p in final_state and 0 <= offset < final_state[p]["hw"]:
            unknown_epochs[p][2] += 1
        if f == "final-read":
            final_reads[p][offset].add(value)
        else:
            poll_reads[(process, p)].append((index, pos, offset, value, time))
    for (p, v), s in sends.items():
        if s["type"] == "ok":
            at_offset[(p, s["offset"])].append((s["index"], -1, "send", v, s["time"], s["process"], s["epoch"]))
            if not explain.known_epoch(s["epoch"]):
                unknown_epochs[p][0] += 1
    # the epochs compared, decided as the Spark engine does
    compared = explain.epoch_sources({p: tuple(unknown_epochs[p]) for p in partitions})
    compared_src = {"send": compared["acks"], "poll": compared["polls"],
                    "final-read": compared["acks"] | compared["polls"]}

    # ---- which partitions have a final committed log --------------------------------------------
    final_log: dict[int, dict[int, set]] = {}     # p -> offset -> values, offsets < hw
    final_values: dict[int, dict[Any, set]] = {}  # p -> value -> offsets
    reason: dict[int, str | None] = {}
    for p in sorted(partitions):
        fs = final_state.get(p)
        if fs is None:
            reason[p] = "no final-state"
            continue
        if not fs["recovered"]:
            reason[p] = "not recovered"
            continue
        hw = fs["hw"]
        log = {o: vs for o, vs in final_reads.get(p, {}).items() if 0 <= o < hw}
        if len(log) != hw:
            reason[p] = "final reads do not cover [0, hw)"
            continue
        reason[p] = None
        final_log[p] = log
        fv: dict[Any, set] = defaultdict(set)
        for o, vs in log.items():
            for v in vs:
                fv[v].add(o)
        final_values[p] = fv

    found: dict[str, list] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    extra: dict[str, dict] = defaultdict(dict)
    timed: list[tuple[str, int, int | None, int]] = []   # (kind, partition, time, weight): checkers/totals.py

    def add(kind: str, key: tuple, example: dict, n: int = 1, time: int | None = None) -> None:
        counts[kind] += n
        found[kind].append((key, example))
        timed.append((kind, example["partition"], time, n))

    # ---- lost-write / failed-write-present / unseen ---------------------------------------------
    unseen_by_part: dict[int, int] = defaultdict(int)
    unseen_values: dict[int, list] = defaultdict(list)
    acked_by_part: dict[int, int] = defaultdict(int)
    lost_by_part: dict[int, int] = defaultdict(int)
    for (p, v), s in sends.items():
        if s["type"] == "ok":
            acked_by_part[p] += 1
        if p not in final_log:
            if s["type"] == "ok":
                unseen_by_part[p] += 1
                unseen_values[p].append(v)
            continue
        present = v in final_values[p]
        if s["type"] == "ok" and not present:
            lost_by_part[p] += 1
            add("lost-write", (p, s["index"]), {
                "partition": p, "value": v, "offset": s["offset"], "epoch": s["epoch"], "index": s["index"],
                "time": s["time"], "process": s["process"], "invoke_index": s["invoke_index"],
                "final_values_at_offset": sorted(final_log[p].get(s["offset"], ()))}, time=s["time"])
        elif s["type"] == "fail" and present:
            add("failed-write-present", (p, s["index"]), {
                "partition": p, "value": v, "index": s["index"], "time": s["time"], "process": s["process"],
                "invoke_index": s["invoke_index"], "error": s["error"],
                "final_offsets": sorted(final_values[p][v])[:10]}, time=s["time"])

    # ---- where the lost writes fall in each acknowledged sequence (checkers/loss_shape.py) --------
    sequences: dict[int, list] = defaultdict(list)
    for (p, v), s in sends.items():
        if s["type"] == "ok" and p in final_log:
            sequences[p].append((s["offset"], s["index"], v not in final_values[p]))
    shapes = {p: loss_shape.classify(lost for _o, _i, lost in sorted(seq)) for p, seq in sequences.items()}
    extra["lost-write"] = {"loss_shape": loss_shape.as_json(shapes)}

    # ---- duplicate ------------------------------------------------------------------------------
    for p, fv in final_values.items():
        for v, offs in fv.items():
            if len(offs) > 1:
                s = sends.get((p, v))
                add("duplicate", (p, v), {
                    "partition": p, "value": v, "offsets": sorted(offs)[:10], "count": len(offs),
                    "index": s["index"] if s else None,
                    "send": None if s is None else {"type": s["type"], "index": s["index"], "offset": s["offset"]}})

    # ---- inconsistent-offset --------------------------------------------------------------------
    # a record is its value and its leader epoch: an offset whose observations differ in either is
    # inconsistent (the epochs that checkers/explain.epoch_sources says are compared)
    for (p, o), obs in at_offset.items():
        values = {x[3] for x in obs}
        compared_epochs = {x[6] for x in obs if explain.known_epoch(x[6]) and p in compared_src[x[2]]}
        if len(values) > 1 or len(compared_epochs) > 1:
            obs.sort(key=lambda x: (x[0], x[1]))
            epochs, seen = explain.offset_observations(obs)
            add("inconsistent-offset", (p, o), {
                "partition": p, "offset": o, "values": sorted(values)[:10], "epochs": epochs,
                "index": obs[0][0], "observations": seen}, time=obs[0][4])

    # ---- nonmonotonic-send ----------------------------------------------------------------------
    for (proc, p), lst in ok_sends_by_proc.items():
        lst.sort()
        for a, b in zip(lst, lst[1:]):
            if b[3] < a[3]:
                add("nonmonotonic-send", (p, b[0]), {
                    "partition": p, "process": proc, "index": b[0],
                    "earlier": {"index": a[0], "time": a[1], "value": a[2], "offset": a[3], "epoch": a[4]},
                    "later": {"index": b[0], "time": b[1], "value": b[2], "offset": b[3], "epoch": b[4]}},
                    time=b[1])

    # ---- realtime-order -----------------------------------------------------------------------------
    for p, acks in acks_by_part.items():
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
                add("realtime-order", (p, a["index"]), {
                    "partition": p, **a,
                    "previous": {"index": best[1], "time": best[2], "process": best[3], "value": best[4],
                                 "offset": best[0], "epoch": best[5]}}, time=a["time"])

    # ---- poll-skip / nonmonotonic-poll ------------------------------------------------------------
    for key in set(poll_reads) | set(assigns):
        proc, p = key
        events = [(i, -1, "assign", o, None, t) for i, o, t in assigns.get(key, [])]
        events += [(i, pos, "read", o, v, t) for i, pos, o, v, t in poll_reads.get(key, [])]
        events.sort(key=lambda e: (e[0], e[1]))
        prev = None
        for e in events:
            i, pos, kind, o, v, t = e
            if kind == "assign":
                prev = (i, kind, o - 1, None, t, o)
                continue
            if prev is not None:
                p_off = prev[2]
                previous = {"kind": prev[1], "index": prev[0], "time": prev[4],
                            "offset": prev[5] if prev[1] == "assign" else p_off, "value": prev[3]}
                ex = {"partition": p, "process": proc, "index": i, "time": t, "offset": o, "value": v,
                      "previous": previous}
                if o > p_off + 1:
                    ex["gap"] = o - p_off - 1
                    add("poll-skip", (p, i, pos), ex, time=t)
                elif o <= p_off:
                    add("nonmonotonic-poll", (p, i, pos), ex, time=t)
            prev = (i, kind, o, v, t, None)

    # ---- dirty-read / aborted-read ----------------------------------------------------------------
    per_value: dict[tuple[int, Any], list] = defaultdict(list)
    for (proc, p), lst in poll_reads.items():
        for i, pos, o, v, t in lst:
            per_value[(p, v)].append((i, pos, o, t, proc))
    for (p, v), reads in per_value.items():
        s = sends.get((p, v))
        first = min(reads)
        base = {"partition": p, "value": v, "offset": first[2], "index": first[0], "time": first[3],
                "process": first[4], "reads": len(reads),
                "send": None if s is None else {"type": s["type"], "index": s["index"], "offset": s["offset"]}}
        if p in final_log and v not in final_values[p]:
            add("dirty-read", (p, first[0], first[1]), dict(base), n=len(reads), time=first[3])
        if s is not None and s["type"] == "fail":
            ex = dict(base)
            ex["error"] = s["error"]
            add("aborted-read", (p, first[0], first[1]), ex, n=len(reads), time=first[3])

    # ---- divergence -------------------------------------------------------------------------------
    by_offset: dict[tuple[int, int], dict[str, tuple]] = defaultdict(dict)
    for node, p, o, epoch, v, crc in _rows(col_dir, "replicas", ["node", "partition", "offset", "epoch", "value", "crc_ok"]):
        by_offset[(p, o)][node] = (v, epoch, crc)
    committed_n = 0
    for (p, o), recs in by_offset.items():
        if len(set(recs.values())) > 1:
            committed_recs = {r for n, r in recs.items() if meta.get((n, p), {}).get("hw", 0) > o}
            committed = len(committed_recs) > 1
            committed_n += committed
            add("divergence", (p, o), {"partition": p, "offset": o, "committed": committed})
    extra["divergence"] = {"committed": committed_n, "residual": counts["divergence"] - committed_n}
    del by_offset

    # ---- hw-regression ------------------------------------------------------------------------------
    by_part: dict[int, list] = defaultdict(list)
    for ob in observations:
        by_part[ob["partition"]].append((ob["index"], 1, ob))           # completion: becomes visible
        by_part[ob["partition"]].append((ob["invoke_index"], 0, ob))    # invocation: compare here
    for p, events in by_part.items():
        events.sort(key=lambda e: (e[0], e[1]))
        best_epoch: dict[Any, tuple] = {}
        best_any: tuple | None = None
        for key, is_completion, ob in events:
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
                kind, prev = "hw-regression", same
            elif best_any is not None and best_any[0] > ob["hw"]:
                kind, prev = "hw-regression-cross-epoch", best_any
            if kind:
                add(kind, (p, ob["index"]), {
                    "partition": p, "epoch": ob["epoch"], "hw": ob["hw"], "index": ob["index"], "time": ob["time"],
                    "process": ob["process"], "invoke_index": ob["invoke_index"], "f": ob["f"],
                    "previous": {"hw": prev[0], "index": prev[1], "epoch": prev[2], "time": prev[3], "process": prev[4]}},
                    time=ob["time"])

    # ---- examples, explained ----------------------------------------------------------------------
    examples = {kind: _top(items, N) for kind, items in found.items()}
    for e in examples.get("poll-skip", []):
        e["skipped"] = explain.skipped(e["offset"], e["gap"], final_log.get(e["partition"], {}))
    offsets, values = explain.wanted_keys(examples)
    rows = []
    if offsets or values:
        for node, p, o, epoch, v, crc in _rows(col_dir, "replicas", ["node", "partition", "offset", "epoch", "value", "crc_ok"]):
            if (p, o) in offsets or (p, v) in values:
                rows.append((node, p, o, epoch, v, crc))
    explain.attach(examples, explain.ReplicaIndex(rows, dict(nodes_by_part), meta))

    # every registered kind, found or not (rundir/kinds.py)
    anomalies = {kind: {"count": counts[kind], "examples": examples.get(kind, []), **extra.get(kind, {})}
                 for kind in kinds.NAMES}
    # totals over the whole run (duplicate and divergence have no operation time: untimed)
    axis = totals.TimeAxis(end_time)
    tot = totals.Totals(axis)
    for kind, p, t, n in timed:
        tot.add(kind, p, t, n)
    for kind in anomalies:
        anomalies[kind].update(tot.for_kind(kind))
    if facts is not None:
        found = protocol_trace.findings(protocol_trace.check_reference(col_dir, facts), facts, N)
        protocol_trace.attach(anomalies, found, tot)

    # ---- statistics ------------------------------------------------------------------------------------
    intervals = [(s, e if e is not None else float("inf")) for s, e in windows.values() if s is not None]
    avail = {"in_fault": {"ok": 0, "total": 0}, "outside_fault": {"ok": 0, "total": 0}}
    for f, typ, t in completions:
        where = "in_fault" if any(s <= t <= e for s, e in intervals) else "outside_fault"
        avail[where]["total"] += 1
        avail[where]["ok"] += typ == "ok"

    parts_out = []
    for p in sorted(partitions):
        fs = final_state.get(p, {})
        parts_out.append({"partition": p, "recovered": reason[p] is None, "reason": reason[p],
                          "hw": fs.get("hw"), "leader": fs.get("leader"), "epoch": fs.get("epoch"),
                          "acked": acked_by_part.get(p, 0),
                          "committed": len(final_log[p]) if p in final_log else None,
                          "lost": lost_by_part.get(p, 0)})
    unseen_parts = sorted(p for p in partitions if reason[p] is not None)
    shown = {p: sorted(unseen_values.get(p, []))[:explain.UNSEEN_VALUES_SHOWN] for p in unseen_parts}
    return {
        "anomalies": anomalies,
        "time_axis": axis.as_json(),
        "unseen": {"count": sum(unseen_by_part.values()), "partitions": unseen_parts,
                   "values": explain.unseen_values(shown),
                   "details": [{"partition": p, "reason": reason[p], "acked": unseen_by_part.get(p, 0),
                                "values": shown[p]} for p in unseen_parts]},
        "partitions": parts_out,
        "stats": {"ops": {f: op_counts[f] for f in sorted(op_counts)}, "availability": avail,
                  "fault_windows": len(intervals)},
    }
