"""The trace adapter of the protocol rules (broker/rules): a run's event logs and polls as rule rows.

Both engines call it. The reference engine reads the columnar `events`, `ops` and `reads` tables here
(`rows_by_partition`) and feeds every row to the rules; the Spark engine runs `check_partition` on its
executors, one partition's events file in Arrow batches with the rows that break nothing folded in
(checkers/quiet_rows.py), and the rest of its rows from `partition_extras`. Either way the rules are the ones the
simulator checks, and the findings go through `findings` into results.json's anomalies.

Rows: every `events` line (broker and controller logs; a broker's `start` is given to each partition of
the run), and one `read` row per ok poll: `offset` the highest offset it returned (None: no records),
`epoch`, `reported_hw` (the HW the poll was told), `hw` (the same, kept only where it is the HW of the
very fetch that returned the records: the native client's polls; `read_row`), `ts` the poll's completion
on the logs' clock (test.json
`start_wall_ns` + history time + `READ_SLACK_NS`: the history's clock starts a moment after
`start_wall_ns` is read, so a completion is placed a little late, never early); one `sent` row per ok
send that was told its offset (`offset`, `value`; stamped the same way); and one node-wide
`damaged` row (src "nemesis") per broker a corrupt fault damaged, at the completion of its start.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from broker.config_keys import parse_acks, rule_keys
from broker.rules import PartitionRules, RuleSettings, Violation, promised
from broker.rules.catalogue import decided_ranges, undecided_sends
from checkers import explain, quiet_rows
from rundir import formats as rf
from rundir import kinds
from rundir.opened import OpenedRun

READ_SLACK_NS = 5_000_000
# every broker reads this machine's clock (a synthetic run, checkers/synthetic.py, stamps every row on one)
SAME_CLOCK_BACKENDS = ("local", "docker", "synthetic")


def _staged(test: dict[str, Any]) -> bool:
    """Whether a scenario or a schedule file placed the run's faults (not the random nemesis)."""
    cfg = test.get("config") if isinstance(test.get("config"), dict) else {}
    nemesis = cfg.get("nemesis") if isinstance(cfg.get("nemesis"), dict) else {}
    return bool(test.get("scenario")) or bool(nemesis.get("schedule_file"))


def settings_from(test: dict[str, Any]) -> RuleSettings:
    """The rule settings of a run from its test.json document (missing keys: the defaults)."""
    cfg = test.get("config") if isinstance(test.get("config"), dict) else {}
    broker = cfg.get("broker") if isinstance(cfg.get("broker"), dict) else {}
    client = cfg.get("client") if isinstance(cfg.get("client"), dict) else {}
    nemesis = cfg.get("nemesis") if isinstance(cfg.get("nemesis"), dict) else {}
    cluster = test.get("cluster") if isinstance(test.get("cluster"), dict) else {}
    faults = [str(f) for f in (nemesis.get("faults") or [])]
    try:
        acks = parse_acks(client.get("acks", "all"))
    except ValueError:
        acks = "all"
    # the harness starts brokers with power_loss whenever its nemesis may cut power (harness/config.py)
    power = bool(broker.get("power_loss")) or any("power" in f for f in faults)
    # storage faults staged on purpose (a scenario, a schedule file): they may damage the last in-sync copy
    # of a partition; drawn at random they spare it (nemesis/driver.py), so every clean leader keeps what
    # lies below a follower's HW. A damaged broker's own recovery cut is exempt either way (`damaged` rows).
    storage = (_staged(test) and any(f.startswith("corrupt") for f in faults)) or bool(test.get("storage_faults"))
    backend = cluster.get("backend") or (cfg.get("cluster") or {}).get("backend") or "local"
    return RuleSettings(
        **{k.name: k.setting.type(broker.get(k.test, k.run_default)) for k in rule_keys() if k.test},
        acks=acks, power_loss=power, storage_faults=storage, same_clock=backend in SAME_CLOCK_BACKENDS)


def run_facts(run: OpenedRun | Path | str, col_dir: Path | str | None = None) -> dict[str, Any]:
    """What the adapter needs: the rule settings, start_wall_ns and whether polls report the HW, from
    test.json (`run`: the opened run, or its directory, opened here); with the columnar tables
    (`col_dir`), also what the run did: a broker started with power_loss (its `start` line says so: the
    harness turns it on for any fault that may cut power), a power-loss fault in the history, a corrupt
    one staged by a scenario or a schedule file."""
    opened = run if isinstance(run, OpenedRun) else OpenedRun.lenient(run)
    test = opened.test
    client = opened.config.get("client") if isinstance(opened.config.get("client"), dict) else {}
    settings = settings_from(test)
    if col_dir is not None:
        faults, power = _what_happened(Path(col_dir))
        settings = replace(settings, power_loss=settings.power_loss or power or "power-loss" in faults,
                           storage_faults=settings.storage_faults or (_staged(test) and "corrupt" in faults))
    return {"settings": settings, "start_wall_ns": opened.start_wall_ns,
            "poll_hw": client.get("kind", "native") == "native"}


def _what_happened(col_dir: Path) -> tuple[set[str], bool]:
    """(the fault kinds of the history's nemesis operations, whether a broker started with power_loss)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    faults: set[str] = set()
    if (col_dir / "ops").is_dir():
        col = pads.dataset(str(col_dir / "ops"), format="parquet").to_table(columns=["fault"]).column("fault")
        faults = {f for f in pc.unique(col).to_pylist() if f}
    power = False
    # a broker's `start` names no partition: where the table is laid out by partition, it is in the wide file
    layout = quiet_rows.partition_files(col_dir / "events")
    files = [Path(layout[1])] if layout else sorted((col_dir / "events").glob("*.parquet"))
    for path in files if (col_dir / "events").is_dir() else ():
        pf = pq.ParquetFile(path)
        for rg in range(pf.num_row_groups):      # the `fields` text only of row groups with a `start`
            if not pc.any(pc.equal(pf.read_row_group(rg, columns=["event"]).column(0), "start")).as_py():
                continue
            t = pf.read_row_group(rg, columns=["src", "event", "fields"])
            power = power or any(src == "broker" and event == "start" and json.loads(f).get("power_loss") is True
                                 for src, event, f in zip(*(t.column(c).to_pylist() for c in t.column_names)))
    return faults, power


# --- rows ------------------------------------------------------------------------------------------

def event_row(ts: int, node: str, src: str, seq: int, fields: str) -> dict[str, Any]:
    """One `events` table row as a rule row (the log line's fields, plus src and seq)."""
    row = json.loads(fields)
    row["ts"], row["node"], row["src"], row["seq"] = ts, node, src, seq
    return row


@dataclass(frozen=True)
class Poll:
    """An ok poll as the history holds it: its partition, history index and time, the highest offset it
    returned (None: no records), and the leader epoch and the HW it was told (the history's values: -1
    for an unknown epoch, a negative HW for none)."""
    partition: int
    index: int
    time_ns: int
    offset: Any
    epoch: Any
    hw: Any


def read_row(poll: Poll, start_wall_ns: int, poll_hw: bool) -> dict[str, Any]:
    """A poll as a rule row. `hw` is kept for read-uncommitted only where it is the HW of the very fetch
    that returned the records: every poll of a native run (`poll_hw`), and in a mixed run the polls that
    carry the answering leader's epoch (the native client's; a Kafka library reports -1 and takes the HW
    from a later ListOffsets). `reported_hw`, what any poll was told the HW is, feeds hw-reported-ahead."""
    known_epoch = explain.known_epoch(poll.epoch)
    hw = poll.hw
    reported = hw if isinstance(hw, int) and hw >= 0 else None
    return {"ts": start_wall_ns + poll.time_ns + READ_SLACK_NS, "node": "client", "src": "client", "seq": poll.index,
            "event": "read", "partition": poll.partition, "offset": poll.offset,
            "epoch": poll.epoch if known_epoch else None,
            "hw": reported if (poll_hw or known_epoch) else None, "reported_hw": reported,
            "index": poll.index, "time": poll.time_ns}


def sent_row(partition: int, time_ns: int, offset: int, value: Any, index: int, start_wall_ns: int) -> dict[str, Any]:
    """An ok send as a rule row (ack-undecided): the offset the producer was told its value is at."""
    return {"ts": start_wall_ns + time_ns + READ_SLACK_NS, "node": "client", "src": "client", "seq": index,
            "event": "sent", "partition": partition, "offset": offset, "value": value, "index": index,
            "time": time_ns}


sort_key = quiet_rows.sort_key     # time order; within one log, line order


def rows_by_partition(col_dir: Path | str, facts: dict[str, Any],
                      sends: dict[int, list[dict]] | None = None) -> dict[int, list[dict]]:
    """The reference engine's rows: each partition's, sorted. With `sends` (a dict), the `sent` rows go
    there instead (each partition's, sorted), for `undecided_sends`."""
    import pyarrow.dataset as pads

    col_dir = Path(col_dir)
    out: dict[int, list[dict]] = defaultdict(list)
    node_wide: list[dict] = []
    events = col_dir / "events"
    if events.is_dir():
        table = pads.dataset(str(events), format="parquet").to_table(
            columns=["ts", "node", "src", "seq", "partition", "fields"])
        for ts, node, src, seq, part, fields in zip(*(table.column(c).to_pylist() for c in table.column_names)):
            row = event_row(ts, node, src, seq, fields)
            if part is None:
                node_wide.append(row)
            else:
                out[part].append(row)
    ops = _ops_rows(col_dir, sends=events.is_dir())
    start = facts.get("start_wall_ns")
    if start is not None:
        for p, row in _poll_reads(col_dir, ops, start, facts.get("poll_hw", True)):
            out[p].append(row)
        for p, row in _ok_sends(ops, start):
            (out[p] if sends is None else sends.setdefault(p, [])).append(row)
        node_wide += _damage_rows(ops, start)
    partitions = set(out) | {op["partition"] for op in ops if op["partition"] is not None}
    _spread(out, partitions, node_wide)
    for p in partitions:
        out[p].sort(key=sort_key)
    for rows in (sends or {}).values():
        rows.sort(key=sort_key)
    return dict(out)


# the ops columns the rows read (one pass over the table for every kind of row)
OPS_COLUMNS = ["index", "time", "process", "type", "f", "partition", "offset", "value", "epoch", "hw", "fault",
               "phase", "targets", "damage"]


def _ops_rows(col_dir: Path, sends: bool = True) -> list[dict[str, Any]]:
    """The history's operations the rules read (OPS_COLUMNS), read once: ok polls, corrupt faults' starts
    and, with `sends`, ok sends told their offset (ack-undecided, judged only beside event logs); [] without
    an ops table. Filtered before they become Python rows: a 10M-send history is 20M operations."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    if not (col_dir / "ops").is_dir():
        return []
    dataset = pads.dataset(str(col_dir / "ops"), format="parquet")
    have = [c for c in OPS_COLUMNS if c in dataset.schema.names]     # tables of an older converter lack some
    done = pc.field("type") != "invoke"
    wanted = (pc.field("f") == "poll") & (pc.field("type") == "ok")
    if sends:
        wanted = wanted | ((pc.field("f") == "send") & (pc.field("type") == "ok"))
    if "fault" in have:
        wanted = wanted | ((pc.field("process") == rf.NEMESIS_PROCESS) & done)
    rows = dataset.to_table(columns=have, filter=wanted).to_pylist()
    missing = [c for c in OPS_COLUMNS if c not in have]
    for row in rows if missing else ():
        row.update(dict.fromkeys(missing))
    return rows


def damage_row(node: str, time_ns: int, index: int, start_wall_ns: int, partition: int | None = None,
               offset: int | None = None) -> dict[str, Any]:
    """A storage fault's damage to `node`'s files (node-wide): at the completion of the fault's start, which
    follows the damage and precedes the restart; with the partition it struck and the first offset whose
    record it damaged, when the fault says (a log fault's)."""
    row = {"ts": start_wall_ns + time_ns, "node": node, "src": "nemesis", "seq": index, "event": "damaged",
           "index": index, "time": time_ns}
    if partition is not None:                   # as the Spark adapter's JSON fields: no null fields
        row["damaged_partition"] = partition
    if offset is not None:
        row["damaged_offset"] = offset
    return row


def damage_entries(op: dict[str, Any]) -> list[tuple[str, int | None, int | None]]:
    """(node, partition, first damaged offset) per node of a corrupt start's completion: from its `damage`
    column ("node/partition/offset,..."), else its targets with neither known."""
    if op.get("damage"):
        out = []
        for entry in op["damage"].split(","):
            node, part, offset = (entry.split("/") + ["", ""])[:3]
            out.append((node, int(part) if part else None, int(offset) if offset else None))
        return out
    return [(node, None, None) for node in (op["targets"] or "").split(",") if node]


def _damage_rows(ops: list[dict[str, Any]], start_wall_ns: int) -> list[dict]:
    """One `damaged` row per node a corrupt fault's start completed on."""
    out = []
    for op in ops:
        if (op["process"] == rf.NEMESIS_PROCESS and op["fault"] == "corrupt" and op["phase"] == "start"
                and op["type"] != "invoke" and op["targets"]):
            out += [damage_row(node, op["time"], op["index"], start_wall_ns, part, offset)
                    for node, part, offset in damage_entries(op)]
    return out


def _poll_reads(col_dir: Path, ops: list[dict[str, Any]], start_wall_ns: int,
                poll_hw: bool) -> Iterator[tuple[int, dict]]:
    """(partition, read row) for every ok poll, with the highest offset it returned (None: none)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    highest: dict[int, int] = {}
    reads = col_dir / "reads"
    if reads.is_dir():          # the highest offset each poll returned, aggregated in Arrow (20M reads at 10M)
        t = pads.dataset(str(reads), format="parquet").to_table(
            columns=["index", "offset"], filter=(pc.field("f") == "poll") & pc.field("offset").is_valid())
        top = t.group_by("index").aggregate([("offset", "max")])
        highest = dict(zip(top.column("index").to_pylist(), top.column("offset_max").to_pylist()))
    for op in ops:
        p = op["partition"]
        if op["f"] == "poll" and op["type"] == "ok" and p is not None:
            poll = Poll(p, op["index"], op["time"], highest.get(op["index"]), op["epoch"], op["hw"])
            yield p, read_row(poll, start_wall_ns, poll_hw)


def _ok_sends(ops: list[dict[str, Any]], start_wall_ns: int) -> Iterator[tuple[int, dict]]:
    """(partition, sent row) for every ok send that was told its offset (acks=0 sends are not)."""
    for op in ops:
        p, offset = op["partition"], op["offset"]
        if op["f"] == "send" and op["type"] == "ok" and p is not None and offset is not None and offset >= 0:
            yield p, sent_row(p, op["time"], offset, op["value"], op["index"], start_wall_ns)


def partition_extras(col_dir: Path | str, facts: dict[str, Any], partitions: Iterable[int]) -> dict[int, list[dict]]:
    """The rows each partition's rules read besides its events file: the polls, a storage fault's damage
    and a broker's node-wide lines (its `start`), each partition's in no order (checkers/quiet_rows.py
    sorts them). Small: a 10M-send run has some 20,000."""
    import pyarrow.dataset as pads

    col_dir = Path(col_dir)
    out: dict[int, list[dict]] = {p: [] for p in partitions}
    node_wide: list[dict] = []
    layout = quiet_rows.partition_files(col_dir / "events")
    if layout is not None:
        t = pads.dataset(layout[1], format="parquet").to_table(columns=["ts", "node", "src", "seq", "fields"])
        node_wide = [event_row(*r) for r in zip(*(t.column(c).to_pylist() for c in t.column_names))]
    start = facts.get("start_wall_ns")
    if start is not None:
        ops = _ops_rows(col_dir, sends=False)
        for p, row in _poll_reads(col_dir, ops, start, facts.get("poll_hw", True)):
            out.setdefault(p, []).append(row)
        node_wide += _damage_rows(ops, start)
    _spread(out, list(out), node_wide)
    return out


def _spread(out: dict[int, list[dict]], partitions: Iterable[int], node_wide: list[dict]) -> None:
    """Give every partition's rules a broker's or a storage fault's node-wide rows."""
    for p in partitions:
        out[p].extend(dict(r, partition=p) for r in node_wide if r.get("src") in ("broker", "nemesis"))


def check_partition(partition: int, path: str | None, extras: list[dict], settings: RuleSettings,
                    batch_rows: int | None = None) -> tuple[list[Violation], bool, Any]:
    """One partition's rules over its events file (in Arrow batches, quiet rows folded) and its extra
    rows: (the violations but ack-undecided's, whether ack-undecided judges it, the offsets its leaders
    acknowledged as ranges). The Spark engine runs it per partition on the executors."""
    rules = PartitionRules(partition, settings, sends=False)
    feed = quiet_rows.QuietFeed(rules, quiet_rows.batches_of([path] if path else [], batch_rows), extras)
    found = list(feed.violations())
    return found, rules.ack_judged(), feed.decided


# --- the rules ----------------------------------------------------------------------------------------

def check_sorted(rows: Iterable[dict], settings: RuleSettings,
                 judged: list[int] | None = None) -> Iterator[Violation]:
    """Run the rules over rows sorted by (partition, ts, node, seq): a new partition starts new rules.
    With `judged` (a list), the rows carry no `sent` rows: ack-undecided is left to `undecided_sends` (or
    its DataFrame form), and each partition it may judge is appended to `judged`. Either way the state
    kept is one partition's, bounded by its nodes and epochs."""
    rules: PartitionRules | None = None
    track = judged is None
    for row in rows:
        p = row["partition"]
        if rules is None or rules.partition != p:
            if rules is not None:
                yield from _finish(rules, judged)
            rules = PartitionRules(p, settings, sends=track)
        yield from rules.feed(row)
    if rules is not None:
        yield from _finish(rules, judged)


def _finish(rules: PartitionRules, judged: list[int] | None) -> list[Violation]:
    found = rules.finish()
    if judged is not None and rules.ack_judged():
        judged.append(rules.partition)
    return found


def check_reference(col_dir: Path | str, facts: dict[str, Any]) -> list[Violation]:
    """Every violation of the run, on one process: the rules over each partition's rows, then ack-undecided
    over each judged partition's ok sends and the acks' spans (as the Spark engine's range anti-join)."""
    sends: dict[int, list[dict]] = {}
    by_part = rows_by_partition(col_dir, facts, sends)
    merged = (row for p in sorted(by_part) for row in by_part[p])
    judged: list[int] = []
    found = list(check_sorted(merged, facts["settings"], judged))
    for p in judged:
        found += undecided_sends(p, sends.get(p, ()), decided_ranges(quiet_rows.spans_of(by_part[p])))
    return found


# --- findings ----------------------------------------------------------------------------------------

def example(v: Violation, start_wall_ns: int | None, promised_kind: bool) -> dict[str, Any]:
    """A violation as an anomaly example (fields: rundir/kinds.py PROTOCOL_FIELDS): `time` on the
    history's axis, and each evidence row's too (a client row keeps its operation's own history time)."""
    time = v.ts - start_wall_ns if start_wall_ns is not None and v.ts else None
    evidence = []
    for e in v.evidence:
        e = dict(e)
        if start_wall_ns is not None and isinstance(e.get("ts"), int) and e.get("event") not in ("read", "sent"):
            e["time"] = e["ts"] - start_wall_ns
        evidence.append(e)
    return {"partition": v.partition, "node": v.node, "time": time, "ts": v.ts, "epoch": v.epoch,
            "detail": v.detail, "promised": promised_kind, "evidence": evidence}


def empty_findings(facts: dict[str, Any]) -> dict[str, dict]:
    keep = promised(facts["settings"])
    return {k: {"count": 0, "examples": [], "promised": k in keep, "timed": [], "buckets": []}
            for k in kinds.PROTOCOL_NAMES}


def order(v: Violation) -> tuple:
    """Example order within a kind (the Spark engine's window orders by the same)."""
    return v.partition, v.ts, v.node, v.detail


def findings(violations: Iterable[Violation], facts: dict[str, Any], examples: int) -> dict[str, dict]:
    """{kind: {"count", "examples", "promised", "timed": [(partition, time, 1)]}} for every protocol kind,
    found or not; examples are each kind's first `examples` in `order`."""
    out = empty_findings(facts)
    start = facts.get("start_wall_ns")
    for v in sorted(violations, key=order):
        slot = out[v.kind]
        slot["count"] += 1
        ex = example(v, start, slot["promised"])
        slot["timed"].append((v.partition, ex["time"], 1))
        if len(slot["examples"]) < examples:
            slot["examples"].append(ex)
    return out


def attach(anomalies: dict[str, dict], found: dict[str, dict], tot: Any) -> None:
    """Put the protocol findings into an engine's anomalies, with their totals (checkers/totals.Totals)."""
    for kind, f in found.items():
        for p, t, n in f["timed"]:
            tot.add(kind, p, t, n)
        for p, b, n, tmin, tmax in f["buckets"]:
            tot.add_bucket(kind, p, b, n, tmin, tmax)
        anomalies[kind] = {"count": f["count"], "examples": f["examples"], "promised": f["promised"],
                           **tot.for_kind(kind)}
