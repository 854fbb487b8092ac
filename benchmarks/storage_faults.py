"""Storage faults (issue 18): detection rate of an unsafe configuration and false alarms of a safe one, under
the corrupt-* nemesis faults (a broker killed, its data files damaged while down, restarted).

    .venv/bin/python benchmarks/storage_faults.py [--runs 10] [--duration 20] [--checker reference]
        [--suite suites/nightly.toml] [--safe storage-faults-safe] [--unsafe NAME]
        [--results-dir .bench/storage-faults]

The safe configuration comes from a suite file (default: nightly's storage-faults-safe, with its nemesis,
workload and broker settings). The unsafe one is, unless --unsafe names another configuration of the
suite, the same with the safety settings of benchmarks/detection_power.py turned off: hw truncation,
acks=1, min.insync.replicas=1, unclean election on (UNSAFE below). Each run is a real `run_test`
(real processes, real SIGKILL, real bytes damaged on disk), shortened to --duration seconds. Run i of both
uses the same seed. Detection rate = unsafe runs whose checker found lost-write or divergence, over runs;
false alarms = safe runs whose verdict is invalid. Runs without a verdict are counted as undecided.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import detection_power  # noqa: E402  (one_run, Stop: the same run and interrupt handling)
from harness.config import with_values  # noqa: E402
from harness.suite_file import load_suite  # noqa: E402

UNSAFE = {"broker.truncation": "hw", "client.acks": 1, "broker.min_insync_replicas": 1,
          "broker.unclean_leader_election": True}


def unsafe_variant(cfg):
    return with_values(cfg, UNSAFE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per configuration [10]")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of workload and faults per run [20]")
    ap.add_argument("--suite", default=str(ROOT / "suites" / "nightly.toml"), help="suite file [suites/nightly.toml]")
    ap.add_argument("--unsafe", default=None, help="unsafe configuration in the suite [the safe one with UNSAFE]")
    ap.add_argument("--safe", default="storage-faults-safe", help="safe configuration in the suite")
    ap.add_argument("--checker", default="reference", choices=("reference", "spark"), help="checker engine [reference]")
    ap.add_argument("--results-dir", default=str(ROOT / ".bench" / "storage-faults"), help="where the runs go")
    ap.add_argument("--seed-base", type=int, default=2000, help="run i uses seed seed-base + i [2000]")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.duration <= 0:
        print("storage_faults: --runs must be >= 1 and --duration > 0", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    detection_power.STOP = stop = detection_power.Stop()

    suite = load_suite(args.suite)
    configs = {c.name: c.cfg for c in suite.configs}
    missing = [n for n in (args.unsafe, args.safe) if n is not None and n not in configs]
    if missing:
        print(f"storage_faults: {args.suite} has no configuration {missing[0]!r} "
              f"(it has: {', '.join(configs)})", file=sys.stderr)
        return 2
    unsafe = configs[args.unsafe] if args.unsafe else unsafe_variant(configs[args.safe])
    sides = [("unsafe", unsafe), ("safe", configs[args.safe])]
    for side, cfg in sides:
        print(f"{side}: truncation={cfg.broker.truncation} acks={cfg.client.acks} "
              f"min.insync={cfg.broker.min_insync_replicas} unclean={cfg.broker.unclean_leader_election} "
              f"faults={','.join(cfg.nemesis.faults)} interval={cfg.nemesis.interval:g}s rate={cfg.workload.rate:g}/s",
              flush=True)
    print(f"{args.runs} runs of {args.duration:g}s each, checker {args.checker}", flush=True)
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(args.runs):
        seed = args.seed_base + i
        for side, cfg in sides:
            if stop.requested:
                break
            r = detection_power.one_run(cfg, f"storage-{side}", args.duration, seed, results_dir, args.checker)
            rows.append({**r, "side": side})
            print(f"{side:6} run {i + 1:2}/{args.runs} seed {seed}: valid={r['valid']} found={r['found']} "
                  f"{r['counts'] or ''} ({r['elapsed_s']:.0f}s) {r['run_dir']}", flush=True)
            (results_dir / "storage-faults.json").write_text(json.dumps(rows, indent=1))
    print()
    for side, _cfg in sides:
        mine = [r for r in rows if r["side"] == side]
        undecided = sum(1 for r in mine if r["valid"] not in (True, False))
        if side == "unsafe":
            hits = sum(1 for r in mine if r["found"])
            print(f"unsafe ({args.unsafe or 'safe + ' + str(UNSAFE)}): detection rate {hits} of {len(mine)} "
                  f"({100 * hits / max(1, len(mine)):.0f}%), undecided {undecided}")
        else:
            alarms = sum(1 for r in mine if r["valid"] is False)
            print(f"safe ({args.safe}): {alarms} false alarms in {len(mine)} runs, undecided {undecided}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
