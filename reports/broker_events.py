"""Broker and controller event logs (nodes/<node>/broker.log) on the history's time axis.

Events carry wall-clock `ts` nanoseconds; test.json's `start_wall_ns` maps them to seconds since the test
started. Per partition this gathers leadership (leader, epoch), ISR changes, truncations, role changes and
each replica's HW over time (thinned to one point per replica per time slot, since a busy run logs an
HW change per fetch). The events table keeps its first rows and every leader change; the first row of
each (partition, epoch) election carries the anchor `leader-p<partition>-e<epoch>`. Lines that are not JSON objects are skipped and counted, not fatal: an event log
is evidence, and a broker killed mid-write tears its last line.

The replication exchanges (fetch-fenced, stale-fetch-served, epoch-query, epoch-answer) become lane marks:
one `LaneMark` per (kind, follower, leader epoch) with a count and its distinct details, not one mark per
event, so a follower refused on every fetch round still draws one mark.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rundir import formats as runformat
from reports.jsonfast import DecodeError, loads

TABLE_EVENTS = ("leader-change", "isr-change", "truncate", "role", "fenced", "unfenced", "start", "stop",
                "recovered", "registered", "fetch-fenced", "stale-fetch-served", "epoch-query")
# replication exchanges drawn as aggregated marks on the follower's lane (LaneMark)
MARK_EVENTS = ("fetch-fenced", "stale-fetch-served", "epoch-query", "epoch-answer")
MAX_MARK_DETAILS = 6
CONTROLLER_EVENTS = ("fenced", "unfenced", "topic-created")  # a node logging these is the controller
MAX_TABLE_ROWS = 400
HW_SLOTS = 600


def node_name(member: Any) -> Any:
    """Brokers are numbered in the wire protocol and named in the run: broker N is node "nN"."""
    if isinstance(member, int) and not isinstance(member, bool):
        return f"n{member}"
    return member


def _names(members: Any) -> list:
    return [node_name(m) for m in members] if isinstance(members, list) else []


@dataclass
class LaneMark:
    """Events of one kind about one follower (its lane) in one leader epoch, drawn as one mark."""
    kind: str                    # one of MARK_EVENTS
    node: str                    # the follower: the lane the mark sits on
    epoch: Any                   # the leader epoch they belong to
    first: float
    last: float
    count: int = 0
    details: list[str] = field(default_factory=list)   # distinct descriptions, at most MAX_MARK_DETAILS


@dataclass
class PartitionEvents:
    partition: int
    leaders: list[tuple[float, Any, Any, list]] = field(default_factory=list)   # t, leader, epoch, isr
    isr: list[tuple[float, list, Any]] = field(default_factory=list)            # t, isr, version
    # the same from the controller's own log, preferred when there is one (brokers learn it later)
    controller_leaders: list[tuple[float, Any, Any, list]] = field(default_factory=list)
    controller_isr: list[tuple[float, list, Any]] = field(default_factory=list)
    truncations: list[tuple[float, str, Any, Any, Any]] = field(default_factory=list)  # t, node, from, to, why
    roles: list[tuple[float, str, Any, Any]] = field(default_factory=list)      # t, node, role, epoch
    hw: dict[str, list[tuple[float, int]]] = field(default_factory=dict)        # node -> (t, hw)
    hw_changes: int = 0
    marks: list[LaneMark] = field(default_factory=list)
    raw_marks: list[tuple[float, str, str, dict]] = field(default_factory=list)  # t, kind, node, event


@dataclass
class BrokerEvents:
    nodes: list[str] = field(default_factory=list)
    controllers: list[str] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)  # (node, relative path) of every node log
    partitions: dict[int, PartitionEvents] = field(default_factory=dict)
    fenced: list[tuple[float, str, Any]] = field(default_factory=list)          # t, reporting node, broker
    lifecycle: list[tuple[float, str, str]] = field(default_factory=list)       # t, node, "start" / "stop"
    table: list[dict[str, Any]] = field(default_factory=list)                   # leadership/ISR/truncation rows
    table_total: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    bad_lines: int = 0


def _part(ev: BrokerEvents, p: Any) -> PartitionEvents | None:
    if not isinstance(p, int) or isinstance(p, bool):
        return None
    pe = ev.partitions.get(p)
    if pe is None:
        pe = ev.partitions[p] = PartitionEvents(p)
    return pe


def read_broker_events(run_dir: Path, start_wall_ns: int | None, duration_s: float) -> BrokerEvents:
    run_dir = Path(run_dir)
    ev = BrokerEvents()
    nodes_root = run_dir / runformat.NODES_DIR
    if not nodes_root.is_dir():
        return ev
    reader = _LogReader(ev, start_wall_ns)
    for node_dir in sorted(p for p in nodes_root.iterdir() if p.is_dir()):
        reader.read_node(node_dir)
    base = reader.base if reader.base is not None else _first_ts(reader.hw_raw)
    if base is not None:
        _hw_series(ev, reader.hw_raw, base, max(duration_s, 1e-3) / HW_SLOTS)
    _settle_partitions(ev)
    ev.fenced.sort(key=lambda x: x[0])
    ev.lifecycle.sort(key=lambda x: x[0])
    _fill_table(ev, reader.table)
    return ev


@dataclass
class _LogReader:
    """Reads the nodes' event logs, one after the other, into `ev`. Times are seconds since `base`: test.json's
    start, or when it has none the first event's `ts`."""
    ev: BrokerEvents
    base: int | None
    hw_raw: list[tuple[str, list[bytes]]] = field(default_factory=list)  # per node, its hw-change lines
    table: list[dict[str, Any]] = field(default_factory=list)            # the events table, unsorted

    def read_node(self, node_dir: Path) -> None:
        ev, node = self.ev, node_dir.name
        ev.nodes.append(node)
        for name in sorted(x.name for x in node_dir.iterdir() if x.is_file()):
            ev.logs.append((node, f"{runformat.NODES_DIR}/{node}/{name}"))
        log = node_dir / runformat.BROKER_LOG
        if not log.is_file():
            return
        is_controller = _is_controller_log(log)
        if is_controller:
            ev.controllers.append(node)
        hw_lines: list[bytes] = []
        self.hw_raw.append((node, hw_lines))
        base, event, counts = self.base, self._event, ev.counts
        with log.open("rb") as fh:
            for raw in fh:
                # HW changes are most of a busy log: set aside whole ones for a columnar pass (_hw_series)
                if b'"hw-change"' in raw and raw.count(b"{") == 1 and raw.rstrip().endswith(b"}"):
                    hw_lines.append(raw if raw.endswith(b"\n") else raw + b"\n")
                    continue
                try:
                    obj = loads(raw)
                    ts = obj["ts"]
                    kind = obj["event"]
                    if base is None:
                        base = self.base = ts
                    t = (ts - base) / 1e9
                except (DecodeError, KeyError, TypeError):
                    if raw.strip():
                        ev.bad_lines += 1
                    continue
                who = str(obj.get("node") or node)
                counts[kind] = counts.get(kind, 0) + 1
                if kind == "hw-change":  # one that did not look whole: read with the others
                    hw_lines.append(raw)
                    continue
                event(obj, kind, t, who, is_controller)

    def _event(self, obj: dict[str, Any], kind: str, t: float, who: str, is_controller: bool) -> None:
        """One event (no HW change): onto its partition's lanes or the run's, and into the table."""
        ev, p = self.ev, obj.get("partition")
        if kind == "leader-change":
            pe = _part(ev, p)
            if pe is not None:
                item = (t, node_name(obj.get("leader")), obj.get("epoch"), _names(obj.get("isr")))
                (pe.controller_leaders if is_controller else pe.leaders).append(item)
        elif kind == "isr-change":
            pe = _part(ev, p)
            if pe is not None:
                item2 = (t, _names(obj.get("isr")), obj.get("version"))
                (pe.controller_isr if is_controller else pe.isr).append(item2)
        elif kind == "truncate":
            pe = _part(ev, p)
            if pe is not None:
                pe.truncations.append((t, who, obj.get("from"), obj.get("to"), obj.get("why")))
        elif kind == "role":
            pe = _part(ev, p)
            if pe is not None:
                pe.roles.append((t, who, obj.get("role"), obj.get("epoch")))
        elif kind == "fenced":
            ev.fenced.append((t, who, node_name(obj.get("broker"))))
        elif kind in ("start", "stop"):
            ev.lifecycle.append((t, who, kind))
        elif kind in MARK_EVENTS:
            pe = _part(ev, p)
            if pe is not None:
                pe.raw_marks.append((t, kind, who, obj))
        if kind in TABLE_EVENTS:
            fields = {k: v for k, v in obj.items() if k not in ("ts", "node", "event", "partition")}
            for key in ("leader", "broker"):
                if key in fields:
                    fields[key] = node_name(fields[key])
            if isinstance(fields.get("isr"), list):
                fields["isr"] = _names(fields["isr"])
            self.table.append({"t": t, "node": who, "event": kind, "partition": p, "fields": fields})


def _settle_partitions(ev: BrokerEvents) -> None:
    """Each partition's lanes as drawn: the controller's view of leaders and ISR when it logged one, without
    repeats, in time order, the replication exchanges folded into marks; the partitions in order."""
    for pe in ev.partitions.values():
        if pe.controller_leaders:
            pe.leaders = pe.controller_leaders
        if pe.controller_isr or pe.controller_leaders:
            pe.isr = pe.controller_isr
        pe.leaders = _dedupe_leaders(pe.leaders)
        pe.isr = _dedupe_isr(pe.isr)
        pe.truncations.sort(key=lambda x: x[0])
        pe.roles.sort(key=lambda x: x[0])
        pe.marks = _lane_marks(pe)
        pe.raw_marks = []
        for series in pe.hw.values():
            series.sort()
    ev.partitions = dict(sorted(ev.partitions.items()))


def _fill_table(ev: BrokerEvents, table: list[dict[str, Any]]) -> None:
    """The events table in time order, the first row of each election carrying its anchor (stories link to
    it): its first rows, and every election after them, so that no leader anchor is missing from the page."""
    table.sort(key=lambda r: r["t"])
    ev.table_total = len(table)
    seen: set[tuple[int, Any]] = set()
    for row in table:
        row["anchor"] = None
        p, epoch = row["partition"], row["fields"].get("epoch")
        if row["event"] == "leader-change" and isinstance(p, int) and epoch is not None and (p, epoch) not in seen:
            seen.add((p, epoch))
            row["anchor"] = leader_anchor(p, epoch)
    ev.table = table[:MAX_TABLE_ROWS] + [r for r in table[MAX_TABLE_ROWS:] if r["anchor"]]


def leader_anchor(partition: int, epoch: Any) -> str:
    """The page id of a leader change in the events table: `leader-p<partition>-e<epoch>`."""
    return f"leader-p{partition}-e{epoch}"


def _epoch_at(leaders: list, t: float) -> Any:
    """The leader epoch in force at time t (the last election at or before it), or None."""
    epoch = None
    for lt, _leader, e, _isr in leaders:
        if lt > t:
            break
        epoch = e
    return epoch


def _mark_of(t: float, kind: str, who: str, obj: dict, leaders: list) -> tuple[str, Any, str] | None:
    """(lane node, leader epoch, one-line detail) of a replication exchange event, or None if it names no
    follower."""
    if kind == "epoch-query":
        answer = obj.get("error") or f"epoch {obj.get('answer_epoch')} ends at {obj.get('answer_end')}"
        cut = obj.get("truncate_to")
        return who, obj.get("current_epoch"), (
            f"asked {node_name(obj.get('leader'))} where epoch {obj.get('epoch')} ends: {answer}"
            + (f"; truncated to {cut}" if cut is not None else "; nothing cut"))
    replica = obj.get("replica")
    if replica is None:
        return None
    lane = str(node_name(replica))
    if kind == "epoch-answer":
        return lane, _epoch_at(leaders, t), (f"{who} answered: epoch {obj.get('epoch')} asked, "
                                             f"epoch {obj.get('answer_epoch')} ends at {obj.get('answer_end')}")
    request = "OffsetsForLeaderEpoch" if obj.get("request") == "epoch" else obj.get("request")
    if kind == "fetch-fenced":
        return lane, obj.get("leader_epoch"), (f"{who} (leader, epoch {obj.get('leader_epoch')}) refused its "
                                               f"{request} at epoch {obj.get('request_epoch')}: {obj.get('error')}")
    return lane, obj.get("leader_epoch"), (f"{who} (leader, epoch {obj.get('leader_epoch')}) served its {request} "
                                           f"at epoch {obj.get('request_epoch')} (no KIP-320 fencing)")


def _lane_marks(pe: PartitionEvents) -> list[LaneMark]:
    """Aggregate the replication exchanges: one mark per (kind, follower, leader epoch)."""
    marks: dict[tuple[str, str, Any], LaneMark] = {}
    for t, kind, who, obj in sorted(pe.raw_marks, key=lambda x: x[0]):
        got = _mark_of(t, kind, who, obj, pe.leaders)
        if got is None:
            continue
        lane, epoch, detail = got
        key = (kind, lane, epoch)
        mark = marks.get(key)
        if mark is None:
            mark = marks[key] = LaneMark(kind, lane, epoch, t, t)
        mark.last = max(mark.last, t)
        mark.count += 1
        if detail not in mark.details and len(mark.details) < MAX_MARK_DETAILS:
            mark.details.append(detail)
    return sorted(marks.values(), key=lambda m: (m.first, m.kind, m.node))


def _first_ts(hw_raw: list[tuple[str, list[bytes]]]) -> int | None:
    for _node, lines in hw_raw:
        for raw in lines[:1]:
            try:
                return int(loads(raw)["ts"])
            except (DecodeError, KeyError, TypeError, ValueError):
                continue
    return None


def _hw_table(lines: list[bytes]) -> Any:
    """The hw-change lines as a pyarrow table (ts, node, partition, new), or None if pyarrow cannot."""
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:  # pragma: no cover
        return None
    schema = pa.schema([("ts", pa.int64()), ("node", pa.string()), ("partition", pa.int64()), ("new", pa.int64())])
    try:
        return pj.read_json(io.BytesIO(b"".join(lines)),
                            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _hw_rows_python(lines: list[bytes], ev: BrokerEvents) -> list[tuple[int, Any, Any, Any]]:
    rows = []
    for raw in lines:
        try:
            obj = loads(raw)
        except DecodeError:
            if raw.strip():
                ev.bad_lines += 1
            continue
        if isinstance(obj, dict):
            rows.append((obj.get("ts"), obj.get("node"), obj.get("partition"), obj.get("new")))
    return rows


def _hw_series(ev: BrokerEvents, hw_raw: list[tuple[str, list[bytes]]], base: int, slot_s: float) -> None:
    """Each replica's HW over time, one point per time slot (the last HW of the slot), and the counts."""
    slot_ns = max(1, int(slot_s * 1e9))
    for node, lines in hw_raw:
        if not lines:
            continue
        table = _hw_table(lines)
        if table is not None:
            import pyarrow.compute as pc

            table = table.filter(pc.and_(pc.is_valid(table["partition"]),
                                         pc.and_(pc.is_valid(table["new"]), pc.is_valid(table["ts"]))))
            table = table.set_column(1, "node", pc.fill_null(table["node"], node))
            table = table.append_column("slot", pc.divide(pc.subtract(table["ts"], base), slot_ns))
            grouped = table.group_by(["partition", "node", "slot"], use_threads=False).aggregate(
                [("ts", "max"), ("new", "last"), ("new", "count")])
            points = [(g["partition"], g["node"], g["ts_max"], g["new_last"], g["new_count"])
                      for g in grouped.to_pylist()]
        else:  # a line pyarrow refuses: the slow path, line by line
            last: dict[tuple, list] = {}
            for ts, who, p, new in _hw_rows_python(lines, ev):
                if not (isinstance(ts, int) and isinstance(p, int) and isinstance(new, int)):
                    continue
                key = (p, str(who or node), (ts - base) // slot_ns)
                item = last.get(key)
                if item is None:
                    last[key] = [ts, new, 1]
                else:
                    item[0], item[1], item[2] = max(item[0], ts), new, item[2] + 1
            points = [(p, who, ts, new, n) for (p, who, _s), (ts, new, n) in last.items()]
        for p, who, ts, new, n in points:
            pe = _part(ev, p)
            if pe is None:
                continue
            pe.hw.setdefault(str(who), []).append(((ts - base) / 1e9, new))
            pe.hw_changes += n
            ev.counts["hw-change"] = ev.counts.get("hw-change", 0) + n


def _is_controller_log(path: Path, probe_lines: int = 200) -> bool:
    """Whether a node's event log is the controller's (it fences, unfences or creates topics)."""
    with path.open("rb") as fh:
        for i, raw in enumerate(fh):
            if i >= probe_lines:
                break
            for kind in CONTROLLER_EVENTS:
                if f'"event":"{kind}"'.encode() in raw or f'"event": "{kind}"'.encode() in raw:
                    return True
    return False


def _dedupe_leaders(items: list) -> list:
    """One entry per (epoch, leader): the controller and the brokers may each log the same election."""
    items.sort(key=lambda x: x[0])
    seen: set = set()
    out = []
    for t, leader, epoch, isr in items:
        key = (epoch, str(leader))
        if key in seen:
            continue
        seen.add(key)
        out.append((t, leader, epoch, isr))
    return out


def _dedupe_isr(items: list) -> list:
    items.sort(key=lambda x: x[0])
    out = []
    last = None
    for t, isr, version in items:
        key = (tuple(sorted(map(str, isr))), version)
        if key == last:
            continue
        last = key
        out.append((t, isr, version))
    return out
