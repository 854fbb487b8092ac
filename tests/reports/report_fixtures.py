"""Hand-built run directories for the report tests (docs/formats.md layout), small enough to reason about.

The "invalid" run tells one story: n1 leads partition 0 and acknowledges values 7 and 8 at offsets 7 and 8
(acks=1) just before it is killed at 3 s; n2 takes over in epoch 1 and writes 10, 11, 12 at offsets 7-9;
n1 comes back and truncates (HW truncation), so 7 and 8 are lost; n3 was partitioned away and still holds
7 and 8 at offsets 7-8 above its HW: divergence at offsets 7 and 8. Partition 1 is healthy. Strings
carrying an XSS payload appear in the test name, a config value, an error, a nemesis detail, a broker
event, a checker example field and a replica record value.

The "lossy2" run is the invalid one with losses in two partitions, like issue 15's run: partition 1's
replicas agree on [101, 102, 103, <payload>], so the acknowledged 104, 105 and 106 (offsets 3-5) are
lost silently; the checker lists only one lost-write example per partition (2 of 5), so counting examples
would say partition 1 lost 1. A pause of every broker starts at 7.9 s and never stops, so the last fault
label sits at the timeline's right edge.

results.json carries the checker's totals (time_axis, by_partition, histogram, ack_times, partitions[].lost)
computed here by docs/formats.md's rules; `old_format=True` leaves them out, as results.json files written
before they existed do.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

XSS = "<script>alert(1)</script>"
START_WALL_NS = 1_763_765_101_000_000_000
S = 1_000_000_000
NODES = ("n1", "n2", "n3")


class HistoryBuilder:
    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def add(self, t_s: float, process: Any, type_: str, f: str, value: dict, error: str | None = None) -> int:
        op = {"index": len(self.ops), "time": int(round(t_s * S)), "process": process, "type": type_, "f": f,
              "value": value}
        if error is not None:
            op["error"] = error
        self.ops.append(op)
        return op["index"]

    def lines(self) -> str:
        return "".join(json.dumps(op, separators=(",", ":")) + "\n" for op in self.ops)


def _dump(run: Path, node: str, partition: int, records: list[tuple[Any, int]], hw: int, epochs: list) -> None:
    d = run / "replicas" / node
    d.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"kind": "meta", "node": node, "topic": "hw", "partition": partition, "log_start": 0,
                         "leo": len(records), "hw": hw, "epochs": epochs, "torn_bytes": 0})]
    for off, (value, epoch) in enumerate(records):
        lines.append(json.dumps({"kind": "record", "offset": off, "epoch": epoch, "value": value, "key": None,
                                 "timestamp": 1763765100000 + off, "crc_ok": True}))
    (d / f"p{partition}.jsonl").write_text("\n".join(lines) + "\n")


def _events(run: Path, node: str, events: list[tuple[float, str, dict]]) -> None:
    d = run / "nodes" / node
    d.mkdir(parents=True, exist_ok=True)
    with (d / "broker.log").open("w") as fh:
        for t, event, fields in events:
            fh.write(json.dumps({"ts": START_WALL_NS + int(t * S), "node": node, "event": event, **fields}) + "\n")
    (d / "stdout.log").write_text(f"{node} started\n")


BUCKETS_S = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)


def time_axis(end_ns: int) -> dict[str, Any]:
    """results.json `time_axis` for a history whose last operation is at end_ns (docs/formats.md)."""
    for b in BUCKETS_S:
        b_ns = int(round(b * S))
        if math.ceil(end_ns / b_ns) <= 100:
            break
    return {"start_s": 0.0, "end_s": end_ns / S, "bucket_s": b, "buckets": max(1, -(-end_ns // b_ns))}


def totals(axis: dict[str, Any], findings: list[tuple[int, int | None]]) -> dict[str, Any]:
    """`by_partition` and `histogram` of one kind from all its findings: (partition, operation time ns)."""
    b_ns, n = int(round(axis["bucket_s"] * S)), axis["buckets"]
    counts, untimed, by_partition = [0] * n, 0, {}
    for p, t in findings:
        by_partition[str(p)] = by_partition.get(str(p), 0) + 1
        if t is None:
            untimed += 1
        else:
            counts[min(t // b_ns, n - 1)] += 1
    return {"by_partition": by_partition, "histogram": {"counts": counts, "untimed": untimed}}


def make_run(results_root: Path, kind: str = "invalid", *, name: str | None = None,
             timestamp: str = "20261121T224501Z", start_offset_s: int = 0, test_name: str | None = None,
             old_format: bool = False) -> Path:
    """A run directory under results_root/<name>/<timestamp>; kind: invalid, lossy2, valid, unknown or
    unchecked.

    test_name: the name recorded in test.json when it must differ from the directory (e.g. markup in it).
    old_format: results.json without the checker's totals (as written before issue 15).
    """
    name = name or {"invalid": "hw-truncation", "lossy2": "hw-truncation-2p", "valid": "leader-epoch"}.get(kind, "chaos")
    run = Path(results_root) / name / timestamp
    run.mkdir(parents=True)
    lossy = kind in ("invalid", "lossy2")
    two = kind == "lossy2"
    h = HistoryBuilder()
    acks: dict[int, int] = {}
    t = 0.1
    # partition 0 sends: values 0..6 ok at offsets 0..6 from n1 (epoch 0)
    for v in range(7):
        h.add(t, 0, "invoke", "send", {"partition": 0, "value": v})
        acks[v] = h.add(t + 0.004, 0, "ok", "send", {"partition": 0, "value": v, "offset": v, "epoch": 0})
        h.add(t + 0.01, 1, "invoke", "poll", {"partition": 0, "offset": v})
        h.add(t + 0.013, 1, "ok", "poll", {"partition": 0, "offset": v, "records": [[v, v]], "hw": v + 1, "epoch": 0})
        t += 0.35
    # values 7 and 8 acked just before the kill
    for v in (7, 8):
        h.add(t, 0, "invoke", "send", {"partition": 0, "value": v})
        acks[v] = h.add(t + 0.003, 0, "ok", "send", {"partition": 0, "value": v, "offset": v, "epoch": 0})
        t += 0.1
    h.add(3.0, "nemesis", "invoke", "kill", {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"]})
    h.add(3.01, "nemesis", "info", "kill", {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"],
                                             "detail": "SIGKILL pid 4242"})
    # during the kill: a timeout (info), a definite failure whose error carries the payload
    h.add(3.1, 0, "invoke", "send", {"partition": 0, "value": 9})
    h.add(4.1, 0, "info", "send", {"partition": 0, "value": 9}, error="timeout")
    h.add(4.2, 2, "invoke", "send", {"partition": 1, "value": 100})
    h.add(4.3, 2, "fail", "send", {"partition": 1, "value": 100}, error=f"NOT_LEADER {XSS}")
    # n2 leads epoch 1 and takes 10, 11, 12 at offsets 7, 8, 9
    t = 4.4
    for k, v in enumerate((10, 11, 12)):
        off = 7 + k if lossy else 9 + k
        h.add(t, 3, "invoke", "send", {"partition": 0, "value": v})
        acks[v] = h.add(t + 0.005, 3, "ok", "send", {"partition": 0, "value": v, "offset": off, "epoch": 1})
        t += 0.2
    h.add(5.0, "nemesis", "invoke", "restart", {"fault": "kill", "phase": "stop", "id": 1, "targets": ["n1"]})
    h.add(5.02, "nemesis", "info", "restart", {"fault": "kill", "phase": "stop", "id": 1, "targets": ["n1"],
                                                "detail": f"restarted {XSS}"})
    h.add(6.0, "nemesis", "invoke", "partition", {"fault": "partition", "phase": "start", "id": 2,
                                                 "targets": ["n3"]})
    h.add(6.01, "nemesis", "info", "partition", {"fault": "partition", "phase": "start", "id": 2,
                                                "targets": ["n3"], "detail": "isolated n3"})
    # partition 1: values 100..105 ok at offsets 0..5 (led by n2)
    t = 6.1
    for k, v in enumerate(range(101, 107)):
        h.add(t, 2, "invoke", "send", {"partition": 1, "value": v})
        acks[v] = h.add(t + 0.006, 2, "ok", "send", {"partition": 1, "value": v, "offset": k, "epoch": 0})
        t += 0.2
    h.add(7.5, "nemesis", "invoke", "heal", {"fault": "partition", "phase": "stop", "id": 2, "targets": ["n3"]})
    h.add(7.51, "nemesis", "info", "heal", {"fault": "partition", "phase": "stop", "id": 2, "targets": ["n3"]})
    if two:  # a fault that starts just before the end and never stops: its label is at the right edge
        h.add(7.9, "nemesis", "invoke", "pause", {"fault": "pause", "phase": "start", "id": 3,
                                                  "targets": list(NODES)})
        h.add(7.91, "nemesis", "info", "pause", {"fault": "pause", "phase": "start", "id": 3, "targets": list(NODES),
                                                 "detail": "SIGSTOP all brokers"})
    p1_final = [101, 102, 103, XSS] if two else list(range(101, 106)) + [XSS]
    # final reads and final state
    p0_final = list(range(7)) + ([10, 11, 12] if lossy else [7, 8, 10, 11, 12])
    h.add(8.0, 4, "invoke", "final-read", {"partition": 0, "offset": 0})
    h.add(8.01, 4, "ok", "final-read", {"partition": 0, "offset": 0, "records": [[o, v] for o, v in enumerate(p0_final)],
                                        "hw": len(p0_final), "epoch": 1})
    h.add(8.02, 4, "invoke", "final-read", {"partition": 1, "offset": 0})
    h.add(8.03, 4, "ok", "final-read", {"partition": 1, "offset": 0,
                                        "records": [[o, v] for o, v in enumerate(p1_final)], "hw": len(p1_final),
                                        "epoch": 0})
    finals = [
        {"partition": 0, "recovered": kind != "unknown", "hw": len(p0_final), "leader": "n2", "epoch": 1,
         "isr": ["n1", "n2", "n3"], "replicas": {n: {"leo": len(p0_final), "hw": len(p0_final)} for n in NODES}},
        {"partition": 1, "recovered": True, "hw": len(p1_final), "leader": "n2", "epoch": 0,
         "isr": ["n1", "n2", "n3"], "replicas": {n: {"leo": len(p1_final), "hw": len(p1_final)} for n in NODES}},
    ]
    for fs in finals:
        h.add(8.1, "harness", "info", "final-state", fs)
    (run / "history.jsonl").write_text(h.lines())
    (run / "nemesis.jsonl").write_text("".join(json.dumps(op) + "\n" for op in h.ops if op["process"] == "nemesis"))
    (run / "final.json").write_text(json.dumps({"partitions": finals, "waited_s": 0.4, "timed_out": False}))

    # replica dumps
    p0 = [(v, 0) for v in range(7)] + ([(10, 1), (11, 1), (12, 1)] if lossy else
                                       [(7, 0), (8, 0), (10, 1), (11, 1), (12, 1)])
    epochs0 = [[0, 0], [1, 7 if lossy else 9]]
    _dump(run, "n1", 0, p0, len(p0), epochs0)
    _dump(run, "n2", 0, p0, len(p0), epochs0)
    if lossy:
        _dump(run, "n3", 0, [(v, 0) for v in range(9)], 7, [[0, 0]])
    else:
        _dump(run, "n3", 0, p0, len(p0), epochs0)
    p1 = [(v, 0) for v in p1_final]
    for n in NODES:
        _dump(run, n, 1, p1, len(p1), [[0, 0]])

    # broker event logs
    _events(run, "controller", [  # the controller names brokers by number, as the real one does
        (0.05, "leader-change", {"partition": 0, "leader": 1, "epoch": 0, "isr": [1, 2, 3]}),
        (0.05, "leader-change", {"partition": 1, "leader": 2, "epoch": 0, "isr": [2, 3, 1]}),
        (3.4, "fenced", {"broker": 1}),
        (3.4, "leader-change", {"partition": 0, "leader": 2, "epoch": 1, "isr": [2, 3]}),
        (5.6, "isr-change", {"partition": 0, "isr": [1, 2, 3], "version": 3}),
        (6.6, "isr-change", {"partition": 0, "isr": [1, 2], "version": 4}),
        (8.0, "isr-change", {"partition": 0, "isr": [1, 2, 3], "version": 5}),
    ])
    n1_events = [(0.06, "role", {"partition": 0, "role": "leader", "epoch": 0})]
    n1_events += [(0.1 + 0.35 * v + 0.01, "hw-change", {"partition": 0, "old": v, "new": v + 1}) for v in range(7)]
    n1_events += [(0.01, "start", {"host": "127.71.0.2", "port": 9092}), (5.1, "start", {"host": "127.71.0.2"}),
                  (5.2, "truncate", {"partition": 0, "from": 9, "to": 7, "why": "hw" if lossy else "leader-epoch"}),
                  (5.3, "role", {"partition": 0, "role": "follower", "epoch": 1})]
    _events(run, "n1", n1_events)
    _events(run, "n2", [(3.45, "role", {"partition": 0, "role": "leader", "epoch": 1}),
                        (3.46, "leader-change", {"partition": 0, "leader": 2, "epoch": 1, "isr": [2, 3]}),
                        (4.5, "hw-change", {"partition": 0, "old": 7, "new": 8}),
                        (4.7, "hw-change", {"partition": 0, "old": 8, "new": 10}),
                        (6.2, "hw-change", {"partition": 1, "old": 0, "new": 6})])
    _events(run, "n3", [(0.5, "hw-change", {"partition": 0, "old": 0, "new": 7}),
                        (8.05, "truncate", {"partition": 0, "from": 9, "to": 9, "why": XSS})])
    with (run / "nodes" / "n3" / "broker.log").open("a") as fh:
        fh.write("this is not json\n")

    (run / "test.json").write_text(json.dumps({
        "name": test_name or name, "run_id": f"{name}-{timestamp}-ab12", "timestamp": timestamp,
        "start_wall_ns": START_WALL_NS + start_offset_s * S, "seed": 42,
        "config": {"workload": "producer-consumer", "partitions": 2, "replication_factor": 3,
                   "broker": {"truncation": "hw" if lossy else "leader-epoch", "min_insync_replicas": 1 if lossy else 2},
                   "producer": {"acks": "1" if lossy else "all"}, "nemesis": {"faults": ["kill", "partition"]},
                   "note": XSS},
        "versions": {"highwater": "0.1.0", "python": "3.11.7"},
        "cluster": {"backend": "local", "nodes": {n: {"host": f"127.71.0.{i + 2}", "port": 9092}
                                                  for i, n in enumerate(NODES)}}}, indent=2))

    if kind == "unchecked":
        return run
    kinds = ("lost-write", "failed-write-present", "divergence", "inconsistent-offset", "duplicate",
             "nonmonotonic-send", "poll-skip", "nonmonotonic-poll", "dirty-read", "aborted-read", "hw-regression")
    axis = time_axis(max(op["time"] for op in h.ops))
    found: dict[str, list[tuple[int, int | None]]] = {k: [] for k in kinds}
    anomalies = {k: {"count": 0, "fails_run": True, "examples": []} for k in kinds}
    lost = ([(0, v) for v in (7, 8)] if lossy else []) + ([(1, v) for v in (104, 105, 106)] if two else [])
    if lossy:
        def lost_example(p: int, v: int) -> dict[str, Any]:
            op = h.ops[acks[v]]
            on = {n: {"value_at": v if (p, n) == (0, "n3") else None, "at_offset": op["value"]["offset"]}
                  for n in NODES}
            return {"partition": p, "value": v, "offset": op["value"]["offset"], "index": acks[v],
                    "time": op["time"], "epoch": 0, "note": XSS, "replicas": on}
        listed = [(0, 7), (1, 104)] if two else lost  # the checker's first examples, not all of them
        anomalies["lost-write"] = {"count": len(lost), "fails_run": True,
                                   "examples": [lost_example(p, v) for p, v in listed]}
        found["lost-write"] = [(p, h.ops[acks[v]]["time"]) for p, v in lost]
        anomalies["divergence"] = {"count": 2, "fails_run": True, "examples": [
            {"partition": 0, "offset": o, "committed": False, "replicas": {"n1": v, "n2": v, "n3": o}}
            for o, v in ((7, 10), (8, 11))]}
        found["divergence"] = [(0, None), (0, None)]  # about replica logs, not an operation: untimed
    lost_by: dict[int, list[int]] = {}
    for p, v in lost:
        lost_by.setdefault(p, []).append(h.ops[acks[v]]["time"])
    if not old_format:
        for k in kinds:
            anomalies[k].update(totals(axis, found[k]))
        anomalies["lost-write"]["ack_times"] = {
            str(p): {"first_s": round(min(ts) / S, 6), "last_s": round(max(ts) / S, 6)} for p, ts in lost_by.items()}
    valid: Any = {"invalid": False, "lossy2": False, "valid": True, "unknown": "unknown"}[kind]
    parts = [{"partition": 0, "recovered": kind != "unknown", "hw": len(p0), "acked": 12, "committed": len(p0)},
             {"partition": 1, "recovered": True, "hw": len(p1), "acked": 6, "committed": len(p1)}]
    if not old_format:
        for item in parts:
            item["lost"] = len(lost_by.get(item["partition"], []))
    results = {
        "valid": valid, "failed_kinds": ["lost-write", "divergence"] if lossy else [],
        "anomalies": anomalies,
        "unseen": {"count": 3 if kind == "unknown" else 0, "partitions": [0] if kind == "unknown" else []},
        "partitions": parts,
        "stats": {"ops": {"send": {"ok": 18, "fail": 1, "info": 1}},
                  "availability": {"in_fault": 0.7, "outside_fault": 1.0}},
        "checker": {"engine": "reference", "elapsed_s": 0.1, "version": "0.1.0"},
    }
    if not old_format:
        results["time_axis"] = axis
    if kind == "unknown":
        results["unknown_reasons"] = [
            {"partition": 0, "reason": "no replica recovered; 3 acknowledged writes could not be checked"},
            {"file": "history.jsonl", "line": 7, "reason": "torn line skipped (--lenient)"}]
    (run / "results.json").write_text(json.dumps(results, indent=2))
    return run
