"""The run directory's formats: file names, history fields, replica dumps, columnar schemas.

This module is the single owner of what `docs/formats.md` describes. The harness writes with it, the
checker and the reports read with it; nobody else spells a file name or a field name of a run directory.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from rundir import kinds
from rundir.exits import HighwaterError

# --- file names -----------------------------------------------------------------------------------

TEST_JSON = "test.json"
HISTORY = "history.jsonl"
NEMESIS = "nemesis.jsonl"
FINAL_JSON = "final.json"
EXPLORE_JSON = "explore.json"        # an exploration's outcome (harness/exploration.py)
EXPLORE_HTML = "explore.html"        # its page (reports/explore_page.py)
SCENARIO_JSON = "scenario.json"      # a scenario run's steps as they played (harness/scenario_runner.py)
RESULTS_JSON = "results.json"
REPORT_HTML = "report.html"
REPLICAS_DIR = "replicas"
NODES_DIR = "nodes"
COLUMNAR_DIR = "columnar"
BROKER_LOG = "broker.log"

# results.json's format: 2 has `format`, `scope` and each anomaly's `status`, and no `failing_kinds`
# (each anomaly's `fails_run` says it); readers accept 1 as well (rundir/verdict.py)
RESULTS_FORMAT = 2

# --- history vocabulary ---------------------------------------------------------------------------

OP_TYPES = ("invoke", "ok", "fail", "info")
COMPLETIONS = ("ok", "fail", "info")
CLIENT_FS = ("send", "poll", "assign", "final-read")
# a group consumer's operations (docs/formats.md, "Client operations"): one invoke and one completion
# each, like the client operations, but one process may have several in flight (an async commit while it
# polls), so they are paired by process, f, group and partitions (checkers/ingest.py)
GROUP_ASSIGN_F = "group-assign"
GROUP_REVOKE_F = "group-revoke"
COMMIT_F = "commit"
COMMITTED_F = "committed"
GROUP_FS = (GROUP_ASSIGN_F, GROUP_REVOKE_F, COMMIT_F, COMMITTED_F)
COMMIT_MODES = ("sync", "async", "auto")
NO_GENERATION = -1        # a generation the client cannot tell
NO_COMMITTED_OFFSET = -1  # an offset map's entry where nothing is committed
NEMESIS_PROCESS = "nemesis"
HARNESS_PROCESS = "harness"
FINAL_STATE_F = "final-state"
# a node the final heal found down (no fault window open on it) and restarted (nemesis/windows.py recover)
FINAL_HEAL_F = "final-heal"
# the anomaly kinds results.json lists, in the documented order (declared in rundir/kinds.py)
ANOMALY_KINDS = kinds.NAMES

# --- test.json config keys the checker reads (all optional) -------------------------------------
# config.checker.allow: anomaly kinds that do not fail the run; config.checker.fail_on: kinds that do.
# config.producer.idempotent (or config.idempotent): the producer claims idempotence, so duplicates fail.
# config.client.acks (the harness's; or config.producer.acks): 0 or 1 means realtime-order does not fail.
CONFIG_CHECKER = "checker"
CONFIG_CHECKER_ALLOW = "allow"
CONFIG_CHECKER_FAIL_ON = "fail_on"
CONFIG_PRODUCER = "producer"
CONFIG_IDEMPOTENT = "idempotent"
CONFIG_IDEMPOTENCE = "idempotence"     # config.client.idempotence, as the harness records it
CONFIG_CLIENT = "client"
CONFIG_ACKS = "acks"

# --- columnar tables: RUN_DIR/columnar/<table>/*.parquet, plus a manifest --------------------------
COLUMNAR_TABLES = ("ops", "reads", "replicas", "replica_meta", "final_state", "events", "group_parts")
COLUMNAR_MANIFEST = "_manifest.json"
# the events table's files: one per partition, its rows in (ts, node, seq) order, and one of the lines
# that name no partition (a broker's `start`), so that a partition's rows are read in order without a sort
EVENTS_PARTITION_FILE = "p-{:05d}.parquet"
EVENTS_WIDE_FILE = "wide.parquet"
# the events table's integer columns (the fields of the lines a produce logs, checkers/quiet_rows.py)
EVENT_INTS = ("old", "new", "leo", "base", "last", "acks", "hw", "min_isr", "flushed", "isr_len")


def replica_dump_path(run_dir: Path, node: str, partition: int) -> Path:
    return Path(run_dir) / REPLICAS_DIR / node / f"p{partition}.jsonl"


def node_dir(run_dir: Path, node: str) -> Path:
    return Path(run_dir) / NODES_DIR / node


class FormatError(HighwaterError, ValueError):
    """A run directory file is malformed. The message names the file, line and field."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class JsonLine:
    line_no: int
    obj: dict[str, Any]


def iter_jsonl(path: Path, *, lenient: bool = False, skipped: list[int] | None = None) -> Iterator[JsonLine]:
    """Yield the objects of a JSON-lines file with 1-based line numbers.

    A torn last line (no trailing newline and not parseable) is what a crashed writer leaves; it is
    skipped and recorded in `skipped`. Any other bad line raises FormatError unless `lenient`.
    """
    path = Path(path)
    with path.open("rb") as fh:
        data_lines = fh.read().split(b"\n")
    last = len(data_lines)
    for i, raw in enumerate(data_lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            torn_tail = i == last  # final line without newline
            if lenient or torn_tail:
                if skipped is not None:
                    skipped.append(i)
                continue
            raise FormatError(path, i, f"not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            if lenient:
                if skipped is not None:
                    skipped.append(i)
                continue
            raise FormatError(path, i, "expected a JSON object")
        yield JsonLine(i, obj)


def validate_op(op: dict[str, Any], path: Path | str, line: int) -> None:
    """Check one history operation's required fields; raise FormatError naming the field."""
    for field, types in (("index", int), ("time", int), ("type", str), ("f", str)):
        if field not in op:
            raise FormatError(path, line, f"missing field '{field}'")
        if not isinstance(op[field], types) or isinstance(op[field], bool):
            raise FormatError(path, line, f"field '{field}' must be {types.__name__}, got {op[field]!r}")
    if "process" not in op:
        raise FormatError(path, line, "missing field 'process'")
    if not isinstance(op["process"], (int, str)) or isinstance(op["process"], bool):
        raise FormatError(path, line, f"field 'process' must be int or string, got {op['process']!r}")
    if op["type"] not in OP_TYPES:
        raise FormatError(path, line, f"field 'type' must be one of {', '.join(OP_TYPES)}, got {op['type']!r}")
    value = op.get("value")
    if value is not None and not isinstance(value, dict):
        raise FormatError(path, line, f"field 'value' must be an object, got {type(value).__name__}")
    if op["f"] in CLIENT_FS and op["process"] not in (NEMESIS_PROCESS, HARNESS_PROCESS):
        if not isinstance(value, dict) or "partition" not in value:
            raise FormatError(path, line, "field 'value.partition' is missing")


def read_bytes(path: Path) -> bytes:
    """An input file's bytes; FormatError naming the file when it cannot be read."""
    path = Path(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise FormatError(path, None, "file is missing") from None
    except OSError as exc:              # a directory in its place, no permission, an I/O error
        raise FormatError(path, None, f"cannot read: {exc.strerror or exc}") from None


def load_json(path: Path) -> Any:
    path = Path(path)
    data = read_bytes(path)
    try:
        return json.loads(data)
    except ValueError as exc:
        raise FormatError(path, getattr(exc, "lineno", None), f"not valid JSON ({exc})") from None


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically (temp file + rename) so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
    tmp.replace(path)


# --- columnar schemas (pyarrow imported lazily: the broker nodes do not need it) -----------------

# Parquet layout of the columnar tables. Row groups are small enough that the checker's range filters
# and point lookups skip most of a table by the groups' min/max statistics (at 10M sends, 128Ki rows
# per group instead of 1Mi took the exact per-offset pass from ~9 s to ~6 s and the example lookups
# from ~8 s to ~4 s); only string columns are dictionary-encoded (the integer columns are nearly
# unique, where a dictionary is larger than the plain values).
ROW_GROUP_ROWS = 128 * 1024


def parquet_writer(path: Path, schema: Any) -> Any:
    """A ParquetWriter with the layout above; write tables of at most ROW_GROUP_ROWS rows, or pass
    row_group_size=ROW_GROUP_ROWS."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    strings = [f.name for f in schema if pa.types.is_string(f.type)]
    return pq.ParquetWriter(path, schema, compression="snappy", use_dictionary=strings)


def _group_parts_schema(pa: Any) -> Any:
    """The group operations (GROUP_FS), one row per history line and partition it names: a group-assign's,
    group-revoke's and committed's invoke its `partitions`; a commit's `offsets`, a committed ok's
    `offsets` and a group-assign ok's `committed` entries with their offset (-1: none committed; null: the
    line names no offset). Completions carry their invoke's index and time, as in `ops`."""
    return pa.schema([
        ("index", pa.int64()), ("time", pa.int64()), ("process", pa.string()), ("type", pa.string()),
        ("f", pa.string()), ("group", pa.string()), ("member", pa.string()), ("generation", pa.int32()),
        ("partition", pa.int32()), ("offset", pa.int64()), ("mode", pa.string()), ("lost", pa.bool_()),
        ("error", pa.string()), ("invoke_index", pa.int64()), ("invoke_time", pa.int64()),
    ])


def arrow_schemas() -> dict[str, Any]:
    import pyarrow as pa

    return {
        "ops": pa.schema([
            ("index", pa.int64()), ("time", pa.int64()), ("process", pa.string()),
            ("type", pa.string()), ("f", pa.string()), ("partition", pa.int32()),
            ("value", pa.int64()), ("offset", pa.int64()), ("epoch", pa.int32()),
            ("hw", pa.int64()), ("error", pa.string()),
            # completions: the matching invoke; nemesis ops: fault, phase, fault id, targets ("n1,n2"), and a
            # corrupt start's completion what it damaged: "node/partition/offset" per node, comma-separated
            # (an empty partition or offset: not a log fault's, e.g. "n2/0/" for a checkpoint)
            ("invoke_index", pa.int64()), ("invoke_time", pa.int64()),
            ("fault", pa.string()), ("phase", pa.string()), ("fault_id", pa.int64()), ("targets", pa.string()),
            ("damage", pa.string()),
            ("key", pa.int64()),        # a send's key (the keyed workload); null: the send has none
            # a group consumer's poll and the group operations (GROUP_FS): the group id and generation
            # (null: not a group operation); a group operation's partitions are in `group_parts`
            ("group", pa.string()), ("generation", pa.int32()),
        ]),
        "reads": pa.schema([
            ("index", pa.int64()), ("process", pa.string()), ("f", pa.string()),
            ("partition", pa.int32()), ("offset", pa.int64()), ("value", pa.int64()),
            ("time", pa.int64()), ("pos", pa.int32()),  # pos: position in the op's records list
            ("epoch", pa.int32()),                      # the record's leader epoch; -1: not recorded
            ("group", pa.string()),                     # a group consumer's poll: its group; else null
        ]),
        "replicas": pa.schema([
            ("node", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
            ("epoch", pa.int32()), ("value", pa.int64()), ("crc_ok", pa.bool_()),
        ]),
        "replica_meta": pa.schema([
            ("node", pa.string()), ("partition", pa.int32()), ("leo", pa.int64()),
            ("hw", pa.int64()), ("log_start", pa.int64()), ("epochs", pa.string()),
            ("torn_bytes", pa.int64()),
        ]),
        "final_state": pa.schema([
            ("partition", pa.int32()), ("recovered", pa.bool_()), ("hw", pa.int64()),
            ("leader", pa.string()), ("epoch", pa.int32()), ("isr", pa.string()),
            ("replicas", pa.string()),  # isr and replicas as JSON text
        ]),
        # the node event log lines the protocol rules read (broker/rules): `src` broker or controller,
        # `seq` the line number in its log, `fields` the whole line as JSON text; then the integer fields
        # of the lines a produce logs per record (checkers/quiet_rows.py BULK, `isr_len` the length of an
        # ack's ISR), and `quiet`: the line is one of those and each of those fields is an int or absent.
        # Laid out by partition, sorted (EVENTS_PARTITION_FILE, EVENTS_WIDE_FILE)
        "events": pa.schema([
            ("ts", pa.int64()), ("node", pa.string()), ("src", pa.string()), ("seq", pa.int64()),
            ("event", pa.string()), ("partition", pa.int32()), ("fields", pa.string()),
            *[(name, pa.int64()) for name in EVENT_INTS], ("quiet", pa.bool_()),
        ]),
        "group_parts": _group_parts_schema(pa),
    }
