"""Run directory JSON lines -> columnar (Parquet) tables, validated line by line, cached in columnar/.

The checker never re-parses JSON on a second check: history.jsonl and the replica dumps are converted
once into RUN_DIR/columnar/<table>/part-*.parquet (schemas in rundir/formats.py) with a manifest
recording the sources' sizes and mtimes; a later check reuses the tables while the sources are unchanged.
A run directory that has no history.jsonl but a columnar manifest (the synthetic benchmark generator
writes Parquet directly) is used as it is.

Every malformed line raises FormatError naming file, line and field; with `lenient` the line is skipped
and counted instead, and history lines that depend on a lost one are kept where they still say something
(an acknowledged send whose invoke was lost is still recorded, so its loss is checked). A torn last line
(what a crashed writer leaves) is always skipped, and a missing replicas/ directory (what a run that
crashed before its dumps leaves) is accepted. Each of these is recorded as a problem naming file and
line: the verdict then cannot be valid (results.py).
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from rundir import evidence as ev
from rundir import formats as rf
from rundir.formats import FormatError
from rundir.opened import OpenedRun

CONVERTER_VERSION = 14  # 6: the `events` table (node event logs, for the protocol rules); 7: reads' `epoch`;
                        # 8: nemesis ops' `targets`; 9: corrupt starts' `damage`; 10: dump offsets checked;
                        # 11: evidence out of scope is no problem, a node's missing event log is one;
                        # 12: events laid out by partition, sorted, with the produce lines' integer columns;
                        # 13: sends' `key` (the keyed workload); 14: the group operations (`group_parts`,
                        # polls' `group` and `generation`)
BATCH_ROWS = rf.ROW_GROUP_ROWS
MAX_PROBLEMS = 100   # problems named one by one (the rest are counted)
# problems only --lenient accepts: a strict check does not reuse tables converted with any of them
LENIENT_PROBLEMS = ("skipped", "missing-dump", "index-gap", "no-invoke", "no-completion")


@dataclass
class IngestResult:
    columnar_dir: Path
    skipped: dict[str, int] = field(default_factory=dict)   # file -> malformed lines skipped (lenient)
    torn: dict[str, int] = field(default_factory=dict)      # file -> torn last lines skipped
    missing_dumps: list[str] = field(default_factory=list)  # lenient: replica dumps listed but absent
    converted: bool = False
    problems: list[dict] = field(default_factory=list)      # the first MAX_PROBLEMS input problems
    problem_count: int = 0
    needs_lenient: bool = False                             # some problem is one only --lenient accepts

    def problem(self, file: str, line: int | None, kind: str, message: str) -> None:
        """Record input that could not be checked: `file` relative to the run directory, 1-based `line`."""
        self.problem_count += 1
        self.needs_lenient = self.needs_lenient or kind in LENIENT_PROBLEMS
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append({"file": file, "line": line, "kind": kind, "message": message})

    def skip(self, label: str, err: FormatError) -> None:
        """A malformed line skipped under --lenient: counted per file and recorded with its error."""
        self.skipped[label] = self.skipped.get(label, 0) + 1
        self.problem(label, err.line, "skipped", f"malformed line skipped: {_what(err)}")

    def as_json(self) -> dict[str, Any]:
        return {"skipped_lines": self.skipped, "torn_lines": self.torn,
                "missing_dumps": self.missing_dumps, "converted": self.converted,
                "problems": self.problems, "problem_count": self.problem_count}


def _what(err: FormatError) -> str:
    """A FormatError's message without the file and line in front of it."""
    text = str(err)
    where = f"{err.path}:{err.line}: " if err.line is not None else f"{err.path}: "
    return text[len(where):] if text.startswith(where) else text


# --- table writers ---------------------------------------------------------------------------------

class _TableWriter:
    """Buffers rows column-wise and writes Parquet row groups of BATCH_ROWS rows."""

    def __init__(self, directory: Path, schema: pa.Schema):
        self.directory = directory
        self.schema = schema
        self.names = schema.names
        self.cols: dict[str, list] = {n: [] for n in self.names}
        self.writer: pq.ParquetWriter | None = None
        directory.mkdir(parents=True, exist_ok=True)

    def add(self, row: dict[str, Any]) -> None:
        for n in self.names:
            self.cols[n].append(row.get(n))
        if len(self.cols[self.names[0]]) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.cols[self.names[0]] and self.writer is not None:
            return
        table = pa.table({n: pa.array(self.cols[n], type=self.schema.field(n).type) for n in self.names},
                         schema=self.schema)
        if self.writer is None:
            self.writer = rf.parquet_writer(self.directory / "part-0.parquet", self.schema)
        self.writer.write_table(table)
        self.cols = {n: [] for n in self.names}

    def close(self) -> None:
        self.flush()  # an empty table still gets a file with the schema
        assert self.writer is not None
        self.writer.close()


# --- validation helpers ----------------------------------------------------------------------------

def _int(obj: dict, key: str, path: Path, line: int, prefix: str = "value.") -> int:
    if key not in obj:
        raise FormatError(path, line, f"missing field '{prefix}{key}'")
    v = obj[key]
    if not isinstance(v, int) or isinstance(v, bool):
        raise FormatError(path, line, f"field '{prefix}{key}' must be an integer, got {v!r}")
    return v


def _damage(entries: Any, path: Path, line: int) -> str | None:
    """A corrupt start's `damage` list as the ops table keeps it: "node/partition/offset,..." (an unknown
    partition or offset empty); None for an empty list."""
    if not isinstance(entries, list):
        raise FormatError(path, line, "field 'value.damage' must be a list")
    out = []
    for pos, entry in enumerate(entries):
        where = f"value.damage[{pos}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("node"), str) or not entry["node"]:
            raise FormatError(path, line, f"field '{where}.node' is missing or not a string")
        parts = [entry["node"]]
        for key in ("partition", "offset"):
            v = entry.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise FormatError(path, line, f"field '{where}.{key}' must be a non-negative integer or null, "
                                              f"got {v!r}")
            parts.append("" if v is None else str(v))
        out.append("/".join(parts))
    return ",".join(out) or None


def _opt_int(obj: dict, key: str, path: Path, line: int, prefix: str = "value.") -> int | None:
    if obj.get(key) is None:
        return None
    return _int(obj, key, path, line, prefix)


def _lines(path: Path, result: IngestResult, label: str):
    """(line_no, parsed object or the exception) for each non-blank line; a torn tail is dropped and
    recorded as a problem of `result`."""
    data = rf.read_bytes(path)
    ends_with_newline = data.endswith(b"\n")
    lines = data.split(b"\n")
    last_no = len(lines) if not ends_with_newline else len(lines) - 1
    for no, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if no == last_no and not ends_with_newline:
                result.torn[label] = result.torn.get(label, 0) + 1
                result.problem(label, no, "torn", "torn last line ignored (no newline at the end, not valid JSON)")
                continue
            yield no, FormatError(path, no, f"not valid JSON ({str(exc).split(':')[0]})")
            continue
        if not isinstance(obj, dict):
            yield no, FormatError(path, no, "expected a JSON object")
            continue
        yield no, obj


# --- history ---------------------------------------------------------------------------------------

class _HistoryConverter:
    def __init__(self, path: Path, out: Path, schemas: dict[str, pa.Schema], lenient: bool = False,
                 result: IngestResult | None = None):
        self.path = path
        self.lenient = lenient
        self.result = result if result is not None else IngestResult(out)
        self.lost_lines = 0   # lines skipped since the last one kept (they explain a gap in the indexes)
        self.ops = _TableWriter(out / "ops", schemas["ops"])
        self.reads = _TableWriter(out / "reads", schemas["reads"])
        self.groups = _GroupOps(path, _TableWriter(out / "group_parts", schemas["group_parts"]))
        self.final_states: list[tuple[int, dict]] = []
        # process -> (index, time, f, partition, send value or None, send key or None)
        self.pending: dict[Any, tuple] = {}
        self.end_time = 0                     # the largest time of any line kept
        self.sent: dict[int, dict[int, int]] = {}                       # partition -> value -> line of its send
        self.next_index = 0

    def convert_line(self, line: int, op: dict) -> None:
        path = self.path
        rf.validate_op(op, path, line)
        if op["index"] != self.next_index and not (self.lenient and op["index"] > self.next_index):
            raise FormatError(path, line, f"field 'index' is {op['index']}, expected {self.next_index} (indexes are dense)")
        notes: list[tuple[str, str]] = []   # (kind, message): problems recorded once the line is kept
        if op["index"] - self.next_index > self.lost_lines:
            gap = (f"index {self.next_index} is" if op["index"] - self.next_index == 1
                   else f"indexes {self.next_index}..{op['index'] - 1} are")
            notes.append(("index-gap", f"{gap} missing from the history (lines lost before this one)"))
        process, typ, f = op["process"], op["type"], op["f"]
        value = op.get("value") or {}
        error = op.get("error")
        if error is not None and not isinstance(error, str):
            error = json.dumps(error)
        row: dict[str, Any] = {"index": op["index"], "time": op["time"], "process": str(process),
                               "type": typ, "f": f, "error": error}
        reads: list[dict] = []
        parts: list[dict] = []
        if process == rf.NEMESIS_PROCESS:
            self._nemesis_fields(row, value, line)
        elif process == rf.HARNESS_PROCESS:
            if f == rf.FINAL_STATE_F:
                self._final_state(line, value)
                row["partition"] = value["partition"]
                row["hw"] = value["hw"]
                row["epoch"] = _opt_int(value, "epoch", path, line)
        elif f in rf.CLIENT_FS:
            row["partition"] = _int(value, "partition", path, line)
            self._pair(op, row, line, notes)
            if f == "send":
                self._send_fields(row, value, line)
            elif f in ("poll", "final-read"):
                reads = self._read_fields(op, row, value, line)
                if f == "poll" and "group" in value:
                    row["group"], row["generation"] = _group_id(value, path, line), _generation(value, path, line)
                    for r in reads:
                        r["group"] = row["group"]
            elif f == "assign":
                row["offset"] = _int(value, "offset", path, line)
        elif f in rf.GROUP_FS:
            parts = self.groups.fields(op, row, value, line)
        # all checks passed: commit the line
        for kind, message in notes:
            self.result.problem(rf.HISTORY, line, kind, message)
        self.lost_lines = 0
        self.next_index = op["index"] + 1
        self.end_time = max(self.end_time, op["time"])
        self.ops.add(row)
        for r in reads:
            self.reads.add(r)
        self.groups.add(parts)

    def _nemesis_fields(self, row: dict[str, Any], value: dict, line: int) -> None:
        """A fault window's start or stop: its fault, phase, id, targets (and a corrupt start's damage)."""
        path = self.path
        for key in ("fault", "phase"):
            if not isinstance(value.get(key), str):
                raise FormatError(path, line, f"field 'value.{key}' is missing or not a string")
        if value["phase"] not in ("start", "stop"):
            raise FormatError(path, line, f"field 'value.phase' must be start or stop, got {value['phase']!r}")
        targets = value.get("targets")
        row.update(fault=value["fault"], phase=value["phase"], fault_id=_int(value, "id", path, line),
                   targets=",".join(str(t) for t in targets) if isinstance(targets, list) and targets else None)
        if "damage" in value:
            row["damage"] = _damage(value["damage"], path, line)

    def _pair(self, op: dict, row: dict[str, Any], line: int, notes: list[tuple[str, str]]) -> None:
        """A client operation's invoke is kept pending until its completion, which gets the invoke's index
        and time; a mismatch is an error (under --lenient, a send's is kept, with a note)."""
        path, process, typ, f, part = self.path, op["process"], op["type"], op["f"], row["partition"]
        value = op.get("value") or {}
        if typ == "invoke":
            if process in self.pending:
                err = FormatError(path, line, f"process {process!r} invoked while its operation at index "
                                              f"{self.pending[process][0]} is still in flight")
                if not self.lenient:
                    raise err
                # lenient: the operation in flight lost its completion line; this one is kept
                notes.append(("no-completion", f"process {process!r} invoked again: its operation invoked at "
                                               f"index {self.pending[process][0]} has no completion"))
            sent = f == "send"
            self.pending[process] = (op["index"], op["time"], f, part, value.get("value") if sent else None,
                                     value.get("key") if sent else None)
            return
        inv = self.pending.pop(process, None)
        key = value.get("key") if f == "send" else None
        if inv is not None and (inv[2] != f or inv[3] != part or inv[5] != key):
            keys = f" key={key}" if key is not None or inv[5] is not None else ""
            was = f" key={inv[5]}" if keys else ""
            err = FormatError(path, line, f"completion f={f!r} partition={part}{keys} does not match its invoke "
                                          f"(index {inv[0]}: f={inv[2]!r} partition={inv[3]}{was})")
            if not (self.lenient and f == "send"):
                raise err
            notes.append(("no-completion", f"the operation invoked at index {inv[0]} by process {process!r} "
                                           f"has no completion"))
            inv = None
        if inv is None:
            if not (self.lenient and f == "send"):
                raise FormatError(path, line, f"'{typ}' completion of process {process!r} without a pending invoke")
            # lenient: its invoke line was lost; an acknowledged send is still checked for loss
            notes.append(("no-invoke", f"'{typ}' send completion of process {process!r} has no invoke "
                                       f"(kept without it)"))
        else:
            row["invoke_index"], row["invoke_time"] = inv[0], inv[1]

    def _send_fields(self, row: dict[str, Any], value: dict, line: int) -> None:
        """A send's value (unique per partition), its key if it has one, and, acknowledged, its offset
        and leader epoch."""
        path, typ, part = self.path, row["type"], row["partition"]
        row["value"] = _int(value, "value", path, line)
        row["key"] = _opt_int(value, "key", path, line)
        if typ != "invoke" and row.get("invoke_index") is None:
            self.sent.setdefault(part, {}).setdefault(row["value"], line)
        if typ == "invoke":
            seen = self.sent.setdefault(part, {})
            if row["value"] in seen:
                raise FormatError(path, line, f"field 'value.value' {row['value']} was already sent to partition "
                                              f"{part} at line {seen[row['value']]} (values are unique per partition)")
            seen[row["value"]] = line
        if typ == "ok":
            row["offset"] = _int(value, "offset", path, line)
            row["epoch"] = _int(value, "epoch", path, line)

    def _read_fields(self, op: dict, row: dict[str, Any], value: dict, line: int) -> list[dict]:
        """A poll's or final read's offset and, ok, its HW, epoch and records (one `reads` row each)."""
        path, f, part = self.path, row["f"], row["partition"]
        row["offset"] = _int(value, "offset", path, line)
        reads: list[dict] = []
        if row["type"] != "ok":
            return reads
        row["hw"] = _int(value, "hw", path, line)
        row["epoch"] = _int(value, "epoch", path, line)
        records = value.get("records")
        if not isinstance(records, list):
            raise FormatError(path, line, "field 'value.records' is missing or not a list")
        for pos, rec in enumerate(records):
            if (not isinstance(rec, list) or len(rec) not in (2, 3)
                    or not all(isinstance(x, int) and not isinstance(x, bool) for x in rec)):
                raise FormatError(path, line, f"field 'value.records[{pos}]' must be [offset, value] or "
                                              f"[offset, value, epoch] integers, got {rec!r}")
            reads.append({"index": op["index"], "process": str(op["process"]), "f": f, "partition": part,
                          "offset": rec[0], "value": rec[1], "time": op["time"], "pos": pos,
                          "epoch": rec[2] if len(rec) == 3 and rec[2] >= 0 else -1})
        return reads

    def _final_state(self, line: int, value: dict) -> None:
        path = self.path
        _int(value, "partition", path, line)
        if not isinstance(value.get("recovered"), bool):
            raise FormatError(path, line, "field 'value.recovered' is missing or not a boolean")
        _int(value, "hw", path, line)
        reps = value.get("replicas")
        if reps is not None and not isinstance(reps, dict):
            raise FormatError(path, line, "field 'value.replicas' must be an object")
        self.final_states.append((line, value))

    def close_open_invokes(self) -> None:
        """An operation still in flight when the history ends (an interrupted or killed run) is
        indeterminate: it gets an `info` row at the end of the history (index after the last line, time
        the history's last time), as if the worker had given up on it, so both engines count it."""
        def as_int(v: Any) -> int | None:
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        for process, (index, time, f, part, value, key) in sorted(self.pending.items(), key=lambda kv: kv[1][0]):
            self.ops.add({"index": self.next_index, "time": self.end_time, "process": str(process),
                          "type": "info", "f": f, "partition": part, "value": as_int(value), "key": as_int(key),
                          "error": "no completion: the history ends while it is in flight",
                          "invoke_index": index, "invoke_time": time})
            self.next_index += 1
        self.pending.clear()
        for inv in self.groups.open_invokes():
            row = {"index": self.next_index, "time": self.end_time, "process": inv["process"], "type": "info",
                   "f": inv["f"], "group": inv["group"], "generation": inv["generation"],
                   "error": "no completion: the history ends while it is in flight",
                   "invoke_index": inv["index"], "invoke_time": inv["time"]}
            self.ops.add(row)
            self.groups.add([dict(r, index=row["index"], time=row["time"], type="info", error=row["error"],
                                  invoke_index=inv["index"], invoke_time=inv["time"]) for r in inv["parts"]])
            self.next_index += 1

    def close(self) -> None:
        self.ops.close()
        self.reads.close()
        self.groups.close()


# --- group operations ------------------------------------------------------------------------------

def _group_id(value: dict, path: Path, line: int) -> str:
    g = value.get("group")
    if not isinstance(g, str) or not g:
        raise FormatError(path, line, f"field 'value.group' must be a non-empty string, got {g!r}")
    return g


def _generation(value: dict, path: Path, line: int) -> int:
    n = _int(value, "generation", path, line)
    if n < rf.NO_GENERATION:
        raise FormatError(path, line, f"field 'value.generation' must be -1 (unknown) or more, got {n}")
    return n


def _partitions(value: dict, path: Path, line: int) -> list[int]:
    ps = value.get("partitions")
    if (not isinstance(ps, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in ps)
            or len(set(ps)) != len(ps)):
        raise FormatError(path, line, f"field 'value.partitions' must be a list of distinct non-negative integers, "
                                      f"got {ps!r}")
    return sorted(ps)


def _offsets(value: dict, key: str, path: Path, line: int) -> list[tuple[int, int]]:
    """An offset map: [[partition, offset], ...], each partition once; offset -1 = none committed."""
    pairs = value.get(key)
    ok = isinstance(pairs, list) and all(
        isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in e)
        and e[0] >= 0 and e[1] >= rf.NO_COMMITTED_OFFSET for e in pairs)
    if not ok or len({e[0] for e in pairs}) != len(pairs):
        raise FormatError(path, line, f"field 'value.{key}' must be a list of [partition, offset] integer pairs "
                                      f"(each partition once, offset -1 or more), got {pairs!r}")
    return sorted((e[0], e[1]) for e in pairs)


class _GroupOps:
    """The group operations (rundir/formats.py GROUP_FS) of the history: each line's fields validated, its
    `group_parts` rows (one per partition it names), and the pairing of completions with invokes. One
    process may have several in flight, and besides its one client operation (an async commit answered
    while the member polls): a completion is paired with the oldest invoke of its process with the same
    f, group and partitions (a commit's: the same offsets)."""

    def __init__(self, path: Path, writer: _TableWriter):
        self.path = path
        self.writer = writer
        self.pending: dict[tuple, list[dict]] = {}

    def fields(self, op: dict, row: dict[str, Any], value: dict, line: int) -> list[dict]:
        """The ops row's group fields, and the line's group_parts rows (its completion paired)."""
        path, f, typ = self.path, op["f"], op["type"]
        group = _group_id(value, path, line)
        generation = None if f == rf.COMMITTED_F else _generation(value, path, line)
        member = None
        if f != rf.COMMITTED_F:
            member = value.get("member")
            if not isinstance(member, str):
                raise FormatError(path, line, f"field 'value.member' must be a string, got {member!r}")
        row["group"], row["generation"] = group, generation
        base = {"index": op["index"], "time": op["time"], "process": row["process"], "type": typ, "f": f, "group": group, "member": member, "generation": generation,
                "error": row["error"]}
        mode, lost = None, None
        if f == rf.COMMIT_F:
            mode = value.get("mode")
            if mode not in rf.COMMIT_MODES:
                raise FormatError(path, line, f"field 'value.mode' must be one of {', '.join(rf.COMMIT_MODES)}, "
                                              f"got {mode!r}")
            named = _offsets(value, "offsets", path, line)
            signature: tuple = tuple(named)
        else:
            ps = _partitions(value, path, line)
            named = [(p, None) for p in ps]
            signature = tuple(ps)
            if f == rf.GROUP_REVOKE_F:
                lost = value.get("lost", False)
                if not isinstance(lost, bool):
                    raise FormatError(path, line, f"field 'value.lost' must be a boolean, got {lost!r}")
            elif typ == "ok":
                key = "committed" if f == rf.GROUP_ASSIGN_F else "offsets"
                have = dict(_offsets(value, key, path, line))
                if set(have) != set(ps):
                    raise FormatError(path, line, f"field 'value.{key}' names partitions {sorted(have)}, "
                                                  f"not the operation's partitions {ps}")
                named = [(p, have[p]) for p in ps]
        parts = [dict(base, partition=p, offset=o, mode=mode, lost=lost) for p, o in named]
        key = (row["process"], f, group, signature)
        if typ == "invoke":
            self.pending.setdefault(key, []).append(
                {"index": op["index"], "time": op["time"], "process": row["process"], "f": f, "group": group,
                 "generation": generation, "parts": parts})
        else:
            queue = self.pending.get(key)
            if not queue:
                raise FormatError(path, line, f"'{typ}' completion of {f} (process {row['process']!r}, group "
                                              f"{group!r}, partitions {[p for p, _ in named]}) without a pending "
                                              f"invoke of the same f, group and partitions")
            inv = queue.pop(0)
            if not queue:
                del self.pending[key]
            row["invoke_index"], row["invoke_time"] = inv["index"], inv["time"]
        for r in parts:
            r.update(invoke_index=row.get("invoke_index"), invoke_time=row.get("invoke_time"))
        return parts

    def add(self, parts: list[dict]) -> None:
        for r in parts:
            self.writer.add(r)

    def open_invokes(self) -> list[dict]:
        """The invokes still in flight, in index order (then forgotten)."""
        out = sorted((inv for queue in self.pending.values() for inv in queue), key=lambda inv: inv["index"])
        self.pending.clear()
        return out

    def close(self) -> None:
        self.writer.close()


def _final_state_row(value: dict) -> dict:
    return {"partition": value["partition"], "recovered": value["recovered"], "hw": value["hw"],
            "leader": value.get("leader"), "epoch": value.get("epoch"),
            "isr": json.dumps(value.get("isr")), "replicas": json.dumps(value.get("replicas") or {}, sort_keys=True)}


# --- replica dumps ---------------------------------------------------------------------------------

class _DumpOffsets:
    """What a replica dump's record lines must be: offsets log_start, log_start+1, ..., leo-1, each once
    and in order (a record failing its CRC may follow, at leo: the start of the torn tail). A line that
    breaks this is named; one that would corrupt the comparison (negative, repeated, out of order, past
    leo) is also left out of the replicas table. Any of them makes the dump one `dump-damaged` problem,
    so the verdict cannot be valid: the divergence check cannot vouch for a replica it did not fully see."""

    SHOWN = 5                       # damaged places named in the problem's message

    def __init__(self, log_start: int, leo: int):
        self.expect, self.leo = log_start, leo
        self.damage: list[str] = []
        self.count = 0
        self.first_line: int | None = None      # the line of the first damage

    def _note(self, line: int, what: str) -> None:
        self.count += 1
        if self.first_line is None:
            self.first_line = line
        if len(self.damage) < self.SHOWN:
            self.damage.append(f"line {line}: {what}")

    def keep(self, line: int, offset: int, crc_ok: bool) -> bool:
        """Whether the record line at `offset` goes into the table (noting what is wrong with it)."""
        if offset < 0:
            self._note(line, f"negative offset {offset}")
            return False
        if not crc_ok:               # the torn tail's first record: past the valid log by definition
            if offset != self.leo:
                self._note(line, f"a record failing its CRC at offset {offset}, not at leo {self.leo}")
            return offset == self.leo
        if offset >= self.leo:
            self._note(line, f"offset {offset} at or past the dump's leo {self.leo}")
            return False
        if offset < self.expect:
            self._note(line, f"offset {offset} repeated or out of order (after {self.expect - 1})")
            return False
        if offset > self.expect:
            self._note(line, f"offsets {_span(self.expect, offset)} missing")
        self.expect = offset + 1
        return True

    def finish(self, lines: int) -> None:
        if self.expect < self.leo:
            self._note(lines, f"offsets {_span(self.expect, self.leo)} missing at the end (leo {self.leo})")

    def message(self) -> str:
        more = f" (and {self.count - len(self.damage)} more)" if self.count > len(self.damage) else ""
        return ("replica dump damaged, this replica was not compared in full: "
                + "; ".join(self.damage) + more)


def _span(first: int, stop: int) -> str:
    return str(first) if stop == first + 1 else f"{first}..{stop - 1}"


def _convert_dump(cv: "_Conversion", dump: tuple[str, int, Path], replicas: _TableWriter,
                  meta_rows: list[dict]) -> None:
    """One replica dump (node, partition, file): its records into `replicas`, its meta line into
    `meta_rows`; a malformed line is an error, or with --lenient skipped and recorded."""
    node, partition, path = dump
    lenient, result, label = cv.lenient, cv.result, str(path.relative_to(cv.run_dir))
    meta: dict | None = None
    offsets: _DumpOffsets | None = None
    last_line = 0
    for line, obj in _lines(path, result, label):
        try:
            if isinstance(obj, FormatError):
                raise obj
            if meta is None:
                if obj.get("kind") != "meta":
                    raise FormatError(path, line, "first line must be the replica's meta line (kind=meta)")
                for key in ("leo", "hw", "log_start"):
                    _int(obj, key, path, line, prefix="")
                if obj.get("node", node) != node:
                    raise FormatError(path, line, f"field 'node' is {obj.get('node')!r}, but the file is under replicas/{node}/")
                if _opt_int(obj, "partition", path, line, prefix="") not in (None, partition):
                    raise FormatError(path, line, f"field 'partition' is {obj.get('partition')}, but the file is p{partition}.jsonl")
                meta = obj
                offsets = _DumpOffsets(obj["log_start"], obj["leo"])
                meta_rows.append({"node": node, "partition": partition, "leo": obj["leo"], "hw": obj["hw"],
                                  "log_start": obj["log_start"], "epochs": json.dumps(obj.get("epochs", [])),
                                  "torn_bytes": obj.get("torn_bytes") or 0})
                continue
            if obj.get("kind", "record") != "record":
                raise FormatError(path, line, f"field 'kind' must be record, got {obj.get('kind')!r}")
            offset = _int(obj, "offset", path, line, prefix="")
            epoch = _int(obj, "epoch", path, line, prefix="")
            if "value" not in obj:
                raise FormatError(path, line, "missing field 'value'")
            v = obj["value"]
            v = v if isinstance(v, int) and not isinstance(v, bool) else None  # non-integer values: null
            crc = bool(obj.get("crc_ok", True))
            last_line = line
            if offsets.keep(line, offset, crc):
                replicas.add({"node": node, "partition": partition, "offset": offset, "epoch": epoch,
                              "value": v, "crc_ok": crc})
        except FormatError as err:
            if not lenient:
                raise
            result.skip(label, err)
    if meta is None:
        err = FormatError(path, None, "empty replica dump (no meta line)")
        if not lenient:
            raise err
        result.skip(label, err)
        return
    offsets.finish(max(last_line, 1))
    if offsets.count:
        result.problem(label, offsets.first_line, "dump-damaged", offsets.message())


def _dump_files(run_dir: Path) -> list[tuple[str, int, Path]]:
    out = []
    root = run_dir / rf.REPLICAS_DIR
    if not root.is_dir():
        return out
    for node_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(node_dir.glob("p*.jsonl")):
            stem = f.stem[1:]
            if not stem.isdigit():
                raise FormatError(f, None, "replica dump name must be p<partition>.jsonl")
            out.append((node_dir.name, int(stem), f))
    return out


# --- the conversion --------------------------------------------------------------------------------

def _event_logs(run_dir: Path) -> list[tuple[str, Path]]:
    """(node, path) of every node event log of the run (nodes/<node>/broker.log)."""
    root = run_dir / rf.NODES_DIR
    if not root.is_dir():
        return []
    return [(d.name, d / rf.BROKER_LOG) for d in sorted(root.iterdir()) if (d / rf.BROKER_LOG).is_file()]


def _convert_events(run_dir: Path, directory: Path, schema: pa.Schema) -> dict[str, int]:
    """The event log lines the protocol rules read (broker/rules `EVENTS_READ`) into the `events` table:
    one file per partition in (ts, node, seq) order, and one of the lines that name no partition
    (rundir/formats.py EVENTS_PARTITION_FILE), with the integer columns of checkers/quiet_rows.py `typed`.
    A log is the controller's when it has a `listening` line. The lines about an internal topic's
    partitions (those naming a `topic` that starts with "__", the groups' __consumer_offsets) are left
    out: their partition numbers are not the test topic's. Lines that are not JSON objects (a torn
    line of a killed process) are skipped and counted per log: the logs are evidence for the white-box
    rules, not the run's record, so a lost line never makes the verdict unknown (docs/formats.md). The
    sort holds the table in memory, as Arrow columns (some 100 bytes a line)."""
    from broker.limits import INTERNAL_PREFIX
    from broker.rules import EVENTS_READ
    from checkers.quiet_rows import typed

    wanted = {name.encode() for name in EVENTS_READ}
    skipped: dict[str, int] = {}
    cols: dict[str, list] = {name: [] for name in schema.names}
    for node, path in _event_logs(run_dir):
        first = len(cols["ts"])
        controller = False
        with path.open("rb") as fh:
            for seq, raw in enumerate(fh, start=1):
                start = raw.find(b'"event":"')
                if start < 0:
                    continue
                name = raw[start + 9:raw.find(b'"', start + 9)]
                if name == b"listening":
                    controller = True
                if name not in wanted:
                    continue
                try:
                    obj = orjson.loads(raw)
                    ts = obj["ts"]
                    if not isinstance(obj, dict) or not isinstance(ts, int):
                        raise ValueError
                except (orjson.JSONDecodeError, ValueError, KeyError, TypeError):
                    label = str(path.relative_to(run_dir))
                    skipped[label] = skipped.get(label, 0) + 1
                    continue
                topic = obj.get("topic")
                if isinstance(topic, str) and topic.startswith(INTERNAL_PREFIX):
                    continue             # the broker's own topics (__consumer_offsets): not the test's partitions
                part = obj.get("partition")
                ints, quiet = typed(obj)
                row = {"ts": ts, "node": node, "seq": seq, "event": obj.get("event"),
                       "partition": part if isinstance(part, int) else None,
                       "fields": raw.decode("utf-8", "replace").strip(), "quiet": quiet, **ints}
                for key, values in cols.items():
                    values.append(row.get(key))
        src = "controller" if controller else "broker"
        cols["src"][first:] = [src] * (len(cols["ts"]) - first)
        if controller:                   # the controller logs no produce lines: nothing of it is quiet
            cols["quiet"][first:] = [False] * (len(cols["ts"]) - first)
    table = pa.table({n: pa.array(cols[n], type=schema.field(n).type) for n in schema.names}, schema=schema)
    write_events(table, directory)
    return skipped


def write_events(table: pa.Table, directory: Path) -> None:
    """An events table as its files: per partition, sorted by (ts, node, seq); the lines of no partition
    in one more file (also when there are none, so the table has its schema)."""
    import pyarrow.compute as pc

    directory.mkdir(parents=True, exist_ok=True)
    order = [("ts", "ascending"), ("node", "ascending"), ("seq", "ascending")]
    parts = pc.unique(table.column("partition").drop_null()).to_pylist()
    files = [(rf.EVENTS_WIDE_FILE, pc.is_null(table.column("partition")))]
    files += [(rf.EVENTS_PARTITION_FILE.format(p), pc.equal(table.column("partition"), p)) for p in sorted(parts)]
    for name, which in files:
        writer = rf.parquet_writer(directory / name, table.schema)
        writer.write_table(table.filter(which).sort_by(order), row_group_size=rf.ROW_GROUP_ROWS)
        writer.close()


def _check_event_logs(run_dir: Path, opened: OpenedRun, result: IngestResult) -> None:
    """A problem for event logs that should be there and are not: none at all (a run that crashed before
    collecting them), or a node test.json's cluster lists that left none. A run whose backend cannot read
    its brokers' logs declares them absent (checkers/coverage.py: not applicable), and a run without a
    cluster (a generated or hand-built one) is taken as it is."""
    have = {node for node, _ in _event_logs(run_dir)}
    backend = opened.backend
    if backend in (None, "synthetic"):
        return
    if not have:
        result.problem(rf.NODES_DIR + "/", None, "no-event-logs",
                       f"no node event logs ({backend} cluster): the protocol rules (broker/rules) not checked")
        return
    for node in opened.nodes:     # each node test.json's cluster lists must have left an event log
        if node not in have:
            label = str((rf.node_dir(run_dir, node) / rf.BROKER_LOG).relative_to(run_dir))
            result.problem(label, None, "missing-event-log",
                           f"event log is missing (test.json's cluster lists node {node}): "
                           f"the protocol rules not checked")


# ingest's problem kind for a collected file that is missing or no longer has its collected size, by evidence
CHANGED_PROBLEMS = {ev.EVENT_LOGS: "event-log-changed", ev.REPLICA_DUMPS: "dump-changed"}


def _check_collected(run_dir: Path, evidence: ev.Evidence, result: IngestResult) -> None:
    """A problem for every file the harness collected (test.json `evidence.collected`) that is not there
    or has another size now: an event log cut short by a copy that did not finish is not the whole log, so
    its rules are unknown, not checked over what is left. A file already named missing is not named twice."""
    named = {pr["file"] for pr in result.problems}
    for label, size in sorted(evidence.collected.items()):
        kind = CHANGED_PROBLEMS[ev.collected_evidence(label)]
        path = run_dir / label
        if not path.is_file():
            if label not in named:
                result.problem(label, None, kind, f"file is missing; the harness collected it ({size:,} bytes): "
                                                  f"not checked")
            continue
        now = path.stat().st_size
        if now < size:
            result.problem(label, None, kind, f"file cut short: {now:,} of the {size:,} bytes the harness "
                                              f"collected (test.json evidence.collected): not checked")
        elif now > size:
            result.problem(label, None, kind, f"file changed after the run: {now:,} bytes, the harness collected "
                                              f"{size:,} (test.json evidence.collected): not checked")


def _sources(run_dir: Path) -> dict[str, list[int]]:
    files = [run_dir / rf.HISTORY, run_dir / rf.FINAL_JSON] + [p for _, _, p in _dump_files(run_dir)]
    files += [p for _, p in _event_logs(run_dir)]
    out = {}
    for p in files:
        if p.exists():
            st = p.stat()
            out[str(p.relative_to(run_dir))] = [st.st_size, st.st_mtime_ns]
    return out


def ingest(run_dir: Path | str, *, lenient: bool = False, force: bool = False, progress=None,
           opened: OpenedRun | None = None) -> IngestResult:
    """Make sure RUN_DIR/columnar/ holds current Parquet tables; return where and what was skipped.
    `opened`: the run's test.json as the caller opened it (else read here, leniently)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FormatError(run_dir, None, "run directory does not exist")
    col = run_dir / rf.COLUMNAR_DIR
    manifest_path = col / rf.COLUMNAR_MANIFEST
    history = run_dir / rf.HISTORY
    manifest = None
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except ValueError:
            manifest = None
    if not history.exists():
        if manifest is not None and manifest.get("synthetic"):
            return _from_manifest(col, manifest)
        raise FormatError(history, None, "file is missing")
    sources = _sources(run_dir)
    if (manifest is not None and not force and manifest.get("version") == CONVERTER_VERSION
            and manifest.get("sources") == sources and (lenient or not manifest.get("needs_lenient"))):
        return _from_manifest(col, manifest)
    return _convert(opened or OpenedRun.lenient(run_dir), sources, lenient=lenient, progress=progress)


def table_rows(col_dir: Path) -> int:
    """Every columnar table's row count, summed (read from the Parquet footers, not the data)."""
    return sum(pq.ParquetFile(part).metadata.num_rows for part in sorted(Path(col_dir).glob("*/*.parquet")))


def _from_manifest(col: Path, manifest: dict) -> IngestResult:
    return IngestResult(col, manifest.get("skipped", {}), manifest.get("torn", {}), manifest.get("missing_dumps", []),
                        problems=manifest.get("problems", []), problem_count=manifest.get("problem_count", 0))


@dataclass
class _Conversion:
    """One conversion of a run directory: the run, where its new tables go (`tmp`, moved into place when
    all went well), their schemas, how strict it is, and what it found."""
    opened: OpenedRun
    tmp: Path
    schemas: dict[str, pa.Schema]
    lenient: bool
    result: IngestResult
    progress: Any = None                 # called with the line number every 100,000 history lines

    @property
    def run_dir(self) -> Path:
        return self.opened.path


def _convert(opened: OpenedRun, sources: dict, *, lenient: bool, progress) -> IngestResult:
    """Every table of the run, written beside the old ones and swapped in at the end (module docstring)."""
    run_dir = opened.path
    col = run_dir / rf.COLUMNAR_DIR
    tmp = run_dir / (rf.COLUMNAR_DIR + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cv = _Conversion(opened, tmp, rf.arrow_schemas(), lenient, IngestResult(col, converted=True), progress)
    try:
        conv = _convert_history(cv)
        _write_final_states(cv, conv)
        _convert_dumps(cv, conv)
        skipped_events = _convert_events(run_dir, tmp / "events", cv.schemas["events"])
        if ev.EVENT_LOGS not in opened.evidence.absent:
            _check_event_logs(run_dir, opened, cv.result)
        _check_collected(run_dir, opened.evidence, cv.result)
        _write_manifest(cv, sources, skipped_events)
        shutil.rmtree(col, ignore_errors=True)
        os.replace(tmp, col)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return cv.result


def _convert_history(cv: _Conversion) -> "_HistoryConverter":
    """history.jsonl into the ops and reads tables, line by line."""
    history, result, lenient = cv.run_dir / rf.HISTORY, cv.result, cv.lenient
    conv = _HistoryConverter(history, cv.tmp, cv.schemas, lenient, result)
    for line, obj in _lines(history, result, rf.HISTORY):
        try:
            if isinstance(obj, FormatError):
                raise obj
            conv.convert_line(line, obj)
        except FormatError as err:
            if not lenient:
                raise
            result.skip(rf.HISTORY, err)
            conv.lost_lines += 1
        if cv.progress is not None and line % 100_000 == 0:
            cv.progress(line)
    conv.close_open_invokes()
    conv.close()
    return conv


def _write_final_states(cv: _Conversion, conv: "_HistoryConverter") -> None:
    """The final_state table: the history's final-state lines (or final.json's, where it has none), the
    last of a partition winning."""
    run_dir = cv.run_dir
    finals = [v for _, v in conv.final_states]
    if not finals and (run_dir / rf.FINAL_JSON).exists():
        data = rf.load_json(run_dir / rf.FINAL_JSON)
        parts = data.get("partitions") if isinstance(data, dict) else None
        if not isinstance(parts, list):
            raise FormatError(run_dir / rf.FINAL_JSON, None, "field 'partitions' is missing or not a list")
        for i, v in enumerate(parts):
            if not isinstance(v, dict):
                raise FormatError(run_dir / rf.FINAL_JSON, None, f"field 'partitions[{i}]' must be an object")
            conv.path = run_dir / rf.FINAL_JSON
            conv._final_state(None, v)
        finals = parts
    fs_writer = _TableWriter(cv.tmp / "final_state", cv.schemas["final_state"])
    last: dict[int, dict] = {}
    for v in finals:
        last[v["partition"]] = v  # the last final-state of a partition wins
    for p in sorted(last):
        fs_writer.add(_final_state_row(last[p]))
    fs_writer.close()


def _convert_dumps(cv: _Conversion, conv: "_HistoryConverter") -> None:
    """The replica dumps into the replicas and replica_meta tables, and the problems of dumps that should be
    there and are not."""
    run_dir, result = cv.run_dir, cv.result
    dumps = _dump_files(run_dir)
    have = {(node, part) for node, part, _ in dumps}
    have_dir = (run_dir / rf.REPLICAS_DIR).is_dir()
    if not have_dir and ev.REPLICA_DUMPS not in cv.opened.evidence.absent:
        # what a run that crashed before its dumps leaves: checked without them, and said so (a backend
        # that cannot dump replicas declares them absent: out of scope, no problem; checkers/coverage.py)
        result.problem(rf.REPLICAS_DIR + "/", None, "no-replicas",
                       "directory is missing: no replica dump was checked (divergence, replica details)")
    for line, v in (conv.final_states if have_dir else []):
        for node in sorted((v.get("replicas") or {})):
            if (node, v["partition"]) not in have:
                missing = rf.replica_dump_path(run_dir, node, v["partition"])
                where = f"{rf.HISTORY}:{line}" if line is not None else rf.FINAL_JSON
                # what a run killed during replica collection leaves: like a missing replicas/, an
                # unknown for what the dump would show (divergence, replica details), never an error
                label = str(missing.relative_to(run_dir))
                result.missing_dumps.append(label)
                result.problem(label, None, "missing-dump", f"replica dump is missing (final-state of partition "
                                                           f"{v['partition']} at {where} lists replica {node}): "
                                                           f"not checked")
    rep_writer = _TableWriter(cv.tmp / "replicas", cv.schemas["replicas"])
    meta_rows: list[dict] = []
    for dump in dumps:
        _convert_dump(cv, dump, rep_writer, meta_rows)
    rep_writer.close()
    meta_writer = _TableWriter(cv.tmp / "replica_meta", cv.schemas["replica_meta"])
    for r in meta_rows:
        meta_writer.add(r)
    meta_writer.close()


def _write_manifest(cv: _Conversion, sources: dict, skipped_events: Any) -> None:
    result = cv.result
    manifest = {"version": CONVERTER_VERSION, "sources": sources, "skipped": result.skipped,
                "skipped_event_lines": skipped_events,
                "torn": result.torn, "missing_dumps": result.missing_dumps, "lenient": cv.lenient,
                "problems": result.problems, "problem_count": result.problem_count,
                "needs_lenient": result.needs_lenient}
    (cv.tmp / rf.COLUMNAR_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
