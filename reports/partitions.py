"""Replica logs side by side: read the replica dumps, find divergent offsets, cut windows around anomalies.

For each partition the report shows one column per replica and one row per offset. Small logs are shown
whole; large ones only in windows around the interesting offsets (divergent runs, the checker's anomaly
examples, each replica's HW / LEO / log start and where each leader epoch starts), with a gap row saying
how many offsets were left out and how many of those diverge. Cells carry what the template needs to
colour them: epoch, above-HW, lost.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rundir import formats as runformat
from rundir.formats import FormatError
from rundir.kinds import LOST_WRITE
from reports.jsonfast import DecodeError, loads

CONTEXT = 3            # rows shown either side of an interesting offset
FULL_LOG_ROWS = 120    # a partition with at most this many offsets is shown whole
MAX_ROWS = 260         # rows per partition at most (windows beyond this are dropped, and said so)
MAX_TOTAL_ROWS = 4000  # over all partitions: many partitions get fewer rows each (the page stays small)
MIN_ROWS = 40
MAX_DIVERGENT_RUNS = 40


@dataclass
class ReplicaLog:
    node: str
    partition: int
    path: Path
    log_start: int
    leo: int
    hw: int | None
    epochs: list
    torn_bytes: int
    values: list[Any]      # by offset - log_start; None where the dump has no record
    epochs_at: list[Any]
    bad_crc: list[int]

    @property
    def end(self) -> int:
        """One past the last offset with a record."""
        return self.log_start + len(self.values)


def read_replica(path: Path) -> ReplicaLog:
    """One replica dump. Fast path: pyarrow's JSON reader when every value is an integer and the offsets
    are contiguous (what highwater's workloads produce); otherwise a line-by-line read that also names the
    line of any problem."""
    path = Path(path)
    fast = _read_replica_arrow(path)
    return fast if fast is not None else _read_replica_lines(path)


def _read_replica_arrow(path: Path) -> ReplicaLog | None:
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj
    except ImportError:  # pragma: no cover
        return None
    with path.open("rb") as fh:
        first = fh.readline()
    try:
        meta = loads(first)
    except DecodeError:
        return None
    if not isinstance(meta, dict) or meta.get("kind") != "meta" or not isinstance(meta.get("log_start", 0), int):
        return None
    schema = pa.schema([("kind", pa.string()), ("offset", pa.int64()), ("epoch", pa.int64()),
                        ("value", pa.int64()), ("crc_ok", pa.bool_())])
    try:
        table = pj.read_json(path, parse_options=pj.ParseOptions(explicit_schema=schema,
                                                                 unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, OSError):
        return None  # a string value, a torn tail, bad JSON: the line-by-line reader handles (or names) it
    table = table.slice(1)
    if table.num_rows and pc.any(pc.not_equal(table["kind"], "record")).as_py():
        return None
    base = int(meta.get("log_start") or 0)
    offsets = table["offset"]
    n = table.num_rows
    if n and (offsets.null_count or offsets[0].as_py() != base or offsets[n - 1].as_py() != base + n - 1
              or n > 1 and not pc.all(pc.equal(pc.pairwise_diff(offsets.combine_chunks()).slice(1), 1)).as_py()):
        return None
    bad = pc.filter(offsets, pc.equal(pc.fill_null(table["crc_ok"], True), False)).to_pylist() if n else []
    return _replica(path, meta, table["value"].to_pylist(), table["epoch"].to_pylist(), bad)


def _read_replica_lines(path: Path) -> ReplicaLog:
    meta: dict[str, Any] | None = None
    values: list[Any] = []
    epochs: list[Any] = []
    bad_crc: list[int] = []
    base = 0
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = loads(raw)
            except DecodeError as exc:
                if not raw.endswith(b"\n"):
                    break  # torn tail
                raise FormatError(path, line_no, f"not valid JSON ({exc})") from None
            if meta is None:
                if not isinstance(obj, dict) or obj.get("kind") != "meta":
                    raise FormatError(path, line_no, "first line must be the replica's metadata (kind \"meta\")")
                meta = obj
                base = int(meta.get("log_start") or 0)
                continue
            try:
                off = obj["offset"]
                i = off - base
            except (KeyError, TypeError):
                raise FormatError(path, line_no, "record without an integer 'offset'") from None
            if i == len(values):
                values.append(obj.get("value"))
                epochs.append(obj.get("epoch"))
            elif i > len(values):
                pad = i - len(values)
                values.extend([None] * pad)
                epochs.extend([None] * pad)
                values.append(obj.get("value"))
                epochs.append(obj.get("epoch"))
            else:
                raise FormatError(path, line_no, f"offset {off} is not after the previous record's")
            if obj.get("crc_ok") is False:
                bad_crc.append(off)
    if meta is None:
        raise FormatError(path, None, "empty replica dump (no metadata line)")
    return _replica(path, meta, values, epochs, bad_crc)


def _replica(path: Path, meta: dict[str, Any], values: list, epochs: list, bad_crc: list[int]) -> ReplicaLog:
    base = int(meta.get("log_start") or 0)
    node = str(meta.get("node") or path.parent.name)
    try:
        partition = int(meta.get("partition", path.stem.lstrip("p")))
    except ValueError:
        raise FormatError(path, 1, "field 'partition' is missing") from None
    leo = meta.get("leo")
    return ReplicaLog(node=node, partition=partition, path=path, log_start=base,
                      leo=int(leo) if isinstance(leo, int) else base + len(values),
                      hw=meta.get("hw") if isinstance(meta.get("hw"), int) else None,
                      epochs=meta.get("epochs") or [], torn_bytes=int(meta.get("torn_bytes") or 0),
                      values=values, epochs_at=epochs, bad_crc=bad_crc)


def read_replicas(run_dir: Path) -> dict[int, list[ReplicaLog]]:
    """Every replica dump of a run, grouped by partition, nodes in name order."""
    root = Path(run_dir) / runformat.REPLICAS_DIR
    out: dict[int, list[ReplicaLog]] = {}
    if not root.is_dir():
        return out
    for node_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(node_dir.glob("p*.jsonl")):
            rep = read_replica(f)
            out.setdefault(rep.partition, []).append(rep)
    for reps in out.values():
        reps.sort(key=lambda r: _node_key(r.node))
    return dict(sorted(out.items()))


def _node_key(node: str) -> tuple:
    digits = "".join(ch for ch in node if ch.isdigit())
    return (node.rstrip("0123456789"), int(digits) if digits else -1, node)


@dataclass
class Cell:
    value: Any
    epoch: Any
    classes: str
    marks: list[str]
    title: str


@dataclass
class Row:
    offset: int
    cells: list[Cell]
    divergent: bool
    notes: list[str]
    anchor: bool = False


@dataclass
class Gap:
    hidden: int
    divergent: int


@dataclass
class PartitionView:
    partition: int
    nodes: list[str]
    replicas: list[ReplicaLog]
    rows: list[Row | Gap]
    total_offsets: int
    divergent_count: int
    divergent_runs: list[tuple[int, int]]
    lost: list[dict[str, Any]]
    whole: bool
    dropped_windows: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    anchored: frozenset = frozenset()   # offsets whose row is on the page with an id (links only go there)


def _divergent_offsets(reps: list[ReplicaLog], lo: int, hi: int) -> list[int]:
    cols_v, cols_e = [], []
    for r in reps:
        pre = [None] * (r.log_start - lo)
        post = [None] * (hi - r.end)
        cols_v.append(pre + r.values + post)
        cols_e.append(pre + r.epochs_at + post)
    if all(c == cols_v[0] for c in cols_v) and all(c == cols_e[0] for c in cols_e):
        return []
    out = []
    for i, (vs, es) in enumerate(zip(zip(*cols_v), zip(*cols_e))):
        seen = None
        for v, e in zip(vs, es):
            if v is None and e is None:
                continue
            if seen is None:
                seen = (v, e)
            elif seen != (v, e):
                out.append(lo + i)
                break
    return out


def _runs(offsets: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for o in offsets:
        if runs and runs[-1][1] == o - 1:
            runs[-1] = (runs[-1][0], o)
        else:
            runs.append((o, o))
    return runs


@dataclass(frozen=True)
class _Highlights:
    """What the view of one partition marks: where its replicas diverge, the writes the checker reports lost
    and the notes its rows carry."""
    divergent: list[int]                  # the offsets where replicas disagree, ascending
    runs: list[tuple[int, int]]           # the same as (first, last) runs of consecutive offsets
    lost_values: dict[Any, dict[str, Any]]  # a lost value -> its lost-write example
    lost: list[dict[str, Any]]            # per lost write: value, offset, found_on (node -> offset), index
    lost_at: dict[int, list[Any]]         # offset -> the values acknowledged there and lost
    notes_at: dict[int, list[str]]        # offset -> the notes its row shows


def _highlights(reps: list[ReplicaLog], lo: int, anomaly_offsets: list[tuple[int, str]],
                lost_writes: list[dict[str, Any]]) -> _Highlights:
    divergent = _divergent_offsets(reps, lo, max(r.end for r in reps))
    lost_values: dict[Any, dict[str, Any]] = {}
    lost_info: list[dict[str, Any]] = []
    for ex in lost_writes[:200]:
        v = ex.get("value")
        found = {}
        for r in reps:
            try:
                found[r.node] = r.log_start + r.values.index(v)
            except ValueError:
                pass
        lost_values[v] = ex
        lost_info.append({"value": v, "offset": ex.get("offset"), "found_on": found, "index": ex.get("index")})
    lost_at: dict[int, list[Any]] = {}
    for info in lost_info:
        if isinstance(info["offset"], int):
            lost_at.setdefault(info["offset"], []).append(info["value"])
    notes_at: dict[int, list[str]] = {}
    for off, label in anomaly_offsets:
        notes_at.setdefault(off, []).append(label)
    for off, vals in lost_at.items():
        notes_at.setdefault(off, []).append("lost write " + ", ".join(str(v) for v in vals[:5]) + " was acked here")
    return _Highlights(divergent, _runs(divergent), lost_values, lost_info, lost_at, notes_at)


def build_view(partition: int, reps: list[ReplicaLog], anomaly_offsets: list[tuple[int, str]],
               lost_writes: list[dict[str, Any]], max_rows: int = MAX_ROWS) -> PartitionView:
    """The side-by-side view of one partition.

    anomaly_offsets: (offset, label) from the checker's examples of this partition.
    lost_writes: the checker's lost-write examples of this partition ({value, offset, ...}).
    """
    lo = min(r.log_start for r in reps)
    hi = max(max(r.end, r.leo) for r in reps)
    marked = _highlights(reps, lo, anomaly_offsets, lost_writes)
    whole = hi - lo + 1 <= min(FULL_LOG_ROWS, max_rows)  # offsets plus the LEO row
    if whole:
        shown, dropped = set(range(lo, hi + 1)), 0
    else:
        shown, dropped = _windows(reps, (lo, hi), marked, anomaly_offsets, max_rows)
    rows = _rows(reps, sorted(shown), (lo, hi), marked)
    runs, divergent = marked.runs, marked.divergent
    return PartitionView(partition=partition, nodes=[r.node for r in reps], replicas=reps, rows=rows,
                         total_offsets=hi - lo, divergent_count=len(divergent), divergent_runs=runs[:20],
                         lost=marked.lost, whole=whole, dropped_windows=dropped,
                         anchored=frozenset(r.offset for r in rows if isinstance(r, Row) and r.anchor))


def _windows(reps: list[ReplicaLog], span: tuple[int, int], marked: _Highlights,
             anomaly_offsets: list[tuple[int, str]], max_rows: int) -> tuple[set[int], int]:
    """The offsets shown of a log too long to show whole, and how many windows were dropped: windows of
    CONTEXT rows around the interesting offsets, most interesting first, while they fit in max_rows."""
    lo, hi = span
    runs = marked.runs
    priority: list[list[int]] = [[], [], []]
    for a, b in runs[:MAX_DIVERGENT_RUNS]:
        priority[0].extend((a, b) if a != b else (a,))
    priority[0].extend(marked.lost_at)
    for info in marked.lost:
        priority[0].extend(info["found_on"].values())
    priority[1].extend(off for off, _ in anomaly_offsets)
    for r in reps:
        priority[2].extend(x for x in (r.log_start, r.hw, r.leo) if isinstance(x, int))
        # where each leader epoch starts: the rows where logs written by different leaders meet
        priority[2].extend(e[1] for e in r.epochs[:50] if isinstance(e, list) and len(e) == 2
                           and isinstance(e[1], int) and e[1] > r.log_start)
    priority[2].append(hi)
    shown: set[int] = set()
    dropped = 0
    for keys in priority:
        for k in sorted(set(keys)):
            window = set(range(max(lo, k - CONTEXT), min(hi, k + CONTEXT) + 1))
            if len(shown | window) > max_rows:
                dropped += 1
                continue
            shown |= window
    return shown, dropped + max(0, len(runs) - MAX_DIVERGENT_RUNS)


def _rows(reps: list[ReplicaLog], shown: list[int], span: tuple[int, int], marked: _Highlights) -> list[Row | Gap]:
    """A row per shown offset (ascending), a gap row wherever offsets were left out."""
    lo, hi = span
    divergent = marked.divergent
    rows: list[Row | Gap] = []
    prev = None
    div_set = set(divergent)
    anchor_offsets = set(marked.notes_at) | {a for a, _ in marked.runs}
    for off in shown:
        if prev is not None and off > prev + 1:
            rows.append(Gap(off - prev - 1, bisect.bisect_left(divergent, off) - bisect.bisect_right(divergent, prev)))
        elif prev is None and off > lo:
            rows.append(Gap(off - lo, bisect.bisect_left(divergent, off)))
        prev = off
        cells = [_cell(r, off, marked.lost_values) for r in reps]
        rows.append(Row(off, cells, off in div_set, marked.notes_at.get(off, []), off in anchor_offsets))
    if prev is not None and prev < hi:
        rows.append(Gap(hi - prev, len(divergent) - bisect.bisect_right(divergent, prev)))
    return rows


def _cell(r: ReplicaLog, off: int, lost_values: dict[Any, dict[str, Any]]) -> Cell:
    """Replica r's record at offset off: its epoch's colour, above-HW, lost, bad CRC; HW / LEO / start marks."""
    i = off - r.log_start
    has = 0 <= i < len(r.values) and (r.values[i] is not None or r.epochs_at[i] is not None)
    v = r.values[i] if has else None
    e = r.epochs_at[i] if has else None
    cls, marks = [], []
    if has:
        cls.append(f"e{e % 8}" if isinstance(e, int) else "e-")
        if r.hw is not None and off >= r.hw:
            cls.append("uncommitted")
        if v in lost_values:
            cls.append("lost")
        if off in r.bad_crc:
            cls.append("badcrc")
    else:
        cls.append("empty")
    if r.hw is not None and off == r.hw:
        marks.append("HW")
    if off == r.leo:
        marks.append("LEO")
    if off == r.log_start and r.log_start > 0:
        marks.append("start")
    title = f"{r.node} offset {off}" + (f": value {v}, epoch {e}" if has else ": no record")
    if v in lost_values:
        title += " (an acknowledged write the checker reports lost)"
    return Cell(v, e, " ".join(cls), marks, title)


def build_views(run_dir: Path, results: dict[str, Any] | None) -> list[PartitionView]:
    """Side-by-side views of every partition with replica dumps, highlighted from results.json."""
    by_partition = read_replicas(run_dir)
    anomaly_offsets: dict[int, list[tuple[int, str]]] = {}
    lost: dict[int, list[dict[str, Any]]] = {}
    anomalies = (results or {}).get("anomalies") or {}
    if isinstance(anomalies, dict):
        for kind, body in anomalies.items():
            examples = body.get("examples") if isinstance(body, dict) else None
            for ex in examples or []:
                if not isinstance(ex, dict) or not isinstance(ex.get("partition"), int):
                    continue
                p = ex["partition"]
                if kind == LOST_WRITE.name:
                    lost.setdefault(p, []).append(ex)
                    continue
                if isinstance(ex.get("offset"), int):
                    anomaly_offsets.setdefault(p, []).append((ex["offset"], kind))
    per_partition = max(MIN_ROWS, min(MAX_ROWS, MAX_TOTAL_ROWS // max(1, len(by_partition))))
    return [build_view(p, reps, anomaly_offsets.get(p, []), lost.get(p, []), per_partition)
            for p, reps in by_partition.items()]
