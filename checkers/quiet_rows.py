"""One partition's sorted event rows fed to the protocol rules in Arrow batches, quiet rows folded column-wise.

Most of a run's event lines are the three a produce logs per record and replica (BULK): `hw-change`,
`ack` and `leo-reported`, and almost none of them breaks a rule. A 10M-send run has some 60M of them, too
many for a Python dict and a rule call each. So, per run of such rows between two other rows (which may
change a broker's role), this module computes with numpy which rows could break a rule: a superset of the
conditions of `_hw_change`, `_ack` and `_leo_reported` in broker/rules/catalogue.py, over the events
table's integer columns. Those rows, every other row, and every row whose fields the columns may not show
exactly (`quiet` false), go through `PartitionRules.feed` one by one, as in the reference engine. Each run of
the rest is folded into the rules' state at once (`PartitionRules.fold`): so the rules stay defined once, in
broker/rules, and tests/checkers/test_quiet_rows.py holds the two forms to the same findings.

The offsets the partition's leaders acknowledged (for ack-undecided) come out as merged ranges (`decided`).
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

import numpy as np

from broker.rules import PartitionRules, Violation
from broker.rules.catalogue import ack_span, decided_ranges
from rundir import formats as rf

# the lines folded column-wise, and the integer fields of each that the conditions read (`isr_len`: the
# length of the ack's ISR list); rundir/formats.py EVENT_INTS holds them all as columns
BULK: dict[str, tuple[str, ...]] = {
    "hw-change": ("old", "new", "leo"),
    "ack": ("base", "last", "acks", "hw", "min_isr", "flushed", "isr_len"),
    "leo-reported": ("leo", "flushed"),
}
NULL = np.iinfo(np.int64).min          # a null integer column as numpy sees it
_INT64 = (np.iinfo(np.int64).min + 1, np.iinfo(np.int64).max)
_ROLE = {"leader": 1, "follower": 2}


def typed(obj: dict[str, Any]) -> tuple[dict[str, int], bool]:
    """The integer columns of one event line's object, and whether the row is `quiet`: a BULK line each of
    whose fields above is absent, null or an int (a bool or a float is not: the rules would read those
    otherwise than a column can), with `isr` absent, null or a list."""
    names = BULK.get(obj.get("event"))
    if names is None:
        return {}, False
    out: dict[str, int] = {}
    quiet = True
    for name in names:
        if name == "isr_len":
            isr = obj.get("isr")
            if isinstance(isr, list):
                out[name] = len(isr)
            elif isr is not None:
                quiet = False
            continue
        v = obj.get(name)
        if type(v) is int and _INT64[0] <= v <= _INT64[1]:
            out[name] = v
        elif v is not None:
            quiet = False
    return out, quiet


def sort_key(row: dict[str, Any]) -> tuple:
    """Time order; within one log, line order (the events files' order, and the reference engine's)."""
    return row["ts"], row["node"], row["seq"]


class _Batch:
    """One Arrow batch of a partition's rows as numpy columns."""

    def __init__(self, batch: Any, fields: Any = None) -> None:
        """`fields`: a function giving the batch's `fields` column, where the batch has none (`batches_of`
        reads it only for a row group one of whose rows is needed whole)."""
        import pyarrow.compute as pc

        self.n = batch.num_rows
        col = batch.column
        self.ts = col("ts").to_numpy(zero_copy_only=False)
        self.seq = col("seq").to_numpy(zero_copy_only=False)
        nodes = pc.dictionary_encode(col("node"))
        self.names = nodes.dictionary.to_pylist()
        self.code = nodes.indices.to_numpy(zero_copy_only=False)
        self.src = col("src")
        self._fields = fields if fields is not None else (lambda: col("fields"))
        self._loaded = None
        self.partition = col("partition")
        broker = pc.fill_null(pc.equal(col("src"), "broker"), False).to_numpy(zero_copy_only=False)
        quiet = pc.fill_null(col("quiet"), False).to_numpy(zero_copy_only=False) & broker
        event = col("event")
        ack = pc.fill_null(pc.equal(event, "ack"), False).to_numpy(zero_copy_only=False)
        self.hw_row = quiet & pc.fill_null(pc.equal(event, "hw-change"), False).to_numpy(zero_copy_only=False)
        self.ack_row = quiet & ack
        self.leo_row = quiet & pc.fill_null(pc.equal(event, "leo-reported"), False).to_numpy(zero_copy_only=False)
        self.quiet = self.hw_row | self.ack_row | self.leo_row
        self.any_ack = broker & ack
        self.int = {name: pc.fill_null(col(name), NULL).to_numpy(zero_copy_only=False) for name in rf.EVENT_INTS}

    def fields(self) -> Any:
        if self._loaded is None:
            self._loaded = self._fields()
        return self._loaded

    def row(self, i: int) -> dict[str, Any]:
        """Row i as the rules read it (checkers/protocol_trace.py `event_row`)."""
        return self.later(i)()

    def later(self, i: int) -> "_Row":
        """Row i, read when called: a row the rules only remember (`PartitionRules.fold`)."""
        return _Row(self.fields, i, (int(self.ts[i]), self.names[self.code[i]], self.src[i].as_py(), int(self.seq[i]),
                                     self.partition[i].as_py()))

    def key(self, i: int) -> tuple:
        return int(self.ts[i]), self.names[self.code[i]], int(self.seq[i])

    def spans(self) -> Iterator[tuple[int, int]]:
        """The [first, last] offsets of every broker `ack` with a last offset (as catalogue.ack_span),
        merged where they touch or overlap."""
        last, base = self.int["last"], self.int["base"]
        m = self.any_ack & (last != NULL)
        if not m.any():
            return
        last, base = last[m], base[m]
        first = np.where((base != NULL) & (base <= last), base, last)
        order = np.argsort(first, kind="stable")
        first, end = first[order], last[order] + 1
        reach = np.maximum.accumulate(end)
        starts = np.flatnonzero(np.concatenate(([True], first[1:] > reach[:-1])))
        stops = np.concatenate((starts[1:], [len(first)])) - 1
        for a, b in zip(starts, stops):
            yield int(first[a]), int(reach[b]) - 1


class _Row:
    """One row of a batch, read (its JSON parsed) when called."""

    __slots__ = ("fields", "i", "head")

    def __init__(self, fields: Any, i: int, head: tuple) -> None:
        self.fields, self.i, self.head = fields, i, head

    def __call__(self) -> dict[str, Any]:
        row = json.loads(self.fields()[self.i].as_py())
        row["ts"], row["node"], row["src"], row["seq"], part = self.head
        if part is not None:
            row["partition"] = part
        return row


class QuietFeed:
    """Feed one partition's rows: `batches` (Arrow record batches of the events table, in (ts, node, seq)
    order) merged with `extras` (dict rows from elsewhere: polls, storage damage, node-wide lines);
    `violations()` yields what `PartitionRules.feed` and `finish` find, as the reference engine's row-by-row
    pass over the same rows would; `decided` holds the offsets its leaders acknowledged, after it."""

    def __init__(self, rules: PartitionRules, batches: Iterable[Any], extras: Iterable[dict[str, Any]]):
        self.rules = rules
        self.batches = batches
        self.extras = sorted(extras, key=sort_key)
        self.spans: list[tuple[int, int]] = []
        self.fed = 0                       # rows that went through `feed` (the others were folded)
        self.folded = 0

    def violations(self) -> Iterator[Violation]:
        rules, extras = self.rules, self.extras
        e = 0
        for batch in self.batches:
            b = _Batch(*batch) if isinstance(batch, tuple) else _Batch(batch)
            if b.n == 0:
                continue
            self.spans.extend(b.spans())
            # where each extra row that sorts before this batch's last row goes (before row `at`)
            stops: list[tuple[int, dict | None]] = []
            last_key = b.key(b.n - 1)
            while e < len(extras) and sort_key(extras[e]) < last_key:
                x = extras[e]
                at = int(np.searchsorted(b.ts, x["ts"], side="left"))
                while at < b.n and int(b.ts[at]) == x["ts"] and b.key(at) < sort_key(x):
                    at += 1
                stops.append((at, x))
                e += 1
            # and the rows that are not quiet, fed where they stand
            stops += [(int(i), None) for i in np.flatnonzero(~b.quiet)]
            stops.sort(key=lambda s: (s[0], s[1] is None))
            pos = 0
            for at, extra in stops:
                yield from self._segment(b, pos, at)
                if extra is not None:
                    yield from self._feed(extra)
                    pos = at
                else:
                    yield from self._feed(b.row(at))
                    pos = at + 1
            yield from self._segment(b, pos, b.n)
        for x in extras[e:]:
            yield from self._feed(x)
        yield from rules.finish()

    @property
    def decided(self):
        return decided_ranges(self.spans)

    def _feed(self, row: dict[str, Any]) -> list[Violation]:
        self.fed += 1
        return self.rules.feed(row)

    def _segment(self, b: _Batch, a: int, z: int) -> Iterator[Violation]:
        """Quiet rows [a, z) of batch b, which no row changing a broker's role separates: the ones a rule's
        condition may hold for go through `feed`, the runs between them are folded."""
        if a >= z:
            return
        rules, s = self.rules, self.rules.settings
        code = b.code[a:z]
        for c in np.unique(code):            # as `feed` makes a broker's state at its first row
            rules.node(b.names[c])
        roles = np.array([_ROLE.get(getattr(rules.nodes.get(name), "role", None), 0) for name in b.names],
                         dtype=np.int8)[code]
        old, new, leo = (b.int[k][a:z] for k in ("old", "new", "leo"))
        hw_row = b.hw_row[a:z] & (new != NULL)
        leader_new = np.where(hw_row & (roles == 1), new, NULL)
        leader_hw = np.maximum(np.maximum.accumulate(leader_new), rules.leader_hw)
        flag = hw_row & (((leo != NULL) & (new > leo))                                       # hw-above-leo
                         | ((roles == 1) & (old != NULL) & (new < old))                     # leader-hw-decrease
                         | ((roles == 2) & bool(s.same_clock) & (old != NULL) & (new > old)
                            & (new > leader_hw)))                                           # follower-hw-ahead
        last, acks, hw, min_isr, flushed, isr_len = (b.int[k][a:z] for k in
                                                     ("last", "acks", "hw", "min_isr", "flushed", "isr_len"))
        ack_row = b.ack_row[a:z] & (last != NULL)
        default_min = s.min_insync_replicas if type(s.min_insync_replicas) is int else NULL
        min_isr = np.where(min_isr != NULL, min_isr, default_min)
        always = s.flush == "always"
        flag |= ack_row & (((acks == -1) & (((hw != NULL) & (last >= hw))                   # ack-above-hw
                                            | ((isr_len != NULL) & (min_isr != NULL)
                                               & (isr_len < min_isr))))                    # ack-below-min-isr
                           | (always & (flushed != NULL) & (last >= flushed)))              # ack-before-flush
        flag |= (b.leo_row[a:z] & always & (leo != NULL) & (flushed != NULL)
                 & (leo > flushed))                                                         # reported-before-flush
        pos = a
        for i in np.flatnonzero(flag) + a:
            self._fold(b, pos, int(i))
            yield from self._feed(b.row(int(i)))
            pos = int(i) + 1
        self._fold(b, pos, z)

    def _fold(self, b: _Batch, a: int, z: int) -> None:
        """Quiet rows [a, z) that break no rule: into the state, per node (`PartitionRules.fold`)."""
        if a >= z:
            return
        self.folded += z - a
        rules = self.rules
        code = b.code[a:z]
        new, leo, last = b.int["new"][a:z], b.int["leo"][a:z], b.int["last"][a:z]
        hw_row = b.hw_row[a:z] & (new != NULL)
        ack_row = b.ack_row[a:z] & (last != NULL)
        # the highest HW a leader's row set in the run, and the first row that set it
        leaders = np.array([getattr(rules.nodes.get(name), "role", None) == "leader" for name in b.names])[code] & hw_row
        top, top_at = None, None
        if leaders.any():
            cand = np.where(leaders, new, NULL)
            j = int(np.argmax(cand))
            if int(cand[j]) > rules.leader_hw:
                top, top_at = int(cand[j]), a + j
        for c in np.unique(code):
            mine = code == c
            where = np.flatnonzero(mine)
            hw_at = np.flatnonzero(mine & hw_row)
            leo_at = np.flatnonzero(mine & hw_row & (leo != NULL))
            acked = last[mine & ack_row]
            owner = top_at is not None and b.code[top_at] == c
            rules.fold(b.names[c], b.later(a + int(where[-1])),
                       hw=int(new[hw_at[-1]]) if len(hw_at) else None,
                       leo=int(leo[leo_at[-1]]) if len(leo_at) else None,
                       acked_end=int(acked.max()) + 1 if len(acked) else None,
                       leader_hw=(top, b.later(top_at)) if owner else None)


def partition_files(events_dir: Any) -> tuple[dict[int, str], str | None] | None:
    """The events table's files (rundir/formats.py EVENTS_PARTITION_FILE): {partition: path} and the path of
    the lines of no partition; None for a table not laid out so (one the generator of an older synthetic
    run wrote), which only the row-by-row pass reads."""
    from pathlib import Path

    d = Path(events_dir)
    wide = d / rf.EVENTS_WIDE_FILE
    if not wide.is_file():
        return None
    head, tail = rf.EVENTS_PARTITION_FILE.split("{", 1)[0], ".parquet"
    out = {}
    for f in sorted(d.glob(head + "*" + tail)):
        out[int(f.name[len(head):-len(tail)])] = str(f.resolve())
    return out, str(wide.resolve())


def batches_of(files: Iterable[str], batch_rows: int | None = None) -> Iterator[tuple[Any, Any]]:
    """A partition's events files, in order, row group by row group: each as (its columns but `fields`,
    a function reading its `fields`). The JSON text is most of the table's bytes, and a row group's is read
    only if one of its rows is needed whole (fed to the rules, or named as evidence). `batch_rows`: at most
    that many rows at a time (None: a row group)."""
    import pyarrow.parquet as pq

    for path in files:
        pf = pq.ParquetFile(path)
        names = [n for n in pf.schema_arrow.names if n != "fields"]
        for rg in range(pf.num_row_groups):
            table = pf.read_row_group(rg, columns=names)
            step = batch_rows or max(1, table.num_rows)
            for start in range(0, table.num_rows, step):
                def fields(rg=rg, start=start, n=min(step, table.num_rows - start)):
                    return pq.ParquetFile(path).read_row_group(rg, columns=["fields"]).column(0).slice(start, n).combine_chunks()
                yield table.slice(start, step).combine_chunks().to_batches()[0], fields


def spans_of(rows: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
    """The acks' [first, last] spans of dict rows (a partition's rows fed row by row)."""
    return [s for s in (ack_span(r) for r in rows if r.get("src") == "broker" and r.get("event") == "ack")
            if s is not None]


def table_of(rows: Iterable[dict[str, Any]]) -> Any:
    """Event rows (dicts as the rules read them, with `src` and `seq`) as an events table, in the given
    order: its columns as ingest writes them from the log lines (`typed`)."""
    import pyarrow as pa

    schema = rf.arrow_schemas()["events"]
    cols: dict[str, list] = {name: [] for name in schema.names}
    for row in rows:
        obj = {k: v for k, v in row.items() if k not in ("ts", "node", "src", "seq")}
        ints, quiet = typed(obj)
        part = row.get("partition")
        values = {"ts": row["ts"], "node": row["node"], "src": row["src"], "seq": row["seq"],
                  "event": row.get("event"), "partition": part if type(part) is int else None,
                  "fields": json.dumps(obj, separators=(",", ":")), "quiet": quiet and row["src"] == "broker", **ints}
        for name in schema.names:
            cols[name].append(values.get(name))
    return pa.table(cols, schema=schema)
