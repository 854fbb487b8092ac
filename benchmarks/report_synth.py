"""A synthetic run directory of any size, for the report benchmark (docs/formats.md layout).

Simulates client workers (send / poll) over a virtual clock with a heap, a nemesis that starts a fault
every `fault_every_s` seconds, three replicas per partition with one divergent tail and lost writes on
partition 0, broker event logs (leader, ISR, HW, truncation) and a results.json naming the anomalies.
Not a model of the broker: just data of the right shape and volume.
"""
from __future__ import annotations

import heapq
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rundir import kinds  # noqa: E402

NODES = ("n1", "n2", "n3")
FAULTS = ("kill", "pause", "partition")
START_WALL_NS = 1_763_765_101_000_000_000
NS = 1_000_000_000
# the kinds results.json lists (all with count 0 but lost writes and divergence)
LISTED_KINDS = (kinds.LOST_WRITE, kinds.FAILED_WRITE_PRESENT, kinds.DIVERGENCE, kinds.INCONSISTENT_OFFSET,
                kinds.DUPLICATE, kinds.NONMONOTONIC_SEND, kinds.POLL_SKIP, kinds.NONMONOTONIC_POLL,
                kinds.DIRTY_READ, kinds.ABORTED_READ, kinds.HW_REGRESSION)


@dataclass(frozen=True)
class Knobs:
    """The size and shape of a synthetic run."""
    ops: int = 1_000_000
    partitions: int = 4
    workers: int = 20
    duration_s: float = 600.0
    fault_every_s: float = 30.0
    fault_len_s: float = 10.0
    seed: int = 7


@dataclass
class Logs:
    """What the clients left behind: per partition, the next offset and the acknowledged values."""
    next_offset: list[int]
    acked: list[list[int]]


def build_run(run_dir: Path, knobs: Knobs = Knobs()) -> Path:
    """Writes a synthetic run directory of the size and shape `knobs` gives at run_dir; returns it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    faults = _faults(knobs)
    events = _nemesis_events(faults)
    logs = _client_events(knobs, faults, events)
    _final_states(events, knobs, faults, logs)
    index_of_value = _write_history(run_dir, events)
    _write_replicas(run_dir, knobs, logs)
    for node in NODES + ("controller",):
        _write_node(run_dir, node, knobs, faults, logs)
    _write_test_json(run_dir, knobs)
    _write_results(run_dir, knobs, logs, index_of_value)
    (run_dir / "final.json").write_text(json.dumps({"partitions": [], "waited_s": 0.0, "timed_out": False}))
    return run_dir


def _dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _faults(knobs: Knobs) -> list[tuple]:
    """(start ns, stop ns, id, fault, targets) of each fault, one every `fault_every_s`."""
    faults = []
    t = knobs.fault_every_s / 2
    fid = 0
    while t + knobs.fault_len_s < knobs.duration_s * 0.95:
        fault = FAULTS[fid % len(FAULTS)]
        faults.append((int(t * NS), int((t + knobs.fault_len_s) * NS), fid, fault, [NODES[fid % 3]]))
        fid += 1
        t += knobs.fault_every_s
    return faults


def _in_fault(faults: list[tuple], tn: int) -> bool:
    for a, b, *_ in faults:
        if a <= tn < b:
            return True
    return False


def _nemesis_events(faults: list[tuple]) -> list[tuple[int, int, str]]:
    """The nemesis' lines as (time, seq, line-without-index): invoke and info of each start and stop."""
    events: list[tuple[int, int, str]] = []
    for a, b, wid, fault, targets in faults:
        for tn, typ, phase, f in ((a, "invoke", "start", fault), (a + 1_000_000, "info", "start", fault),
                                  (b, "invoke", "stop", "heal"), (b + 1_000_000, "info", "stop", "heal")):
            value = {"fault": fault, "phase": phase, "id": wid, "targets": targets}
            if typ == "info":
                value["detail"] = f"{f} {','.join(targets)}"
            events.append((tn, len(events), _dumps({"process": "nemesis", "type": typ, "f": f, "value": value})))
    return events


def _send(logs: Logs, next_value: list[int], op: tuple) -> tuple[dict, dict]:
    """The invoke and completion of a send to partition p completing with typ."""
    process, p, typ = op
    v = next_value[p]
    next_value[p] += 1
    inv = {"process": process, "type": "invoke", "f": "send", "value": {"partition": p, "value": v}}
    if typ == "ok":
        o = logs.next_offset[p]
        logs.next_offset[p] += 1
        logs.acked[p].append(v)
        comp = {"process": process, "type": "ok", "f": "send",
                "value": {"partition": p, "value": v, "offset": o, "epoch": 1}}
    else:
        comp = {"process": process, "type": typ, "f": "send", "value": {"partition": p, "value": v},
                "error": "timeout" if typ == "info" else "NOT_ENOUGH_REPLICAS"}
    return inv, comp


def _poll(logs: Logs, op: tuple) -> tuple[dict, dict]:
    """The invoke and completion of a poll of partition p's last 5 offsets completing with typ."""
    process, p, typ = op
    acked = logs.acked[p]
    o = max(0, logs.next_offset[p] - 5)
    inv = {"process": process, "type": "invoke", "f": "poll", "value": {"partition": p, "offset": o}}
    if typ == "ok":
        recs = [[o + i, acked[o + i]] for i in range(min(5, len(acked) - o))]
        comp = {"process": process, "type": "ok", "f": "poll",
                "value": {"partition": p, "offset": o, "records": recs, "hw": logs.next_offset[p], "epoch": 1}}
    else:
        comp = {"process": process, "type": typ, "f": "poll", "value": {"partition": p, "offset": o},
                "error": "timeout" if typ == "info" else "NOT_LEADER"}
    return inv, comp


def _client_events(knobs: Knobs, faults: list[tuple], events: list[tuple[int, int, str]]) -> Logs:
    """Adds the clients' lines to events (sorted by time after), up to `ops` lines in all."""
    rng = random.Random(knobs.seed)
    partitions, workers = knobs.partitions, knobs.workers
    gap_ns = int(knobs.duration_s * NS * workers / (knobs.ops / 2))
    logs = Logs([0] * partitions, [[] for _ in range(partitions)])
    next_value = [0] * partitions
    heap = [(rng.randrange(gap_ns), w, w) for w in range(workers)]  # (time, worker, process)
    heapq.heapify(heap)
    next_process = workers
    seq = len(events)
    target = knobs.ops - len(events) - partitions
    out: list[tuple[int, int, str]] = []
    while len(out) + 2 <= target:
        tn, w, process = heapq.heappop(heap)
        p = rng.randrange(partitions)
        faulty = _in_fault(faults, tn)
        lat = int(rng.lognormvariate(14.5, 0.6)) if not faulty else int(rng.lognormvariate(18.5, 1.0))
        send = rng.random() < 0.6
        roll = rng.random()
        typ = "ok" if (not faulty or roll < 0.6) else ("fail" if roll < 0.85 else "info")
        inv, comp = _send(logs, next_value, (process, p, typ)) if send else _poll(logs, (process, p, typ))
        out.append((tn, seq, _dumps(inv)))
        out.append((tn + lat, seq + 1, _dumps(comp)))
        seq += 2
        nxt = tn + lat + rng.randrange(gap_ns)
        if typ == "info":
            process = next_process
            next_process += 1
        heapq.heappush(heap, (nxt, w, process))
    events.extend(out)
    events.sort()
    return logs


def _final_states(events: list[tuple[int, int, str]], knobs: Knobs, faults: list[tuple], logs: Logs) -> None:
    """Appends the harness' final-state line of each partition, after the last event."""
    end = events[-1][0] + 1_000_000
    seq = len(events)
    for p in range(knobs.partitions):
        hw = logs.next_offset[p]
        fs = {"partition": p, "recovered": True, "hw": hw, "leader": "n1", "epoch": 1 + len(faults),
              "isr": list(NODES), "replicas": {n: {"leo": hw, "hw": hw} for n in NODES}}
        events.append((end + p, seq, _dumps({"process": "harness", "type": "info", "f": "final-state",
                                             "value": fs})))
        seq += 1


def _write_history(run_dir: Path, events: list[tuple[int, int, str]]) -> dict[tuple[int, int], int]:
    """history.jsonl and nemesis.jsonl; the index of every 97th line's acknowledged send by (partition, value)."""
    index_of_value: dict[tuple[int, int], int] = {}
    with (run_dir / "history.jsonl").open("w") as fh, (run_dir / "nemesis.jsonl").open("w") as nf:
        for i, (tn, _s, body) in enumerate(events):
            line = f'{{"index":{i},"time":{tn},{body[1:]}\n'
            fh.write(line)
            if '"process":"nemesis"' in body:
                nf.write(line)
            elif i % 97 == 0 and '"f":"send"' in body and '"type":"ok"' in body:
                obj = json.loads(body)
                index_of_value[(obj["value"]["partition"], obj["value"]["value"])] = i
    return index_of_value


def _write_replicas(run_dir: Path, knobs: Knobs, logs: Logs) -> None:
    """The replica dumps: partition 0's n3 diverges in its last 300 offsets."""
    for p in range(knobs.partitions):
        n = logs.next_offset[p]
        for node in NODES:
            d = run_dir / "replicas" / node
            d.mkdir(parents=True, exist_ok=True)
            vals = logs.acked[p]
            with (d / f"p{p}.jsonl").open("w") as fh:
                fh.write(json.dumps({"kind": "meta", "node": node, "topic": "hw", "partition": p, "log_start": 0,
                                     "leo": n, "hw": n, "epochs": [[0, 0], [1, n // 2]], "torn_bytes": 0}) + "\n")
                for o in range(n):
                    v, e = vals[o], (0 if o < n // 2 else 1)
                    if p == 0 and node == "n3" and o >= n - 300:
                        v, e = 10_000_000 + o, 2
                    fh.write(f'{{"kind":"record","offset":{o},"epoch":{e},"value":{v},"key":null,'
                             f'"timestamp":{1763765100000 + o},"crc_ok":true}}\n')


def _controller_lines(knobs: Knobs, faults: list[tuple]) -> list[dict]:
    """The controller's leader change (at each fault's start) and ISR change (at its end) per partition."""
    out = []
    for k, (a, b, _wid, _fault, targets) in enumerate(faults):
        for p in range(knobs.partitions):
            out.append({"ts": START_WALL_NS + a + 500_000_000, "node": "controller", "event": "leader-change",
                        "partition": p, "leader": NODES[(k + 1) % 3], "epoch": k + 1,
                        "isr": [x for x in NODES if x not in targets]})
            out.append({"ts": START_WALL_NS + b + 900_000_000, "node": "controller", "event": "isr-change",
                        "partition": p, "isr": list(NODES), "version": 2 * k + 2})
    return out


def _broker_lines(node: str, knobs: Knobs, faults: list[tuple], logs: Logs) -> list[dict]:
    """A broker's truncations (after each fault that targets it) and its HW changes over the run."""
    out = []
    for k, (_a, b, _wid, _fault, targets) in enumerate(faults):
        if node in targets:
            for p in range(knobs.partitions):
                out.append({"ts": START_WALL_NS + b + 200_000_000, "node": node, "event": "truncate",
                            "partition": p, "from": 100 * k + 7, "to": 100 * k, "why": "hw"})
    for p in range(knobs.partitions):
        n = logs.next_offset[p]
        step = max(1, n // 2000)
        for o in range(0, n, step):
            tn = int(o / max(1, n) * knobs.duration_s * NS)
            out.append({"ts": START_WALL_NS + tn, "node": node, "event": "hw-change",
                        "partition": p, "old": max(0, o - step), "new": o})
    return out


def _write_node(run_dir: Path, node: str, knobs: Knobs, faults: list[tuple], logs: Logs) -> None:
    d = run_dir / "nodes" / node
    d.mkdir(parents=True, exist_ok=True)
    lines = _controller_lines(knobs, faults) if node == "controller" else _broker_lines(node, knobs, faults, logs)
    with (d / "broker.log").open("w") as fh:
        for line in lines:
            fh.write(json.dumps(line) + "\n")
    (d / "stdout.log").write_text(f"{node} started\n")


def _write_test_json(run_dir: Path, knobs: Knobs) -> None:
    (run_dir / "test.json").write_text(json.dumps({
        "name": "synthetic", "run_id": "synthetic-bench", "timestamp": "20261121T000000Z",
        "start_wall_ns": START_WALL_NS, "seed": knobs.seed,
        "config": {"nodes": list(NODES), "partitions": knobs.partitions, "replication_factor": 3,
                   "workers": knobs.workers, "duration_s": knobs.duration_s,
                   "broker": {"truncation": "hw", "min_insync_replicas": 1}, "producer": {"acks": "1"},
                   "nemesis": {"faults": list(FAULTS), "interval_s": knobs.fault_every_s}},
        "versions": {"highwater": "0.1.0"},
        "cluster": {"backend": "synthetic", "nodes": {n: {"host": "127.0.0.1", "port": 9092 + i}
                                                      for i, n in enumerate(NODES)}}}, indent=2))


def _anomalies(logs: Logs, index_of_value: dict[tuple[int, int], int]) -> dict:
    """The anomalies: 25 acknowledged writes of partition 0 lost, 300 offsets diverging (20 examples)."""
    acked0, n0 = logs.acked[0], logs.next_offset[0]
    lost = [{"partition": 0, "value": acked0[o], "offset": o, "index": index_of_value.get((0, acked0[o]), 0),
             "time": 0} for o in range(n0 - 300, n0 - 275)]
    divergence = [{"partition": 0, "offset": o, "committed": True,
                   "values": {"n1": acked0[o], "n2": acked0[o], "n3": 10_000_000 + o}}
                  for o in range(n0 - 300, n0 - 280)]
    anomalies = {k.name: {"count": 0, "fails_run": True, "examples": []} for k in LISTED_KINDS}
    anomalies[kinds.LOST_WRITE.name] = {"count": len(lost), "fails_run": True, "examples": lost}
    anomalies[kinds.DIVERGENCE.name] = {"count": 300, "fails_run": True, "examples": divergence}
    return anomalies


def _write_results(run_dir: Path, knobs: Knobs, logs: Logs, index_of_value: dict[tuple[int, int], int]) -> None:
    (run_dir / "results.json").write_text(json.dumps({
        "valid": False, "failed_kinds": [kinds.LOST_WRITE.name, kinds.DIVERGENCE.name],
        "anomalies": _anomalies(logs, index_of_value),
        "unseen": {"count": 0, "partitions": []},
        "partitions": [{"partition": p, "recovered": True, "hw": logs.next_offset[p], "acked": len(logs.acked[p]),
                        "committed": logs.next_offset[p]} for p in range(knobs.partitions)],
        "stats": {"ops": {}, "availability": {"in_fault": 0.6, "outside_fault": 1.0}},
        "checker": {"engine": "synthetic", "elapsed_s": 0.0, "version": "0.1.0"}}, indent=1))
