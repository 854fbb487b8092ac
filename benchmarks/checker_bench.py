"""Benchmark of `highwater check`: wall time and peak memory for 1M, 10M and 100M sends (three replicas).

For each size a synthetic run directory (checkers/synthetic.py, Parquet written directly, with the
brokers' and the controller's event logs, 5 injected anomalies of every history kind and every protocol rule,
the "findings == injected set" line below covering both) is generated once into the cache directory (default .bench/, git-ignored), then
`highwater check RUN_DIR` runs end to end as a subprocess (Spark local mode, JVM start-up included) and
so does `highwater check --engine reference` (the single-process reference) where it fits in memory.
Printed per run: wall time, peak RSS of the whole process tree (driver JVM + Python, sampled every
0.1 s from /proc), CPU seconds used, the machine's load average (other work on the machine slows the
wall time down), and whether the findings equal the injected set and the reference's findings.

    .venv/bin/python benchmarks/checker_bench.py [--sizes 1000000,10000000,100000000] [--cache .bench]

Measured 2026-11-22 on the shared 2-core / 24 GiB machine (load average 1-10 from other work meanwhile),
findings equal to the injected set at every size:
  1M sends:   Spark 48-68 s wall, 2.8-2.9 GiB peak, ~75 CPU s; reference 110 s, 3.8 GiB, identical findings
  10M sends:  Spark 116-118 s wall, 2.8-2.9 GiB peak, ~165 CPU s; reference killed by the kernel at 20 GiB
  100M sends: Spark 652 s wall, 3.8 GiB peak, 782 CPU s; reference not run (about 370 GiB)
After the findings union was coalesced to 4 tasks (same day, same findings, results.json identical):
  1M sends:   Spark 41 s wall at load 1.7-2.2; 54 s, 2.91 GiB peak, 76 CPU s at load 3.3-4.2
  10M sends:  Spark 75 s wall at load 2.2-3.0 (105 s before, load 2.7); 91-102 s, 2.95 GiB, 157-159 CPU s
              at load 3.3-4.2. Only ~74 of those CPU s are inside Spark tasks; the rest is JVM start-up, JIT,
              query planning and AQE re-planning, so 45 s on 2 cores needs fewer, simpler query plans.
And with uncompressed local shuffle files (spark_session.py):
  1M sends:   Spark 42.5 s wall, 3.1 GiB peak, 74 CPU s at load 2.9-3.1
  10M sends:  Spark 74.8 s wall, 2.95 GiB peak, 137 CPU s at load 2.9-3.2
Second session (2026-11-22, idle machine, same 10M run; the old code re-measured that day for comparison):
  old code (b990631): 86 s wall, 158 CPU s, 2.96 GiB
  block digests + driver-side example lookups: 90-99 s wall, 163-182 CPU s, 3.4-3.7 GiB; the exact pass
  shuffles 306k rows instead of 29.65M (25 of 2,424 blocks unclean) but per-query code generation, JIT
  warm-up and planning dominate at this size (the same restricted pass: 10.8 s first, 4.0 s second time
  in one JVM), so 10M is not faster yet. 100M not re-measured.
Third session (2026-11-22; the machine's speed drifted by up to 30% between runs of the same code that
day, so old and new code were compared in alternation, 2 rounds each on the same 10M run):
  old code (9ae3d3b): 89.7 and 99.8 s; with the value checks fused and fewer scans: 78.7 and 84.9 s
  with 128Ki-row row groups as well (regenerated runs, findings equal to the injected set at every size):
  1M sends:   Spark 39.8 s wall, 2.46 GiB peak, 69 CPU s
  10M sends:  Spark 73.0 and 73.5 s wall, 3.08-3.2 GiB peak, 132-134 CPU s (target 45 s: not met)
  100M sends: Spark 289.8 s wall, 3.41 GiB peak, 513 CPU s (652 s in the first session)
Fourth session (2026-11-22), the JVM class archive (checkers/jvm_archive.py) on and off in alternation:
  1M sends:   on 37.1 and 38.9 s wall (65-70 CPU s, 2.5-2.6 GiB); off 40.3 and 45.0 s (68-78 CPU s)
  10M sends:  on 60.2, 66.9 and 68.6 s (124-126 CPU s, 2.85-2.89 GiB); off 66.8 and 66.8 s (120-121 CPU s):
              the ~4 s it saves at start-up is inside the drift between runs at this size.
  JIT compilation (-XX:+CITime) is ~84 of ~155 CPU s at 10M; raising the C2 thresholds 10x or 40x,
  transparent huge pages, and a single-long-key join for (partition, value) gave nothing measurable.
Fifth session (2026-11-22), with the JVM's CPU split by thread role (printed since then):
  10M sends:  68.7 s wall, 125.6 CPU s, 2.85 GiB: JIT compiler threads 44.1 (C2 34.8, C1 9.3), executor
              tasks 52.1, GC 4.8, driver and other threads 21.4 (query planning, code generation, py4j)
  1M sends:   34.6-36.9 s wall, 60-66 CPU s: JIT 26-29, tasks 13-15, other 16-18
  100M sends: 315.3 s wall, 554 CPU s, 3.51 GiB: tasks 416.7, JIT 75.9, other 48.7, GC 9.8
  (findings equal to the injected set at every size)
  Cutting CPU did not cut wall time: C2 thresholds x10 took C2 from ~21 to 13 CPU s at 1M and left the
  wall at 35.9 s (35.7-36.9 without). Measured in alternation at 10M, none of these beat the drift
  between identical runs (60-75 s that day): one fused aggregation over the ops table for statistics,
  non-ok sends, ack digests and watermark observations (slower: 13.2 s against 12.7 s for the separate
  queries, 27-32 s when a string max made it a sort aggregate); statistics and non-ok sends fused (slower);
  integer f/type codes instead of strings (same scan time); nonmonotonic-send by mapInArrow over
  file-ordered splits (14.7-16.5 s against 11-15 s for the window); a hash-prefixed window sort; AQE off;
  C1 only (worse, 77-80 s); inlining and escape-analysis limits; the independent families in a side thread
  (worse: 64-68 s against 61-62 s, 10% more CPU); 32Ki-row row groups; narrow per-source digest
  aggregations. No code generation at all: 157 s. Java 25 (Temurin, on this machine): no faster alone;
  with an AOT cache (JEP 483/515) trained on a small check, 5-9% faster (59-68 s against 64-76 s).
2026-11-28, the JIT profile by input size (checkers/spark_driver.jvm_profile), `--drivers private
--profiles auto,tiered --rounds 2`, alternating (other work on the machine meanwhile):
  1M sends:   auto (C1-only: ~5M rows) 44.2 and 44.8 s wall, 53-59 CPU s; tiered 51.1 and 45.6 s, 73-83 CPU s:
              median ratio 0.92, CPU 0.72 (C2's 21-25 CPU s are gone; C1 compiles 5 s instead of 6-7.5)
  10M sends:  auto picks tiered here (~50M rows), so both arms run the same JVM: 206.1 against 216.8 s in
              round 1; round 2 of both was killed by the kernel at 21-22 GiB (the protocol rules' Python
              phase, with tests running beside it): the memory of a 10M check is a known open problem.
2026-12-02, the protocol rules over the events table laid out by partition, quiet rows folded
(checkers/quiet_rows.py), full event logs (six lines a record, 60M at 10M), `--drivers private`,
alternating with the code of 2026-11-30 (cdf3ee2, PYSPARK_PYTHON set for it; load 1.3-3.0):
  10M sends:  new 87.2 and 85.8 s wall, 3.76 and 3.69 GiB peak, 135 CPU s, findings == injected set;
              old 260.1 and 275.6 s, 3.87 and 4.18 GiB, 281-512 CPU s (it misses follower-hw-ahead and
              epoch-outlived-restart: synthetic runs were not yet on one clock). Ratio new/old 0.32.
              The code of 2026-12-01 morning (c3da894) had not finished after 325 s.
  1M sends:   new 34.2 s (77.1 s for c3da894 the same hour); against cdf3ee2 in alternation, median
              wall ratio new/old 0.97 (34.1 against 33.2 s), findings equal.
  The rules' pass itself: 1.7 s a partition of 7.5M lines on one core (it was ~40 s). The same 10M run
  with its events table moved aside, alternated (load 2.1-2.6): without 84.7 and 83.8 s, with 100.6 and
  96.8 s: the event logs' rules cost 13-16 s; the rest of the check is the other families.
  100M sends: 579.4 s wall, 6.32 GiB peak, 797 CPU s, findings == injected set (600M event lines;
              generated in 990 s, 22 GB); the target of 300 s is not met.
2026-12-02, generator 4 (hw-reported-ahead and damaged-record-kept injected too: all 21 rules, 5 each):
  10M sends:  80.0 s wall, 3.8 GiB peak, 126 CPU s (load 1.0-2.2), findings == injected set. Where the time
              goes (a Spark event log of the same check, 84 s): statistics 4 s, block digests 11 s, offsets
              6 s, the union of the history families 31 s (realtime-order's window alone 13-16 s warm), the
              rules 15 s (2.4 s building their extra rows on the driver, 10.6 s of mapInArrow, 2 s the
              anti-join); tasks keep the 2 cores 81% busy (125 task-seconds in 77 s).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rundir import formats as rf  # noqa: E402
from rundir import kinds  # noqa: E402
from checkers import synthetic  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
COMPARED = ("valid", "anomalies", "unseen", "partitions", "stats", "time_axis")


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return out


def _cpu_seconds(stat_file: str) -> float:
    """User + system CPU seconds of a process or thread, from its /proc .../stat file."""
    with open(stat_file) as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def _sample(pids: list[int]) -> tuple[int, dict[int, float]]:
    rss, cpu = 0, {}
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as fh:
                rss += int(fh.read().split()[1]) * PAGE
            cpu[p] = _cpu_seconds(f"/proc/{p}/stat")
        except (OSError, IndexError, ValueError):
            pass
    return rss, cpu


# JVM threads by role, by the start of their name (/proc/PID/task/TID/comm, cut to 15 characters)
THREAD_ROLES = (("C2 Compiler", "jit_c2"), ("C1 Compiler", "jit_c1"), ("GC Thread", "gc"), ("VM Thread", "gc"),
                ("Executor task", "tasks"))


def _threads(pids: list[int], seen: dict[int, tuple[str, float]]) -> None:
    """Record the CPU seconds so far and role of every thread of the JVM among `pids` in `seen` (tid ->
    (role, cpu)); a thread that has ended keeps its last reading."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as fh:
                if fh.read().strip() != "java":
                    continue
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                    name = fh.read().strip()
                secs = _cpu_seconds(f"/proc/{pid}/task/{tid}/stat")
            except (OSError, IndexError, ValueError):  # the thread ended meanwhile
                continue
            role = next((r for prefix, r in THREAD_ROLES if name.startswith(prefix)), "other")
            seen[int(tid)] = (role, secs)


def _service_pids() -> list[int]:
    """The shared driver's supervisor (its process tree holds the driver JVM), if it runs."""
    from checkers import spark_service

    svc = spark_service.status()
    return [svc.pid] if svc else []


def measure(cmd: list[str], env: dict | None = None, shared: bool = False) -> dict:
    """Run `cmd`, sampling its process tree (and with `shared` the shared driver's: its CPU counted from
    now, its whole RSS in the peak)."""
    load0 = os.getloadavg()[0]
    base = {}
    for root in _service_pids() if shared else []:
        for p in _tree(root):
            try:
                base[p] = _cpu_seconds(f"/proc/{p}/stat")
            except (OSError, IndexError, ValueError):
                pass
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    peak, cpu = 0, {}
    threads: dict[int, tuple[str, float]] = {}
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        n = 0
        while not done.is_set():
            pids = set(_tree(proc.pid))  # a starting shared driver is in both trees: counted once
            for root in _service_pids() if shared else []:
                pids.update(_tree(root))
            rss, c = _sample(sorted(pids))
            c = {q: v - base.get(q, 0.0) for q, v in c.items()}
            peak = max(peak, rss)
            cpu.update(c)
            if n % 5 == 0 and not shared:  # every 0.5 s (reading ~100 threads' files costs the machine)
                _threads(list(c), threads)
            n += 1
            time.sleep(0.1)

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    out, err = proc.communicate()
    wall = time.monotonic() - t0
    done.set()
    th.join()
    by_role: dict[str, float] = {}
    for role, secs in threads.values():
        by_role[role] = by_role.get(role, 0.0) + secs
    return {"rc": proc.returncode, "wall_s": round(wall, 1), "peak_rss_gib": round(peak / 2**30, 2),
            "cpu_s": round(sum(cpu.values()), 1),
            "jvm_threads_cpu_s": {r: round(v, 1) for r, v in sorted(by_role.items())}, "load_before": round(load0, 1),
            "load_after": round(os.getloadavg()[0], 1), "stdout": out.strip(), "stderr": err.strip()[-500:]}


def ensure_run(cache: Path, sends: int, k: int) -> tuple[Path, dict]:
    run = cache / f"synthetic-{sends}"
    manifest = run / rf.COLUMNAR_DIR / rf.COLUMNAR_MANIFEST
    if manifest.exists():
        m = json.loads(manifest.read_text())
        if (m.get("sends") == sends and m.get("k") == k and m.get("seed") == 1 and m.get("event_logs")
                and m.get("generator") == synthetic.GENERATOR_VERSION):
            return run, m["expected"]
    t = time.monotonic()
    expected = synthetic.generate(run, sends, k=k, seed=1)
    print(f"  generated {run} in {time.monotonic() - t:.0f} s", flush=True)
    return run, expected


def compare_profiles(cmd: list[str], profiles: list[str], rounds: int) -> list[tuple[str, dict]]:
    """The private driver under each JIT profile, alternating round by round; prints each profile's median
    wall time and its ratio to the last profile's (the old default, when that is `tiered`)."""
    tries, walls = [], {p: [] for p in profiles}
    for r in range(rounds):
        for prof in profiles:
            s = measure(cmd, env=dict(os.environ, HIGHWATER_SPARK_SERVICE="off", HIGHWATER_SPARK_JVM_PROFILE=prof))
            walls[prof].append(s["wall_s"])
            tries.append((f"private, profile {prof}, round {r + 1}", s))
    base = statistics.median(walls[profiles[-1]])
    for prof in profiles:
        med = statistics.median(walls[prof])
        print(f"  profile {prof}: median wall {med:.1f} s over {rounds} ({', '.join(f'{w:.1f}' for w in walls[prof])}); "
              f"ratio to {profiles[-1]} {med / base:.2f}", flush=True)
    return tries


def findings(path: Path) -> dict:
    doc = json.loads(path.read_text())
    return {k: doc[k] for k in COMPARED}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000,100000000")
    ap.add_argument("--cache", default=str(ROOT / ".bench"))
    ap.add_argument("--k", type=int, default=5, help="anomalies injected per kind")
    ap.add_argument("--reference-max", type=int, default=2_000_000,
                    help="largest size the in-memory reference is run at (it needs ~4 KB per send: 1M sends "
                         "peaked at 3.8 GiB, 10M sends were killed by the kernel at 20 GiB on a 24 GiB machine)")
    ap.add_argument("--no-reference", action="store_true", help="run only the Spark checker")
    ap.add_argument("--spark-master", default=None)
    ap.add_argument("--drivers", default="private,shared",
                    help="private: a driver of the check's own (HIGHWATER_SPARK_SERVICE=off, all cold); shared: "
                         "the shared driver, stopped first, so its first check starts it and the second finds it "
                         "running (both printed)")
    ap.add_argument("--profiles", default="",
                    help="with the private driver: JIT profiles to compare (checkers/spark_driver.py), e.g. "
                         "auto,tiered; each is measured --rounds times, alternating, and the median ratios printed")
    ap.add_argument("--rounds", type=int, default=2)
    return ap


def _spark_tries(cmd: list[str], args: argparse.Namespace) -> list[tuple[str, dict]]:
    """The Spark check measured with each driver of --drivers (and each JIT profile with --profiles)."""
    tries = []
    for driver in args.drivers.split(","):
        if driver == "private" and args.profiles:
            tries += compare_profiles(cmd, args.profiles.split(","), args.rounds)
        elif driver == "private":
            tries.append(("private", measure(cmd, env=dict(os.environ, HIGHWATER_SPARK_SERVICE="off"))))
        elif driver == "shared":
            from checkers import spark_service

            spark_service.stop()
            tries.append(("shared, starting it", measure(cmd, shared=True)))
            tries.append(("shared, running", measure(cmd, shared=True)))
        else:
            raise SystemExit(f"--drivers: unknown driver {driver!r} (private, shared)")
    for label, s in tries:
        print(f"  spark ({label}): rc={s['rc']} wall={s['wall_s']} s peak={s['peak_rss_gib']} GiB "
              f"cpu={s['cpu_s']} s load={s['load_before']}->{s['load_after']} | {s['stdout'] or s['stderr']}",
              flush=True)
        if s["jvm_threads_cpu_s"]:
            print(f"  spark JVM CPU by thread role (s; seen at 0.5 s intervals): {s['jvm_threads_cpu_s']}",
                  flush=True)
    return tries


def _matches_injected(out_spark: Path, expected: dict) -> bool:
    """Whether the Spark checker found exactly the anomalies injected (and the committed divergences)."""
    got = findings(out_spark)
    counts = {k: got["anomalies"][k]["count"] for k in rf.ANOMALY_KINDS}
    want = {k: expected[k] for k in rf.ANOMALY_KINDS}
    return counts == want and \
        got["anomalies"][kinds.DIVERGENCE.name]["committed"] == expected["divergence_committed"]


def _reference(highwater: str, run: Path, row: dict, out_spark: Path) -> None:
    """The reference checker measured on the run, and whether the Spark checker's findings are identical."""
    s = row["spark"]
    out_ref = run / "results-reference.json"
    r = measure([highwater, "check", str(run), "--quiet", "--engine", "reference", "--output", str(out_ref)])
    print(f"  reference: rc={r['rc']} wall={r['wall_s']} s peak={r['peak_rss_gib']} GiB cpu={r['cpu_s']} s "
          f"load={r['load_before']}->{r['load_after']} | {r['stdout'] or r['stderr']}", flush=True)
    row["reference"] = r
    if r["rc"] in (0, 1, 2) and s["rc"] in (0, 1, 2):
        row["identical_to_reference"] = findings(out_spark) == findings(out_ref)
        print(f"  spark findings identical to reference (counts, examples, stats): "
              f"{row['identical_to_reference']}", flush=True)


def _size(args: argparse.Namespace, cache: Path, highwater: str, sends: int) -> dict:
    """One size: the run (built or cached), the Spark check, and the reference unless too large."""
    print(f"== {sends:,} sends", flush=True)
    run, expected = ensure_run(cache, sends, args.k)
    out_spark = run / "results-spark.json"
    cmd = [highwater, "check", str(run), "--quiet", "--output", str(out_spark)]
    if args.spark_master:
        cmd += ["--spark-master", args.spark_master]
    tries = _spark_tries(cmd, args)
    s = tries[-1][1]
    row = {"sends": sends, "spark": s}
    if s["rc"] in (0, 1, 2):
        row["spark_matches_injected"] = _matches_injected(out_spark, expected)
        print(f"  spark findings == injected set: {row['spark_matches_injected']}", flush=True)
    if args.no_reference:
        pass
    elif sends <= args.reference_max:
        _reference(highwater, run, row, out_spark)
    else:
        print(f"  reference: skipped above {args.reference_max:,} sends (in memory, ~4 KB per send: "
              f"about {sends * 4000 / 2**30:.0f} GiB here)", flush=True)
    return row


def main() -> int:
    args = _parser().parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    highwater = str(Path(sys.executable).with_name("highwater"))
    rows = [_size(args, cache, highwater, sends) for sends in [int(s) for s in args.sizes.split(",")]]
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
