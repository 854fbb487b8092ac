"""The report's charts as SVG strings: timeline, throughput, latency, and per-partition replication state.

All share the time axis (seconds since the test started) and the fault bands: every nemesis fault window
shaded over the plot and labelled above it (labels that would overlap move to a second row, or keep only
their hover title; a label near the right edge ends at the edge; each links to its row in the fault
list). Under the timeline, one band per anomaly kind shows where all of its findings fall in time (the
checker's histograms, reports/totals.py), not just the listed examples. Colours are CSS classes defined
in the report's stylesheet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rundir.kinds import LOST_WRITE
from reports.broker_events import LaneMark, PartitionEvents
from reports.history_scan import FaultWindow, HistorySummary
from reports.svg import Frame, Linear, Log, Margins, esc, fmt_count, fmt_seconds, polyline_path, r1
from reports.totals import KindBand, TimeAxis

WIDTH = 1100
LABEL_ROWS = 2
LABEL_ROW_H = 13
TOP = 8 + LABEL_ROWS * LABEL_ROW_H
MAX_TITLED_POINTS = 1500
LABEL_CHAR_W = 7.0  # a generous estimate of a band label character's width (10.5 px bold)
KIND_ROW_H = 24     # one row per anomaly kind under the timeline: its name and count, then its band
KIND_STRIP_H = 9


def fault_anchor(fault_id: object) -> str:
    """The page id of a fault window (its row in the fault list): `fault-<nemesis value.id>`."""
    return f"fault-{fault_id}"


def _x_scale(frame: Frame, duration_s: float) -> Linear:
    return Linear(0, max(duration_s, 1e-3), frame.left, frame.right_x)


def fault_bands(frame: Frame, x: Linear, faults: list[FaultWindow], *, labels: bool = True) -> None:
    row_end = [-1e9] * LABEL_ROWS
    out = ['<g class="faults">']
    for w in faults:
        x0, x1 = x(w.start_s), x(max(w.stop_s, w.start_s))
        x0, x1 = max(x0, frame.left), min(max(x1, x0 + 1.5), frame.right_x)
        title = (f"{w.label}: {w.start_s:.2f} s to "
                 + (f"{w.stop_s:.2f} s" if w.stop_index is not None else "end (never stopped)")
                 + (f" — {w.detail}" if w.detail else ""))
        out.append(f'<rect class="band f-{esc(w.fault)}" x="{r1(x0)}" y="{r1(frame.top)}" '
                   f'width="{r1(x1 - x0)}" height="{r1(frame.plot_h)}"><title>{esc(title)}</title></rect>')
        if not labels:
            continue
        text = w.label
        est = LABEL_CHAR_W * len(text)
        # a label that would run past the chart's right edge ends at the edge instead (right-aligned)
        right_edge = frame.width - 2
        start = min(x0, right_edge - est)
        anchor = ' text-anchor="end"' if start < x0 else ""
        tx = right_edge if start < x0 else x0
        for row in range(LABEL_ROWS):
            if start > row_end[row] + 8:
                y = frame.top - 4 - (LABEL_ROWS - 1 - row) * LABEL_ROW_H
                out.append(f'<a href="#{esc(fault_anchor(w.id))}"><text class="band-label f-{esc(w.fault)}" '
                           f'x="{r1(tx)}" y="{r1(y)}"{anchor}>{esc(text)}<title>{esc(title)}</title></text></a>')
                row_end[row] = start + est
                break
    out.append("</g>")
    frame.add("".join(out))


def kind_rows(frame: Frame, x: Linear, axis: TimeAxis, bands: list[KindBand], top: float) -> None:
    """Under the timeline, one row per anomaly kind with findings: its name, count and time range, then a
    strip shaded per time bucket by how many findings fall in it (darker: more), each bucket titled with
    its count and time range. Findings with no operation time are only counted in the row's name."""
    out = ['<g class="kinds">']
    right = min(frame.right_x, x(axis.end_s)) if axis.end_s > 0 else frame.right_x
    for n, b in enumerate(bands):
        y = top + n * KIND_ROW_H
        sy = y + KIND_ROW_H - KIND_STRIP_H - 3
        what = "acknowledged" if b.kind == LOST_WRITE.name else "at"
        label = (f"{b.kind}: {b.count:,}" + (f", {what} {fmt_span(b.first_s, b.last_s)}" if b.first_s is not None
                                             else "") + (f", {b.untimed:,} with no time" if b.untimed else ""))
        out.append(f'<g class="krow {"fails" if b.fails_run else "soft"}" data-kind="{esc(b.kind)}">'
                   f'<a href="#kind-{esc(b.kind)}"><text class="kind-label" x="{r1(frame.left)}" y="{r1(sy - 3)}">'
                   f'{esc(label)}</text></a>'
                   f'<rect class="kstrip" x="{r1(frame.left)}" y="{r1(sy)}" width="{r1(max(right - frame.left, 1))}" '
                   f'height="{KIND_STRIP_H}"/>')
        top_count = max(b.counts, default=0) or 1
        for i, c in enumerate(b.counts):
            if not c:
                continue
            t0, t1 = axis.span(i)
            x0 = max(frame.left, x(t0))
            x1 = min(frame.right_x, max(x(t1), x0 + 1.5))
            if x0 >= frame.right_x:
                x0 = frame.right_x - 1.5
            shade = 0.3 + 0.7 * c / top_count
            tip = f"{b.kind}: {c:,} in {t0:.1f}–{t1:.1f} s"
            out.append(f'<rect class="kcell" x="{r1(x0)}" y="{r1(sy)}" width="{r1(max(x1 - x0, 1.5))}" '
                       f'height="{KIND_STRIP_H}" fill-opacity="{shade:.2f}"><title>{esc(tip)}</title></rect>')
        out.append("</g>")
    out.append("</g>")
    frame.add("".join(out))


def fmt_span(a: float | None, b: float | None) -> str:
    """A time range in seconds since the start: '5.9–21 s', '6.2 s' when both ends round alike."""
    if a is None or b is None:
        return ""
    fa, fb = f"{a:.3g}", f"{b:.3g}"
    return f"{fa} s" if fa == fb else f"{fa}–{fb} s"


def timeline(summary: HistorySummary, markers: list[tuple[float, str, int]],
             axis: TimeAxis | None = None, bands: list[KindBand] = ()) -> str:
    """Every sampled client operation: completion time against latency, coloured ok / fail / info; under
    it, when results.json has the checker's histograms, one band per anomaly kind over the same time axis."""
    bands = list(bands) if axis is not None else []
    extra = KIND_ROW_H * len(bands) + 10 if bands else 0
    frame = Frame(WIDTH, 330 + extra, Margins(top=TOP, bottom=30 + extra),
                  label="Timeline of operations: latency by completion time")
    x = _x_scale(frame, summary.duration_s)
    lats = [p.latency_s for p in summary.points if p.latency_s > 0]
    lo = min(lats) if lats else 1e-4
    hi = max(lats) if lats else 1.0
    y = Log(lo * 0.8, hi * 1.25, frame.bottom_y, frame.top)
    fault_bands(frame, x, summary.faults)
    frame.y_axis(y, fmt_seconds, title="latency")
    frame.x_axis(x, title="seconds since start")
    paths: dict[tuple[str, str], list[str]] = {}
    titled: list[str] = []
    for p in summary.points:
        px, py = r1(x(p.t_s)), r1(y(max(p.latency_s, lo)))
        if p.type != "ok" and len(titled) < MAX_TITLED_POINTS:
            tip = f"#{p.index} {p.f} {p.type}" + (f" ({p.error})" if p.error else "") + \
                  f", process {p.process}, {p.t_s:.3f} s, latency {fmt_seconds(p.latency_s)}"
            dot = (f'<circle class="pt {esc(p.type)}" cx="{px}" cy="{py}" r="3.4"><title>{esc(tip)}</title>'
                   '</circle>')
            titled.append(f'<a href="#h-{p.index}">{dot}</a>' if p.index in summary.excerpt else dot)
            continue
        shape = "sq" if p.f == "poll" else "rd"
        paths.setdefault((p.type, shape), []).append(f"M{px} {py}h0")
    clip = f' clip-path="url(#{frame.clip_id()})"'
    density = "sparse" if len(summary.points) < 1500 else "dense"
    body = [f'<g class="points {density}"{clip}>']
    for (typ, shape), segs in sorted(paths.items(), key=lambda kv: {"ok": 0, "info": 1, "fail": 2}.get(kv[0][0], 3)):
        body.append(f'<path class="dots {esc(typ)} {shape}" d="{"".join(segs)}"/>')
    body.extend(titled)
    body.append("</g>")
    frame.add("".join(body))
    if markers:
        mk = ['<g class="markers">']
        for t, kind, n in markers[:150]:
            mx = r1(x(t))
            mk.append(f'<a href="#ex-{esc(kind)}-{n}"><line class="marker" x1="{mx}" y1="{r1(frame.top)}" '
                      f'x2="{mx}" y2="{r1(frame.bottom_y)}"/><path class="marker-head" '
                      f'd="M{mx} {r1(frame.top + 7)}l-4 -7h8z"><title>{esc(kind)} example {n + 1} at '
                      f'{t:.3f} s</title></path></a>')
        mk.append("</g>")
        frame.add("".join(mk))
    if bands:
        kind_rows(frame, x, axis, bands, frame.bottom_y + 32)
    return frame.render()


def throughput(summary: HistorySummary) -> str:
    """Completions per second in each time bucket, stacked ok / info / fail."""
    frame = Frame(WIDTH, 230, Margins(top=TOP), label="Throughput: completed operations per second")
    x = _x_scale(frame, summary.duration_s)
    nb, bs = summary.nbuckets, summary.bucket_s
    stacks = {typ: [0] * nb for typ in ("ok", "info", "fail")}
    for per_type in summary.counts.values():
        for typ, c in per_type.items():
            if typ in stacks:
                s = stacks[typ]
                for i, v in enumerate(c):
                    s[i] += v
    totals = [sum(stacks[t][i] for t in stacks) / bs for i in range(nb)]
    top = max(totals) if totals else 1
    y = Linear(0, max(top * 1.1, 1), frame.bottom_y, frame.top)
    fault_bands(frame, x, summary.faults)
    frame.y_axis(y, fmt_count, title="ops/s")
    frame.x_axis(x, title="seconds since start")
    base = [0.0] * nb
    out = ['<g class="stack">']
    for typ in ("ok", "info", "fail"):
        upper = [base[i] + stacks[typ][i] / bs for i in range(nb)]
        if not any(stacks[typ]):
            continue
        d = []
        for i in range(nb):
            x0, x1 = x(i * bs), x(min((i + 1) * bs, summary.duration_s if i == nb - 1 else (i + 1) * bs))
            d.append(f"{'M' if i == 0 else 'L'}{r1(x0)} {r1(y(upper[i]))}L{r1(x1)} {r1(y(upper[i]))}")
        for i in range(nb - 1, -1, -1):
            x0, x1 = x(i * bs), x(min((i + 1) * bs, summary.duration_s if i == nb - 1 else (i + 1) * bs))
            d.append(f"L{r1(x1)} {r1(y(base[i]))}L{r1(x0)} {r1(y(base[i]))}")
        out.append(f'<path class="area {typ}" d="{"".join(d)}Z"><title>{typ} completions per second'
                   f'</title></path>')
        base = upper
    out.append("</g>")
    frame.add("".join(out))
    return frame.render()


def latency(summary: HistorySummary, f: str) -> str:
    """p50 / p95 / p99 latency of one operation kind per time bucket (log scale)."""
    frame = Frame(WIDTH, 210, Margins(top=TOP), label=f"Latency of {f}: p50, p95, p99")
    x = _x_scale(frame, summary.duration_s)
    series = summary.latency.get(f, [])
    vals = [v for q in series if q for v in q if v > 0]
    lo, hi = (min(vals), max(vals)) if vals else (1e-4, 1.0)
    y = Log(lo * 0.8, hi * 1.25, frame.bottom_y, frame.top)
    fault_bands(frame, x, summary.faults)
    frame.y_axis(y, fmt_seconds, title=f"{f} latency")
    frame.x_axis(x, title="seconds since start")
    bs = summary.bucket_s
    out = [f'<g class="lines" clip-path="url(#{frame.clip_id()})">']
    for qi, name in ((2, "p99"), (1, "p95"), (0, "p50")):
        pts = [None if q is None else (x(min((i + 0.5) * bs, summary.duration_s)), y(max(q[qi], lo)))
               for i, q in enumerate(series)]
        lone = [p for i, p in enumerate(pts) if p is not None
                and (i == 0 or pts[i - 1] is None) and (i == len(pts) - 1 or pts[i + 1] is None)]
        out.append(f'<path class="q {name}" d="{polyline_path(pts)}"><title>{esc(f)} {name}</title></path>')
        for px, py in lone:  # a bucket with no neighbours still shows up
            out.append(f'<circle class="q {name}" cx="{r1(px)}" cy="{r1(py)}" r="1.8"/>')
    out.append("</g>")
    frame.add("".join(out))
    return frame.render()


def thin(series: list, max_points: int) -> list:
    """Every k-th point of a step series, always keeping the last one."""
    if len(series) <= max_points:
        return series
    k = -(-len(series) // max_points)
    out = series[::k]
    if out[-1] is not series[-1]:
        out.append(series[-1])
    return out


@dataclass(frozen=True)
class RuleMark:
    """A protocol finding (an example of a broker/rules kind) on its partition's chart."""
    t: float            # seconds since the start
    kind: str
    n: int              # its example number: the row `ex-<kind>-<n>` of the anomalies section
    node: str
    detail: str
    promised: bool = True


@dataclass(frozen=True)
class ClusterTimeline:
    """What every partition's replication chart draws the same: the run's fault windows and length, each
    node's colour class, and the broker processes' starts and stops (t, node, "start" / "stop")."""
    faults: list[FaultWindow]
    duration_s: float
    node_class: dict[str, str]
    lifecycle: list[tuple[float, str, str]] = ()


LANE_H = 16   # a lane of the replication chart: the leader's, a node's ISR membership, the rules'
HW_H = 130    # the replication chart's HW plot


def partition_state(pe: PartitionEvents, nodes: list[str], cluster: ClusterTimeline, max_points: int = 600,
                    rules: list[RuleMark] = ()) -> str:
    """Leader (with epoch) and ISR membership lanes, truncations, replication exchanges (`lane_mark`), a
    lane of the protocol rules broken on this partition when there are any (`rule_mark`), and each
    replica's HW over time (at most `max_points` HW points per replica: many partitions share the page's
    size budget)."""
    lanes = ["leader"] + nodes + (["rules"] if rules else [])
    lanes_bottom = TOP + LANE_H * len(lanes) + 6
    height = lanes_bottom + HW_H + 44
    end_s = max([cluster.duration_s] + [t for t, *_ in pe.leaders] + [t for t, *_ in pe.isr]
                + [t for t, *_ in pe.truncations] + [m.last for m in pe.marks] + [s[-1][0] for s in pe.hw.values() if s]
                + [m.t for m in rules])
    frame = Frame(WIDTH, height, Margins(top=TOP), label=f"Partition {pe.partition}: leadership, ISR and HW")
    chart = _ReplicationChart(pe, cluster, _x_scale(frame, end_s), end_s)
    fault_bands(frame, chart.x, cluster.faults)
    out = ['<g class="lanes">']
    for i, name in enumerate(lanes):
        ly = TOP + i * LANE_H
        label = "leader" if i == 0 else "rules" if rules and i == len(lanes) - 1 else name + " in ISR"
        out.append(f'<text class="lane-name" x="{r1(frame.left - 6)}" y="{r1(ly + 12)}" text-anchor="end">'
                   f'{esc(label)}</text>')
        out.append(f'<line class="lane-sep" x1="{frame.left}" y1="{r1(ly + LANE_H)}" x2="{frame.right_x}" '
                   f'y2="{r1(ly + LANE_H)}"/>')
    chart.leader_segments(out)
    # ISR membership per node: from ISR changes, else from the ISR carried by leader changes
    isr_series = sorted([(t, isr) for t, isr, _v in pe.isr] + [(t, isr) for t, _l, _e, isr in pe.leaders if isr],
                        key=lambda item: item[0])
    for n_i, node in enumerate(nodes):
        chart.node_lane(out, node, TOP + (n_i + 1) * LANE_H, isr_series)
    if rules:
        ly = TOP + (len(lanes) - 1) * LANE_H
        out.extend(rule_mark(m, chart.x, ly, LANE_H) for m in rules if 0 <= m.t <= end_s)
    out.append("</g>")
    frame.add("".join(out))
    chart.hw_plot(frame, lanes_bottom + 8, max_points)
    return frame.render()


@dataclass(frozen=True)
class _ReplicationChart:
    """One partition's replication chart being drawn: its events, the run's timeline, the x scale, its end."""
    pe: PartitionEvents
    cluster: ClusterTimeline
    x: Linear
    end_s: float

    def leader_segments(self, out: list[str]) -> None:
        """The leader lane: a segment per leadership, labelled with leader and epoch where it fits."""
        pe, x = self.pe, self.x
        for k, (t, leader, epoch, _isr) in enumerate(pe.leaders):
            t_end = pe.leaders[k + 1][0] if k + 1 < len(pe.leaders) else self.end_s
            x0, x1 = x(t), x(t_end)
            cls = self.cluster.node_class.get(str(leader), "nx") if leader is not None else "none"
            label = f"{leader} e{epoch}" if leader is not None else f"none e{epoch}"
            title = f"partition {pe.partition}: leader {leader}, epoch {epoch}, from {t:.3f} s"
            out.append(f'<rect class="seg {cls}" x="{r1(x0)}" y="{r1(TOP + 2)}" width="{r1(max(x1 - x0, 1))}" '
                       f'height="{LANE_H - 4}"><title>{esc(title)}</title></rect>')
            if x1 - x0 > 6.5 * len(label) + 4:
                out.append(f'<text class="seg-label" x="{r1(x0 + 3)}" y="{r1(TOP + 12)}">{esc(label)}</text>')

    def node_lane(self, out: list[str], node: str, ly: float, isr_series: list[tuple[float, list]]) -> None:
        """A node's lane: its ISR membership, its process starts / stops, its truncations, the replication
        exchanges about it."""
        pe, x, end_s = self.pe, self.x, self.end_s
        for k, (t, isr) in enumerate(isr_series):
            if node not in [str(m) for m in isr]:
                continue
            t_end = isr_series[k + 1][0] if k + 1 < len(isr_series) else end_s
            out.append(f'<rect class="seg {self.cluster.node_class.get(node, "nx")} isr" x="{r1(x(t))}" '
                       f'y="{r1(ly + 4)}" width="{r1(max(x(t_end) - x(t), 1))}" height="{LANE_H - 8}"><title>'
                       f'{esc(f"{node} in ISR {sorted(map(str, isr))} from {t:.3f} s")}</title></rect>')
        for t, who, kind in self.cluster.lifecycle:
            if who != node or not 0 <= t <= end_s:
                continue
            tx = r1(x(t))
            shape = f"M{tx} {r1(ly + 3)}l4 6h-8z" if kind == "start" else f"M{r1(x(t) - 3)} {r1(ly + 4)}h6v6h-6z"
            out.append(f'<path class="life {esc(kind)}" d="{shape}"><title>'
                       f'{esc(f"{node} process {kind} at {t:.3f} s")}</title></path>')
        for t, who, frm, to, why in pe.truncations:
            if who != node:
                continue
            tx = r1(x(t))
            out.append(f'<path class="trunc" d="M{tx} {r1(ly + LANE_H - 2)}l-5 -10h10z"><title>'
                       f'{esc(f"{node} truncated partition {pe.partition} from {frm} to {to} ({why}) at {t:.3f} s")}'
                       f'</title></path>')
        for mark in pe.marks:
            if mark.node == node:
                out.append(lane_mark(mark, x, ly, LANE_H))

    def hw_plot(self, frame: Frame, hw_top: float, max_points: int) -> None:
        """Each replica's HW over time, a step line per replica (thinned to max_points points), under the lanes."""
        pe, x = self.pe, self.x
        height = frame.height
        hw_bottom = hw_top + HW_H
        hws = [v for s in pe.hw.values() for _t, v in s]
        hy = Linear(0, max(max(hws, default=1), 1), hw_bottom, hw_top, integer=True)
        sub = Frame(WIDTH, height, Margins(top=hw_top, bottom=height - hw_bottom))
        sub.y_axis(hy, fmt_count, title="HW", target=4)
        sub.x_axis(x, title="seconds since start")
        frame.parts.extend(sub.parts)
        lines = ['<g class="hw">']
        for node, series in sorted(pe.hw.items()):
            series = thin(series, max_points)
            d = []
            prev_y = None
            for t, v in series:
                px, py = x(t), hy(v)
                if prev_y is None:
                    d.append(f"M{r1(px)} {r1(py)}")
                else:
                    d.append(f"H{r1(px)}V{r1(py)}")
                prev_y = py
            if series:
                d.append(f"H{r1(x(self.end_s))}")
            lines.append(f'<path class="hwline {self.cluster.node_class.get(node, "nx")}" d="{"".join(d)}"><title>'
                         f'{esc(node)} HW</title></path>')
        lines.append("</g>")
        frame.add("".join(lines))


# replication exchange marks: CSS class and shape (d relative to the mark's centre) per event kind
MARK_STYLE = {
    "fetch-fenced": ("rmark fenced-fetch", "m-4 -4l8 8m0 -8l-8 8"),           # a cross: refused
    "stale-fetch-served": ("rmark stale-served", "m0 -5l5 5l-5 5l-5 -5z"),    # a diamond: served anyway
    "epoch-query": ("rmark epoch-query", "m-3.5 0a3.5 3.5 0 1 0 7 0a3.5 3.5 0 1 0 -7 0"),
    "epoch-answer": ("rmark epoch-answer", "m-2.5 -2.5h5v5h-5z"),
}


def lane_mark(mark: LaneMark, x: Linear, lane_y: float, lane_h: float) -> str:
    """One aggregated replication mark on a follower's lane: its shape at the first event, a line to the
    last one when they span time, `×count` beside it, and every distinct detail in its hover title."""
    cls, shape = MARK_STYLE.get(mark.kind, ("rmark", "m-3 -3h6v6h-6z"))
    cx, cy = x(mark.first), lane_y + lane_h / 2
    noun = "event" if mark.count == 1 else "events"
    title = (f"{mark.node}: {mark.count} {mark.kind} {noun} in leader epoch {mark.epoch}, "
             f"{mark.first:.3f}" + (f"-{mark.last:.3f}" if mark.last > mark.first else "") + " s\n"
             + "\n".join(mark.details))
    parts = [f'<g class="{cls}">']
    if x(mark.last) - cx >= 2:
        parts.append(f'<line x1="{r1(cx)}" y1="{r1(cy)}" x2="{r1(x(mark.last))}" y2="{r1(cy)}"/>')
    parts.append(f'<path d="M{r1(cx)} {r1(cy)}{shape}"/>')
    if mark.count > 1:
        parts.append(f'<text class="rmark-count" x="{r1(cx + 6)}" y="{r1(cy + 3.5)}">×{mark.count}</text>')
    parts.append(f"<title>{esc(title)}</title></g>")
    return "".join(parts)


def rule_mark(mark: RuleMark, x: Linear, lane_y: float, lane_h: float) -> str:
    """A broken protocol rule on the rules lane: a triangle at its time, linking to its example row, with
    the rule, node and detail in its hover title (hollow when the configuration does not promise it)."""
    cx, cy = x(mark.t), lane_y + lane_h / 2
    title = (f"{mark.kind} at {mark.t:.3f} s ({mark.node}): {mark.detail}"
             + ("" if mark.promised else "\nnot promised by this configuration: reported, not failing"))
    cls = "pmark" if mark.promised else "pmark soft"
    return (f'<a href="#ex-{esc(mark.kind)}-{mark.n}"><path class="{cls}" d="M{r1(cx)} {r1(cy - 5)}l5 9h-10z">'
            f'<title>{esc(title)}</title></path></a>')


def node_classes(nodes: list[str]) -> dict[str, str]:
    """A colour class per node, brokers ("n1", "n2", ...) first so they get the first colours, then others."""
    brokers = [n for n in nodes if re.fullmatch(r"n\d+", n)]
    ordered = brokers + [n for n in nodes if n not in brokers]
    return {n: f"n{i % 8}" for i, n in enumerate(ordered)}


def legend_items(faults: list[FaultWindow]) -> list[str]:
    return sorted({w.fault for w in faults})

