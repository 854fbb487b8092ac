"""Exploration speed and power (issue 19): schedules per minute, time to first failure and shrunk size per
configuration, and a long safe run that must find nothing.

    .venv/bin/python benchmarks/explore_speed.py [--seed 1] [--speed-s 20] [--search-schedules 3000]
        [--shrink-budget 10] [--long-events 1000000] [--workers 2] [--json FILE] [--only NAME ...]

1. speed: schedules of 50 events per minute for 3 replicas (leader-epoch, acks=-1, min ISR 2; and hw,
   acks=1), with workers=1 and workers=2, each for --speed-s seconds (target: >= 5,000/min on 2 cores).
2. per configuration of CONFIGS (hw with acks=1 and acks=-1, the shipped scenarios' bugs, the unsafe
   settings of the other safety levels, and their safe counterparts), within --search-schedules
   schedules (one worker), per invariant: the first finding ("first") and the first finding the fix
   avoids ("fix-avoids": its exact replay under the configuration's fixed settings is possible and does
   not fail that invariant, e.g. a loss that only hw truncation loses, KIP-101's cases). For each: its schedule index, the
   time to it (the search's elapsed time up to that schedule's chunk, taken by the progress callback),
   its length and its length after simulator/shrink.py `shrink` (at most --shrink-budget seconds; a
   fix-avoids finding is shrunk keeping that property), and whether the configuration promises it; then the same with swarm testing (explore's
   SearchSpace(swarm=True)) unless --no-swarm.
3. long safe run: leader-epoch, acks=-1, min ISR 2, clean elections, fencing, flush always, for at least
   --long-events events with --workers processes: events run and findings (must be 0).
Figures depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator import explore as ex  # noqa: E402
from simulator import invariants as inv  # noqa: E402
from harness.exploration import EXPLORE_REPLICA_LAG_MS  # noqa: E402
from simulator.world import SimSettings as _SimSettings  # noqa: E402


def SimSettings(**kw):  # noqa: N802 - the simulator's settings with the replica lag `highwater explore` searches with
    return _SimSettings(**{"replica_lag_time_max_ms": EXPLORE_REPLICA_LAG_MS, **kw})

SAFE = dict(truncation="leader-epoch", acks=-1, min_insync_replicas=2)
# name -> (settings, what it stands for, the settings with the fix: a finding "the fix avoids" is one whose
# exact replay under them is valid and finds nothing)
CONFIGS: dict[str, tuple[dict, str, dict | None]] = {
    "hw-acks1": (dict(truncation="hw", acks=1), "hw truncation, acks=1, min ISR 1; what leader-epoch avoids: "
                 "KIP-101 case 1 (no-acked-loss, seed-data-loss) and case 2 (committed-prefix-agreement, "
                 "seed-divergence)", dict(truncation="leader-epoch", acks=1)),
    "hw-acks-all": (dict(truncation="hw", acks=-1, min_insync_replicas=2), "hw truncation, acks=all, min ISR 2",
                    dict(SAFE)),
    "kip-279": (dict(truncation="kip-101", acks=-1, unclean_leader_election=True),
                "KIP-279: single-round KIP-101 exchange, unclean elections (scenarios/kip-279.toml)",
                dict(truncation="leader-epoch", acks=-1, unclean_leader_election=True)),
    "kafka-7128": (dict(SAFE, isr_join_requires_epoch_start=False),
                   "KAFKA-7128: ISR join on LEO >= HW only, otherwise safe (scenarios/kafka-7128.toml)", dict(SAFE)),
    "kafka-7128-hw": (dict(truncation="hw", acks=-1, min_insync_replicas=2, isr_join_requires_epoch_start=False),
                      "KAFKA-7128 rule off with hw truncation (the scenario's hw mode)",
                      dict(truncation="hw", acks=-1, min_insync_replicas=2)),
    "no-fencing": (dict(SAFE, fetch_fencing=False), "KIP-320 off (KAFKA-6880), otherwise safe", dict(SAFE)),
    "no-elr-power-loss": (dict(SAFE, flush="never"), "KIP-966 off, flush never (power loss), otherwise safe",
                          dict(SAFE, flush="never", eligible_leader_replicas=True)),
    "elr-power-loss": (dict(SAFE, flush="never", eligible_leader_replicas=True),
                       "KIP-966 on, flush never: promised safe", None),
    "unclean": (dict(SAFE, unclean_leader_election=True), "unclean elections on, otherwise safe", dict(SAFE)),
    "safe": (dict(SAFE), "leader-epoch, acks=all, min ISR 2, clean elections: promised safe", None),
}


def fix_avoids(fixed: SimSettings, actions, invariant: str) -> bool:
    """The exact schedule is possible under the fixed settings and does not fail `invariant` there (it may
    fail another one: with acks=1 leader-epoch truncation still loses writes, not prefix agreement)."""
    try:
        got = ex.replay(fixed, actions, raise_invalid=True)
    except ex._sim_errors():
        return False
    return got is None or got.invariant != invariant


def speed(settings: SimSettings, workers: int, seconds: float, seed: int) -> dict:
    r = ex.explore(settings,
                   ex.SearchSpace(seed), ex.Budget(seconds=seconds),
                   keep=ex.Keep(first_per_invariant=False), workers=workers)
    per_min = r.schedules / r.elapsed_s * 60
    return {"workers": workers, "schedules": r.schedules, "events": r.events, "elapsed_s": round(r.elapsed_s, 2),
            "schedules_per_min": round(per_min), "events_per_s": round(r.events / r.elapsed_s),
            "findings": len(r.findings)}


def search(name: str, kw: dict, schedules: int, seed: int, shrink_budget: float, swarm: bool = False) -> dict:
    """Every failing schedule in `schedules`; per invariant the first one, and the first one the fix
    avoids (see CONFIGS), each with its time to find and its shrunk length (the latter shrunk keeping
    "the fix avoids it")."""
    settings = SimSettings(**kw)
    fixed_kw = CONFIGS[name][2]
    fixed = SimSettings(**fixed_kw) if fixed_kw is not None else None
    seen_at: dict[int, float] = {}
    t0 = time.monotonic()

    def progress(n, events, findings):
        now = time.monotonic() - t0
        for f in findings:
            seen_at.setdefault(f.index, now)

    r = ex.explore(settings,
                   ex.SearchSpace(seed, swarm=swarm), ex.Budget(schedules=schedules),
                   keep=ex.Keep(first_per_invariant=False), progress=progress)
    try:
        from simulator.shrink import ShrinkBudget, shrink
    except ImportError:                      # shrinker not there yet
        shrink = None
    picks: list[tuple[str, ex.Finding]] = []
    for f in r.findings:
        if not any(kind == "first" and g.invariant == f.invariant for kind, g in picks):
            picks.append(("first", f))
        if fixed is not None and not any(kind == "fix-avoids" and g.invariant == f.invariant for kind, g in picks):
            if fix_avoids(fixed, f.actions, f.invariant):
                picks.append(("fix-avoids", f))
    rows = []
    for kind, f in picks:
        row = {"kind": kind, "invariant": f.invariant, "schedule": f.index, "schedules_to_find": f.index + 1,
               "time_to_find_s": round(seen_at.get(f.index, r.elapsed_s), 2), "length": len(f.actions),
               "promised": not f.expected, "text": f.text}
        if shrink is not None:
            t1 = time.monotonic()
            also = (lambda acts, inv_name=f.invariant: fix_avoids(fixed, acts, inv_name)) if kind == "fix-avoids" \
                else None
            try:
                small = shrink(settings, f, budget=ShrinkBudget(shrink_budget), also=also)
                row["shrunk"] = len(small.actions)
                row["shrink_s"] = round(time.monotonic() - t1, 2)
                row["story"] = [str(a) for a in small.actions]
            except Exception as exc:        # report, keep measuring the others
                row["shrunk"] = None
                row["shrink_error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    failing = len({f.index for f in r.findings})
    return {"name": name, "swarm": swarm, "settings": kw, "fixed": fixed_kw, "what": CONFIGS[name][1],
            "promises_no_loss": inv.promises_no_loss(settings), "schedules": r.schedules, "events": r.events,
            "failing_schedules": failing, "elapsed_s": round(r.elapsed_s, 2), "findings": rows}


def long_safe(events: int, workers: int, seed: int, length: int = 50) -> dict:
    settings = SimSettings(**SAFE)
    n = -(-events // length)
    r = ex.explore(settings,
                   ex.SearchSpace(seed), ex.Budget(schedules=n),
                   keep=ex.Keep(first_per_invariant=False), workers=workers)
    while r.events < events:                 # a schedule may end early: top up with another seed's schedules
        more = ex.explore(settings,
                          ex.SearchSpace(f"{seed}+"), ex.Budget(schedules=-(-(events - r.events) // length)),
                          keep=ex.Keep(first_per_invariant=False), workers=workers)
        r = ex.ExploreResult(r.schedules + more.schedules, r.events + more.events, r.findings + more.findings,
                             r.elapsed_s + more.elapsed_s, r.stopped)
    return {"settings": SAFE, "schedules": r.schedules, "events": r.events, "elapsed_s": round(r.elapsed_s, 1),
            "findings": [f.describe() for f in r.findings], "workers": workers}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--speed-s", type=float, default=20.0, help="seconds per speed measurement [20]")
    ap.add_argument("--search-schedules", type=int, default=3000, help="schedules per configuration [3000]")
    ap.add_argument("--shrink-budget", type=float, default=10.0, help="seconds per shrink [10]")
    ap.add_argument("--long-events", type=int, default=1_000_000, help="events of the long safe run [1000000]")
    ap.add_argument("--workers", type=int, default=2, help="workers of the long safe run [2]")
    ap.add_argument("--only", nargs="*", default=None, help="parts: speed, search, long, or configuration names")
    ap.add_argument("--swarm", action=argparse.BooleanOptionalAction, default=True,
                    help="search each configuration with swarm testing too [on]")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    return ap


def _usage_error(args: argparse.Namespace, only: set[str] | None) -> str | None:
    """What is wrong with the arguments, or None."""
    if args.speed_s <= 0 or args.search_schedules < 1 or args.long_events < 1 or args.workers < 1:
        return "--speed-s, --search-schedules, --long-events and --workers must be positive"
    unknown = (only or set()) - {"speed", "search", "long"} - set(CONFIGS)
    if unknown:
        return f"--only: unknown part(s) {sorted(unknown)}"
    return None


def _speed_part(args: argparse.Namespace) -> list[dict]:
    """Part 1: schedules per minute, safe and hw settings, with one and two workers."""
    rows = []
    for label, kw in (("leader-epoch acks=all minISR=2", SAFE), ("hw acks=1", dict(truncation="hw", acks=1))):
        for w in (1, 2):
            row = {"settings": label, **speed(SimSettings(**kw), w, args.speed_s, args.seed)}
            rows.append(row)
            print(f"speed  {label:32} workers={w}: {row['schedules_per_min']:>7,} schedules/min "
                  f"({row['events_per_s']:,} events/s, {row['schedules']:,} schedules in {row['elapsed_s']} s)",
                  flush=True)
    return rows


def _print_search(name: str, swarm: bool, res: dict) -> None:
    head = (f"search {name + (' swarm' if swarm else ''):24} {res['schedules']:,} schedules in "
            f"{res['elapsed_s']} s, {res['failing_schedules']} failing; "
            f"promises no loss: {res['promises_no_loss']}")
    print(head, flush=True)
    if not res["findings"]:
        print("         no finding", flush=True)
    for f in res["findings"]:
        shrunk = f.get("shrunk", "-")
        print(f"         {f['kind']:10} {f['invariant']:27} schedule {f['schedule']:>5} {f['time_to_find_s']:>6} s "
              f"{f['length']:>3} events -> shrunk {shrunk:>3}  "
              f"{'PROMISED ' if f['promised'] else ''}{f['text'][:80]}", flush=True)


def _search_part(args: argparse.Namespace, names: list[str]) -> list[dict]:
    """Part 2: each configuration searched (and with swarm testing unless --no-swarm)."""
    rows = []
    for name, swarm in [(n, sw) for n in names for sw in ((False, True) if args.swarm else (False,))]:
        res = search(name, CONFIGS[name][0], args.search_schedules, args.seed, args.shrink_budget, swarm)
        rows.append(res)
        _print_search(name, swarm, res)
    return rows


def _long_part(args: argparse.Namespace) -> dict:
    """Part 3: the long safe run, which must find nothing."""
    res = long_safe(args.long_events, args.workers, args.seed)
    print(f"long   safe leader-epoch: {res['events']:,} events in {res['schedules']:,} schedules, "
          f"{res['elapsed_s']} s, workers={res['workers']}: {len(res['findings'])} findings", flush=True)
    for f in res["findings"][:5]:
        print(f"         {f}")
    return res


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    only = set(args.only) if args.only else None
    error = _usage_error(args, only)
    if error:
        print(f"explore_speed: {error}", file=sys.stderr)
        return 2
    out: dict = {"seed": args.seed}

    def want(part: str) -> bool:
        return only is None or part in only

    if want("speed"):
        out["speed"] = _speed_part(args)
    names = [n for n in CONFIGS if want("search") or (only and n in only)]
    if names:
        out["search"] = _search_part(args, names)
    if want("long"):
        out["long"] = _long_part(args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
