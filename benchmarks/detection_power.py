"""Detection power of random-nemesis runs, and false alarms of the safe configuration under the same faults.

    .venv/bin/python benchmarks/detection_power.py [--runs 10] [--durations 30,60]
        [--suite suites/nightly.toml] [--config hw-truncation] [--checker reference] [--results-dir .bench/detection]

The HW-truncation configuration is taken from a suite file (default: nightly's `hw-truncation`, with its
nemesis, workload and broker settings). The safe configuration is the same configuration with only the
four safety settings changed: leader-epoch truncation, acks=all, min.insync.replicas=2, no unclean
election. Run i of both uses the same seed, so both see the same random fault sequence.

For each duration: detection power = runs of the HW configuration whose checker found lost-write or
divergence, over runs; false alarms = runs of the safe configuration whose verdict is invalid. Runs whose
verdict is not decided (no results, or unknown) are counted and printed separately. Each run is a real
`run_test` (real processes, SIGKILL, power-loss emulation); the checker engine defaults to the
single-process reference checker so forty runs fit in an evening (--checker spark for the real thing).
"""
from __future__ import annotations

import argparse
import copy
import json
import logging
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.config import TestConfig, with_values  # noqa: E402
from harness.runner import run_test  # noqa: E402
from harness.suite_file import load_suite  # noqa: E402
from rundir import kinds  # noqa: E402

SAFE = {"broker.truncation": "leader-epoch", "client.acks": "all", "broker.min_insync_replicas": 2,
        "broker.unclean_leader_election": False}
FOUND = (kinds.LOST_WRITE.name, kinds.DIVERGENCE.name)


def safe_variant(cfg: TestConfig) -> TestConfig:
    return with_values(cfg, SAFE)


class Stop:
    """SIGINT/SIGTERM: end the run in progress cleanly (heal, stop its processes) and start no other."""

    def __init__(self):
        self.requested, self.session = False, None
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.handle)

    def handle(self, signum, _frame):
        self.requested = True
        print(f"detection_power: {signal.Signals(signum).name}: stopping after the run in progress", flush=True)
        if self.session is not None:
            self.session.request_interrupt(signal.Signals(signum).name)

    def hook(self, session):
        self.session = session


STOP: Stop | None = None


def one_run(cfg: TestConfig, name: str, duration: float, seed: int, results_dir: Path, checker: str) -> dict:
    cfg = copy.deepcopy(cfg)
    cfg.name, cfg.time_limit, cfg.seed = name, float(duration), seed
    cfg.results_dir, cfg.checker.engine = str(results_dir), checker
    t0 = time.monotonic()
    outcome = run_test(cfg, session_hook=STOP.hook if STOP else None)
    res = outcome.results or {}
    counts = {k: v.get("count", 0) for k, v in (res.get("anomalies") or {}).items()
              if isinstance(v, dict) and v.get("count", 0)}
    return {"config": name, "duration": duration, "seed": seed, "exit_code": outcome.exit_code,
            "valid": res.get("valid") if outcome.results is not None else None, "counts": counts,
            "found": any(counts.get(k, 0) > 0 for k in FOUND), "elapsed_s": round(time.monotonic() - t0, 1),
            "run_dir": str(outcome.run_dir), "problems": outcome.problems[:3]}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per configuration and duration [10]")
    ap.add_argument("--durations", default="30,60", help="comma-separated run lengths in seconds [30,60]")
    ap.add_argument("--suite", default=str(ROOT / "suites" / "nightly.toml"), help="suite file to take the HW "
                    "configuration from [suites/nightly.toml]")
    ap.add_argument("--config", default="hw-truncation", help="configuration name in that suite [hw-truncation]")
    ap.add_argument("--checker", default="reference", choices=("reference", "spark"), help="checker engine [reference]")
    ap.add_argument("--results-dir", default=str(ROOT / ".bench" / "detection"), help="where the runs go")
    ap.add_argument("--seed-base", type=int, default=1000, help="run i uses seed seed-base + i [1000]")
    ap.add_argument("--only", choices=("hw", "safe"), default=None, help="measure one side only")
    return ap


def _print_configuration(args: argparse.Namespace, hw: TestConfig) -> None:
    print(f"HW configuration {args.config} from {args.suite}: truncation={hw.broker.truncation} acks={hw.client.acks} "
          f"min.insync={hw.broker.min_insync_replicas} unclean={hw.broker.unclean_leader_election} "
          f"flush={hw.broker.flush} faults={','.join(hw.nemesis.faults)} interval={hw.nemesis.interval:g}s "
          f"rate={hw.workload.rate:g}/s; safe: same with {SAFE}; checker {args.checker}", flush=True)


def _run_all(args: argparse.Namespace, sides: list[tuple[str, TestConfig]], durations: list[float],
             results_dir: Path) -> list[dict]:
    """Run i of every side with seed seed-base + i, per duration, until a stop is requested; detection.json
    rewritten after each run."""
    rows = []
    for duration in durations:
        for i in range(args.runs):
            if STOP.requested:
                break
            seed = args.seed_base + i
            for side, cfg in sides:
                if STOP.requested:
                    break
                r = one_run(cfg, f"detect-{side}", duration, seed, results_dir, args.checker)
                rows.append({**r, "side": side})
                print(f"{side:4} {duration:4.0f}s run {i + 1:2}/{args.runs} seed {seed}: valid={r['valid']} "
                      f"found={r['found']} {r['counts'] or ''} ({r['elapsed_s']:.0f}s) {r['run_dir']}", flush=True)
                (results_dir / "detection.json").write_text(json.dumps(rows, indent=1))
    return rows


def _print_table(rows: list[dict], sides: list[tuple[str, TestConfig]], durations: list[float]) -> None:
    """Per duration and side: detection power (hw) or false alarms (safe), and the undecided runs."""
    print()
    print(f"{'duration':>8}  {'configuration':<13} {'runs':>4}  {'found lost/divergent':>20}  {'undecided':>9}")
    for duration in durations:
        for side, _cfg in sides:
            mine = [r for r in rows if r["side"] == side and r["duration"] == duration]
            undecided = sum(1 for r in mine if r["valid"] not in (True, False))
            if side == "hw":
                hits = sum(1 for r in mine if r["found"])
                label = f"{hits} of {len(mine)} ({100 * hits / max(1, len(mine)):.0f}%)"
                print(f"{duration:>7.0f}s  {'hw-truncation':<13} {len(mine):>4}  {label:>20}  {undecided:>9}")
            else:
                alarms = sum(1 for r in mine if r["valid"] is False)
                label = f"{alarms} false alarms"
                print(f"{duration:>7.0f}s  {'safe':<13} {len(mine):>4}  {label:>20}  {undecided:>9}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    global STOP
    STOP = Stop()

    suite = load_suite(args.suite)
    match = [c for c in suite.configs if c.name == args.config]
    if not match:
        print(f"detection_power: {args.suite} has no configuration {args.config!r} "
              f"(it has: {', '.join(c.name for c in suite.configs)})", file=sys.stderr)
        return 2
    hw = match[0].cfg
    safe = safe_variant(hw)
    durations = [float(d) for d in args.durations.split(",") if d.strip()]
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    sides = [(n, c) for n, c in (("hw", hw), ("safe", safe)) if args.only in (None, n)]
    _print_configuration(args, hw)
    rows = _run_all(args, sides, durations, results_dir)
    _print_table(rows, sides, durations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
