"""Everything a report shows, read from one run directory (docs/formats.md) into a `Run`.

test.json, results.json and final.json are read whole (they are small); history.jsonl in one streaming
pass (reports/history_scan.py); replica dumps into side-by-side views (reports/partitions.py); broker
event logs onto the history's time axis (reports/broker_events.py). A run that crashed may lack
results.json, final.json or the dumps: the report says what is missing instead of failing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rundir import formats as runformat
from rundir.formats import FormatError
from reports.anomalies import referenced_indexes
from reports.broker_events import BrokerEvents, read_broker_events
from reports.history_scan import HistorySummary, scan_history
from reports.partitions import PartitionView, build_views
from reports.process_timeline import ProcessOps

@dataclass
class Run:
    run_dir: Path
    test: dict[str, Any]
    results: dict[str, Any] | None
    final: dict[str, Any] | None
    history: HistorySummary
    partitions: list[PartitionView]
    broker: BrokerEvents
    files: list[tuple[str, int]] = field(default_factory=list)  # (relative path, bytes)
    notes: list[str] = field(default_factory=list)
    scenario: dict[str, Any] | None = None   # scenario.json: a scenario run's steps as they played
    processes: ProcessOps = field(default_factory=ProcessOps)  # every client operation by process

    @property
    def verdict(self) -> str:
        return verdict_of(self.results)


def verdict_of(results: dict[str, Any] | None) -> str:
    """'valid', 'invalid' or 'unknown' (also for a run that was never checked)."""
    if not isinstance(results, dict):
        return "unknown"
    v = results.get("valid")
    if v is True:
        return "valid"
    if v is False:
        return "invalid"
    return "unknown"


def _optional_json(path: Path, what: str, notes: list[str]) -> dict[str, Any] | None:
    if not path.exists():
        notes.append(f"{path.name} is missing: {what}.")
        return None
    obj = runformat.load_json(path)
    if not isinstance(obj, dict):
        raise FormatError(path, None, "expected a JSON object at the top level")
    return obj


def _check_results(results: dict[str, Any], path: Path) -> None:
    if "valid" not in results:
        raise FormatError(path, None, "missing field 'valid'")
    if results["valid"] not in (True, False, "unknown"):
        raise FormatError(path, None, f"field 'valid' must be true, false or \"unknown\", got {results['valid']!r}")
    anomalies = results.get("anomalies", {})
    if not isinstance(anomalies, dict):
        raise FormatError(path, None, "field 'anomalies' must be an object")
    for kind, body in anomalies.items():
        if not isinstance(body, dict):
            raise FormatError(path, None, f"field 'anomalies.{kind}' must be an object")
        if "count" in body and (not isinstance(body["count"], int) or isinstance(body["count"], bool)):
            raise FormatError(path, None, f"field 'anomalies.{kind}.count' must be an integer")
        if not isinstance(body.get("examples", []), list):
            raise FormatError(path, None, f"field 'anomalies.{kind}.examples' must be a list")


def list_files(run_dir: Path, limit: int = 20000) -> list[tuple[str, int]]:
    """Files of the run (not the report itself, not the columnar cache), relative paths, sorted."""
    out = []
    for p in sorted(run_dir.rglob("*")):
        rel = p.relative_to(run_dir).as_posix()
        if not p.is_file() or rel == runformat.REPORT_HTML or rel.startswith(runformat.COLUMNAR_DIR + "/"):
            continue
        out.append((rel, p.stat().st_size))
        if len(out) >= limit:
            break
    return out


def load_run(run_dir: Path) -> Run:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FormatError(run_dir, None, "not a run directory (no such directory)")
    history_path = run_dir / runformat.HISTORY
    if not history_path.exists():
        raise FormatError(history_path, None, "file is missing: not a run directory")
    notes: list[str] = []
    test = _optional_json(run_dir / runformat.TEST_JSON, "the run's configuration is unknown", notes) or {}
    results = _optional_json(run_dir / runformat.RESULTS_JSON,
                             "the run has not been checked, so its verdict is unknown", notes)
    if results is not None:
        _check_results(results, run_dir / runformat.RESULTS_JSON)
    final = None
    if (run_dir / runformat.FINAL_JSON).exists():
        final = _optional_json(run_dir / runformat.FINAL_JSON, "", notes)
    scenario = None
    if (run_dir / runformat.SCENARIO_JSON).exists():
        scenario = _optional_json(run_dir / runformat.SCENARIO_JSON, "the scenario's steps are unknown", notes)
        scenario = scenario if isinstance(scenario, dict) and isinstance(scenario.get("steps"), list) else None
    wanted = set(referenced_indexes(results)) | set(step_indexes(scenario))
    processes = ProcessOps(pinned=wanted)
    history = scan_history(history_path, wanted=wanted, ops=processes)
    if history.torn_lines:
        notes.append(f"history.jsonl ends in a torn line (line {history.torn_lines[-1]}), ignored: "
                     "the run's writer stopped mid-line.")
    if not (run_dir / runformat.REPLICAS_DIR).is_dir():
        why = (test.get("cluster") or {}).get("no_replica_dumps") if isinstance(test.get("cluster"), dict) else None
        notes.append(f"no replica dumps ({why}): divergence and replica details were not checked, and there "
                     "are no side-by-side logs." if isinstance(why, str) and why else
                     "replicas/ is missing: no replica dumps, so no side-by-side logs.")
    partitions = build_views(run_dir, results)
    start = test.get("start_wall_ns") if isinstance(test.get("start_wall_ns"), int) else None
    broker = read_broker_events(run_dir, start, history.duration_s)
    if broker.bad_lines:
        notes.append(f"{broker.bad_lines} line(s) of the node event logs are not JSON events and were skipped.")
    if start is None and broker.partitions:
        notes.append("test.json has no start_wall_ns: broker events are placed relative to the first event.")
    return Run(run_dir=run_dir, test=test, results=results, final=final, history=history,
               partitions=partitions, broker=broker, files=list_files(run_dir), notes=notes, scenario=scenario,
               processes=processes)


def step_indexes(scenario: dict[str, Any] | None) -> list[int]:
    """The first history entry each scenario step wrote (the report links the step to it)."""
    out = []
    for st in (scenario or {}).get("steps") or []:
        first, end = (st.get("first_index"), st.get("end_index")) if isinstance(st, dict) else (None, None)
        if isinstance(first, int) and isinstance(end, int) and end > first:
            out.append(first)
    return out
