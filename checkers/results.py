"""Assembling results.json from an engine's findings: fails_run per kind, the verdict, statistics.

Both engines (Spark and the reference) return the same `findings` structure:
  {"anomalies": {kind: {"count": n, "examples": [...], "by_partition": {...}, "histogram": {...},
                        ...extra counts}},
   "time_axis": {"start_s", "end_s", "bucket_s", "buckets"} (checkers/totals.py),
   "unseen": {"count": n, "partitions": [...], "details": [...]},
   "partitions": [...],
   "stats": {"ops": {f: {"ok": n, "fail": n, "info": n}},
             "availability": {"in_fault": {"ok": n, "total": n}, "outside_fault": {...}}, "fault_windows": n}}
and this module turns it into the document described in docs/formats.md.

The verdict is honest about its input: whatever could not be checked (partitions without a final
committed log, history lines skipped or torn, replica dumps missing: ingest's `problems`) is listed in
`unknown_reasons`, and a run with any such reason is never valid: `unknown`, or `false` when anomalies
that fail the run were found anyway (those are real).
"""
from __future__ import annotations

from typing import Any

from rundir import evidence
from rundir import formats as rf
from checkers import coverage, totals


def _ratio(c: dict[str, int]) -> float | None:
    return round(c["ok"] / c["total"], 6) if c.get("total") else None


def verdict(anomalies: dict[str, dict], unseen_count: int, reasons: list[dict] | None = None) -> bool | str:
    if any(a["fails_run"] and a["count"] > 0 for a in anomalies.values()):
        return False
    if unseen_count > 0 or reasons:
        return "unknown"
    return True


def unknown_reasons(unseen: dict[str, Any], input_info: dict[str, Any]) -> list[dict[str, Any]]:
    """What could not be checked, one entry each: {file, line, partition, reason} (null where not known).
    Input problems first (in the order ingest met them), then the partitions without a final log."""
    out: list[dict[str, Any]] = []
    problems = input_info.get("problems") or []
    for pr in problems:
        out.append({"file": pr.get("file"), "line": pr.get("line"), "partition": None, "reason": pr.get("message")})
    more = (input_info.get("problem_count") or 0) - len(problems)
    if more > 0:
        out.append({"file": None, "line": None, "partition": None,
                    "reason": f"{more} more input problems (not listed one by one)"})
    for d in unseen.get("details") or []:
        out.append({"file": None, "line": None, "partition": d["partition"],
                    "reason": f"{d['reason']}: {d['acked']} acknowledged sends not checked"})
    return out


def build(findings: dict[str, Any], *, failing: list[str], checker: dict[str, Any],
          input_info: dict[str, Any] | None = None, statuses: dict[str, Any] | None = None) -> dict[str, Any]:
    """results.json's document. `statuses`: each kind's coverage (checkers/coverage.py; None: all checked)."""
    anomalies: dict[str, dict] = {}
    statuses = statuses or {}
    axis = findings.get("time_axis") or totals.TimeAxis(None).as_json()
    for kind in rf.ANOMALY_KINDS:
        a = dict(findings["anomalies"].get(kind) or {"count": 0, "examples": []})
        for k, v in totals.empty(kind, axis).items():
            a.setdefault(k, v)
        a["fails_run"] = kind in failing
        st = statuses.get(kind)
        a["status"] = st.status if st is not None else evidence.CHECKED
        if st is not None and st.reason is not None:
            a["status_reason"] = st.reason
        anomalies[kind] = a
    unseen = findings["unseen"]
    reasons = unknown_reasons(unseen, input_info or {})
    stats = findings["stats"]
    avail = stats.get("availability", {})
    out_stats = {
        "ops": stats["ops"],
        "availability": {
            "in_fault": _ratio(avail.get("in_fault", {})),
            "outside_fault": _ratio(avail.get("outside_fault", {})),
            "counts": avail,
            "fault_windows": stats.get("fault_windows", 0),
        },
    }
    return {
        "format": rf.RESULTS_FORMAT,
        "valid": verdict(anomalies, unseen["count"], reasons),
        "unknown_reasons": reasons,                          # what could not be checked (never valid then)
        # the kinds found that fail the run (which kinds would: each anomaly's `fails_run`)
        "failed_kinds": [k for k in failing if anomalies[k]["count"] > 0],
        "scope": coverage.scope(statuses),                   # what the verdict does not cover, and why
        "anomalies": anomalies,
        "time_axis": axis,                                   # the histograms' buckets
        "unseen": unseen,
        "partitions": findings["partitions"],
        "stats": out_stats,
        "input": input_info or {},
        "checker": checker,
    }
