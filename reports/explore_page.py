"""An exploration's page (explore.html), beside its explore.json, and what the results index says of it.

`highwater explore` searches fault schedules in simulation (harness/exploration.py) and writes
explore.json: its options and settings, the invariants the settings promise, the schedules and events it
ran, and each kept finding shrunk to a short schedule with its story and an exported scenario file. The
page shows that for people: the outcome, the search, and per finding the story, the schedule, the
scenario file and the commands that replay it (on real processes, and the search itself).

A finding of an invariant the settings do not promise is "expected" (the configuration never claimed
it); one of a promised invariant is a real failure. `judged(doc)` says which, for the page and the index.

Self-contained like the run report: the reports' stylesheet inline, autoescaped template, no fetches.
"""
from __future__ import annotations

import datetime as _dt
import os
import shlex
from pathlib import Path
from typing import Any

from rundir import formats as runformat
from rundir.expectation import AS_EXPECTED, NOT_JUDGED, UNEXPECTED
from reports.render import asset, environment, results_root_of


def verdict(doc: dict[str, Any]) -> str:
    """invalid when a finding was kept, valid when schedules ran without one, unknown when none ran."""
    if doc.get("findings") or doc.get("findings_total"):
        return "invalid"
    return "valid" if doc.get("schedules") else "unknown"


def judged(doc: dict[str, Any]) -> tuple[str, str]:
    """(state, phrase) of rundir/expectation.py for an exploration: as expected when every violation found
    is of an invariant the settings do not promise, unexpected when a promised one broke."""
    counts = doc.get("findings_by_invariant") or {}
    if not doc.get("schedules"):
        return NOT_JUDGED, "nothing was searched"
    unexpected = {k: n for k, n in (doc.get("unexpected_by_invariant") or {}).items() if n}
    if unexpected:
        return UNEXPECTED, ("a promised invariant broke: "
                            + ", ".join(f"{k} ({n} schedules)" for k, n in sorted(unexpected.items())))
    if counts:
        return AS_EXPECTED, "only invariants these settings do not promise were violated"
    return AS_EXPECTED, "no promised invariant broke"


def headline(doc: dict[str, Any]) -> str:
    """`FOUND no-acked-loss (1,204 schedules) in 4,322 schedules, 210,500 events, 30.0 s` or `NOTHING FOUND in ...`."""
    where = (f"in {int(doc.get('schedules') or 0):,} schedules, {int(doc.get('events') or 0):,} events, "
             f"{float(doc.get('explore_s') or 0):.1f} s")
    counts = doc.get("findings_by_invariant") or {}
    if not counts:
        return f"NOTHING FOUND {where}" if doc.get("schedules") else f"NOTHING SEARCHED {where}"
    return "FOUND " + ", ".join(f"{k} ({int(n):,} schedules)" for k, n in counts.items()) + f" {where}"


def _replay(run_dir: Path, doc: dict[str, Any], finding: dict[str, Any]) -> list[str]:
    """The commands that replay a finding: its scenario on real processes, then the search itself."""
    out = []
    if finding.get("scenario"):
        mode = (doc.get("settings") or {}).get("truncation")
        out.append(f"highwater scenario {shlex.quote(str(run_dir / finding['scenario']))}"
                   + (f" --truncation {mode}" if mode else ""))
    argv = doc.get("argv")
    if isinstance(argv, list) and argv:
        seed_given = any(str(a) == "--seed" or str(a).startswith("--seed=") for a in argv)
        words = [str(a) for a in argv] + ([] if seed_given else ["--seed", str(doc.get("seed"))])
        out.append(" ".join(shlex.quote(w) for w in words))
    return out


def render_explore_page(run_dir: Path, doc: dict[str, Any]) -> str:
    run_dir = Path(run_dir)
    state, phrase = judged(doc)
    root = results_root_of(run_dir)
    index_link = (os.path.relpath(root / "index.html", run_dir.resolve()).replace(os.sep, "/")
                  if root is not None else None)
    findings = [dict(f, replay=_replay(run_dir, doc, f)) for f in doc.get("findings") or [] if isinstance(f, dict)]
    return environment().get_template("explore.html.j2").render(
        doc=doc, name=str(doc.get("name") or "explore"), timestamp=str(doc.get("timestamp") or run_dir.name),
        verdict=verdict(doc), headline=headline(doc), state=state, phrase=phrase, findings=findings,
        settings={k: v for k, v in (doc.get("settings") or {}).items() if v is not None},
        options={k: v for k, v in (doc.get("options") or {}).items() if v is not None},
        promises=list(doc.get("promises") or []), index_link=index_link,
        generated=_dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"), css=asset("report.css"))


def write_explore_page(run_dir: Path) -> Path:
    """Write RUN_DIR/explore.html from its explore.json; return its path. Raises runformat.FormatError."""
    run_dir = Path(run_dir)
    doc = runformat.load_json(run_dir / runformat.EXPLORE_JSON)
    if not isinstance(doc, dict):
        raise runformat.FormatError(run_dir / runformat.EXPLORE_JSON, None, "expected a JSON object")
    out = run_dir / runformat.EXPLORE_HTML
    tmp = run_dir / f".{runformat.EXPLORE_HTML}.{os.getpid()}.tmp"
    tmp.write_text(render_explore_page(run_dir, doc), encoding="utf-8")
    tmp.replace(out)
    return out
