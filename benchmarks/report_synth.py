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
from pathlib import Path

NODES = ("n1", "n2", "n3")
FAULTS = ("kill", "pause", "partition")


def build_run(run_dir: Path, *, ops: int = 1_000_000, partitions: int = 4, workers: int = 20,
              duration_s: float = 600.0, fault_every_s: float = 30.0, fault_len_s: float = 10.0,
              seed: int = 7) -> Path:
    rng = random.Random(seed)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    start_wall_ns = 1_763_765_101_000_000_000
    ns = 1_000_000_000
    gap_ns = int(duration_s * ns * workers / (ops / 2))

    faults = []
    t = fault_every_s / 2
    fid = 0
    while t + fault_len_s < duration_s * 0.95:
        fault = FAULTS[fid % len(FAULTS)]
        faults.append((int(t * ns), int((t + fault_len_s) * ns), fid, fault, [NODES[fid % 3]]))
        fid += 1
        t += fault_every_s

    def in_fault(tn: int) -> bool:
        for a, b, *_ in faults:
            if a <= tn < b:
                return True
        return False

    events: list[tuple[int, int, str]] = []  # (time, seq, line-without-index)
    seq = 0
    for a, b, wid, fault, targets in faults:
        for tn, typ, phase, f in ((a, "invoke", "start", fault), (a + 1_000_000, "info", "start", fault),
                                  (b, "invoke", "stop", "heal"), (b + 1_000_000, "info", "stop", "heal")):
            value = {"fault": fault, "phase": phase, "id": wid, "targets": targets}
            if typ == "info":
                value["detail"] = f"{f} {','.join(targets)}"
            events.append((tn, seq, json.dumps({"process": "nemesis", "type": typ, "f": f, "value": value},
                                               separators=(",", ":"))))
            seq += 1

    next_offset = [0] * partitions
    acked: list[list[int]] = [[] for _ in range(partitions)]
    next_value = [0] * partitions
    heap = [(rng.randrange(gap_ns), w, w) for w in range(workers)]  # (time, worker, process)
    heapq.heapify(heap)
    next_process = workers
    client_lines = 0
    target = ops - len(events) - partitions
    out: list[tuple[int, int, str]] = []
    while client_lines + 2 <= target:
        tn, w, process = heapq.heappop(heap)
        p = rng.randrange(partitions)
        faulty = in_fault(tn)
        lat = int(rng.lognormvariate(14.5, 0.6)) if not faulty else int(rng.lognormvariate(18.5, 1.0))
        send = rng.random() < 0.6
        roll = rng.random()
        typ = "ok" if (not faulty or roll < 0.6) else ("fail" if roll < 0.85 else "info")
        if send:
            v = next_value[p]
            next_value[p] += 1
            inv = {"process": process, "type": "invoke", "f": "send", "value": {"partition": p, "value": v}}
            if typ == "ok":
                o = next_offset[p]
                next_offset[p] += 1
                acked[p].append(v)
                comp = {"process": process, "type": "ok", "f": "send",
                        "value": {"partition": p, "value": v, "offset": o, "epoch": 1}}
            else:
                comp = {"process": process, "type": typ, "f": "send", "value": {"partition": p, "value": v},
                        "error": "timeout" if typ == "info" else "NOT_ENOUGH_REPLICAS"}
        else:
            o = max(0, next_offset[p] - 5)
            inv = {"process": process, "type": "invoke", "f": "poll", "value": {"partition": p, "offset": o}}
            if typ == "ok":
                recs = [[o + i, acked[p][o + i]] for i in range(min(5, len(acked[p]) - o))]
                comp = {"process": process, "type": "ok", "f": "poll",
                        "value": {"partition": p, "offset": o, "records": recs, "hw": next_offset[p], "epoch": 1}}
            else:
                comp = {"process": process, "type": typ, "f": "poll", "value": {"partition": p, "offset": o},
                        "error": "timeout" if typ == "info" else "NOT_LEADER"}
        out.append((tn, seq, json.dumps(inv, separators=(",", ":"))))
        out.append((tn + lat, seq + 1, json.dumps(comp, separators=(",", ":"))))
        seq += 2
        client_lines += 2
        nxt = tn + lat + rng.randrange(gap_ns)
        if typ == "info":
            process = next_process
            next_process += 1
        heapq.heappush(heap, (nxt, w, process))
    events.extend(out)
    events.sort()
    end = events[-1][0] + 1_000_000
    for p in range(partitions):
        hw = next_offset[p]
        fs = {"partition": p, "recovered": True, "hw": hw, "leader": "n1", "epoch": 1 + len(faults),
              "isr": list(NODES), "replicas": {n: {"leo": hw, "hw": hw} for n in NODES}}
        events.append((end + p, seq, json.dumps({"process": "harness", "type": "info", "f": "final-state",
                                                 "value": fs}, separators=(",", ":"))))
        seq += 1

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

    # replicas: partition 0's n3 diverges in its last 300 offsets; 25 acked writes of p0 are lost
    lost = []
    for p in range(partitions):
        n = next_offset[p]
        for node in NODES:
            d = run_dir / "replicas" / node
            d.mkdir(parents=True, exist_ok=True)
            vals = acked[p]
            with (d / f"p{p}.jsonl").open("w") as fh:
                fh.write(json.dumps({"kind": "meta", "node": node, "topic": "hw", "partition": p, "log_start": 0,
                                     "leo": n, "hw": n, "epochs": [[0, 0], [1, n // 2]], "torn_bytes": 0}) + "\n")
                for o in range(n):
                    v, e = vals[o], (0 if o < n // 2 else 1)
                    if p == 0 and node == "n3" and o >= n - 300:
                        v, e = 10_000_000 + o, 2
                    fh.write(f'{{"kind":"record","offset":{o},"epoch":{e},"value":{v},"key":null,'
                             f'"timestamp":{1763765100000 + o},"crc_ok":true}}\n')
    n0 = next_offset[0]
    for o in range(n0 - 300, n0 - 275):
        lost.append({"partition": 0, "value": acked[0][o], "offset": o,
                     "index": index_of_value.get((0, acked[0][o]), 0), "time": 0})
    divergence = [{"partition": 0, "offset": o, "committed": True,
                   "values": {"n1": acked[0][o], "n2": acked[0][o], "n3": 10_000_000 + o}}
                  for o in range(n0 - 300, n0 - 280)]

    for node in NODES + ("controller",):
        d = run_dir / "nodes" / node
        d.mkdir(parents=True, exist_ok=True)
        with (d / "broker.log").open("w") as fh:
            for k, (a, b, wid, fault, targets) in enumerate(faults):
                for p in range(partitions):
                    leader = NODES[(k + 1) % 3]
                    if node == "controller":
                        fh.write(json.dumps({"ts": start_wall_ns + a + 500_000_000, "node": node,
                                             "event": "leader-change", "partition": p, "leader": leader,
                                             "epoch": k + 1, "isr": [x for x in NODES if x not in targets]}) + "\n")
                        fh.write(json.dumps({"ts": start_wall_ns + b + 900_000_000, "node": node,
                                             "event": "isr-change", "partition": p, "isr": list(NODES),
                                             "version": 2 * k + 2}) + "\n")
                    elif node in targets:
                        fh.write(json.dumps({"ts": start_wall_ns + b + 200_000_000, "node": node,
                                             "event": "truncate", "partition": p, "from": 100 * k + 7,
                                             "to": 100 * k, "why": "hw"}) + "\n")
            if node != "controller":
                for p in range(partitions):
                    step = max(1, next_offset[p] // 2000)
                    for o in range(0, next_offset[p], step):
                        tn = int(o / max(1, next_offset[p]) * duration_s * ns)
                        fh.write(json.dumps({"ts": start_wall_ns + tn, "node": node, "event": "hw-change",
                                             "partition": p, "old": max(0, o - step), "new": o}) + "\n")
        (d / "stdout.log").write_text(f"{node} started\n")

    (run_dir / "test.json").write_text(json.dumps({
        "name": "synthetic", "run_id": "synthetic-bench", "timestamp": "20261121T000000Z",
        "start_wall_ns": start_wall_ns, "seed": seed,
        "config": {"nodes": list(NODES), "partitions": partitions, "replication_factor": 3, "workers": workers,
                   "duration_s": duration_s, "broker": {"truncation": "hw", "min_insync_replicas": 1},
                   "producer": {"acks": "1"}, "nemesis": {"faults": list(FAULTS), "interval_s": fault_every_s}},
        "versions": {"highwater": "0.1.0"},
        "cluster": {"backend": "synthetic", "nodes": {n: {"host": "127.0.0.1", "port": 9092 + i}
                                                      for i, n in enumerate(NODES)}}}, indent=2))
    kinds = ("lost-write", "failed-write-present", "divergence", "inconsistent-offset", "duplicate",
             "nonmonotonic-send", "poll-skip", "nonmonotonic-poll", "dirty-read", "aborted-read", "hw-regression")
    anomalies = {k: {"count": 0, "fails_run": True, "examples": []} for k in kinds}
    anomalies["lost-write"] = {"count": len(lost), "fails_run": True, "examples": lost}
    anomalies["divergence"] = {"count": 300, "fails_run": True, "examples": divergence}
    (run_dir / "results.json").write_text(json.dumps({
        "valid": False, "failed_kinds": ["lost-write", "divergence"], "anomalies": anomalies,
        "unseen": {"count": 0, "partitions": []},
        "partitions": [{"partition": p, "recovered": True, "hw": next_offset[p], "acked": len(acked[p]),
                        "committed": next_offset[p]} for p in range(partitions)],
        "stats": {"ops": {}, "availability": {"in_fault": 0.6, "outside_fault": 1.0}},
        "checker": {"engine": "synthetic", "elapsed_s": 0.0, "version": "0.1.0"}}, indent=1))
    (run_dir / "final.json").write_text(json.dumps({"partitions": [], "waited_s": 0.0, "timed_out": False}))
    return run_dir
