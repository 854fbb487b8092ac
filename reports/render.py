"""Render a run's report.html: load the run, draw the charts, fill the Jinja2 template (autoescaped).

`write_report(run_dir)` is what the harness calls after each run and what `highwater report` runs. The
page is self-contained: the stylesheet, the script and every chart are inline, nothing is fetched. Values
from the run reach the page only through autoescaped template variables or `reports.svg.esc`.
"""
from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from rundir.expectation import judge
from rundir.verdict import reason_text, scope_groups
from rundir import formats as runformat
from rundir.kinds import DIVERGENCE, LOST_WRITE, PROTOCOL_NAMES
from reports import charts
from reports.anomalies import MAX_EXAMPLES_SHOWN, anomaly_kinds, example_times, referenced_indexes
from reports.config_summary import flatten, show, summary
from reports.jsonfast import dumps_compact
from reports.load import Run, load_run
from reports.process_timeline import page_data
from reports.story import page_teller
from reports.svg import fmt_count, fmt_seconds
from reports.totals import kind_bands, partition_totals

TEMPLATES = Path(__file__).parent / "templates"
LATENCY_ORDER = ("send", "poll", "final-read")
MAX_VALUE_CHARS = 600  # of one history entry's value in the excerpt
MIN_LATENCY_CHART = 10  # completions of one kind needed for its latency chart
QUICK_FILES = (runformat.HISTORY, runformat.RESULTS_JSON, runformat.TEST_JSON, runformat.NEMESIS, runformat.FINAL_JSON)


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False)
    env.filters["secs"] = lambda v: fmt_seconds(v) if isinstance(v, (int, float)) else "—"
    env.filters["num"] = lambda v: f"{v:,}".replace(",", "\u202f") if isinstance(v, int) else v
    env.filters["count"] = fmt_count
    env.filters["json"] = dumps_compact
    env.filters["show"] = show
    env.filters["bytes"] = human_bytes
    env.filters["pct"] = lambda v: f"{v * 100:.1f}%" if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"
    return env


def asset(name: str) -> Markup:
    """A stylesheet or script shipped with the templates, inlined as is (it is ours, not run data)."""
    return Markup((TEMPLATES / name).read_text())


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def started_at(test: dict[str, Any]) -> str:
    ns = test.get("start_wall_ns")
    if isinstance(ns, int) and not isinstance(ns, bool):
        return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    ts = test.get("timestamp")
    return str(ts) if ts else "unknown"


def verdict_line(run: Run) -> str:
    v = run.verdict
    if run.results is None:
        return "Not checked: there is no results.json for this run."
    anomalies = run.results.get("anomalies") or {}
    failing = [(k, b.get("count", 0)) for k, b in anomalies.items()
               if isinstance(b, dict) and b.get("fails_run", True) and (b.get("count") or 0) > 0]
    if v == "invalid":
        total = sum(c for _k, c in failing if isinstance(c, int))
        if not total:
            return "The checker found this run invalid."
        return (f"{total:,} anomal{'y' if total == 1 else 'ies'} of {len(failing)} kind"
                f"{'' if len(failing) == 1 else 's'} that fail the run.")
    if v == "unknown":
        unseen_doc = run.results.get("unseen") if isinstance(run.results.get("unseen"), dict) else {}
        unseen = unseen_doc.get("count") if isinstance(unseen_doc.get("count"), int) else 0
        parts = unseen_doc.get("partitions") if isinstance(unseen_doc.get("partitions"), list) else []
        reasons = [reason_text(r) for r in run.results.get("unknown_reasons") or [] if isinstance(r, dict)]
        why = ""
        if reasons:
            shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3:,} more" if len(reasons) > 3 else "")
            why = f" What could not be checked: {shown}."
        if not unseen:
            return "The checker could not decide: its verdict is unknown." + why
        return (f"No anomalies found, but {unseen:,} acknowledged write(s) could not be checked"
                + (f" (partition{'s' if len(parts) > 1 else ''} {', '.join(map(str, parts))} did not recover)."
                   if parts else ".") + why)
    soft = [(k, b.get("count", 0)) for k, b in anomalies.items()
            if isinstance(b, dict) and not b.get("fails_run", True) and (b.get("count") or 0) > 0]
    if soft:
        return ("No anomalies that fail the run; counted but allowed: "
                + ", ".join(f"{k} {c:,}" for k, c in soft) + ".")
    divergence = anomalies.get(DIVERGENCE.name) if isinstance(anomalies.get(DIVERGENCE.name), dict) else {}
    if divergence.get("status", "checked") != "checked":      # no replica was compared (results.json scope)
        return "No anomalies found: no acknowledged write was lost."
    return "No anomalies found: no acknowledged write was lost and the replicas agree."


def excerpt_rows(run: Run) -> list[dict[str, Any]]:
    """The history lines the examples refer to (with context), in order, with gap markers between runs."""
    referenced = set(referenced_indexes(run.results))
    rows: list[dict[str, Any]] = []
    prev = None
    for idx in sorted(run.history.excerpt):
        op = run.history.excerpt[idx]
        if prev is not None and idx > prev + 1:
            rows.append({"gap": idx - prev - 1})
        prev = idx
        value = dumps_compact(op["value"]) if op.get("value") is not None else ""
        if len(value) > MAX_VALUE_CHARS:  # a poll of a thousand records: the start is enough, the file has all
            value = value[:MAX_VALUE_CHARS] + f" … ({len(value) - MAX_VALUE_CHARS:,} more characters)"
        rows.append({"gap": 0, "index": idx, "time": op.get("time", 0) / 1e9, "process": op.get("process"),
                     "type": op.get("type"), "f": op.get("f"),
                     "value": value,
                     "error": op.get("error") or "", "referenced": idx in referenced})
    return rows


def results_root_of(run_dir: Path) -> Path | None:
    """The results directory a run sits in (<root>/<test>/<timestamp>), when it looks like one."""
    root = Path(run_dir).resolve().parent.parent
    if (root / "index.html").exists() or (root / "latest").exists() or root.name == "results":
        return root
    return None


def file_groups(files: list[tuple[str, int]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The run's files grouped for the Files section: the run's own files, each node's logs, the replica
    dumps; anything deeper (a broker's data directory) is one line per directory with its count and size."""
    groups: dict[str, list[dict[str, Any]]] = {}
    dirs: dict[str, dict[str, Any]] = {}
    for rel, size in files:
        parts = rel.split("/")
        group = "run" if len(parts) == 1 else parts[0]
        if len(parts) <= 3:
            groups.setdefault(group, []).append({"href": rel, "label": rel, "size": size, "files": 1})
            continue
        key = "/".join(parts[:3]) + "/"
        d = dirs.get(key)
        if d is None:
            d = dirs[key] = {"href": key, "label": key, "size": 0, "files": 0}
            groups.setdefault(group, []).append(d)
        d["size"] += size
        d["files"] += 1
    order = ["run", runformat.NODES_DIR, runformat.REPLICAS_DIR]
    return [(g, groups[g]) for g in order + sorted(set(groups) - set(order)) if g in groups]


def partition_rows(final_states: list, checked: list) -> list[dict[str, Any]]:
    """One row per partition: the harness's final state joined with the checker's per-partition counts."""
    rows: dict[Any, dict[str, Any]] = {}
    for src in (final_states, checked):
        for item in src if isinstance(src, list) else []:
            if isinstance(item, dict) and "partition" in item:
                rows.setdefault(item["partition"], {}).update(item)
    keys = ("partition", "recovered", "hw", "leader", "epoch", "isr", "acked", "committed")
    return [{k: r.get(k, "") for k in keys} for _p, r in sorted(rows.items(), key=lambda kv: str(kv[0]).zfill(9))]


def hot_partitions(run: Run) -> set[int]:
    """Partitions with something to look at: divergence, lost writes, any anomaly counted or exemplified."""
    hot = {pv.partition for pv in run.partitions if pv.divergent_count or pv.lost}
    hot |= {p for p, t in partition_totals(run.results).items() if t.bad}
    for body in ((run.results or {}).get("anomalies") or {}).values():
        for ex in (body.get("examples") or []) if isinstance(body, dict) else []:
            if isinstance(ex, dict) and isinstance(ex.get("partition"), int):
                hot.add(ex["partition"])
    return hot


def kind_partitions(totals: dict) -> dict[str, list[tuple[int, int, bool]]]:
    """kind -> [(partition, count, from_examples)] for the per-partition line of each anomaly kind."""
    out: dict[str, list[tuple[int, int, bool]]] = {}
    for p, t in totals.items():
        if t.lost:
            out.setdefault(LOST_WRITE.name, []).append((p, t.lost, t.lost_from_examples))
        for kind, n in t.kinds.items():
            out.setdefault(kind, []).append((p, n, kind in t.kinds_from_examples))
    return out


def rule_marks(results: dict[str, Any] | None) -> dict[int, list[charts.RuleMark]]:
    """partition -> its protocol findings shown in the anomalies section (the examples of the broker/rules
    kinds with a time), for the rules lane of its chart."""
    out: dict[int, list[charts.RuleMark]] = {}
    anomalies = (results or {}).get("anomalies")
    for kind in PROTOCOL_NAMES:
        body = anomalies.get(kind) if isinstance(anomalies, dict) else None
        examples = body.get("examples") if isinstance(body, dict) else None
        for n, ex in enumerate((examples if isinstance(examples, list) else [])[:MAX_EXAMPLES_SHOWN]):
            if not isinstance(ex, dict):
                continue
            p, t = ex.get("partition"), ex.get("time")
            if isinstance(p, int) and not isinstance(p, bool) and isinstance(t, int) and not isinstance(t, bool):
                out.setdefault(p, []).append(charts.RuleMark(t / 1e9, kind, n, str(ex.get("node", "?")),
                                                             str(ex.get("detail", "")), ex.get("promised") is not False))
    return out


def unique_fault_ids(faults: list) -> set[int]:
    """Positions of the fault windows that carry the `fault-<id>` anchor: the first window of each id."""
    seen, keep = set(), set()
    for i, w in enumerate(faults):
        if str(w.id) not in seen:
            seen.add(str(w.id))
            keep.add(i)
    return keep


def partition_nodes(pe, nodes: list[str], controllers: set[str]) -> list[str]:
    """The nodes that hold a replica of this partition according to its events (else every broker)."""
    seen = set(pe.hw) | {t[1] for t in pe.truncations}
    for _t, isr, _v in pe.isr:
        seen.update(map(str, isr))
    for _t, leader, _e, isr in pe.leaders:
        seen.update(map(str, isr))
        if leader is not None:
            seen.add(str(leader))
    picked = [n for n in nodes if n in seen and n not in controllers]
    return picked or [n for n in nodes if n not in controllers]


def step_rows(run: Run) -> list[dict[str, Any]]:
    """A scenario run's steps as they played (scenario.json): number, what, outcome, times, detail, and
    the history entries it wrote (linked when the excerpt holds the first)."""
    rows = []
    for st in (run.scenario or {}).get("steps") or []:
        if not isinstance(st, dict):
            continue
        args = st.get("args") if isinstance(st.get("args"), dict) else {}
        first, end = st.get("first_index"), st.get("end_index")
        wrote = isinstance(first, int) and isinstance(end, int) and end > first
        start_ns, end_ns = st.get("start_ns"), st.get("end_ns")
        rows.append({"step": st.get("step"), "do": str(st.get("do") or "?"),
                     "args": ", ".join(f"{k}={show(v)}" for k, v in args.items()),
                     "note": str(st.get("note") or ""), "outcome": str(st.get("outcome") or "not played"),
                     "start_s": start_ns / 1e9 if isinstance(start_ns, int) else None,
                     "end_s": end_ns / 1e9 if isinstance(end_ns, int) else None,
                     "detail": str(st.get("detail") or ""), "expected": st.get("expected"), "seen": st.get("seen"),
                     "first_index": first if wrote else None, "last_index": end - 1 if wrote else None,
                     "linked": wrote and first in run.history.excerpt})
    return rows


def context(run: Run) -> dict[str, Any]:
    """The template's variables: the run's header and verdict, its anomaly kinds, its configuration, the
    history's charts, the replication views and the files (built in this order: chart ids count up)."""
    h = run.history
    markers = example_times(run.results, h.op_times)
    anchors = {(pv.partition, row.offset) for pv in run.partitions for row in pv.rows
               if getattr(row, "anchor", False)}
    kinds = anomaly_kinds(run.results, anchors, story=page_teller(run))
    fault_ids = unique_fault_ids(h.faults)
    processes = page_data(run.processes, h.faults, {i: charts.fault_anchor(w.id) for i, w in enumerate(h.faults)
                                                    if i in fault_ids})
    return {**_header(run), "kinds": kinds, "failing": [k for k in kinds if k.count > 0], **_configuration(run),
            **_history_charts(run, markers, fault_ids, processes), **_replication(run), **_files(run)}


def _header(run: Run) -> dict[str, Any]:
    """What the run was, and its verdict."""
    test = run.test
    scenario_failed = (run.scenario or {}).get("failed") if run.scenario else None
    return {
        "expectation": judge(test.get("expect"), run.results,
                             not_played="a step did not play out" if scenario_failed else None),
        "steps": step_rows(run),
        "scenario_failed": str(scenario_failed or ""),
        "kind": str(test.get("kind") or "run"),
        "test": test,
        "name": str(test.get("name") or run.run_dir.name),
        "run_id": str(test.get("run_id") or run.run_dir.name),
        "started": started_at(test),
        "seed": test.get("seed", "unknown"),
        "verdict": run.verdict,
        "verdict_line": verdict_line(run),
        "results": run.results or {},
        "checked": run.results is not None,
        "scope": scope_groups(run.results),          # what the verdict does not cover, and why
        "unchecked_kinds": sum(g["count"] for g in scope_groups(run.results)),
    }


def _configuration(run: Run) -> dict[str, Any]:
    """The run's configuration, versions and cluster, and the harness's notes."""
    test = run.test
    cluster_nodes = ((test.get("cluster") or {}).get("nodes") or {})
    return {
        "config_summary": summary(test.get("config") or {}, limit=12, kind=str(test.get("kind") or "run")),
        "config_flat": [(k, show(v)) for k, v in flatten(test.get("config") or {})] if test.get("config") else [],
        "versions": test.get("versions") or {},
        "backend": (test.get("cluster") or {}).get("backend", "unknown"),
        "cluster_nodes": cluster_nodes if isinstance(cluster_nodes, dict) else {},
        "notes": run.notes,
    }


def _history_charts(run: Run, markers: list[tuple[float, str, int]], fault_ids: set[int],
                    processes: Any) -> dict[str, Any]:
    """The history's totals and charts: timeline (with the anomaly kinds' bands), per-process timeline,
    throughput, a latency chart per operation kind with enough completions to draw a line (the table has
    every kind)."""
    h = run.history
    enough = {f for f, per in h.totals.items() if sum(per.values()) >= MIN_LATENCY_CHART}
    latency_fs = [f for f in LATENCY_ORDER if f in h.latency and f in enough] + sorted(
        f for f in h.latency if f not in LATENCY_ORDER and f != "assign" and f in enough)
    totals = partition_totals(run.results)
    axis, bands = kind_bands(run.results)
    totals_rows = []
    for f in sorted(h.totals, key=lambda f: (LATENCY_ORDER + ("assign",)).index(f)
                    if f in LATENCY_ORDER + ("assign",) else 9):
        t = h.totals[f]
        totals_rows.append({"f": f, "ok": t.get("ok", 0), "fail": t.get("fail", 0), "info": t.get("info", 0),
                            "lat": h.latency_overall.get(f)})
    return {
        "h": h,
        "totals_rows": totals_rows,
        "timeline_svg": Markup(charts.timeline(h, markers, axis, bands)),
        "kind_bands": bands,
        "time_axis": axis,
        "totals": totals,
        "kind_partitions": kind_partitions(totals),
        "view_partitions": {pv.partition for pv in run.partitions},
        "span": charts.fmt_span,
        "fault_anchor": charts.fault_anchor,
        "fault_ids": fault_ids,
        "ptl": processes,
        "throughput_svg": Markup(charts.throughput(h)),
        "latency_svgs": [(f, Markup(charts.latency(h, f))) for f in latency_fs],
        "fault_kinds": charts.legend_items(h.faults),
        "markers": len(markers),
    }


def _replication(run: Run) -> dict[str, Any]:
    """The partitions: replica logs side by side, final states, each one's replication chart, the excerpt."""
    h, test = run.history, run.test
    nodes = sorted({n for p in run.partitions for n in p.nodes} | set(run.broker.nodes)
                   | set(((test.get("cluster") or {}).get("nodes") or {}).keys()))
    node_class = charts.node_classes(nodes)
    controllers = set(run.broker.controllers) | {"controller"}
    hw_points = max(60, 2400 // max(1, len(run.broker.partitions)))  # HW points per replica and partition
    rules = rule_marks(run.results)
    cluster = charts.ClusterTimeline(h.faults, h.duration_s, node_class, run.broker.lifecycle)
    final_states = h.final_states or list((run.final or {}).get("partitions") or [])
    return {
        "partitions": run.partitions,
        "hot_partitions": hot_partitions(run),
        "node_class": node_class,
        "broker_nodes": [n for n in node_class if n not in controllers],
        "partition_rows": partition_rows(final_states, (run.results or {}).get("partitions") or []),
        "broker": run.broker,
        "replication": [(p, Markup(charts.partition_state(pe, partition_nodes(pe, nodes, controllers), cluster,
                                                          hw_points, rules.get(p, []))))
                        for p, pe in run.broker.partitions.items()],
        "rule_lanes": any(p in rules for p in run.broker.partitions),
        "excerpt": excerpt_rows(run),
    }


def _files(run: Run) -> dict[str, Any]:
    """The run's files and node logs, the link to the results index, the inlined assets."""
    index_link = None
    root = results_root_of(run.run_dir)
    if root is not None:
        index_link = os.path.relpath(root / "index.html", run.run_dir.resolve()).replace(os.sep, "/")
    return {
        "files": run.files,
        "file_groups": file_groups(run.files),
        "quick_files": [f for f in QUICK_FILES if f in {rel for rel, _size in run.files}],
        "node_logs": [(node, rel) for node, rel in run.broker.logs if rel.endswith("/" + runformat.BROKER_LOG)],
        "index_link": index_link,
        "css": asset("report.css"),
        "js": asset("report.js"),
        "ptl_js": asset("process_timeline.js"),
        "generated": _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def render_report(run: Run) -> str:
    return environment().get_template("report.html.j2").render(**context(run))


def write_report(run_dir: Path) -> Path:
    """Write RUN_DIR/report.html and return its path. Raises runformat.FormatError on bad input."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    html = render_report(run)
    out = run_dir / runformat.REPORT_HTML
    tmp = run_dir / f".{runformat.REPORT_HTML}.{os.getpid()}.tmp"
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out
