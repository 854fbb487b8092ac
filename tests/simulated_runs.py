"""Small synthetic run directories as the harness writes them (JSON lines), for the checker's tests and
benchmarks (test data: it lives under tests/, not in the checkers package).

`RunBuilder` writes histories operation by operation (hand-built known-answer tests), and the nodes'
event logs line by line (the protocol rules' input); `simulate()` runs
a random but correct Kafka-like model (concurrent producers and consumers, fault windows, leader changes
whose new leader's HW lags, info sends that end up present or absent, uncommitted tails truncated and
their offsets rewritten) and `inject()` then damages such a run with random anomalies of every kind.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.eventlog import EVENT_FIELDS
from rundir import formats as rf


@dataclass
class Replica:
    records: list[tuple[Any, int]]          # (value, epoch) at offsets 0, 1, ...
    hw: int
    crc_ok: dict[int, bool] = field(default_factory=dict)


class RunBuilder:
    """Build a run directory's history, final state, replica dumps and node event logs by hand.

    `backend` and `start_wall_ns` go into test.json: the backend decides whether the protocol rules
    trust the logs' clocks to agree ("local", "docker"), and an event's `ts` minus `start_wall_ns` is
    its time on the history's axis. `controller` names the node whose log is the controller's (its
    first line is a `listening` event, as the checker and the report recognise it)."""

    def __init__(self, config: dict | None = None, *, backend: str = "synthetic", start_wall_ns: int = 0,
                 controller: str = "c0"):
        self.ops: list[dict] = []
        self.time = 0
        self.config = config or {}
        self.replicas: dict[tuple[str, int], Replica] = {}
        self.final_states: list[dict] = []
        self._next_fault_id = 0
        self.backend = backend
        self.start_wall_ns = start_wall_ns
        self.controller = controller
        self.logs: dict[str, list[str]] = {}     # node -> its event log's lines
        self._last_ts = start_wall_ns

    # -- raw operations ---------------------------------------------------------------------------
    def op(self, process: Any, typ: str, f: str, value: dict | None, error: str | None = None,
           dt: int = 1_000_000) -> int:
        self.time += dt
        o = {"index": len(self.ops), "time": self.time, "process": process, "type": typ, "f": f}
        if value is not None:
            o["value"] = value
        if error is not None:
            o["error"] = error
        self.ops.append(o)
        return o["index"]

    # -- client operations (invoke immediately followed by completion) --------------------------
    def send(self, process: int, partition: int, value: Any, outcome: str = "ok", offset: int | None = None,
             epoch: int = 1, error: str | None = None, key: int | None = None) -> int:
        inv = {"partition": partition, "value": value} if key is None else {"partition": partition, "key": key,
                                                                             "value": value}
        self.op(process, "invoke", "send", inv)
        if outcome == "ok":
            return self.op(process, "ok", "send", dict(inv, offset=offset, epoch=epoch))
        return self.op(process, outcome, "send", inv, error=error or ("timeout" if outcome == "info" else "NOT_LEADER"))

    def poll(self, process: int, partition: int, frm: int, records: list[tuple[int, Any]], hw: int, epoch: int = 1,
             f: str = "poll", outcome: str = "ok") -> int:
        inv = {"partition": partition, "offset": frm}
        self.op(process, "invoke", f, inv)
        if outcome != "ok":
            return self.op(process, outcome, f, inv, error="timeout")
        return self.op(process, "ok", f, dict(inv, records=[list(r) for r in records], hw=hw, epoch=epoch))

    def assign(self, process: int, partition: int, offset: int) -> int:
        v = {"partition": partition, "offset": offset}
        self.op(process, "invoke", "assign", v)
        return self.op(process, "ok", "assign", v)

    def fault(self, phase: str, fault_id: int | None = None, fault: str = "kill", targets=("n2",),
              damage: list[dict] | None = None) -> int:
        if fault_id is None:
            fault_id = self._next_fault_id
            self._next_fault_id += 1
        f = {"kill": {"start": "kill", "stop": "restart"}, "pause": {"start": "pause", "stop": "resume"},
             "partition": {"start": "partition", "stop": "heal"}}.get(fault, {"start": fault, "stop": fault})[phase]
        v = {"fault": fault, "phase": phase, "id": fault_id, "targets": list(targets)}
        self.op("nemesis", "invoke", f, v)
        done = dict(v, detail="synthetic")
        if damage is not None:                  # a corrupt start's completion: what it damaged
            done["damage"] = damage
        self.op("nemesis", "info", f, done)
        return fault_id

    # -- node event logs ----------------------------------------------------------------------------
    def event(self, node: str, event: str, *, ts: int | None = None, **fields: Any) -> int:
        """Append one event line to `node`'s log (nodes/<node>/broker.log); returns its `ts`.

        `ts` is wall-clock nanoseconds; by default the builder's clock now (`start_wall_ns` plus the last
        operation's time), and a microsecond after the previous defaulted event, so lines written one
        after another keep their order without moving the operations' clock. The event and its fields
        must be documented ones (broker/eventlog.py), so a misspelt field cannot pass unnoticed."""
        allowed = EVENT_FIELDS.get(event)
        if allowed is None:
            raise ValueError(f"undocumented event {event!r}")
        if set(fields) - allowed:
            raise ValueError(f"{event}: undocumented fields {sorted(set(fields) - allowed)}")
        if ts is None:
            ts = max(self._last_ts + 1_000, self.start_wall_ns + self.time)
            self._last_ts = ts
        if node == self.controller and node not in self.logs:
            self.logs[node] = [json.dumps({"ts": ts, "node": node, "event": "listening", "host": "127.0.0.1",
                                           "port": 9000}, separators=(",", ":"))]
        self.raw_event(node, json.dumps({"ts": ts, "node": node, "event": event, **fields}, separators=(",", ":")))
        return ts

    def raw_event(self, node: str, line: str) -> None:
        """Append any text as one line of `node`'s log (a torn or malformed line, say)."""
        self.logs.setdefault(node, []).append(line)

    def wall(self, time_ns: int) -> int:
        """A history time as an event log `ts`."""
        return self.start_wall_ns + time_ns

    # -- final phase ------------------------------------------------------------------------------
    def final(self, partition: int, log: list[Any], *, epoch: int = 1, recovered: bool = True,
              hw: int | None = None, replicas: dict[str, Replica] | None = None, process: int = 9000,
              chunk: int = 1000, read: bool = True, leader: str = "n1", record_epochs: bool = False) -> None:
        """Final reads of `log` (values at offsets 0..), the final-state op, and replica dumps
        (default: n1..n3 all holding `log` with `epoch`, HW = LEO). With `record_epochs` the final reads'
        records carry the leader replica's epochs ([o, v, e]); otherwise none ([o, v]: unknown)."""
        hw = len(log) if hw is None else hw
        if replicas is None:
            replicas = {n: Replica([(v, epoch) for v in log], len(log)) for n in ("n1", "n2", "n3")}
        if read:
            lead = replicas.get(leader) or next(iter(replicas.values()))
            for start in range(0, max(hw, 1), chunk):
                recs = [(o, log[o], lead.records[o][1]) if record_epochs else (o, log[o])
                        for o in range(start, min(start + chunk, hw))]
                self.poll(process, partition, start, recs, hw, epoch, f="final-read")
        for node, rep in replicas.items():
            self.replicas[(node, partition)] = rep
        state = {"partition": partition, "recovered": recovered, "hw": hw, "leader": leader, "epoch": epoch,
                 "isr": sorted(replicas), "replicas": {n: {"leo": len(r.records), "hw": r.hw} for n, r in replicas.items()}}
        self.op("harness", "info", rf.FINAL_STATE_F, state)
        self.final_states.append(state)

    # -- output -----------------------------------------------------------------------------------
    def write(self, run_dir: Path | str, name: str = "synthetic", *, evidence: dict | None = None,
              nodes: list[str] | tuple = ()) -> Path:
        """Write the run directory. `evidence`: test.json's evidence section (rundir/evidence.py; None: none,
        as a run directory written before it existed); `nodes`: test.json's cluster nodes, each of which
        must then have left an event log."""
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        test = {"name": name, "run_id": f"{name}-0", "timestamp": "20261121T000000Z",
                "start_wall_ns": self.start_wall_ns, "seed": 0, "config": self.config, "versions": {},
                "cluster": {"backend": self.backend, "nodes": {n: {} for n in nodes}}}
        if evidence is not None:
            test["evidence"] = evidence
        rf.write_json(run_dir / rf.TEST_JSON, test)
        with (run_dir / rf.HISTORY).open("w") as fh:
            for o in self.ops:
                fh.write(json.dumps(o) + "\n")
        with (run_dir / rf.NEMESIS).open("w") as fh:
            for o in self.ops:
                if o["process"] == rf.NEMESIS_PROCESS:
                    fh.write(json.dumps(o) + "\n")
        if self.final_states:
            rf.write_json(run_dir / rf.FINAL_JSON, {"partitions": self.final_states, "waited_s": 0.0, "timed_out": False})
        for (node, p), rep in sorted(self.replicas.items()):
            path = rf.replica_dump_path(run_dir, node, p)
            path.parent.mkdir(parents=True, exist_ok=True)
            epochs = []
            for o, (_, e) in enumerate(rep.records):
                if not epochs or epochs[-1][0] != e:
                    epochs.append([e, o])
            with path.open("w") as fh:
                fh.write(json.dumps({"kind": "meta", "node": node, "topic": "hw", "partition": p, "log_start": 0,
                                     "leo": len(rep.records), "hw": rep.hw, "epochs": epochs, "torn_bytes": 0}) + "\n")
                for o, (v, e) in enumerate(rep.records):
                    fh.write(json.dumps({"kind": "record", "offset": o, "epoch": e, "value": v, "key": None,
                                         "timestamp": 0, "crc_ok": rep.crc_ok.get(o, True)}) + "\n")
        for node, lines in sorted(self.logs.items()):
            path = run_dir / rf.NODES_DIR / node / rf.BROKER_LOG
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in lines))
        return run_dir


# --- a random, correct model -------------------------------------------------------------------------

@dataclass
class _Partition:
    log: list[tuple[int, int]] = field(default_factory=list)   # (value, epoch)
    committed: int = 0                                           # true HW
    epoch: int = 1
    reported: int = 0                                            # HW the current leader reports (may lag)


def simulate(seed: int, *, partitions: int = 2, producers: int = 3, consumers: int = 2, steps: int = 300) -> RunBuilder:
    """A random history of a correct system, with final phase and replica dumps."""
    rnd = random.Random(seed)
    b = RunBuilder(config={"producer": {"idempotent": False}})
    parts = [_Partition() for _ in range(partitions)]
    next_value = [1]
    next_process = [0]

    def new_process() -> int:
        next_process[0] += 1
        return next_process[0]

    prod = [{"proc": new_process(), "op": None} for _ in range(producers)]
    cons = [{"proc": new_process(), "op": None, "pos": {}} for _ in range(consumers)]
    open_faults: list[int] = []

    def commit(p: _Partition) -> None:
        p.committed = len(p.log)
        p.reported = p.committed

    def complete_send(w: dict, fault: bool) -> None:
        part, v = w["op"]
        p = parts[part]
        r = rnd.random()
        bad = 0.35 if fault else 0.08
        if r < 1 - bad:
            p.log.append((v, p.epoch))
            commit(p)
            b.op(w["proc"], "ok", "send", {"partition": part, "value": v, "offset": len(p.log) - 1, "epoch": p.epoch})
        elif r < 1 - bad / 2:
            b.op(w["proc"], "fail", "send", {"partition": part, "value": v}, error="NOT_ENOUGH_REPLICAS")
        else:
            fate = rnd.choice(("present", "tail", "absent"))
            if fate == "present":
                p.log.append((v, p.epoch))
                commit(p)
            elif fate == "tail":
                p.log.append((v, p.epoch))       # uncommitted: truncated at a leader change or committed later
            b.op(w["proc"], "info", "send", {"partition": part, "value": v}, error="timeout")
            w["proc"] = new_process()
        w["op"] = None

    def complete_poll(w: dict, fault: bool) -> None:
        part, frm = w["op"]
        p = parts[part]
        r = rnd.random()
        if r < (0.8 if fault else 0.95):
            end = min(frm + rnd.randint(0, 5), p.reported)
            recs = [[o, p.log[o][0]] for o in range(frm, max(frm, end))]
            b.op(w["proc"], "ok", "poll", {"partition": part, "offset": frm, "records": recs, "hw": p.reported,
                                           "epoch": p.epoch})
            w["pos"][part] = frm + len(recs)
        elif r < 0.97:
            b.op(w["proc"], "fail", "poll", {"partition": part, "offset": frm}, error="NOT_LEADER")
        else:
            b.op(w["proc"], "info", "poll", {"partition": part, "offset": frm}, error="timeout")
            w["proc"] = new_process()
            w["pos"] = {}
        w["op"] = None

    for _ in range(steps):
        r = rnd.random()
        fault = bool(open_faults)
        if r < 0.04:
            if open_faults and rnd.random() < 0.6:
                b.fault("stop", open_faults.pop(rnd.randrange(len(open_faults))))
            else:
                open_faults.append(b.fault("start", fault=rnd.choice(("kill", "pause", "partition"))))
        elif r < 0.08:
            p = rnd.choice(parts)                                   # leader change
            del p.log[p.committed:]                                 # the uncommitted tail is truncated
            p.epoch += 1
            p.reported = max(0, p.committed - rnd.randint(0, 3))    # the new leader's HW lags
        elif r < 0.10:
            p = rnd.choice(parts)                                   # the lagging HW catches up
            p.reported = p.committed
        elif r < 0.55:
            w = rnd.choice(prod)
            if w["op"] is None:
                part = rnd.randrange(partitions)
                w["op"] = (part, next_value[0])
                next_value[0] += 1
                b.op(w["proc"], "invoke", "send", {"partition": part, "value": w["op"][1]})
            else:
                complete_send(w, fault)
        else:
            w = rnd.choice(cons)
            if w["op"] is None:
                part = rnd.randrange(partitions)
                if part not in w["pos"] or rnd.random() < 0.05:
                    off = rnd.randint(0, parts[part].reported)
                    b.assign(w["proc"], part, off)
                    w["pos"][part] = off
                    continue
                w["op"] = (part, w["pos"][part])
                b.op(w["proc"], "invoke", "poll", {"partition": part, "offset": w["pos"][part]})
            else:
                complete_poll(w, fault)
    for w in prod:
        if w["op"] is not None:
            complete_send(w, False)
    for w in cons:
        if w["op"] is not None:
            complete_poll(w, False)
    for fid in open_faults:
        b.fault("stop", fid)
    final_proc = new_process()
    for i, p in enumerate(parts):
        if rnd.random() < 0.5:
            del p.log[p.committed:]
        commit(p)
        b.final(i, [v for v, _ in p.log], epoch=p.epoch, process=final_proc, chunk=rnd.randint(3, 20),
                replicas={n: Replica(list(p.log), len(p.log)) for n in ("n1", "n2", "n3")})
    return b


# --- damage: random anomalies of every kind ----------------------------------------------------------

def inject(b: RunBuilder, seed: int, n: int = 6) -> list[str]:
    """Apply `n` random mutations to a simulated run, in place; returns what was done (for messages)."""
    rnd = random.Random(seed)
    done = []
    ops = b.ops
    by_f = lambda f, typ=None: [o for o in ops if o["f"] == f and (typ is None or o["type"] == typ)]  # noqa: E731
    for _ in range(n):
        kind = rnd.choice(("lose", "fail-present", "diverge", "residual", "ack-offset", "skip", "repeat",
                           "dirty", "aborted", "hw", "duplicate", "unrecovered", "final-gap", "crc"))
        finals = by_f("final-read", "ok")
        polls = [o for o in by_f("poll", "ok") if o["value"]["records"]]
        if kind in ("lose", "duplicate", "fail-present") and finals:
            o = rnd.choice([f for f in finals if f["value"]["records"]] or finals)
            recs = o["value"]["records"]
            if not recs:
                continue
            i = rnd.randrange(len(recs))
            part = o["value"]["partition"]
            if kind == "lose":
                new = -rnd.randint(1, 10**6)
            elif kind == "duplicate":
                new = rnd.choice(recs)[1]
            else:
                failed = [s for s in by_f("send", "fail") if s["value"]["partition"] == part]
                if not failed:
                    continue
                new = rnd.choice(failed)["value"]["value"]
            off = recs[i][0]
            recs[i] = [off, new]
            for (node, p), rep in b.replicas.items():
                if p == part and off < len(rep.records) and rnd.random() < 0.8:
                    rep.records[off] = (new, rep.records[off][1])
            done.append(f"{kind} p{part}@{off}")
        elif kind in ("diverge", "residual", "crc") and b.replicas:
            (node, p), rep = rnd.choice(sorted(b.replicas.items()))
            if not rep.records:
                continue
            off = rnd.randrange(len(rep.records))
            if kind == "crc":
                rep.crc_ok[off] = False
            else:
                rep.records[off] = (-rnd.randint(1, 10**6), rep.records[off][1] + rnd.randint(0, 1))
                if kind == "residual":
                    rep.hw = min(rep.hw, off)
            done.append(f"{kind} {node} p{p}@{off}")
        elif kind == "ack-offset":
            acks = by_f("send", "ok")
            if acks:
                a = rnd.choice(acks)
                a["value"]["offset"] = max(0, a["value"]["offset"] + rnd.choice((-2, -1, 1, 2)))
                done.append(f"ack-offset {a['index']}")
        elif kind in ("skip", "repeat", "dirty", "aborted") and polls:
            o = rnd.choice(polls)
            recs = o["value"]["records"]
            i = rnd.randrange(len(recs))
            if kind == "skip":
                del recs[i]
            elif kind == "repeat":
                recs.insert(i, list(recs[i]))
            elif kind == "dirty":
                recs[i] = [recs[i][0], -rnd.randint(1, 10**6)]
            else:
                failed = [s for s in by_f("send", "fail") if s["value"]["partition"] == o["value"]["partition"]]
                if not failed:
                    continue
                recs[i] = [recs[i][0], rnd.choice(failed)["value"]["value"]]
            done.append(f"{kind} {o['index']}")
        elif kind == "hw":
            obs = by_f("poll", "ok") + finals
            if obs:
                o = rnd.choice(obs)
                o["value"]["hw"] = max(0, o["value"]["hw"] - rnd.randint(1, 3))
                if rnd.random() < 0.3:
                    o["value"]["epoch"] += 1
                done.append(f"hw {o['index']}")
        elif kind == "unrecovered":
            fs = [o for o in ops if o["f"] == rf.FINAL_STATE_F]
            if fs:
                o = rnd.choice(fs)
                o["value"]["recovered"] = False
                for s in b.final_states:
                    if s["partition"] == o["value"]["partition"]:
                        s["recovered"] = False
                done.append(f"unrecovered p{o['value']['partition']}")
        elif kind == "final-gap" and finals:
            o = rnd.choice(finals)
            if o["value"]["records"]:
                o["value"]["records"].pop(rnd.randrange(len(o["value"]["records"])))
                done.append(f"final-gap {o['index']}")
    return done
