"""Benchmark: the Spark check of a group history against a plain one of the same size (issue 43's target:
within 1.3x).

Two synthetic runs of N sends (checkers/synthetic.py, the same seed and injections, event logs included)
are generated once into the cache directory: the plain one, and the group shape (`Harness(groups=True)`:
each partition's consumer a member of one group, a commit after every poll, the final committed
offsets). Then `highwater check RUN_DIR` runs on each in alternation, --rounds times, each with a driver
of its own (HIGHWATER_SPARK_SERVICE=off: cold, as benchmarks/checker_bench.py's `private`), measured by
checker_bench.measure. Printed: each check's wall and CPU time, whether its findings equal the injected
set, the median wall time of each, and the ratio group / plain.

    .venv/bin/python benchmarks/group_check_bench.py [--sends 1000000] [--rounds 2] [--cache .bench]

Measured 2026-12-03 on the shared 2-core machine (other work beside it, load 2.0-3.6), 1M sends (2,006,000
plain history lines; 2,010,000 for the group shape: 2,000 commits, 8 final committed reads), findings
equal to the injected set in every check:
  plain 49.8 and 58.0 s wall (57.6, 60.2 CPU s); groups 59.4 and 69.4 s (71.3, 72.8 CPU s):
  median ratio groups/plain 1.19
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from rundir import formats as rf  # noqa: E402
from checkers import synthetic  # noqa: E402
from checker_bench import _matches_injected, measure  # noqa: E402


def ensure(cache: Path, sends: int, k: int, groups: bool) -> tuple[Path, dict]:
    """The run (generated unless cached with this generator, size, k and shape) and its expected counts."""
    run = cache / f"synthetic-{'groups-' if groups else ''}{sends}"
    manifest = run / rf.COLUMNAR_DIR / rf.COLUMNAR_MANIFEST
    if manifest.exists():
        m = json.loads(manifest.read_text())
        if (m.get("sends") == sends and m.get("k") == k and m.get("generator") == synthetic.GENERATOR_VERSION
                and m.get("groups", False) == groups):
            return run, m["expected"]
    t = time.monotonic()
    expected = synthetic.generate(run, sends, k=k, seed=1, harness=synthetic.Harness(groups=groups))
    m = json.loads(manifest.read_text())
    m["groups"] = groups
    manifest.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    rows = sum(1 for _ in (run / rf.COLUMNAR_DIR).glob("*/*.parquet"))
    print(f"  generated {run} ({m['history_lines']:,} history lines, {rows} files) in "
          f"{time.monotonic() - t:.0f} s", flush=True)
    return run, expected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sends", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--k", type=int, default=5, help="anomalies injected per kind")
    ap.add_argument("--cache", default=str(ROOT / ".bench"))
    args = ap.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    highwater = str(Path(sys.executable).with_name("highwater"))
    runs = {shape: ensure(cache, args.sends, args.k, shape == "groups") for shape in ("plain", "groups")}
    walls: dict[str, list[float]] = {shape: [] for shape in runs}
    env = dict(os.environ, HIGHWATER_SPARK_SERVICE="off")
    for r in range(args.rounds):
        for shape, (run, expected) in runs.items():
            out = run / "results-spark.json"
            s = measure([highwater, "check", str(run), "--quiet", "--output", str(out)], env=env)
            ok = s["rc"] in (0, 1, 2) and _matches_injected(out, expected)
            walls[shape].append(s["wall_s"])
            print(f"  round {r + 1} {shape}: rc={s['rc']} wall={s['wall_s']} s cpu={s['cpu_s']} s "
                  f"peak={s['peak_rss_gib']} GiB load={s['load_before']}->{s['load_after']} "
                  f"findings == injected set: {ok} | {s['stdout'] or s['stderr']}", flush=True)
    med = {shape: statistics.median(w) for shape, w in walls.items()}
    print(f"median wall: plain {med['plain']:.1f} s, groups {med['groups']:.1f} s; "
          f"ratio groups/plain {med['groups'] / med['plain']:.2f} (target <= 1.3)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
