"""What a check covered: each anomaly kind's status from the run's declared evidence (rundir/evidence.py).

`kind_statuses` gives every kind of rundir/kinds.py a `Status`: checked; not applicable to the run's
backend (its evidence is out of scope: the verdict covers the rest); not checked because the run's format
cannot hold its evidence (an older run); or missing, where evidence that should be there is not (ingest
recorded the problem, so the verdict is unknown). `apply` clears the findings of every kind that was not
checked, so a rule never reports on evidence its run could not hold, and `scope` is results.json's
summary of what was left out, grouped by reason. A kind that reads what only some workloads record (its
`needs`: key-reorder, the keyed workload's keys; the group kinds, a consumer group's `group`) is
`not-exercised` in a run where no operation records
it (`column_filled`), its count 0 and its status saying why; that is no part of the scope, since the
run never set out to check it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.rules.evidence import RULE_EVENTS
from rundir import evidence as ev
from rundir import kinds

# ingest's problem kinds (checkers/ingest.py) that say a sort of evidence is missing from the run
MISSING_PROBLEMS = {"no-replicas": ev.REPLICA_DUMPS, "missing-dump": ev.REPLICA_DUMPS, "dump-changed": ev.REPLICA_DUMPS,
                    "no-event-logs": ev.EVENT_LOGS, "missing-event-log": ev.EVENT_LOGS,
                    "event-log-changed": ev.EVENT_LOGS}


def logged_event_types(col_dir: Path) -> frozenset[str]:
    """What an undeclared run's logs hold: the event types present in its `events` table, and each
    `event.field` a rule needs (broker/rules/evidence.py) that some line of that event carries. Streamed
    batch by batch, and a field's search stops at its first line, so memory stays bounded at any size."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    path = Path(col_dir) / "events"
    if not path.is_dir():
        return frozenset()
    dataset = pads.dataset(str(path), format="parquet")
    have: set[str] = set()
    for batch in dataset.to_batches(columns=["event"]):
        have.update(e for e in pc.unique(batch.column(0)).to_pylist() if e)
    for need in sorted(set().union(*RULE_EVENTS.values())):
        event, _, name = need.partition(".")
        if not name or event not in have:
            continue
        for batch in dataset.to_batches(columns=["fields"], filter=pc.field("event") == event):
            if pc.any(pc.match_substring(batch.column(0), f'"{name}":')).as_py():
                have.add(need)
                break
    return frozenset(have)


def column_filled(col_dir: Path, column: str) -> bool:
    """Whether some operation of the run fills `column` of the ops table: from its Parquet statistics (the
    null count against the rows of each row group: no scan); a file without them counts as filled."""
    import pyarrow.parquet as pq

    for path in sorted((Path(col_dir) / "ops").glob("*.parquet")):
        md = pq.ParquetFile(path).metadata
        if column not in md.schema.names:
            continue
        col = md.schema.names.index(column)
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            st = rg.column(col).statistics
            if rg.num_rows and (st is None or not st.has_null_count or st.null_count < rg.num_rows):
                return True
    return False


def kind_statuses(evidence: ev.Evidence, problems: list[dict[str, Any]], col_dir: Path) -> dict[str, ev.Status]:
    """Every kind's status. `problems`: ingest's input problems (the missing evidence among them)."""
    missing: dict[str, str] = {}
    for pr in problems:
        what = MISSING_PROBLEMS.get(pr.get("kind"))
        if what is not None and what not in missing:
            missing[what] = f"{pr.get('file')}: {pr.get('message')}"
    have = None if evidence.event_types is not None else logged_event_types(col_dir)
    filled: dict[str, bool] = {}
    out: dict[str, ev.Status] = {}
    for kind in kinds.KINDS:
        status = ev.family_status(evidence, kind.family, missing)
        if status.status == ev.CHECKED and kind.family == "protocol":
            status = ev.rule_status(evidence, RULE_EVENTS[kind.name], have)
        elif status.status == ev.CHECKED and kind.needs is not None:
            need = kind.needs
            if need.column not in filled:
                filled[need.column] = column_filled(col_dir, need.column)
            if not filled[need.column]:
                status = ev.Status(ev.NOT_EXERCISED, need.missing, ev.HISTORY)
        out[kind.name] = status
    return out


def apply(anomalies: dict[str, dict], statuses: dict[str, ev.Status]) -> None:
    """Clear the findings of every kind out of scope or out of the run's format (its totals are rebuilt
    empty by checkers/results.py). A kind with missing evidence keeps what it found in the evidence
    that is there: those findings are real, and the missing rest makes the verdict unknown."""
    for name, st in statuses.items():
        if st.status in (ev.NOT_APPLICABLE, ev.NOT_CHECKED, ev.NOT_EXERCISED) and name in anomalies:
            old = anomalies[name]
            anomalies[name] = {"count": 0, "examples": [],
                               **({"promised": old["promised"]} if "promised" in old else {})}


def scope(statuses: dict[str, ev.Status]) -> dict[str, list[dict[str, Any]]]:
    """results.json's `scope`: the kinds not applicable and the kinds not checked, each group with its
    evidence and reason, in the documented kind order: {"not_applicable": [...], "not_checked": [...],
    "missing": [...]}, each entry {"evidence", "reason", "kinds": [...]}."""
    groups: dict[tuple[str, str | None, str | None], list[str]] = {}
    for name in kinds.NAMES:
        st = statuses.get(name)
        if st is not None and st.status not in (ev.CHECKED, ev.NOT_EXERCISED):
            groups.setdefault((st.status, st.evidence, st.reason), []).append(name)
    out: dict[str, list[dict[str, Any]]] = {"not_applicable": [], "not_checked": [], "missing": []}
    key = {ev.NOT_APPLICABLE: "not_applicable", ev.NOT_CHECKED: "not_checked", ev.MISSING: "missing"}
    for (status, evidence, reason), names in groups.items():
        out[key[status]].append({"evidence": evidence, "reason": reason, "kinds": names})
    return out
