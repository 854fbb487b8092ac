"""Assembling results.json from an engine's findings: fails_run per kind, the verdict, statistics.

Both engines (Spark and the reference) return the same `findings` structure:
  {"anomalies": {kind: {"count": n, "examples": [...], ...extra counts}},
   "unseen": {"count": n, "partitions": [...], "details": [...]},
   "partitions": [...],
   "stats": {"ops": {f: {"ok": n, "fail": n, "info": n}},
             "availability": {"in_fault": {"ok": n, "total": n}, "outside_fault": {...}}, "fault_windows": n}}
and this module turns it into the document described in docs/formats.md.
"""
from __future__ import annotations

from typing import Any

from harness import runformat as rf


def _ratio(c: dict[str, int]) -> float | None:
    return round(c["ok"] / c["total"], 6) if c.get("total") else None


def verdict(anomalies: dict[str, dict], unseen_count: int) -> bool | str:
    if any(a["fails_run"] and a["count"] > 0 for a in anomalies.values()):
        return False
    if unseen_count > 0:
        return "unknown"
    return True


def build(findings: dict[str, Any], *, failing: list[str], checker: dict[str, Any],
          input_info: dict[str, Any] | None = None) -> dict[str, Any]:
    anomalies: dict[str, dict] = {}
    for kind in rf.ANOMALY_KINDS:
        a = dict(findings["anomalies"].get(kind) or {"count": 0, "examples": []})
        a["fails_run"] = kind in failing
        anomalies[kind] = a
    unseen = findings["unseen"]
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
        "valid": verdict(anomalies, unseen["count"]),
        "failing_kinds": list(failing),                      # kinds that fail a run (configured)
        "failed_kinds": [k for k in failing if anomalies[k]["count"] > 0],  # ... and were found
        "anomalies": anomalies,
        "unseen": unseen,
        "partitions": findings["partitions"],
        "stats": out_stats,
        "input": input_info or {},
        "checker": checker,
    }


def summary_line(results: dict[str, Any]) -> str:
    """One line: verdict, then the kinds with findings (failing ones marked with '!')."""
    v = results["valid"]
    head = {True: "VALID", False: "INVALID"}.get(v, "UNKNOWN") if isinstance(v, bool) else "UNKNOWN"
    parts = []
    for kind, a in results["anomalies"].items():
        if a["count"]:
            parts.append(f"{kind}={a['count']}{'!' if a['fails_run'] else ''}")
    if results["unseen"]["count"]:
        parts.append(f"unseen={results['unseen']['count']} (partitions {results['unseen']['partitions']})")
    ck = results.get("checker", {})
    tail = f" [{ck.get('engine')} {ck.get('elapsed_s')}s]" if ck else ""
    return f"{head}: " + (", ".join(parts) if parts else "no anomalies") + tail
