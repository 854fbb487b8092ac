"""What a run was expected to show, and whether it showed it.

A scenario says in its `[expect]` table which anomaly kinds each truncation mode should produce (none:
the run should be VALID); a suite entry says `safe` or `finds = [...]`. The run records the one that
applies in test.json as "expect" (`record`), so that everything reading a run directory judges it the
same way (`judge`): the terminal line of `highwater scenario`, the report's banner and the index.

The verdict (and its exit code) stays the checker's, as Jepsen's does; the expectation is said beside it:
"INVALID — as expected in hw mode". It is judged only when the run was checked with a definite verdict
and (for a scenario) every step played out; otherwise it is "not judged", with the reason, never "as
expected".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

AS_EXPECTED, UNEXPECTED, NOT_JUDGED = "as-expected", "unexpected", "not-judged"


def record(kinds: list[str] | tuple[str, ...], *, by: str, mode: str | None = None) -> dict[str, Any]:
    """test.json's "expect": the anomaly kinds expected (empty: none, a VALID run), who expects them
    ("scenario" or "suite") and the truncation mode they were expected in."""
    return {"by": by, "kinds": sorted(set(kinds)), **({"mode": mode} if mode else {})}


def found_kinds(results: dict | None) -> list[str]:
    """Anomaly kinds with a count above 0 that fail the run (results.json)."""
    if not results:
        return []
    return sorted(k for k, a in (results.get("anomalies") or {}).items()
                  if isinstance(a, dict) and a.get("count", 0) > 0 and a.get("fails_run", True))


@dataclass(frozen=True)
class Judged:
    expected: tuple[str, ...]        # the kinds expected (empty: no anomalies)
    by: str                          # "scenario" | "suite"
    mode: str | None
    found: tuple[str, ...]           # the failing kinds the checker found
    state: str                       # AS_EXPECTED | UNEXPECTED | NOT_JUDGED
    reason: str = ""                 # why not judged

    @property
    def wanted(self) -> str:
        """`lost-write, divergence` or `no anomalies`."""
        return ", ".join(self.expected) or "no anomalies"

    @property
    def where(self) -> str:
        return f" in {self.mode} mode" if self.mode else ""

    def phrase(self) -> str:
        """`as expected in hw mode`, `NOT as expected in hw mode (expected lost-write; found none)`,
        `expectation not judged: the run was not checked`."""
        if self.state == AS_EXPECTED:
            return f"as expected{self.where}"
        if self.state == UNEXPECTED:
            return (f"NOT as expected{self.where} (expected {self.wanted}; found "
                    f"{', '.join(self.found) or 'none'})")
        return f"expectation ({self.wanted}{self.where}) not judged: {self.reason}"


def judge(expect: Any, results: dict | None, *, not_played: str | None = None) -> Judged | None:
    """The expectation `expect` (test.json's "expect") against `results` (results.json, None when the
    run was not checked); `not_played`: why the run did not play out (a scenario step failed). None when
    the run had no expectation."""
    if not isinstance(expect, dict) or not isinstance(expect.get("kinds"), list):
        return None
    kinds = tuple(str(k) for k in expect["kinds"])
    found = tuple(found_kinds(results))
    base = dict(expected=kinds, by=str(expect.get("by") or "scenario"),
                mode=str(expect["mode"]) if expect.get("mode") else None, found=found)
    if not_played:
        return Judged(**base, state=NOT_JUDGED, reason=not_played)
    valid = (results or {}).get("valid")
    if results is None:
        return Judged(**base, state=NOT_JUDGED, reason="the run was not checked")
    if valid not in (True, False):
        return Judged(**base, state=NOT_JUDGED, reason="the verdict is unknown")
    ok = set(kinds) <= set(found) if kinds else (valid is True and not found)
    return Judged(**base, state=AS_EXPECTED if ok else UNEXPECTED)
