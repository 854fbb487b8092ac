"""Report generation speed and size on a synthetic run: `python benchmarks/report_speed.py [--ops N ...] [--browser]`.

Builds (once, cached under .bench/) a run directory with N history operations (default 1,000,000),
replica dumps, broker event logs and a results.json with anomalies (benchmarks/report_synth.py), then
times `write_report` and prints the generation time, the report's size, what the per-process timeline
embeds (bytes, per operation and per bar) and peak memory. Several sizes: `--ops 10000 1000000`.
With `--browser`, headless Chromium (tests/reports/report_cdp.py) opens each report a few times and the
script prints the load time: until the process timeline has drawn (the `data-draw-ms` it records, ms since
navigation start) and until the load event, and how long a redraw takes (zoom in, whole run).
Target (issue 6): at most 10 s and 5 MB for 1M operations.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sys
import time
from html import unescape
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from report_synth import Knobs, build_run  # noqa: E402

from reports.render import write_report  # noqa: E402


TIMELINE_ATTRS = re.compile(rb'data-meta="([^"]*)" data-ops="([^"]*)"')


def timeline_figures(html: bytes) -> tuple[int, dict]:
    """(bytes the timeline's two attributes take in the file, its JSON header)."""
    m = TIMELINE_ATTRS.search(html)
    if m is None:
        return 0, {}
    meta = json.loads(unescape(m.group(1).decode()))
    return len(m.group(1)) + len(m.group(2)), meta


def browser_load(report: Path, loads: int) -> dict[str, list[float]]:
    """Open the report `loads` times in fresh pages: first timeline draw, load event, redraw times (ms)."""
    sys.path.insert(0, str(HERE.parent / "tests" / "reports"))
    from report_cdp import Browser  # the browser tests' DevTools driver

    out: dict[str, list[float]] = {"drawn": [], "load": [], "redraw": []}
    settle = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    with Browser(timeout=120) as browser:
        for _ in range(loads):
            page = browser.new_page(width=1360, height=900)
            page.navigate(report.resolve().as_uri())
            drawn = page.evaluate("Number(document.getElementById('ptl').dataset.drawMs)")
            load = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
            out["drawn"].append(drawn)
            out["load"].append(load)
            for button in ("in", "all"):
                page.evaluate(f"document.querySelector('.ptl-tools button[data-zoom={button}]').click()")
                page.evaluate(settle, await_promise=True)
                out["redraw"].append(page.evaluate("Number(document.getElementById('ptl').dataset.lastDrawMs)"))
            browser.send("Page.close", {}, page.session)
    return out


def measure(ops: int, args) -> bool:
    run = args.dir / f"report-{ops}" if args.partitions == 4 else args.dir / f"report-{ops}-p{args.partitions}"
    marker = run / "history.jsonl"
    if args.rebuild and run.exists():
        shutil.rmtree(run)
    if not marker.exists():
        t0 = time.perf_counter()
        build_run(run, Knobs(ops=ops, partitions=args.partitions))
        print(f"built synthetic run {run} in {time.perf_counter() - t0:.1f} s")
    lines = sum(1 for _ in marker.open("rb"))
    sizes = {p.relative_to(run).parts[0]: 0 for p in run.iterdir()}
    for p in run.rglob("*"):
        if p.is_file():
            sizes[p.relative_to(run).parts[0]] += p.stat().st_size
    print(f"run: {lines:,} history lines; history.jsonl {sizes['history.jsonl'] / 2**20:.0f} MB, "
          f"replicas/ {sizes.get('replicas', 0) / 2**20:.0f} MB, nodes/ {sizes.get('nodes', 0) / 2**20:.0f} MB")
    times, cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = write_report(run)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    size = out.stat().st_size
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"report: {out}")
    print(f"generation time: best {min(times):.2f} s, worst {max(times):.2f} s wall over {len(times)} runs; "
          f"CPU {min(cpu):.2f} s (target <= 10 s)")
    print(f"report size: {size / 2**20:.2f} MB ({size:,} bytes) (target <= 5 MB)")
    embedded, meta = timeline_figures(out.read_bytes())
    if meta:
        n_ops, bars = meta["ops"], meta["bars"]
        print(f"process timeline: {embedded:,} bytes embedded ({embedded / max(n_ops, 1):.1f} per operation, "
              f"{embedded / max(bars, 1):.1f} per bar): {bars:,} bars for {n_ops:,} operations in "
              f"{len(meta['lanes']):,} lanes" + (f", runs merged per {meta['slot_us'] / 1000:g} ms slot"
                                                 if meta["runs"] else ", every operation its own bar"))
    print(f"peak memory (RSS): {peak_mb:.0f} MB")
    if args.browser:
        b = browser_load(out, args.loads)
        print(f"headless Chromium over {args.loads} loads: timeline drawn at {min(b['drawn']):.0f}–"
              f"{max(b['drawn']):.0f} ms after navigation start, load event at {min(b['load']):.0f}–"
              f"{max(b['load']):.0f} ms; a redraw (zoom in, whole run) {min(b['redraw']):.1f}–"
              f"{max(b['redraw']):.1f} ms")
    return max(times) <= 10 and size <= 5 * 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, nargs="+", default=[1_000_000], help="history lines (operations) in the run")
    ap.add_argument("--partitions", type=int, default=4, help="partitions (three replicas each)")
    ap.add_argument("--dir", type=Path, default=HERE.parent / ".bench", help="where the synthetic run is kept")
    ap.add_argument("--rebuild", action="store_true", help="build the synthetic run again")
    ap.add_argument("--repeat", type=int, default=3, help="report generations to time (the best is printed)")
    ap.add_argument("--browser", action="store_true", help="also time loading the report in headless Chromium")
    ap.add_argument("--loads", type=int, default=3, help="page loads per report with --browser")
    args = ap.parse_args()
    ok = True
    for n in args.ops:
        if len(args.ops) > 1:
            print(f"--- {n:,} history lines")
        ok = measure(n, args) and ok
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} (wall time grows with the load; CPU time does not)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
