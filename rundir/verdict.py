"""Reading a results.json back: the verdict's exit code and the one verdict line every command prints.

checkers/results.py writes results.json (docs/formats.md); this module is how the harness, the checker's
own CLI and the reports read its verdict, so none of them needs the checker to say what it found.
"""
from __future__ import annotations

from typing import Any

from rundir.exits import EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID


def reason_text(r: dict[str, Any]) -> str:
    """One unknown reason as text: `file:line: reason`, `partition p: reason` or the reason alone."""
    if r.get("file") is not None:
        where = f"{r['file']}:{r['line']}" if r.get("line") is not None else r["file"]
        return f"{where}: {r['reason']}"
    if r.get("partition") is not None:
        return f"partition {r['partition']}: {r['reason']}"
    return str(r.get("reason"))


# the head word of the verdict line per exit code (docs/running.md "Exit codes")
VERDICT_WORDS = {EXIT_VALID: "VALID", EXIT_INVALID: "INVALID", EXIT_UNKNOWN: "UNKNOWN", EXIT_USAGE: "NOT RUN",
                 EXIT_INTERNAL: "INTERNAL ERROR"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def kind_names(names: list[str]) -> str:
    """Kinds as a reader wants them: a whole family by its name ("protocol rules" for the broker's rules),
    the rest one by one."""
    from rundir import kinds

    by_family: dict[str, list[str]] = {}
    for k in kinds.KINDS:
        by_family.setdefault(k.family, []).append(k.name)
    out, left = [], list(names)
    for family, members in by_family.items():
        inside = [m for m in members if m in left]
        if len(members) < 2 or len(inside) * 2 <= len(members):
            continue
        what = f"the {len(members)} protocol rules" if family == "protocol" else f"the {family} family"
        rest = [m for m in members if m not in left]
        out.append(what if not rest else f"{len(inside)} of {what[4:]} (all but {', '.join(rest)})")
        left = [n for n in left if n not in members]
    return ", ".join(out + left)


def scope_texts(results: dict[str, Any] | None) -> list[str]:
    """What the verdict does not cover (results.json `scope`), one text per group: "not applicable:
    (why): divergence" for evidence out of the backend's scope, "not checked (why): ack-undecided" for
    evidence the run's format cannot hold. Evidence that is missing is an unknown reason instead."""
    out = []
    scope = (results or {}).get("scope") or {}
    for key, word in (("not_applicable", "not applicable"), ("not_checked", "not checked")):
        groups = [g for g in scope.get(key) or [] if isinstance(g, dict) and g.get("kinds")]
        if len(groups) == 1 or key == "not_applicable":
            out += [f"{word} ({g['reason']}): {kind_names(list(g['kinds']))}" for g in groups]
        elif groups:     # one line for the rules an older format cannot feed; results.json has each reason
            names = [k for g in groups for k in g["kinds"]]
            out.append(f"{word} (the run's format lacks the event lines they need; results.json scope): "
                       f"{kind_names(names)}")
    return out


SCOPE_HEADS = (("not_applicable", "Not applicable to this cluster"), ("not_checked", "Not checked in this run's format"))


def scope_groups(results: dict[str, Any] | None) -> list[dict[str, str]]:
    """results.json `scope` for a page: [{"key", "head", "reason", "kinds"}] (kinds as `kind_names` puts
    them), not applicable first."""
    scope = (results or {}).get("scope")
    if not isinstance(scope, dict):
        return []
    return [{"key": key, "head": head, "reason": str(g.get("reason")), "kinds": kind_names(list(g["kinds"])),
             "count": len(g["kinds"])}
            for key, head in SCOPE_HEADS for g in scope.get(key) or [] if isinstance(g, dict) and g.get("kinds")]


def failing_kinds(results: dict[str, Any]) -> list[str]:
    """The kinds that would fail the run: each anomaly's `fails_run` (a format-1 results.json also listed
    them as `failing_kinds`)."""
    anomalies = results.get("anomalies") or {}
    return [k for k, a in anomalies.items() if isinstance(a, dict) and a.get("fails_run")]


def verdict_exit_code(results: dict[str, Any] | None) -> int:
    """The exit code a results.json verdict maps to, the one mapping of every command: 0 valid (`true`),
    1 invalid (`false`), 2 unknown (`"unknown"`, or no results: not checked); any other value is no
    verdict the checker writes, so the harness failed: 255."""
    if results is None:
        return EXIT_UNKNOWN
    v = results.get("valid")
    if v is True:
        return EXIT_VALID
    if v is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN if v == "unknown" else EXIT_INTERNAL


def verdict_line(results: dict[str, Any] | None, *, exit_code: int | None = None, reasons: list[str] | tuple = (),
                 prefix: str = "highwater: ") -> str:
    """The one verdict line every command prints (`run`, `check`, `scenario`, and each repeat of `suite`):

        highwater: INVALID (exit 1): lost-write=503 inconsistent-offset=175 · 3 partitions · checked by spark in 4.8 s
        highwater: UNKNOWN (exit 2): no anomalies · 2 unknown reasons, first: <reason> · 3 partitions · ...
        highwater: UNKNOWN (exit 2): not checked · 1 unknown reason: interrupted
        highwater: VALID (exit 0): no anomalies · not applicable (why): divergence · ...

    `results` is results.json's document, or None when the run was not checked; `exit_code` the command's
    exit code (default: the one the verdict maps to), which picks the head word; `reasons` are what else
    made the outcome unknown (a scenario step that did not play out, an interrupt), listed before the
    checker's own unknown reasons. Counts are those of every kind found; kinds that do not fail the run
    (policy) are marked "(allowed)". Reads results.json defensively (older files lack some fields)."""
    code = exit_code if exit_code is not None else verdict_exit_code(results)
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
        parts += scope_texts(results)
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
