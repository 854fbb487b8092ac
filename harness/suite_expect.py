"""Judging a configuration: its repeats' verdicts against its expectation (safe, or finds kinds).

A repeat is what one run left behind (exit code, results.json's verdict and anomaly counts). The outcome
of a configuration is one of:

    passed    the expectation held: every repeat valid (safe), or one repeat showed every listed kind (finds)
    failed    the expectation is broken: a repeat of a safe configuration found anomalies, or no repeat
              of a finds configuration showed all the listed kinds although every repeat was checked
    error     it could not be decided: a safe configuration with a repeat that was not checked or whose
              verdict is unknown (e.g. a partition never recovered), or a finds configuration whose kinds
              were not shown while some repeat went unchecked
    skipped   not run (time budget exhausted, interrupted); never counted as passed

An explore entry's repeat is one exploration in simulation (harness/exploration.py): its counts are
findings per violated invariant, `findings` the shrunk ones with their stories. `expect = "found"`
passes when one repeat found a violation (of `invariant`, when named) and fails when every repeat
explored to its end without one; `expect = "none"` fails on any finding. A repeat that ended in an
error (exit 254/255) makes the outcome inconclusive unless the expectation is already decided.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.suite_file import Expectation
from rundir.verdict import verdict_line

@dataclass
class RepeatResult:
    index: int                              # 1-based
    exit_code: int
    valid: bool | str | None                # results.json "valid"; None when the run was not checked
    counts: dict[str, int] = field(default_factory=dict)   # anomaly kind -> count, only counts above 0
    unseen: int = 0
    run_dir: str | None = None              # relative to the suite directory
    report: str | None = None               # relative to the suite directory, when it exists
    seed: int | None = None
    elapsed_s: float = 0.0
    problems: list[str] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)       # kinds counted but not failing the run (policy)
    line: str = field(default="", compare=False)           # the verdict line (not in suite.json)
    findings: list[dict[str, Any]] | None = None           # explore repeats: the shrunk findings (explore.json)
    explored: dict[str, Any] | None = None                 # explore repeats: schedules, events, seconds

    @property
    def found(self) -> set[str]:
        return {k for k, c in self.counts.items() if c > 0}

    @property
    def checked(self) -> bool:
        return self.valid in (True, False, "unknown")

    def count(self, kind: str) -> int:
        return int(self.counts.get(kind, 0))

    def to_json(self) -> dict[str, Any]:
        out = {"index": self.index, "exit_code": self.exit_code, "valid": self.valid, "counts": dict(self.counts),
               "unseen": self.unseen, "run_dir": self.run_dir, "report": self.report, "seed": self.seed,
               "elapsed_s": round(self.elapsed_s, 3), "problems": list(self.problems), "allowed": list(self.allowed)}
        if self.findings is not None:
            out["findings"] = list(self.findings)
        if self.explored is not None:
            out["explored"] = dict(self.explored)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RepeatResult":
        return cls(index=int(d.get("index", 0)), exit_code=int(d.get("exit_code", 255)), valid=d.get("valid"),
                   counts={str(k): int(v) for k, v in (d.get("counts") or {}).items()},
                   unseen=int(d.get("unseen") or 0), run_dir=d.get("run_dir"), report=d.get("report"),
                   seed=d.get("seed"), elapsed_s=float(d.get("elapsed_s") or 0.0),
                   problems=list(d.get("problems") or []), allowed=list(d.get("allowed") or []),
                   findings=d.get("findings"), explored=d.get("explored"))


def repeat_from_results(index: int, exit_code: int, results: dict[str, Any] | None, **extra) -> RepeatResult:
    """A RepeatResult from a run's exit code and its results.json document (None when not checked)."""
    extra.setdefault("line", verdict_line(results, exit_code=exit_code, prefix="",
                                          reasons=[] if results is not None else extra.get("problems") or []))
    if results is None:
        return RepeatResult(index=index, exit_code=exit_code, valid=None, **extra)
    counts, allowed = {}, []
    for kind, body in (results.get("anomalies") or {}).items():
        n = body.get("count", 0) if isinstance(body, dict) else 0
        if isinstance(n, int) and n > 0:
            counts[str(kind)] = n
            if body.get("fails_run") is False:
                allowed.append(str(kind))
    unseen = (results.get("unseen") or {}).get("count", 0) or 0
    return RepeatResult(index=index, exit_code=exit_code, valid=results.get("valid"), counts=counts,
                        unseen=int(unseen), allowed=sorted(allowed), **extra)


def _kinds_text(r: RepeatResult, kinds: list[str] | None = None) -> str:
    kinds = kinds if kinds is not None else sorted(r.found)
    return ", ".join(f"{k} ({r.count(k)})" for k in kinds) or "nothing"


def _why_unchecked(r: RepeatResult) -> str:
    if r.valid == "unknown":
        return f"verdict unknown ({r.unseen} acknowledged writes could not be checked)"
    first = f": {r.problems[0]}" if r.problems else ""
    return f"not checked (exit {r.exit_code}{first})"


def repeat_from_explore(index: int, exit_code: int, doc: dict[str, Any] | None, **extra) -> RepeatResult:
    """A RepeatResult from an exploration's exit code and explore.json (None when it did not finish)."""
    if doc is None:
        extra.setdefault("line", f"ERROR (exit {exit_code})"
                                 + (f": {extra['problems'][0]}" if extra.get("problems") else ""))
        return RepeatResult(index=index, exit_code=exit_code, valid=None, findings=[], **extra)
    from harness.exploration import summary_line
    counts = {str(k): int(v) for k, v in (doc.get("findings_by_invariant") or {}).items() if v}
    explored = {k: doc.get(k) for k in ("schedules", "events", "explore_s", "schedules_per_s")}
    extra.setdefault("line", summary_line(doc))
    if not counts and not doc.get("schedules"):      # nothing searched: never "no finding"
        return RepeatResult(index=index, exit_code=exit_code, valid=None, counts=counts, findings=[],
                            explored=explored, **extra)
    return RepeatResult(index=index, exit_code=exit_code, valid=not counts, counts=counts,
                        findings=list(doc.get("findings") or []), explored=explored, **extra)


def _explored_text(r: RepeatResult) -> str:
    e = r.explored or {}
    return f"{int(e.get('schedules') or 0):,} schedules, {int(e.get('events') or 0):,} events"


def evaluate_explore(expect: Expectation, repeats: list[RepeatResult]) -> tuple[str, str]:
    n = len(repeats)
    ran = [r for r in repeats if r.checked]
    if expect.explore == "none":
        bad = [r for r in ran if r.found]
        if bad:
            parts = "; ".join(f"repeat {r.index} (seed {r.seed}) found {_kinds_text(r)}" for r in bad)
            return "failed", f"expected no finding, but {len(bad)} of {n} repeats found one: {parts}"
        if len(ran) < n:
            parts = "; ".join(f"repeat {r.index} {_why_unchecked(r)}" for r in repeats if not r.checked)
            return "error", f"expected no finding, not shown: {parts}"
        return "passed", "no finding in " + "; ".join(f"repeat {r.index}: {_explored_text(r)}" for r in repeats)
    want = expect.invariant
    for r in ran:
        if (want is None and r.found) or (want is not None and want in r.found):
            return "passed", f"repeat {r.index} of {n} found {_kinds_text(r, [want] if want else None)}"
    what = want or "a violation"
    summary = "; ".join(f"repeat {r.index} found {_kinds_text(r)} in {_explored_text(r)}" if r.checked else
                        f"repeat {r.index} {_why_unchecked(r)}" for r in repeats)
    status = "failed" if len(ran) == n else "error"
    return status, f"expected to find {what}, but no repeat did: {summary}"


def evaluate(expect: Expectation, repeats: list[RepeatResult]) -> tuple[str, str]:
    """(status, message) for a configuration; the message names the broken expectation."""
    n = len(repeats)
    if n == 0:
        return "skipped", "not run"
    if expect.explore is not None:
        return evaluate_explore(expect, repeats)
    if expect.safe:
        bad = [r for r in repeats if r.valid is False]
        if bad:
            parts = "; ".join(f"repeat {r.index} found {_kinds_text(r)}" for r in bad)
            return "failed", f"expected safe, but {len(bad)} of {n} repeats found anomalies: {parts}"
        unclear = [r for r in repeats if r.valid is not True]
        if unclear:
            parts = "; ".join(f"repeat {r.index} {_why_unchecked(r)}" for r in unclear)
            return "error", f"expected safe, not shown: {parts}"
        return "passed", f"safe in {n} of {n} repeats"
    wanted = list(expect.finds)
    for r in repeats:
        if set(wanted) <= r.found:
            return "passed", f"repeat {r.index} of {n} found {_kinds_text(r, wanted)}"
    summary = "; ".join(f"repeat {r.index} found {_kinds_text(r)}" if r.checked else
                        f"repeat {r.index} {_why_unchecked(r)}" for r in repeats)
    status = "failed" if all(r.checked for r in repeats) else "error"
    return status, f"expected to find {', '.join(wanted)} in one repeat, but none did: {summary}"


def suite_exit_code(statuses: list[str]) -> int:
    """0 every expectation held; 1 one is broken; 2 none broken but something was not decided or not run."""
    if "failed" in statuses:
        return 1
    if "error" in statuses or "skipped" in statuses:
        return 2
    return 0
