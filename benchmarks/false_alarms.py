"""False alarms of the safe configuration: default `highwater run`s must all be VALID, and what the
white-box protocol rules cost their check.

    .venv/bin/python benchmarks/false_alarms.py [--runs 20] [--time-limit 60] [--soak-minutes 0]
        [--seed 1] [--checker spark|reference] [--results-dir DIR] [--json FILE]

Each run is a real `highwater run` with the defaults (leader-epoch truncation, acks=all,
min.insync.replicas 2, flush always, the default rotating nemesis mix), seeds seed, seed+1, ...; then,
with --soak-minutes, one long run of that many minutes. Per run it prints the verdict, the kinds found
(results.json `failed_kinds`, and every protocol kind counted even where the configuration does not
promise it), the acknowledged sends, the faults started, the check's wall time and its "protocol rules"
phase (the Spark engine's time for the white-box rules; the reference engine does them inside its one
phase), and the protocol rows read. A run that is not VALID is a false alarm (or an unknown): its run
directory is printed so it can be looked at. Exit 1 if any run was not VALID.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HIGHWATER = [sys.executable, "-m", "harness.cli"]
sys.path.insert(0, str(ROOT))

from rundir import kinds  # noqa: E402


def _run(args: list[str], results: Path, timeout: float) -> tuple[int, Path | None, float]:
    t0 = time.monotonic()
    proc = subprocess.run([*HIGHWATER, "run", *args, "--results-dir", str(results), "--plain"], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    lines = [l for l in proc.stdout.strip().splitlines() if l.strip()]
    run_dir = Path(lines[-1]).parent if lines and lines[-1].endswith("report.html") else None
    return proc.returncode, run_dir, time.monotonic() - t0


def _faults(run_dir: Path) -> int:
    path = run_dir / "nemesis.jsonl"
    if not path.exists():
        return 0
    n = 0
    for line in path.read_text().splitlines():
        try:
            op = json.loads(line)
        except ValueError:
            continue
        if op.get("type") == "info" and (op.get("value") or {}).get("phase") == "start":
            n += 1
    return n


def describe(code: int, run_dir: Path | None, wall: float) -> dict:
    rec: dict = {"exit": code, "run_dir": str(run_dir) if run_dir else None, "wall_s": round(wall, 1)}
    res_path = run_dir / "results.json" if run_dir else None
    if res_path is None or not res_path.exists():
        rec["verdict"] = "no results"
        return rec
    res = json.loads(res_path.read_text())
    rec["verdict"] = {True: "valid", False: "invalid"}.get(res.get("valid"), "unknown")
    rec["failed"] = res.get("failed_kinds", [])
    rec["protocol_counts"] = {k: res["anomalies"][k]["count"] for k in kinds.PROTOCOL_NAMES
                              if res["anomalies"].get(k, {}).get("count")}
    rec["unknown"] = [u.get("reason") for u in res.get("unknown_reasons", [])][:3]
    rec["acked"] = sum(p.get("acked") or 0 for p in res.get("partitions", []))
    checker = res.get("checker") or {}
    rec["check_s"] = checker.get("elapsed_s")
    rec["protocol_s"] = (checker.get("phases_s") or {}).get("protocol rules")
    rec["faults"] = _faults(run_dir)
    manifest = run_dir / "columnar" / "_manifest.json"
    if manifest.exists():
        rec["skipped_event_lines"] = sum(json.loads(manifest.read_text()).get("skipped_event_lines", {}).values())
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--soak-minutes", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checker", choices=("spark", "reference"), default="spark")
    ap.add_argument("--results-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    results = a.results_dir or Path(tempfile.mkdtemp(prefix="highwater-false-alarms-"))
    print(f"false alarms: results in {results}; {a.runs} runs of {a.time_limit:.0f} s"
          + (f" and a {a.soak_minutes:.0f}-minute soak" if a.soak_minutes else "") + f", checker {a.checker}",
          flush=True)
    records = []
    plan = [(a.seed + i, a.time_limit) for i in range(a.runs)]
    if a.soak_minutes:
        plan.append((a.seed + a.runs, a.soak_minutes * 60))
    for i, (seed, limit) in enumerate(plan, 1):
        args = ["--time-limit", str(limit), "--seed", str(seed), "--checker", a.checker]
        code, run_dir, wall = _run(args, results, timeout=limit * 3 + 900)
        rec = describe(code, run_dir, wall)
        rec.update(seed=seed, time_limit=limit)
        records.append(rec)
        print(f"[{i}/{len(plan)}] seed {seed} {limit:.0f} s: {rec['verdict'].upper()} (exit {code}) "
              f"acked {rec.get('acked')} faults {rec.get('faults')} check {rec.get('check_s')} s "
              f"protocol {rec.get('protocol_s')} s"
              + (f" failed {','.join(rec['failed'])}" if rec.get("failed") else "")
              + (f" protocol kinds {rec['protocol_counts']}" if rec.get("protocol_counts") else "")
              + (f" unknown: {rec['unknown']}" if rec.get("unknown") else "")
              + (f" -> {rec['run_dir']}" if rec["verdict"] != "valid" else ""), flush=True)
        if a.json:
            a.json.write_text(json.dumps(records, indent=2) + "\n")
    bad = [r for r in records if r["verdict"] != "valid"]
    prot = [r["protocol_s"] for r in records if isinstance(r.get("protocol_s"), (int, float))]
    print(f"false alarms: {len(records) - len(bad)} of {len(records)} VALID"
          + (f"; not valid: {[(r['seed'], r['verdict'], r.get('failed')) for r in bad]}" if bad else ""))
    if prot:
        print(f"protocol rules phase: median {statistics.median(prot):.2f} s, max {max(prot):.2f} s "
              f"over {len(prot)} checks")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
