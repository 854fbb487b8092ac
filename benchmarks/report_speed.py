"""Report generation speed and size on a synthetic run: `python benchmarks/report_speed.py [--ops N]`.

Builds (once, cached under .bench/) a run directory with N history operations (default 1,000,000),
replica dumps, broker event logs and a results.json with anomalies (benchmarks/report_synth.py), then
times `write_report` and prints the generation time, the report's size and peak memory.
Target (issue 6): at most 10 s and 5 MB for 1M operations.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from report_synth import build_run  # noqa: E402

from reports.render import write_report  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000, help="history lines (operations) in the run")
    ap.add_argument("--partitions", type=int, default=4, help="partitions (three replicas each)")
    ap.add_argument("--dir", type=Path, default=HERE.parent / ".bench", help="where the synthetic run is kept")
    ap.add_argument("--rebuild", action="store_true", help="build the synthetic run again")
    ap.add_argument("--repeat", type=int, default=3, help="report generations to time (the best is printed)")
    args = ap.parse_args()

    run = args.dir / f"report-{args.ops}" if args.partitions == 4 else args.dir / f"report-{args.ops}-p{args.partitions}"
    marker = run / "history.jsonl"
    if args.rebuild and run.exists():
        shutil.rmtree(run)
    if not marker.exists():
        t0 = time.perf_counter()
        build_run(run, ops=args.ops, partitions=args.partitions)
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
    print(f"peak memory (RSS): {peak_mb:.0f} MB")
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} (wall time grows with the load; CPU time does not)")
    return 0 if max(times) <= 10 and size <= 5 * 2**20 else 1


if __name__ == "__main__":
    sys.exit(main())
