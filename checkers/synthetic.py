"""Synthetic run directories of any size, written straight to columnar (Parquet), with known anomalies.

`generate(run_dir, sends=N)` writes RUN_DIR/test.json and RUN_DIR/columnar/{ops,reads,replicas,
replica_meta,final_state}/ the way ingest would, for a run of N sends over P partitions and three
replicas: producers (one per partition, a new process id after each `info`), fault windows every other
chunk of sends (the chunk, test.json's config and whether event logs are written: `Harness`), one
consumer per partition polling the whole log in chunks of 500 after an assign to 0, final reads in
chunks of 1000, and every replica holding the final log. Outcomes: ~0.5% fail, ~0.5%
info that ended present, ~0.5% info that ended absent, the rest ok.

Then `k` anomalies of every kind are injected at spread-out offsets, each with a known effect, and the
expected counts are returned (and stored in the columnar manifest under "expected"):
  lost-write         an acked value's offset holds an absent info-send's value instead (+1 inconsistent-offset)
  failed-write-present  a failed send's value replaces a present info send (+1 aborted-read: the consumer reads it)
  divergence         replica n3 differs below its HW (committed), and k offsets beyond n3's HW (residual)
  duplicate          an acked value also replaces the next (info-present) offset
  nonmonotonic-send  two consecutive acked sends of one producer land swapped (+1 realtime-order: the
                     sends never overlap)
  realtime-order     two consecutive acked sends of different producers (an info send between them: a new
                     process id) land swapped
  poll-skip / nonmonotonic-poll   the consumer misses one record / reads one twice
  dirty-read         the consumer reads an absent info-send's value (+1 inconsistent-offset)
  hw-regression      a poll reports HW-1 in the same epoch; hw-regression-cross-epoch: HW-2 in epoch 2
The event logs (`events` table, as checkers/ingest.py writes it): six lines per record of a log (each
follower's `leo-reported`, the leader's `hw-change` and `ack`, each follower's `hw-change`) after every
broker's `start`, `recovered` and `role` and the controller's `leader-change`; a clean run breaks no
protocol rule. k violations of every rule of EVENT_INJECTED are placed between records (`_inject_events`),
each found once (epoch-two-leaders also +1 leader-not-elected: the second leader was never elected;
ack-undecided: a record's `ack` line left out). read-uncommitted is injected in the history: k of the
first two polls of a partition report their own last offset as the HW; hw-reported-ahead too: the last
poll of k partitions is told HW L + 1 (and so are their final reads, so that no later observation goes
back); damaged-record-kept by k corrupt faults after the sends, each damaging n2's record 10 before the end
of one partition's log, after which n2 reopens that log whole. So every rule is injected (k <= P).
Memory is bounded by one partition's log (8 bytes per record) plus one chunk of operations.
"""
from __future__ import annotations

import itertools
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.eventlog import EVENT_NAMES
from broker.rules import names
from rundir import evidence
from rundir import formats as rf
from rundir import kinds

OK, FAIL, INFO_PRESENT, INFO_ABSENT = 0, 1, 2, 3
POLL_CHUNK = 500
FINAL_CHUNK = 1000
NODES = ("n1", "n2", "n3")
DT = 1000  # ns between history lines
GENERATOR_VERSION = 5  # 2: the events table laid out by partition, with its integer columns (as ingest's 12);
                       # 3: read-uncommitted injected, the evidence declared; 4: hw-reported-ahead and
                       # damaged-record-kept injected (every rule now); 5: the group_parts table and the
                       # group columns (as ingest's 14), the group shape (Harness.groups)
GROUP = "g"           # the group shape's consumer group
CONSUMER_BASE = 10**9
FINAL_BASE = 2 * 10**9
INJECTED = tuple(k.name for k in (kinds.LOST_WRITE, kinds.FAILED_WRITE_PRESENT, kinds.DIVERGENCE, kinds.DUPLICATE,
                                  kinds.NONMONOTONIC_SEND, kinds.POLL_SKIP, kinds.NONMONOTONIC_POLL, kinds.DIRTY_READ,
                                  kinds.HW_REGRESSION, kinds.HW_REGRESSION_CROSS_EPOCH, kinds.REALTIME_ORDER))

# the injected kinds placed at an acknowledged record no other injection touches
AT_ACKED_RECORD = tuple(k.name for k in (kinds.LOST_WRITE, kinds.DIVERGENCE, kinds.POLL_SKIP, kinds.NONMONOTONIC_POLL,
                                         kinds.DIRTY_READ, kinds.HW_REGRESSION, kinds.HW_REGRESSION_CROSS_EPOCH))


@dataclass
class _Plan:
    log_set: dict[int, dict[int, int]] = field(default_factory=dict)      # p -> offset -> value (final, replicas, reads)
    ack_offset: dict[int, int] = field(default_factory=dict)              # send i -> acked offset
    n3_set: dict[int, dict[int, int]] = field(default_factory=dict)       # p -> offset -> value on n3 only
    n3_hw: dict[int, int] = field(default_factory=dict)                   # p -> n3 checkpointed hw
    read_drop: dict[int, set] = field(default_factory=dict)               # p -> offsets the consumer misses
    read_twice: dict[int, set] = field(default_factory=dict)              # p -> offsets read twice
    read_value: dict[int, dict[int, int]] = field(default_factory=dict)   # p -> offset -> value the consumer reads
    poll_hw: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)  # (p, poll no) -> (hw delta, epoch)
    poll_at_end: set[tuple[int, int]] = field(default_factory=set)      # (p, poll no) reporting its last offset as HW
    hw_ahead: set[int] = field(default_factory=set)                      # p whose last poll is told HW L + 1
    damage: list[int] = field(default_factory=list)                      # p each corrupt fault strikes, in turn
    damage_at: list[tuple[int, int]] = field(default_factory=list)       # (p, its corrupt start's completion index)
    lengths: dict[int, int] = field(default_factory=dict)                # p -> records in its log


def _outcomes(n: int, rng: np.random.Generator) -> np.ndarray:
    r = rng.random(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.uint8)
    out[r < 0.015] = INFO_ABSENT
    out[r < 0.010] = INFO_PRESENT
    out[r < 0.005] = FAIL
    return out


def _log(outcome: np.ndarray, p: int, P: int) -> tuple[np.ndarray, np.ndarray]:
    """(send indices of partition p, outcome of each); the log is the present ones in order."""
    idx = np.arange(p, len(outcome), P, dtype=np.int64)
    return idx, outcome[p::P]


@dataclass(frozen=True)
class _PartitionLog:
    """Partition p's sends (every P-th of the run's, from send p) and its log: the present ones (ok and
    info-present) in offset order, each record's value the index of its send."""
    p: int
    P: int
    sends: np.ndarray      # the partition's send indices
    outcomes: np.ndarray   # the outcome of each
    values: np.ndarray     # per offset of the log: its record's value
    records: np.ndarray    # per offset of the log: the outcome of its send

    def ok(self, o: int) -> bool:
        """Whether the record at offset o was acknowledged."""
        return self.records[o] == OK

    def sends_between(self, a: int, b: int) -> np.ndarray:
        """The outcomes of the partition's sends strictly between the sends of the records at offsets a < b."""
        return self.outcomes[(int(self.values[a]) - self.p) // self.P + 1:(int(self.values[b]) - self.p) // self.P]


def _partition_log(outcome: np.ndarray, p: int, P: int) -> _PartitionLog:
    idx, oc = _log(outcome, p, P)
    present = (oc == OK) | (oc == INFO_PRESENT)
    return _PartitionLog(p, P, idx, oc, idx[present], oc[present])


@dataclass
class _Spares:
    """The values the injections put where they do not belong: per partition, the values of info-absent and
    of failed sends not used yet (taken from the end), and values no send wrote (`fresh`: -2, -3, ...)."""
    absent: dict[int, list]
    failed: dict[int, list]
    fresh: Callable[[], int] = field(default_factory=lambda: itertools.count(-2, -1).__next__)


def _plan(outcome: np.ndarray, P: int, k: int, rng: np.random.Generator) -> tuple[_Plan, dict[str, int]]:
    """Where the k anomalies of every kind go (`_Plan`), and the counts the checker should find."""
    plan = _Plan()
    slots = [(kind, j) for j in range(k) for kind in INJECTED]
    logs = {p: _partition_log(outcome, p, P) for p in range(P)}
    plan.lengths = {p: len(log.values) for p, log in logs.items()}
    start, stride = _regions(plan.lengths, len(slots), P, k)
    expected = {kind: 0 for kind in rf.ANOMALY_KINDS}
    expected["divergence_committed"] = 0
    spares = _Spares({p: list(logs[p].sends[logs[p].outcomes == INFO_ABSENT]) for p in range(P)},
                     {p: list(logs[p].sends[logs[p].outcomes == FAIL]) for p in range(P)})
    for n, (kind, _) in enumerate(slots):
        p, region = n % P, n // P
        spot = _place(kind, logs[p], range(start + region * stride + 2, start + (region + 1) * stride - 2), plan)
        if spot is None:
            raise ValueError(f"no place for {kind} in partition {p} region {region}")
        for also in _inject(plan, kind, logs[p], spot, spares):
            expected[also] += 1
        expected[kind] += 1
    _plan_polls_and_faults(plan, expected, k, P)
    _plan_residual(plan, expected, k, len(logs[0].values), spares.fresh)
    return plan, expected


def _regions(lengths: dict[int, int], slots: int, P: int, k: int) -> tuple[int, int]:
    """(start, stride) of the regions the history injections are spread over, one per slot of a partition:
    from past the first two polls' offsets (left alone) to 80% of the shortest log."""
    per_part = -(-slots // P)
    start = 2 * POLL_CHUNK
    stride = (int(min(lengths.values()) * 0.8) - start) // max(per_part, 1)
    if k and stride < 2 * POLL_CHUNK + 50:
        raise ValueError(f"too few sends for {k} anomalies of each kind over {P} partitions")
    return start, stride


def _next_producer(log: _PartitionLog, x: int, hi: int) -> int | None:
    """The log position of the next ack after the ack at x (below hi), when only info-present records lie
    between them and an info send (a new process id) came between the two sends."""
    q = x + 1
    while q < hi and log.records[q] == INFO_PRESENT:
        q += 1
    if q >= hi or not log.ok(q):
        return None
    between = log.sends_between(x, q)
    return q if ((between == INFO_PRESENT) | (between == INFO_ABSENT)).any() else None


def _place(kind: str, log: _PartitionLog, region: range, plan: _Plan) -> tuple[int, int | None] | None:
    """Where in `region` of the log `kind` goes first: (its offset, the offset it swaps with, for
    nonmonotonic-send and realtime-order), or None if nowhere."""
    ok, loc, lvals = log.ok, log.records, log.values
    for o in region:
        if kind in AT_ACKED_RECORD and ok(o) and (log.p, o // POLL_CHUNK) not in plan.poll_hw:
            return o, None
        if kind == kinds.FAILED_WRITE_PRESENT.name and loc[o] == INFO_PRESENT:
            return o, None
        if kind == kinds.DUPLICATE.name and loc[o] == INFO_PRESENT and ok(o - 1):
            return o, None
        if kind == kinds.NONMONOTONIC_SEND.name and ok(o) and ok(o + 1) and lvals[o + 1] == lvals[o] + log.P:
            return o, o + 1
        if kind == kinds.REALTIME_ORDER.name and ok(o):
            q = _next_producer(log, o, region.stop)
            if q is not None:
                return o, q
    return None


def _inject(plan: _Plan, kind: str, log: _PartitionLog, spot: tuple[int, int | None], spares: _Spares) -> list[str]:
    """Put one anomaly of `kind` into the plan at `spot` (`_place`); returns what else it is counted as
    (the kinds it breaks too, or divergence_committed)."""
    p, lvals = log.p, log.values
    o, q = spot
    ls = plan.log_set.setdefault(p, {})
    if kind == kinds.LOST_WRITE.name:
        ls[o] = int(spares.absent[p].pop())
        return [kinds.INCONSISTENT_OFFSET.name]
    if kind == kinds.FAILED_WRITE_PRESENT.name:
        ls[o] = int(spares.failed[p].pop())
        return [kinds.ABORTED_READ.name]
    if kind == kinds.DIVERGENCE.name:
        plan.n3_set.setdefault(p, {})[o] = spares.fresh()
        return ["divergence_committed"]
    if kind == kinds.DUPLICATE.name:
        ls[o] = int(lvals[o - 1])
    elif kind in (kinds.NONMONOTONIC_SEND.name, kinds.REALTIME_ORDER.name):
        a, b = int(lvals[o]), int(lvals[q])
        ls[o], ls[q] = b, a
        plan.ack_offset[a], plan.ack_offset[b] = q, o
        if kind == kinds.NONMONOTONIC_SEND.name:    # the two sends never overlap either
            return [kinds.REALTIME_ORDER.name]
    elif kind == kinds.POLL_SKIP.name:
        plan.read_drop.setdefault(p, set()).add(o)
    elif kind == kinds.NONMONOTONIC_POLL.name:
        plan.read_twice.setdefault(p, set()).add(o)
    elif kind == kinds.DIRTY_READ.name:
        plan.read_value.setdefault(p, {})[o] = int(spares.absent[p].pop())
        return [kinds.INCONSISTENT_OFFSET.name]
    elif kind == kinds.HW_REGRESSION.name:
        plan.poll_hw[(p, o // POLL_CHUNK)] = (1, 1)
    elif kind == kinds.HW_REGRESSION_CROSS_EPOCH.name:
        plan.poll_hw[(p, o // POLL_CHUNK)] = (2, 2)
    return []


def _plan_polls_and_faults(plan: _Plan, expected: dict[str, int], k: int, P: int) -> None:
    """The injections at whole polls and faults: read-uncommitted, hw-reported-ahead, damaged-record-kept."""
    # read-uncommitted: k of the first two polls of a partition (left alone above) report the HW at the last
    # offset they return, so each returned a record at its own HW; in poll order, so no HW goes back
    if k > 2 * P:
        raise ValueError(f"too many anomalies of each kind ({k}) for {P} partitions: at most {2 * P}")
    for j in range(k):
        plan.poll_at_end.add((j % P, j // P))
        expected[names.READ_UNCOMMITTED] += 1
    # hw-reported-ahead: the last poll of k partitions is told HW L + 1, above every HW its leader had; the
    # partition's final reads are told the same, so no observation after it goes back (no hw-regression)
    # damaged-record-kept: k corrupt faults after the sends damage a record of n2 (`_damage_ops`), and n2
    # reopens that partition's log whole
    if k > P:
        raise ValueError(f"too many anomalies of each kind ({k}) for {P} partitions: at most {P}")
    for j in range(k):
        plan.hw_ahead.add(j)
        plan.damage.append(j)
        expected[names.HW_REPORTED_AHEAD] += 1
        expected[names.DAMAGED_RECORD_KEPT] += 1


def _plan_residual(plan: _Plan, expected: dict[str, int], k: int, L: int, fresh) -> None:
    """Residual divergence: n3 of partition 0 (L records) disagrees on k offsets at and beyond its own HW."""
    if k:
        plan.n3_hw[0] = L - k - 1
        for j in range(k):
            plan.n3_set.setdefault(0, {})[L - k - 1 + j] = fresh()
        expected[kinds.DIVERGENCE.name] += k


class _Writer:
    def __init__(self, directory: Path, schema: pa.Schema):
        directory.mkdir(parents=True, exist_ok=True)
        self.w = rf.parquet_writer(directory / "part-0.parquet", schema)
        self.schema = schema
        self.lines: list[tuple] = []     # the events table's single lines (`_line`)

    def write(self, cols: dict[str, Any]) -> None:
        n = next(len(v[0]) if isinstance(v, tuple) else len(v)
                 for v in cols.values() if not isinstance(v, (str, int, type(None))))
        arrays = []
        for f in self.schema:
            v = cols.get(f.name)
            if v is None:
                arrays.append(pa.nulls(n, f.type))
            elif isinstance(v, (str, int, bool)):
                arrays.append(pa.array([v], f.type).take(pa.array(np.zeros(n, dtype=np.int32))))
            elif isinstance(v, tuple):  # (numpy values, numpy null mask)
                arrays.append(pa.array(v[0], f.type, mask=v[1]))
            elif isinstance(v, pa.Array):
                arrays.append(v.cast(f.type))
            else:
                arrays.append(pa.array(v, f.type))
        self.w.write_table(pa.Table.from_arrays(arrays, schema=self.schema), row_group_size=rf.ROW_GROUP_ROWS)

    def close(self) -> None:
        self.w.close()


class _EventsWriter:
    """The events table as ingest lays it out (rundir/formats.py EVENTS_PARTITION_FILE): a file per
    partition, its rows in (ts, node, seq) order, the per-record batches (`write`) merged with the few
    single lines (`_line`) that sort among them; the lines of no partition in the wide file (`close`)."""

    ORDER = [("ts", "ascending"), ("node", "ascending"), ("seq", "ascending")]

    def __init__(self, directory: Path, schema: pa.Schema):
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.schema = directory, schema
        self.lines: list[tuple] = []     # (ts, node, src, partition, JSON text), until their partition's file
        self.w: Any = None
        self.pending: list[tuple] = []   # the open partition's single lines not written yet

    def begin(self, p: int) -> None:
        """Start partition p's file: its single lines made so far go among its batches."""
        self.end()
        self.w = rf.parquet_writer(self.directory / rf.EVENTS_PARTITION_FILE.format(p), self.schema)
        self.pending = sorted((x for x in self.lines if x[3] == p), key=lambda x: (x[0], x[1]))
        self.lines = [x for x in self.lines if x[3] != p]

    def write(self, table: pa.Table) -> None:
        """One sorted batch of the open partition, with the single lines that sort before its end."""
        last = table.column("ts")[-1].as_py() if table.num_rows else None
        cut = len(self.pending) if last is None else next(
            (i for i, x in enumerate(self.pending) if x[0] > last), len(self.pending))
        if cut:
            table = pa.concat_tables([table, self._table(self.pending[:cut])]).sort_by(self.ORDER)
            self.pending = self.pending[cut:]
        self.w.write_table(table, row_group_size=rf.ROW_GROUP_ROWS)

    def end(self) -> None:
        if self.w is not None:
            if self.pending:
                self.w.write_table(self._table(self.pending), row_group_size=rf.ROW_GROUP_ROWS)
            self.w.close()
        self.w, self.pending = None, []

    def close(self) -> None:
        self.end()
        rest = sorted(self.lines, key=lambda x: (x[0], x[1]))
        w = rf.parquet_writer(self.directory / rf.EVENTS_WIDE_FILE, self.schema)
        w.write_table(self._table([x for x in rest if x[3] is None]))
        w.close()
        assert all(x[3] is None for x in rest), "single lines of a partition never begun"

    def _table(self, lines: list[tuple]) -> pa.Table:
        from checkers.quiet_rows import table_of

        return table_of({**json.loads(body), "ts": ts, "node": node, "src": src, "seq": ts}
                        for ts, node, src, _, body in lines)


def _as_str(a: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(a, pa.int64()), pa.string())


def _choice(codes: np.ndarray, labels: list[str]) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(labels)).cast(pa.string())


@dataclass
class _SendState:
    """Per partition, across the chunks of sends: the infos so far (each starts a new producer process
    id) and the next offset of its log."""
    P: int
    info_count: np.ndarray = field(init=False)
    next_offset: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.info_count = np.zeros(self.P, dtype=np.int64)
        self.next_offset = np.zeros(self.P, dtype=np.int64)


def _send_rows(W: dict, outcome: np.ndarray, plan: _Plan, span: tuple[int, int], index: int,
               state: _SendState) -> int:
    """The invoke and completion rows of the sends span = [c0, c1), from history index `index`; returns
    the next index."""
    c0, c1 = span
    n = c1 - c0
    i = np.arange(c0, c1, dtype=np.int64)
    part = (i % state.P).astype(np.int32)
    oc = outcome[c0:c1]
    is_info = (oc == INFO_PRESENT) | (oc == INFO_ABSENT)
    present = (oc == OK) | (oc == INFO_PRESENT)
    proc = np.empty(n, dtype=np.int64)
    offs = np.empty(n, dtype=np.int64)
    for p in range(state.P):
        m = part == p
        infos_before = np.cumsum(is_info[m]) - is_info[m]
        proc[m] = p + state.P * (state.info_count[p] + infos_before)
        state.info_count[p] += int(is_info[m].sum())
        pres = present[m]
        offs[m] = state.next_offset[p] + np.cumsum(pres) - 1
        state.next_offset[p] += int(pres.sum())
    for a, o in plan.ack_offset.items():
        if c0 <= a < c1:
            offs[a - c0] = o
    base = index
    inv_idx = base + 2 * np.arange(n, dtype=np.int64)
    rows = 2 * n
    col_index = np.arange(base, base + rows, dtype=np.int64)
    proc2 = np.repeat(proc, 2)
    part2 = np.repeat(part, 2)
    val2 = np.repeat(i, 2)
    tcode = np.empty(rows, dtype=np.int32)
    tcode[0::2] = 0
    tcode[1::2] = np.where(oc == OK, 1, np.where(oc == FAIL, 2, 3))
    is_ok = np.zeros(rows, dtype=bool)
    is_ok[1::2] = oc == OK
    offset2 = np.zeros(rows, dtype=np.int64)
    offset2[1::2] = offs
    ecode = np.zeros(rows, dtype=np.int32)
    ecode[1::2] = np.where(oc == FAIL, 1, np.where(is_info, 2, 0))
    comp = np.zeros(rows, dtype=bool)
    comp[1::2] = True
    invi = np.zeros(rows, dtype=np.int64)
    invi[1::2] = inv_idx
    W["ops"].write({
        "index": col_index, "time": col_index * DT, "process": _as_str(proc2),
        "type": _choice(tcode, ["invoke", "ok", "fail", "info"]), "f": "send", "partition": part2,
        "value": val2, "offset": (offset2, ~is_ok), "epoch": (np.ones(rows, dtype=np.int32), ~is_ok),
        "error": pa.DictionaryArray.from_arrays(pa.array(ecode, mask=ecode == 0),
                                                pa.array(["", "NOT_ENOUGH_REPLICAS", "timeout"])).cast(pa.string()),
        "invoke_index": (invi, ~comp), "invoke_time": (invi * DT, ~comp)})
    index += rows
    return index


def _consumer_side(W: dict, outcome: np.ndarray, P: int, p: int, plan: _Plan, index: int,
                   groups: dict[str, int] | None = None) -> tuple[int, tuple]:
    """Partition p's consumer (an assign to 0, then its polls), final reads and replicas; returns the next
    history index and (p, L, the replicas' leo and hw) for its final state. With `groups` (the expected
    counts) the consumer is a member of the group shape (`_group_member`)."""
    idx, oc = _log(outcome, p, P)
    log = idx[(oc == OK) | (oc == INFO_PRESENT)].copy()
    for o, v in plan.log_set.get(p, {}).items():
        log[o] = v
    L = len(log)
    cproc = str(CONSUMER_BASE + p)
    # assign to 0
    W["ops"].write({"index": np.array([index, index + 1]), "time": np.array([index, index + 1]) * DT,
                    "process": cproc, "type": _choice(np.array([0, 1]), ["invoke", "ok"]), "f": "assign",
                    "partition": np.array([p, p]), "offset": np.array([0, 0]),
                    "invoke_index": (np.array([0, index]), np.array([True, False])),
                    "invoke_time": (np.array([0, index * DT]), np.array([True, False]))})
    index += 2
    consumer = _Reader(cproc, "poll", POLL_CHUNK, GROUP if groups is not None else None)
    if groups is not None:
        index = _group_assign(W, p, cproc, index)
    index = _reads(W, plan, p, log, index, consumer)
    if groups is not None:
        index = _group_member(W, plan, p, log, index, consumer, groups)
    index = _reads(W, plan, p, log, index, _Reader(str(FINAL_BASE + p), "final-read", FINAL_CHUNK))
    for node in NODES:
        vals = log
        hw = L
        if node == "n3" and (p in plan.n3_set or p in plan.n3_hw):
            vals = log.copy()
            for o, v in plan.n3_set.get(p, {}).items():
                vals[o] = v
            hw = plan.n3_hw.get(p, L)
        W["replicas"].write({"node": node, "partition": np.full(L, p, dtype=np.int32),
                             "offset": np.arange(L, dtype=np.int64), "epoch": np.ones(L, dtype=np.int32),
                             "value": vals, "crc_ok": np.ones(L, dtype=bool)})
        W["replica_meta"].write({"node": [node], "partition": [p], "leo": [L], "hw": [hw], "log_start": [0],
                                 "epochs": ["[[1, 0]]"], "torn_bytes": [0]})
    return index, (p, L, {n: {"leo": L, "hw": plan.n3_hw.get(p, L) if n == "n3" else L} for n in NODES})


@dataclass(frozen=True)
class Harness:
    """What the harness side of a synthetic run did and recorded around its sends: a kill fault window
    over every other `chunk` sends (the sends' operations are written a chunk at a time too), the
    configuration test.json records (`config`; None: a non-idempotent producer), and whether the
    brokers' and the controller's event logs were kept (`events`)."""
    chunk: int = 1_000_000
    config: dict | None = None
    events: bool = True
    groups: bool = False     # the group shape: each partition's consumer a member of GROUP (`_group_member`)


def generate(run_dir: Path | str, sends: int, *, partitions: int = 8, k: int = 5, seed: int = 1,
             harness: Harness = Harness()) -> dict[str, int]:
    """Write a synthetic run; returns the expected anomaly counts (and `divergence_committed`). With
    `harness.events` (the default), the brokers' and the controller's event logs too (`_events`)."""
    run_dir = Path(run_dir)
    P = partitions
    rng = np.random.default_rng(seed)
    outcome = _outcomes(sends, rng)
    plan, expected = _plan(outcome, P, k, rng)
    col = run_dir / rf.COLUMNAR_DIR
    shutil.rmtree(col, ignore_errors=True)
    schemas = rf.arrow_schemas()
    W: dict[str, Any] = {t: _Writer(col / t, schemas[t]) for t in rf.COLUMNAR_TABLES if t != "events"}
    W["events"] = _EventsWriter(col / "events", schemas["events"])
    index, windows = _send_phase(W, outcome, plan, P, harness.chunk)
    index = _damage_ops(W, plan, index, windows)
    index = _consumer_phase(W, outcome, P, plan, index, expected if harness.groups else None)
    if harness.events:
        _events(W, outcome, P, k, plan, expected)
    for w in W.values():
        w.close()
    expected = {k2: v for k2, v in expected.items()}
    manifest = {"synthetic": True, "generator": GENERATOR_VERSION, "sends": sends, "partitions": P, "k": k,
                "seed": seed, "history_lines": index, "event_logs": harness.events,
                "expected": expected, "skipped": {}, "torn": {}}
    (col / rf.COLUMNAR_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    _write_test_json(run_dir, sends, seed, harness)
    return expected


def _send_phase(W: dict, outcome: np.ndarray, plan: _Plan, P: int, chunk: int) -> tuple[int, int]:
    """Phase A: the sends in chunks, a kill fault window over every other chunk (the last one closed after
    the sends); returns the next history index and the number of fault windows."""
    state = _SendState(P)
    index = 0
    windows = 0
    open_window = None
    sends = len(outcome)
    for c0 in range(0, sends, chunk):
        if open_window is None:
            open_window = windows
            windows += 1
            index = _kill_op(W, index, "start", open_window)
        else:
            index = _kill_op(W, index, "stop", open_window)
            open_window = None
        index = _send_rows(W, outcome, plan, (c0, min(sends, c0 + chunk)), index, state)
    if open_window is not None:
        index = _kill_op(W, index, "stop", open_window)
    return index, windows


def _kill_op(W: dict, index: int, phase: str, fault_id: int) -> int:
    """A kill fault's start (f "kill") or stop ("restart"), invoked and completed, from history index
    `index`; returns the next index."""
    W["ops"].write({"index": np.array([index, index + 1]), "time": np.array([index, index + 1]) * DT,
                    "process": rf.NEMESIS_PROCESS, "type": _choice(np.array([0, 1]), ["invoke", "info"]),
                    "f": "kill" if phase == "start" else "restart", "fault": "kill", "phase": phase,
                    "fault_id": fault_id})
    return index + 2


def _consumer_phase(W: dict, outcome: np.ndarray, P: int, plan: _Plan, index: int,
                    groups: dict[str, int] | None = None) -> int:
    """Phases B and C, per partition: its consumer's polls, final reads and replicas, then every
    partition's final state; returns the next history index."""
    finals = []
    for p in range(P):
        index, final = _consumer_side(W, outcome, P, p, plan, index, groups)
        finals.append(final)
    for p, L, reps in finals:
        W["ops"].write({"index": np.array([index]), "time": np.array([index * DT]), "process": rf.HARNESS_PROCESS,
                        "type": ["info"], "f": [rf.FINAL_STATE_F], "partition": np.array([p]), "hw": np.array([L]),
                        "epoch": np.array([1])})
        W["final_state"].write({"partition": [p], "recovered": [True], "hw": [L], "leader": ["n1"], "epoch": [1],
                                "isr": [json.dumps(list(NODES))], "replicas": [json.dumps(reps, sort_keys=True)]})
        index += 1
    return index


def _write_test_json(run_dir: Path, sends: int, seed: int, harness: Harness) -> None:
    """RUN_DIR/test.json, as the harness writes it."""
    rf.write_json(run_dir / rf.TEST_JSON, {
        "name": "synthetic", "run_id": f"synthetic-{sends}-{seed}", "timestamp": "20261121T000000Z",
        "start_wall_ns": 0, "seed": seed, "config": harness.config or {"producer": {"idempotent": False}},
        "versions": {}, "cluster": {"backend": "synthetic", "nodes": {n: {} for n in NODES}},
        # as the harness declares what a run holds; without event logs, undeclared (an older run's form)
        **({evidence.SECTION: evidence.declare(EVENT_NAMES).as_json()} if harness.events else {})})


@dataclass(frozen=True)
class _Reader:
    """Who reads a partition's whole log, one operation per `size` records from offset 0: its consumer
    (f "poll") or the final reads ("final-read"), as history process `process`."""
    process: str
    f: str
    size: int
    group: str | None = None    # a member of this group (the group shape), its polls of generation 1


def _reads(W: dict, plan: _Plan, p: int, log: np.ndarray, index: int, reader: _Reader) -> int:
    """Write the polls (or final reads) of one partition's whole log; returns the next history index. The
    plan's injections at polls and at the records read are the consumer's (`_told`, `_records_read`)."""
    hw, epoch = _told(plan, p, len(log), reader)
    okx = _read_ops(W, p, index, reader, hw, epoch)
    offsets, values = _records_read(plan, p, log, reader)
    _write_records(W, p, reader, okx, offsets, values)
    return index + 2 * len(hw)


def _told(plan: _Plan, p: int, L: int, reader: _Reader) -> tuple[np.ndarray, np.ndarray]:
    """(the HW, the epoch) each read operation of a log of L records is told: L and 1, but at the consumer's
    injected polls (hw-regression, read-uncommitted); in a partition of plan.hw_ahead the last poll (every
    final read) is told HW L + 1."""
    n_ops = max(1, -(-L // reader.size))
    hw = np.full(n_ops, L, dtype=np.int64)
    epoch = np.ones(n_ops, dtype=np.int32)
    polls = reader.f == "poll"
    if polls:
        for (pp, no), (delta, ep) in plan.poll_hw.items():
            if pp == p:
                hw[no] -= delta
                epoch[no] = ep
        for pp, no in plan.poll_at_end:
            if pp == p and no < n_ops:
                hw[no] = min(L, (no + 1) * reader.size) - 1
    ahead = p in plan.hw_ahead
    if ahead and polls:
        if n_ops < 3:
            raise ValueError(f"too few records in partition {p} for hw-reported-ahead ({L})")
        hw[-1] = L + 1
    elif ahead:
        hw[:] = L + 1
    return hw, epoch


def _read_ops(W: dict, p: int, index: int, reader: _Reader, hw: np.ndarray, epoch: np.ndarray) -> np.ndarray:
    """The invoke and ok rows of the read operations told `hw` and `epoch`, from history index `index`;
    returns the ok rows' indices."""
    n_ops = len(hw)
    starts = np.arange(n_ops, dtype=np.int64) * reader.size
    inv = index + 2 * np.arange(n_ops, dtype=np.int64)
    okx = inv + 1
    rows = 2 * n_ops
    idx = np.empty(rows, dtype=np.int64)
    idx[0::2], idx[1::2] = inv, okx
    tcode = np.tile(np.array([0, 1], dtype=np.int32), n_ops)
    comp = tcode == 1
    hw2 = np.repeat(hw, 2)
    ep2 = np.repeat(epoch, 2)
    invi = np.repeat(inv, 2)
    W["ops"].write({"index": idx, "time": idx * DT, "process": reader.process, "type": _choice(tcode, ["invoke", "ok"]),
                    "f": reader.f, "partition": np.full(rows, p, dtype=np.int32), "offset": np.repeat(starts, 2),
                    "hw": (hw2, ~comp), "epoch": (ep2, ~comp), "invoke_index": (invi, ~comp),
                    "invoke_time": (invi * DT, ~comp), "group": reader.group,
                    "generation": 1 if reader.group is not None else None})
    return okx


def _records_read(plan: _Plan, p: int, log: np.ndarray, reader: _Reader) -> tuple[np.ndarray, np.ndarray]:
    """(offset, value) of every record read, in order: the whole log, with the consumer's injected damage
    (a value it reads instead, a record it misses, one it reads twice)."""
    offsets = np.arange(len(log), dtype=np.int64)
    values = log
    if reader.f == "poll":
        values = log.copy()
        for o, v in plan.read_value.get(p, {}).items():
            values[o] = v
        keep = np.ones(len(log), dtype=bool)
        for o in plan.read_drop.get(p, ()):
            keep[o] = False
        reps = np.ones(len(log), dtype=np.int64)
        for o in plan.read_twice.get(p, ()):
            reps[o] = 2
        reps[~keep] = 0
        offsets = np.repeat(offsets, reps)
        values = np.repeat(values, reps)
    return offsets, values


def _write_records(W: dict, p: int, reader: _Reader, okx: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> None:
    """One `reads` row per record read, under the ok row (`okx`) of the operation whose offsets hold it."""
    op_no = offsets // reader.size
    # position within the poll: running count within each op
    first = np.searchsorted(op_no, op_no, side="left")
    pos = (np.arange(len(offsets)) - first).astype(np.int32)
    ok_index = okx[op_no]
    step = 1 << 22
    for s in range(0, len(offsets), step):
        e = min(len(offsets), s + step)
        W["reads"].write({"index": ok_index[s:e], "process": reader.process, "f": reader.f,
                          "partition": np.full(e - s, p, dtype=np.int32), "offset": offsets[s:e], "value": values[s:e],
                          "time": ok_index[s:e] * DT, "pos": pos[s:e],
                          "epoch": np.full(e - s, -1, dtype=np.int32),    # reads carry no epoch here
                          "group": reader.group})


def _group_rows(W: dict, rows: dict[str, Any], parts: dict[str, Any]) -> None:
    """Group operations: their `ops` rows and their `group_parts` rows (one partition each here)."""
    W["ops"].write(rows)
    W["group_parts"].write(dict(rows, **parts))


def _pairs(index: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n operations invoked and completed one after the other from history index `index`: the rows'
    indices, whether each is the completion, and each row's invoke index."""
    idx = np.arange(index, index + 2 * n, dtype=np.int64)
    comp = np.tile(np.array([False, True]), n)
    return idx, comp, np.repeat(idx[0::2], 2)


def _group_assign(W: dict, p: int, cproc: str, index: int) -> int:
    """The group shape's member of partition p (member m<p>, generation 1) is assigned it, nothing committed."""
    idx, comp, inv = _pairs(index, 1)
    _group_rows(W, {"index": idx, "time": idx * DT, "process": cproc, "type": _choice(comp.astype(np.int32),
                    ["invoke", "ok"]), "f": rf.GROUP_ASSIGN_F, "group": GROUP, "generation": 1,
                    "invoke_index": (inv, ~comp), "invoke_time": (inv * DT, ~comp)},
                {"partition": np.full(2, p, dtype=np.int32), "member": f"m{p}",
                 "offset": (np.full(2, rf.NO_COMMITTED_OFFSET, dtype=np.int64), ~comp)})
    return index + 2


def _group_member(W: dict, plan: _Plan, p: int, log: np.ndarray, index: int, consumer: _Reader,
                  expected: dict[str, int]) -> int:
    """After partition p's polls: the member's sync commit of each poll's end (acknowledged), then the final
    committed read of the group (the whole log, L); returns the next history index. The consumer's
    injected damage is the group's too: a record it missed or read another value for is lost-by-group
    (below the final committed L), one it read twice a group-reread; `expected` gains them."""
    L = len(log)
    n = max(1, -(-L // consumer.size))
    ends = np.minimum(L, (np.arange(n, dtype=np.int64) + 1) * consumer.size)
    idx, comp, inv = _pairs(index, n)
    _group_rows(W, {"index": idx, "time": idx * DT, "process": consumer.process,
                    "type": _choice(comp.astype(np.int32), ["invoke", "ok"]), "f": rf.COMMIT_F, "group": GROUP,
                    "generation": 1, "invoke_index": (inv, ~comp), "invoke_time": (inv * DT, ~comp)},
                {"partition": np.full(2 * n, p, dtype=np.int32), "member": f"m{p}", "offset": np.repeat(ends, 2),
                 "mode": "sync"})
    index += 2 * n
    idx, comp, inv = _pairs(index, 1)
    _group_rows(W, {"index": idx, "time": idx * DT, "process": str(FINAL_BASE + p),
                    "type": _choice(comp.astype(np.int32), ["invoke", "ok"]), "f": rf.COMMITTED_F, "group": GROUP,
                    "invoke_index": (inv, ~comp), "invoke_time": (inv * DT, ~comp)},
                {"partition": np.full(2, p, dtype=np.int32), "offset": (np.full(2, L, dtype=np.int64), ~comp)})
    _offsets, values = _records_read(plan, p, log, consumer)
    expected[kinds.LOST_BY_GROUP.name] += int(np.isin(log, values, invert=True).sum())
    _vals, counts = np.unique(values, return_counts=True)
    expected[kinds.GROUP_REREAD.name] += int((counts > 1).sum())
    return index + 2


def _damage_ops(W: dict, plan: _Plan, index: int, fault_id: int) -> int:
    """The corrupt faults of plan.damage, after the sends: each damages n2's record 10 before the end of
    one partition's log (its start's completion says so, as the harness records it), and n2 restarts
    (`_events` writes its `start` and `recovered` after the completion); returns the next history index."""
    for n, p in enumerate(plan.damage):
        L = plan.lengths[p]
        rows = np.arange(index, index + 4, dtype=np.int64)
        W["ops"].write({"index": rows, "time": rows * DT, "process": rf.NEMESIS_PROCESS,
                        "type": _choice(np.array([0, 1, 0, 1]), ["invoke", "info"]), "f": "corrupt",
                        "fault": "corrupt", "phase": ["start", "start", "stop", "stop"],
                        "fault_id": np.full(4, fault_id + n, dtype=np.int64), "targets": "n2",
                        "damage": [None, f"n2/{p}/{L - 10}", None, None]})
        plan.damage_at.append((p, index + 1))
        index += 4
    return index


# ---- event logs ------------------------------------------------------------------------------------
# Per record of a partition's log (offset o, written by send i, at ts (2i+1)*DT + the line's place): each
# follower's `leo-reported` of o+1, the leader's `hw-change` to o+1, its `ack` of [o, o], then each
# follower's `hw-change` to o+1 (the six lines a real acks=all produce logs). Before the first record: every
# broker's `start` (node-wide), `recovered` at 0 and `role` (n1 leads epoch 1, elected by the controller's
# `leader-change`), and n1's `follower-served` of each follower.
LEADER, FOLLOWERS = "n1", ("n2", "n3")
EVENT_CHUNK = 250_000          # records per batch of event lines
# the rules injected into the event logs (the order they are placed in), and what else each one breaks
EVENT_INJECTED = (names.HW_ABOVE_LEO, names.LEADER_HW_DECREASE, names.FOLLOWER_HW_AHEAD, names.ACK_ABOVE_HW,
                  names.ACK_BELOW_MIN_ISR, names.ACKED_NOT_DURABLE, names.ACK_BEFORE_FLUSH, names.EPOCH_TWO_LEADERS,
                  names.LEADER_NOT_ELECTED, names.EPOCH_OUTLIVED_RESTART, names.ELECTION_OUTSIDE_ISR,
                  names.EPOCH_NOT_INCREASING, names.TRUNCATE_BELOW_HW, names.ISR_JOIN_LAGGING,
                  names.STALE_EPOCH_SERVED, names.REPORTED_BEFORE_FLUSH, names.FLUSHED_PAST_TRUNCATION,
                  names.ACK_UNDECIDED)
EVENT_SIDE_EFFECTS = {names.EPOCH_TWO_LEADERS: names.LEADER_NOT_ELECTED}   # the second leader was never elected


def _fields(event: str, p: int, **cols: Any) -> pa.Array:
    """A column of JSON objects {"event", "partition", then `cols` in order}: ints (numpy arrays or
    scalars) and JSON literals (str)."""
    n = next(len(v) for v in cols.values() if isinstance(v, np.ndarray))
    parts: list[Any] = [f'{{"event":"{event}","partition":{p}']
    for name, v in cols.items():
        parts.append(f',"{name}":')
        parts.append(_as_str(v) if isinstance(v, np.ndarray) else (v if isinstance(v, str) else str(v)))
    parts.append("}")
    arrays = [pa.array(np.full(n, x, dtype=object), pa.string()) if isinstance(x, str) else x for x in parts]
    return pc.binary_join_element_wise(*arrays, "")


def _line(W: dict, ts: int, node: str, src: str, p: int | None, fields: dict) -> None:
    """One event line, kept until its partition's file is written (the few lines outside the per-record
    batches: `_EventsWriter`)."""
    body = json.dumps({"event": fields.pop("event"), **({} if p is None else {"partition": p}), **fields},
                      separators=(",", ":"))
    W["events"].lines.append((ts, node, src, p, body))


def _inject_events(W: dict, p: int, spots: list[tuple[str, int, int]]) -> None:
    """The injected violations of one partition, each at (kind, record offset o, its send index i), placed
    between record o's lines and the next record's (which find the state as the baseline left it)."""
    epoch, version = 1, 1
    for kind, o, i in sorted(spots, key=lambda x: x[1]):
        t = (2 * i + 1) * DT + 100
        b = lambda node, ts, **f: _line(W, ts, node, "broker", p, f)       # noqa: E731
        c = lambda ts, **f: _line(W, ts, "c0", "controller", p, f)          # noqa: E731
        if kind == names.HW_ABOVE_LEO:
            b(LEADER, t, event="hw-change", old=o + 1, new=o + 1, leo=o)
        elif kind == names.LEADER_HW_DECREASE:
            b(LEADER, t, event="hw-change", old=o + 1, new=o, leo=o + 1)
        elif kind == names.FOLLOWER_HW_AHEAD:
            b("n2", t, event="hw-change", old=o + 1, new=o + 5, leo=o + 5)
        elif kind == names.ACK_ABOVE_HW:
            b(LEADER, t, event="ack", base=o, last=o, epoch=1, acks=-1, hw=o, isr=[1, 2, 3], min_isr=2, flushed=o + 1)
        elif kind == names.ACK_BELOW_MIN_ISR:
            b(LEADER, t, event="ack", base=o, last=o, epoch=1, acks=-1, hw=o + 1, isr=[1], min_isr=2, flushed=o + 1)
        elif kind == names.ACK_BEFORE_FLUSH:
            b(LEADER, t, event="ack", base=o, last=o, epoch=1, acks=-1, hw=o + 1, isr=[1, 2, 3], min_isr=2, flushed=o)
        elif kind == names.ACKED_NOT_DURABLE:   # n1 reopens its log short of what it acked, and leads again
            b(LEADER, t, event="recovered", leo=o - 1, hw=o - 1)
            b(LEADER, t + 1, event="role", role="leader", epoch=1)
        elif kind == names.EPOCH_TWO_LEADERS:   # n2 claims epoch 1 too, then follows again
            b("n2", t, event="role", role="leader", epoch=1)
            b("n2", t + 1, event="role", role="follower", epoch=1)
        elif kind == names.LEADER_NOT_ELECTED:  # n1 claims an epoch no election gave, then its own again
            epoch += 1
            b(LEADER, t, event="role", role="leader", epoch=epoch)
            b(LEADER, t + 1, event="role", role="leader", epoch=1)
        elif kind == names.EPOCH_OUTLIVED_RESTART:  # n2 elected, restarted, then leads that epoch
            epoch += 1
            c(t, event="leader-change", leader=2, epoch=epoch, isr=[1, 2, 3])
            b("n2", t + 1, event="start")
            b("n2", t + 2, event="recovered", leo=o + 1, hw=o + 1)
            b("n2", t + 3, event="role", role="leader", epoch=epoch)
            b("n2", t + 4, event="role", role="follower", epoch=1)
        elif kind == names.ELECTION_OUTSIDE_ISR:  # n3 elected from an ISR without it; the ISR is then restored
            epoch += 1
            c(t, event="isr-change", version=version + 1, isr=[1, 2], elr=[])
            c(t + 1, event="leader-change", leader=3, epoch=epoch, isr=[1, 2], version=version + 2)
            c(t + 2, event="isr-change", version=version + 3, isr=[1, 2, 3], elr=[])
            version += 3
        elif kind == names.EPOCH_NOT_INCREASING:
            c(t, event="leader-change", leader=1, epoch=1, isr=[1, 2, 3])
        elif kind == names.TRUNCATE_BELOW_HW:
            b("n2", t, event="truncate", to=o - 1, why="leader-epoch")
        elif kind == names.ISR_JOIN_LAGGING:
            b(LEADER, t, event="isr-expand-proposed", replica=3, replica_leo=o - 5, hw=o + 1, epoch_start=0)
        elif kind == names.STALE_EPOCH_SERVED:
            b(LEADER, t, event="follower-served", replica=2, request="fetch", request_epoch=0)
        elif kind == names.REPORTED_BEFORE_FLUSH:
            b("n2", t, event="leo-reported", leo=o + 1, flushed=o, epoch=1, leader=1)
        elif kind == names.FLUSHED_PAST_TRUNCATION:
            b("n3", t, event="truncate", to=o + 1, why="leader-epoch", flushed=o + 5, log_start=0)
        # ack-undecided: the record's own `ack` line is left out (`_events`)


def _events(W: dict, outcome: np.ndarray, P: int, k: int, plan: _Plan, expected: dict[str, int]) -> None:
    """Write the brokers' and the controller's event lines (the `events` table), with k violations of
    every rule of EVENT_INJECTED, counted into `expected`."""
    for n, node in enumerate(NODES):
        _line(W, 1 + n, node, "broker", None, {"event": "start", "truncation": "leader-epoch", "flush": "always",
                                               "power_loss": False, "min_insync_replicas": 2})
    for p in range(P):
        log = _partition_log(outcome, p, P)
        L = len(log.values)
        _partition_start(W, p)
        spots = _event_spots(log, k, plan, expected)
        _inject_events(W, p, spots)
        for pp, done in plan.damage_at:     # n2 reopens its log whole after the corrupt fault's start
            if pp == p:
                t = done * DT + 10
                _line(W, t, "n2", "broker", p, {"event": "start"})
                _line(W, t + 1, "n2", "broker", p, {"event": "recovered", "leo": L, "hw": L})
                _line(W, t + 2, "n2", "broker", p, {"event": "role", "role": "follower", "epoch": 1})
        W["events"].begin(p)
        no_ack = np.array([o for kind, o, _ in spots if kind == names.ACK_UNDECIDED], dtype=np.int64)
        for s in range(0, L, EVENT_CHUNK):
            o = np.arange(s, min(L, s + EVENT_CHUNK), dtype=np.int64)
            W["events"].write(_record_lines(p, o, log.values[s:s + len(o)], no_ack, W["events"].schema))
        W["events"].end()


def _partition_start(W: dict, p: int) -> None:
    """Partition p's lines before its first record: the controller elects n1 (epoch 1), every broker
    recovers an empty log and takes its role, and n1 serves each follower's fetch."""
    _line(W, 10, "c0", "controller", p, {"event": "leader-change", "leader": 1, "epoch": 1, "isr": [1, 2, 3],
                                         "version": 1})
    for n, node in enumerate(NODES):
        _line(W, 20 + n, node, "broker", p, {"event": "recovered", "leo": 0, "hw": 0})
        _line(W, 30 + n, node, "broker", p, {"event": "role", "role": "leader" if node == LEADER else "follower",
                                             "epoch": 1})
    for n, f in enumerate(FOLLOWERS):
        _line(W, 40 + n, LEADER, "broker", p, {"event": "follower-served", "replica": int(f[1:]),
                                               "request": "fetch", "request_epoch": 1})


def _event_spots(log: _PartitionLog, k: int, plan: _Plan, expected: dict[str, int]) -> list[tuple[str, int, int]]:
    """The places of the partition's share of the injected rules (k of each kind, spread over the
    partitions and the log): (kind, offset, its send index), at ok records no history anomaly touches
    (nor their neighbours); each counted into `expected`, with what else it breaks."""
    p, P = log.p, log.P
    L = len(log.values)
    rec_ok = log.records == OK
    taken = {o for o in plan.log_set.get(p, {})} | set(plan.ack_offset.values())
    spots = []
    mine = [(kind, j) for j in range(k) for kind in EVENT_INJECTED if (EVENT_INJECTED.index(kind) * k + j) % P == p]
    if mine:
        step = (L - 2000) // (len(mine) + 1)
        for m, (kind, _) in enumerate(mine):
            o = 1000 + (m + 1) * step
            while not rec_ok[o] or o in taken or o + 1 in taken or o - 1 in taken:
                o += 1
            spots.append((kind, o, int(log.values[o])))
            taken.add(o)
            expected[kind] += 1
            if kind in EVENT_SIDE_EFFECTS:
                expected[EVENT_SIDE_EFFECTS[kind]] += 1
    return spots


def _record_lines(p: int, o: np.ndarray, sends: np.ndarray, no_ack: np.ndarray, schema: pa.Schema) -> pa.Table:
    """The six lines of each record at offsets `o` (written by `sends`), in time order, as a batch of the
    events table; the records at offsets `no_ack` have no `ack` line (ack-undecided)."""
    t = (2 * sends + 1) * DT
    nxt = o + 1
    ts, nodes, fields, ints = [], [], [], []
    for sub, (node, f, cols) in enumerate([
            ("n2", _fields("leo-reported", p, leo=nxt, flushed=nxt, epoch=1, leader=1),
             {"leo": nxt, "flushed": nxt}),
            ("n3", _fields("leo-reported", p, leo=nxt, flushed=nxt, epoch=1, leader=1),
             {"leo": nxt, "flushed": nxt}),
            (LEADER, _fields("hw-change", p, old=o, new=nxt, leo=nxt), {"old": o, "new": nxt, "leo": nxt}),
            (LEADER, _fields("ack", p, base=o, last=o, epoch=1, acks=-1, hw=nxt, isr="[1,2,3]", min_isr=2,
                             flushed=nxt),
             {"base": o, "last": o, "acks": -1, "hw": nxt, "min_isr": 2, "flushed": nxt, "isr_len": 3}),
            ("n2", _fields("hw-change", p, old=o, new=nxt, leo=nxt), {"old": o, "new": nxt, "leo": nxt}),
            ("n3", _fields("hw-change", p, old=o, new=nxt, leo=nxt), {"old": o, "new": nxt, "leo": nxt})]):
        keep = ~np.isin(o, no_ack) if sub == 3 and len(no_ack) else None
        tt = t + sub
        cols = {k: np.broadcast_to(np.asarray(v, dtype=np.int64), o.shape) for k, v in cols.items()}
        if keep is not None:
            tt, f = tt[keep], f.filter(pa.array(keep))
            cols = {k: v[keep] for k, v in cols.items()}
        ts.append(tt)
        nodes.append(pa.array(np.full(len(tt), node, dtype=object), pa.string()))
        fields.append(f)
        ints.append(cols)
    return _lines_table(p, ts, nodes, fields, ints, schema)


def _lines_table(p: int, ts: list[np.ndarray], nodes: list[pa.Array], fields: list[pa.Array],
                 ints: list[dict[str, np.ndarray]], schema: pa.Schema) -> pa.Table:
    """Partition p's broker lines given as groups (each group's times, nodes, JSON fields and integer
    columns, rf.EVENT_INTS, those it lacks null) as one table in time order (stable: a tie keeps the
    groups' order)."""
    order = np.argsort(np.concatenate(ts), kind="stable")
    allts = np.concatenate(ts)[order]
    take = pa.array(order)
    all_fields = pa.concat_arrays(fields).take(take)
    n = len(allts)
    columns = {"ts": pa.array(allts, pa.int64()), "node": pa.concat_arrays(nodes).take(take),
               "src": pa.array(np.full(n, "broker", dtype=object), pa.string()), "seq": pa.array(allts, pa.int64()),
               "event": pc.extract_regex(all_fields, r'^\{"event":"(?P<e>[^"]+)"').field("e"),
               "partition": pa.array(np.full(n, p, dtype=np.int32)), "fields": all_fields}
    for name in rf.EVENT_INTS:
        vals = [c.get(name) for c in ints]
        mask = np.concatenate([np.zeros(len(x), bool) if v is not None else np.ones(len(x), bool)
                               for v, x in zip(vals, ts)])[order]
        data = np.concatenate([v if v is not None else np.zeros(len(x), np.int64)
                               for v, x in zip(vals, ts)])[order]
        columns[name] = pa.array(data, pa.int64(), mask=mask)
    columns["quiet"] = pa.array(np.ones(n, dtype=bool))
    return pa.table(columns, schema=schema)
