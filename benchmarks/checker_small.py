"""Benchmark of the checker's fixed cost: what a user waits for on small runs, Spark next to the reference.

Printed, each Spark figure beside the reference engine's from the same invocation:
1. small real runs (`highwater run` with its defaults and a 60 s time limit, `--runs` of them): the time
   from the end of the final phase (harness.log's "final phase:" line) to results.json inside the run,
   and, per run, `highwater check RUN_DIR --engine reference` from a new process;
2. `highwater check RUN_DIR` of the last run from a new process: with the shared Spark driver stopped
   (all cold), with it running (as after any earlier check), with a private driver
   (HIGHWATER_SPARK_SERVICE=off, the old default), and with the reference engine;
3. the known-answer cases (tests/checkers/checker_scenarios.py), each its own run directory checked
   by its own `highwater check` process, shared driver stopped at the start: total time per engine;
4. with --suite FILE [--only PATTERN]: that suite's wall time and the share of it its runs spent in
   the checker (results.json checker.elapsed_s: ingest and check).
The shared driver used is the install's (checkers/spark_service.py); it is stopped at the start and
left running at the end (it stops itself when idle).

    .venv/bin/python benchmarks/checker_small.py [--runs 5] [--time-limit 60] [--skip-runs] [--skip-cases]

Measured 2026-11-24 (2-core machine; see the closing note of issue 14 for the figures and the loads).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "checkers"))
sys.path.insert(0, str(ROOT / "tests"))          # tests/simulated_runs.py: the run builder

from checkers import spark_service  # noqa: E402

HIGHWATER = [sys.executable, "-m", "harness.cli"]


def _timed(args: list[str], env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env)
    return time.monotonic() - t0, proc


def _check(run_dir: Path, *extra: str, env: dict | None = None) -> tuple[float, str]:
    out = Path(tempfile.mkdtemp(prefix="hw-bench-")) / "results.json"
    wall, proc = _timed([*HIGHWATER, "check", str(run_dir), "-q", "-o", str(out), *extra], env)
    shutil.rmtree(out.parent, ignore_errors=True)
    if proc.returncode not in (0, 1, 2):
        raise SystemExit(f"highwater check {run_dir} {' '.join(extra)} failed ({proc.returncode}): {proc.stderr[-400:]}")
    return wall, proc.stdout.strip()


def _final_phase_end(run_dir: Path) -> float:
    for line in (run_dir / "harness.log").read_text().splitlines():
        if " final phase: waited " in line:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            return stamp.timestamp()
    raise SystemExit(f"{run_dir}/harness.log has no final-phase line")


def small_runs(n: int, time_limit: float, store: Path) -> Path:
    print(f"== {n} small runs (highwater run defaults, --time-limit {time_limit:g}; final phase end -> results.json)")
    spark_service.stop()
    spark_s, ref_s = [], []
    last = None
    for i in range(n):
        wall, proc = _timed([*HIGHWATER, "run", "--time-limit", str(time_limit), "--plain",
                             "--results-dir", str(store)])
        if proc.returncode not in (0, 1, 2):
            raise SystemExit(f"highwater run failed ({proc.returncode}): {proc.stderr[-400:]}")
        run_dir = ROOT / Path(proc.stdout.strip().splitlines()[-1]).parent
        if not run_dir.is_absolute() or not run_dir.exists():
            run_dir = Path(proc.stdout.strip().splitlines()[-1]).parent
        after = (run_dir / "results.json").stat().st_mtime - _final_phase_end(run_dir)
        ref, _ = _check(run_dir, "--engine", "reference")
        lines = sum(1 for _ in open(run_dir / "history.jsonl", "rb"))
        spark_s.append(after)
        ref_s.append(ref)
        print(f"run {i + 1}: {lines} history lines, run {wall:.1f} s wall; final phase -> results.json "
              f"spark {after:.2f} s | reference check {ref:.2f} s", flush=True)
        last = run_dir
    print(f"median: spark {statistics.median(spark_s):.2f} s | reference {statistics.median(ref_s):.2f} s")
    return last


def cold_checks(run_dir: Path) -> None:
    print(f"== highwater check {run_dir.name} from a new process")
    spark_service.stop()
    cold, out = _check(run_dir)
    warm, _ = _check(run_dir)
    warm2, _ = _check(run_dir)
    private, _ = _check(run_dir, env=dict(os.environ, HIGHWATER_SPARK_SERVICE="off"))
    ref, ref_out = _check(run_dir, "--engine", "reference")
    print(f"shared driver stopped (cold) {cold:.2f} s | running {warm:.2f} s, {warm2:.2f} s | "
          f"private driver {private:.2f} s | reference {ref:.2f} s")
    print(f"  spark: {out}\n  reference: {ref_out}")


def known_answer_cases(work: Path) -> None:
    import checker_scenarios as sc
    from simulated_runs import RunBuilder

    print(f"== {len(sc.SCENARIOS)} known-answer cases, one run directory and one highwater check each")
    dirs = []
    for s in sc.SCENARIOS:
        b = RunBuilder()
        s(b, 0)
        dirs.append(b.write(work / s.__name__))
    totals = {}
    for engine in ("spark", "reference"):
        if engine == "spark":
            spark_service.stop()
        t0 = time.monotonic()
        for d in dirs:
            _check(d, "--engine", engine)
        totals[engine] = time.monotonic() - t0
    print(f"total: spark {totals['spark']:.1f} s (shared driver started by the first) | "
          f"reference {totals['reference']:.1f} s")


def suite_share(suite: str, only: str | None, store: Path) -> None:
    print(f"== highwater suite {suite}" + (f" --only {only}" if only else ""))
    args = [*HIGHWATER, "suite", suite, "--results-dir", str(store)] + (["--only", only] if only else [])
    wall, proc = _timed(args)
    summaries = list(store.glob("suites/*/*/suite.json"))
    if not summaries:
        raise SystemExit(f"the suite wrote no suite.json ({proc.returncode}): {proc.stderr[-400:]}")
    doc = json.loads(summaries[0].read_text())
    checking, runs = 0.0, 0
    for cfg in doc.get("configs", []):
        for rep in cfg.get("repeats", []):
            if rep.get("run_dir"):
                res = summaries[0].parent / rep["run_dir"] / "results.json"
                if res.exists():
                    checking += json.loads(res.read_text())["checker"]["elapsed_s"]
                    runs += 1
    print(f"suite exit {proc.returncode}, {runs} runs, wall {wall:.0f} s; checking {checking:.0f} s "
          f"= {100 * checking / wall:.1f}% of the wall time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--run-dir", type=Path, default=None, help="check this run instead of making new ones")
    ap.add_argument("--skip-runs", action="store_true")
    ap.add_argument("--skip-cases", action="store_true")
    ap.add_argument("--suite", default=None, help="also run this suite file and print its checking share")
    ap.add_argument("--only", default=None, help="with --suite: only these configurations")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, shared driver directory {spark_service.directory()}")
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
        run_dir = args.run_dir
        if not args.skip_runs:
            run_dir = small_runs(args.runs, args.time_limit, Path(tmp) / "results")
        if run_dir is not None:
            cold_checks(run_dir)
        if not args.skip_cases:
            known_answer_cases(Path(tmp) / "cases")
        if args.suite:
            suite_share(args.suite, args.only, Path(tmp) / "suite-results")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
