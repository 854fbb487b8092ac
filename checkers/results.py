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

from rundir import formats as rf
from checkers import totals


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


def reason_text(r: dict[str, Any]) -> str:
    """One unknown reason as text: `file:line: reason`, `partition p: reason` or the reason alone."""
    if r.get("file") is not None:
        where = f"{r['file']}:{r['line']}" if r.get("line") is not None else r["file"]
        return f"{where}: {r['reason']}"
    if r.get("partition") is not None:
        return f"partition {r['partition']}: {r['reason']}"
    return str(r.get("reason"))


def build(findings: dict[str, Any], *, failing: list[str], checker: dict[str, Any],
          input_info: dict[str, Any] | None = None) -> dict[str, Any]:
    anomalies: dict[str, dict] = {}
    axis = findings.get("time_axis") or totals.TimeAxis(None).as_json()
    for kind in rf.ANOMALY_KINDS:
        a = dict(findings["anomalies"].get(kind) or {"count": 0, "examples": []})
        for k, v in totals.empty(kind, axis).items():
            a.setdefault(k, v)
        a["fails_run"] = kind in failing
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
        "valid": verdict(anomalies, unseen["count"], reasons),
        "unknown_reasons": reasons,                          # what could not be checked (never valid then)
        "failing_kinds": list(failing),                      # kinds that fail a run (configured)
        "failed_kinds": [k for k in failing if anomalies[k]["count"] > 0],  # ... and were found
        "anomalies": anomalies,
        "time_axis": axis,                                   # the histograms' buckets
        "unseen": unseen,
        "partitions": findings["partitions"],
        "stats": out_stats,
        "input": input_info or {},
        "checker": checker,
    }


# the head word of the verdict line per exit code (docs/running.md "Exit codes")
VERDICT_WORDS = {0: "VALID", 1: "INVALID", 2: "UNKNOWN", 254: "NOT RUN", 255: "INTERNAL ERROR"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def verdict_exit_code(results: dict[str, Any]) -> int:
    """The exit code a results.json verdict maps to: 0 valid, 1 invalid, 2 unknown."""
    v = results.get("valid")
    return 0 if v is True else 1 if v is False else 2


def verdict_line(results: dict[str, Any] | None, *, exit_code: int | None = None, reasons: list[str] | tuple = (),
                 prefix: str = "highwater: ") -> str:
    """The one verdict line every command prints (`run`, `check`, `scenario`, and each repeat of `suite`):

        highwater: INVALID (exit 1): lost-write=503 inconsistent-offset=175 · 3 partitions · checked by spark in 4.8 s
        highwater: UNKNOWN (exit 2): no anomalies · 2 unknown reasons, first: <reason> · 3 partitions · ...
        highwater: UNKNOWN (exit 2): not checked · 1 unknown reason: interrupted

    `results` is results.json's document, or None when the run was not checked; `exit_code` the command's
    exit code (default: the one the verdict maps to), which picks the head word; `reasons` are what else
    made the outcome unknown (a scenario step that did not play out, an interrupt), listed before the
    checker's own unknown reasons. Counts are those of every kind found; kinds that do not fail the run
    (policy) are marked "(allowed)". Reads results.json defensively (older files lack some fields)."""
    code = exit_code if exit_code is not None else (verdict_exit_code(results) if results is not None else 2)
    head = VERDICT_WORDS.get(code, "UNKNOWN")
    all_reasons = [str(r) for r in reasons]
    parts: list[str] = []
    if results is None:
        parts.append("not checked")
    else:
        found = []
        for kind, a in (results.get("anomalies") or {}).items():
            n = a.get("count", 0) if isinstance(a, dict) else 0
            if n:
                found.append(f"{kind}={n}" + ("" if a.get("fails_run", True) else " (allowed)"))
        parts.append(" ".join(found) if found else "no anomalies")
        all_reasons += [reason_text(r) for r in results.get("unknown_reasons") or []]
    if all_reasons:
        n = len(all_reasons)
        parts.append(f"1 unknown reason: {all_reasons[0]}" if n == 1
                     else f"{n} unknown reasons, first: {all_reasons[0]}")
    if results is not None:
        if isinstance(results.get("partitions"), list):
            parts.append(_plural(len(results["partitions"]), "partition"))
        skipped = sum((results.get("input") or {}).get("skipped_lines", {}).values())
        if skipped:
            parts.append(f"{_plural(skipped, 'malformed line')} skipped")
        ck = results.get("checker") or {}
        if ck.get("engine"):
            took = ck.get("elapsed_s")
            parts.append(f"checked by {ck['engine']}" + (f" in {took:.1f} s" if isinstance(took, (int, float)) else ""))
    return f"{prefix}{head} (exit {code}): " + " · ".join(parts)
