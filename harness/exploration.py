"""Explorations in simulation: the options, one run of the search into the run store, and its output.

`highwater explore` (harness/explore_command.py) and the suite's `explore` entries (harness/suite_file.py,
harness/suite.py) both go through here.

- `OPTIONS` / `parse_options`: the declared options, by their suite-file names (the flags are the same
  with dashes), validated once for both; `ExploreOptions` holds them, `sim_settings` turns them into
  simulator/world.py `SimSettings`.
- `run_exploration`: simulator/explore.py `explore` (every failing schedule), per violated invariant
  the first finding that `shrink_conditions` can keep most of (`pick_findings`; "index", while
  "first_index" is the invariant's first failing schedule), each shrunk
  (simulator/shrink.py, `shrink_conditions`: preferring a schedule the real cluster can replay and, in
  hw mode, one the leader-epoch replay survives) and told as a numbered story with the settle steps
  where the loss happens (simulator/story.py), then
  `<results>/<name>/<timestamp>/` gets explore.json and one scenario file per finding
  (harness/explore_export.py `to_scenario`), and `<results>/<name>/latest` points at it.

explore.json: {format, kind "explore", name, timestamp, argv, code, options, settings (SimSettings),
promises (the invariants the configuration promises), seed, schedules, events, findings_total,
findings_by_invariant, stopped, explore_s, elapsed_s, schedules_per_s, findings: [{invariant, text,
first_text, seed, index, first_index, expected, settled, original_length, shrunk_length, shrunk_for, shrink_s, story,
actions, scenario}], exit_code}. "shrunk_for" says what the shrink kept besides the invariant: "faithful
replay" (no replay gap, harness/explore_export.py `replay_gaps`), "faithful replay, leader-epoch holds
it" / "leader-epoch holds it" (hw mode: the same events in leader-epoch mode do not fail the
invariant, so the story shows the hw bug, not a loss every mode has), or "same invariant only" (the
found schedule itself has gaps and leader-epoch fails it too: nothing stricter could be kept). A finding is "expected" when the configuration does not promise its invariant
(simulator/invariants.py `promises`); it is a finding all the same (exit 1).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from broker.config_keys import parse_acks, sim_keys
from harness.progress import heartbeat
from reports.explore_page import write_explore_page
from reports.index import write_index
from rundir import formats as runformat, store
from rundir.exits import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID
from rundir.settings import Setting, SettingError, declare, did_you_mean

EXPLORE_JSON = runformat.EXPLORE_JSON
FORMAT_VERSION = 1
DEFAULT_NAME = "explore"
DEFAULT_BUDGET_S = 30.0          # neither --schedules nor --budget: explore for this long
SHRUNK_PER_INVARIANT = 1         # findings shrunk and written per violated invariant
PICK_LIMIT = 300                 # findings of an invariant looked at for one that shrink_conditions keeps
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_name(raw: Any) -> str:
    if not isinstance(raw, str) or not raw or raw[0] in "._-" or not set(raw) <= _NAME_CHARS:
        raise ValueError(f"must be letters, digits, '.', '_' or '-', got {raw!r}")
    return raw


# The options of an exploration, by their suite-file names (the flags are the same with dashes): the
# broker keys the simulator models that have a flag (broker/config_keys.py), with a test run's defaults
# and the choices the simulator models, then the client's acks and the search's own.
OPTIONS: dict[str, Setting] = declare(
    *[Setting(k.option, k.setting.type, k.run_default, k.setting.doc,
              **{**k.checks(), **({"choices": k.sim} if isinstance(k.sim, tuple) else {})})
      for k in sim_keys() if k.flag],
    Setting("acks", object, "all", "0, 1 or all", parse=parse_acks, metavar="0|1|all"),
    Setting("replicas", int, 3, "replicas (nodes n1..nN)", min=1, max=9),
    Setting("length", int, 50, "events per schedule", min=1),
    Setting("schedules", object, None, "stop after this many schedules", parse=lambda v: _positive_int(v),
            metavar="INTEGER"),
    Setting("budget", object, None, f"stop after this many seconds [{DEFAULT_BUDGET_S:g} without --schedules]",
            parse=lambda v: _positive_float(v), metavar="SECONDS"),
    Setting("seed", object, None, "seed of the search (default: a fresh one, recorded)",
            parse=lambda v: _int(v), metavar="INTEGER"),
    Setting("workers", int, 1, "processes exploring in parallel", min=1, max=64),
    Setting("shrink_budget", float, 30.0, "seconds to shrink each finding (0: do not shrink)", min=0, finite=True),
)


def _int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"must be an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw)
    raise ValueError(f"must be an integer, got {raw!r}")


def _positive_int(raw: Any) -> int:
    try:
        v = _int(raw)
    except ValueError:
        v = 0
    if v < 1:
        raise ValueError(f"must be an integer of at least 1, got {raw!r}")
    return v


def _positive_float(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"must be a number of seconds above 0, got {raw!r}")
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number of seconds above 0, got {raw!r}") from None
    if not (v > 0) or v == float("inf"):
        raise ValueError(f"must be a number of seconds above 0, got {raw!r}")
    return v


def _budget_s(self) -> float | None:
    """The search's time budget: the one given, else DEFAULT_BUDGET_S when no schedule count is."""
    if self.budget is None and self.schedules is None:
        return DEFAULT_BUDGET_S
    return self.budget


def _describe(self) -> str:
    parts = [self.truncation, f"acks={self.acks}", f"min.insync.replicas={self.min_insync_replicas}"]
    parts.append("unclean election" if self.unclean_election else "no unclean election")
    if not self.fetch_fencing:
        parts.append("no fetch fencing")
    if self.eligible_leader_replicas:
        parts.append("ELR")
    parts += [f"flush={self.flush}", f"{self.replicas} replicas"]
    return ", ".join(parts)


# one field per option, its default the option's
ExploreOptions = dataclasses.make_dataclass(
    "ExploreOptions", [(s.name, s.type, dataclasses.field(default=s.default)) for s in OPTIONS.values()],
    frozen=True, namespace={"budget_s": property(_budget_s), "describe": _describe,
                            "to_json": lambda self: dataclasses.asdict(self), "__module__": __name__})


def parse_options(table: dict[str, Any], *, text: bool = False) -> ExploreOptions:
    """Validate explore options (a suite's `explore = {...}` table, or the flags as strings with `text`).
    Raise SettingError naming the key; cross-field rules are checked too."""
    for key in table:
        if key not in OPTIONS:
            raise SettingError(key, f"is not an explore option (known: {', '.join(OPTIONS)})"
                                    f"{did_you_mean(key, OPTIONS)}", "unknown")
    values = {}
    for key, value in table.items():
        if value is None:
            continue
        values[key] = OPTIONS[key].value(value, text=text)
    opts = ExploreOptions(**values)
    if opts.min_insync_replicas > opts.replicas:
        raise SettingError("min_insync_replicas", f"must be at most the number of replicas ({opts.replicas}), "
                                                  f"got {opts.min_insync_replicas}")
    return opts


# records per simulated follower fetch: a schedule writes a few records, so with a broker's limit (1000) a
# follower always caught up in one fetch and no schedule reached a follower behind the leader's HW
# mid-catch-up (broker/config_keys.py RUN_REPLICA_FETCH_MAX_RECORDS says the same of real runs)
EXPLORE_FETCH_MAX_RECORDS = 2
# the simulated replica lag bound of a search (a broker's own is 2000 ms, broker/config_keys.py): one third
# of the session timeout, so the clock steps a schedule can take (simulator/world.py `advances`: 100, 1001,
# 3001 ms) keep an ISR shrink and a fencing apart and a few events reach either. Measured: with the
# broker's 2000 (steps 100, 2001, 3001) a 30-s search at seed 7 missed checkpoint-hw-unclamped, which
# this finds (benchmarks/mutation.py --methods b).
EXPLORE_REPLICA_LAG_MS = 1000


def sim_settings(opts: ExploreOptions):
    """The simulator/world.py SimSettings of an exploration."""
    from simulator.world import SimSettings
    return SimSettings(replicas=opts.replicas, acks=opts.acks, replica_fetch_max_records=EXPLORE_FETCH_MAX_RECORDS,
                       replica_lag_time_max_ms=EXPLORE_REPLICA_LAG_MS,
                       **{k.sim_name: getattr(opts, k.option) for k in sim_keys() if k.flag})


def _settings_json(settings) -> dict[str, Any]:
    try:
        return dataclasses.asdict(settings)
    except TypeError:
        return dict(vars(settings))


def finding_expected(settings, invariant: str) -> bool:
    """A violation the configuration does not promise to avoid (simulator/invariants.py `promises`:
    e.g. no-acked-loss with acks=1, or committed-prefix-agreement in hw mode): still a finding."""
    from simulator.invariants import promises
    return invariant not in promises(settings)


def promised(settings) -> list[str]:
    from simulator.invariants import INVARIANTS, promises
    kept = promises(settings)
    return [name for name in INVARIANTS if name in kept]


# --- one exploration -----------------------------------------------------------------------------

@dataclass
class ExploreRun:
    run_dir: Path
    path: Path                 # explore.json
    doc: dict[str, Any]
    exit_code: int
    page: Path | None = None   # explore.html (reports/explore_page.py), None when it could not be written


def _invariant_slug(name: str) -> str:
    return "".join(ch if ch in _NAME_CHARS else "-" for ch in name)


FAITHFUL = "faithful replay"
LE_HOLDS = "leader-epoch holds it"
SAME_ONLY = "same invariant only"


def shrink_conditions(settings, finding, *, replay=None) -> tuple[Callable[[list], bool] | None, str, list[str]]:
    """What the shrink of `finding` keeps besides its invariant: (the `also` predicate or None, the
    "shrunk_for" text, the conditions the found schedule does not meet). A condition is used only when the found schedule meets it, so the shrink always
    keeps the finding; without any, the plain shrink ("same invariant only")."""
    from harness.explore_export import renumbered_for, replay_gaps
    if replay is None:
        from simulator.explore import replay
    le = dataclasses.replace(settings, truncation="leader-epoch") if settings.truncation == "hw" else None

    def faithful(actions) -> bool:
        return not replay_gaps(settings, actions)

    def le_holds(actions) -> bool:
        other = renumbered_for(settings, actions, le)
        if other is None:
            return False
        got = replay(le, other)
        return got is None or got.invariant != finding.invariant

    checks = [(FAITHFUL, faithful)] + ([(LE_HOLDS, le_holds)] if le is not None else [])
    kept = [(name, check) for name, check in checks if check(list(finding.actions))]
    missing = [name for name, _c in checks if name not in dict(kept)]
    if not kept:
        return None, SAME_ONLY, missing
    preds = [check for _name, check in kept]
    return (lambda actions: all(p(actions) for p in preds)), ", ".join(name for name, _c in kept), missing


def pick_findings(settings, found: list) -> list[tuple[Any, tuple]]:
    """The findings of one invariant (in schedule order) to shrink, SHRUNK_PER_INVARIANT of them, each
    with its `shrink_conditions`: the first ones that meet every condition, else those that meet the
    most, looking at the first PICK_LIMIT (the earliest wins a tie)."""
    scored = []
    # a finding that breaks a promise the settings make comes before any expected one, whatever its index
    ordered = sorted(found, key=lambda f: bool(getattr(f, "expected", False)))[:PICK_LIMIT]
    for f in ordered:
        cond = shrink_conditions(settings, f)
        expected = bool(getattr(f, "expected", False))
        scored.append((expected, len(cond[2]), len(scored), f, cond))
        if sum(1 for s in scored if s[:2] == (expected, 0)) >= SHRUNK_PER_INVARIANT:
            break
    scored.sort(key=lambda s: s[:3])
    return [(f, cond) for *_key, f, cond in scored[:SHRUNK_PER_INVARIANT]]


def run_exploration(opts: ExploreOptions, *, results_root: Path | str = "results", name: str = DEFAULT_NAME,
                    progress: Callable[..., None] | None = None,
                    say: Callable[[str], None] = lambda _m: None,
                    searched: Callable[[], None] | None = None) -> ExploreRun:
    """Explore, shrink the first finding of each violated invariant, write the scenario files and
    explore.json into a new run directory `<results_root>/<name>/<timestamp>/`; point `latest` at it.
    `progress` follows the search; `searched()` is called when it ends (before shrinking)."""
    settings = sim_settings(opts)
    seed = opts.seed if opts.seed is not None else secrets.randbelow(2**31)
    run = store.create_run_dir(results_root, name)
    say(f"explore {opts.describe()}; seed {seed}, {opts.length} events per schedule, "
        + (f"{opts.schedules} schedules" if opts.schedules else "")
        + (" or " if opts.schedules and opts.budget_s else "")
        + (f"{opts.budget_s:g} s" if opts.budget_s else "")
        + f", {opts.workers} worker{'s' if opts.workers != 1 else ''}, into {run.path}")
    t0 = time.monotonic()
    result = _search(opts, settings, seed, run, progress)
    search = _Searched(seed, result, time.monotonic() - t0)
    if searched is not None:
        searched()
    findings = _shrunk_findings(opts, settings, result, run, say)
    doc = _explore_doc(opts, settings, run, search, findings, elapsed=time.monotonic() - t0)
    path, page = _write_outputs(run, doc, Path(results_root), say)
    return ExploreRun(run_dir=run.path, path=path, doc=doc, exit_code=doc["exit_code"], page=page)


@dataclass(frozen=True)
class _Searched:
    """A finished search: its seed, simulator/explore.py's result and how long it ran (s)."""
    seed: int
    result: Any
    explore_s: float


@dataclass(frozen=True)
class _Shrunk:
    """A finding as shrunk: the smaller schedule (the finding itself without a shrink budget), what the
    shrink kept besides the invariant (explore.json's `shrunk_for`) and how long it took (s)."""
    small: Any
    shrunk_for: str
    shrink_s: float


def _search(opts: ExploreOptions, settings, seed: int, run, progress):
    """simulator/explore.py `explore` over the options' schedules, keeping up to PICK_LIMIT findings of
    each invariant; on an error or Ctrl-C the run directory is removed (no half-empty one stays)."""
    try:
        from simulator.explore import Budget, Keep, SearchSpace, explore
        return explore(settings, SearchSpace(seed, length=opts.length),
                       Budget(schedules=opts.schedules, seconds=opts.budget_s),
                       keep=Keep(first_per_invariant=False, per_invariant=PICK_LIMIT), workers=opts.workers,
                       progress=progress)
    except BaseException:
        shutil.rmtree(run.path, ignore_errors=True)
        raise


def _shrunk_findings(opts: ExploreOptions, settings, result, run, say) -> list[dict[str, Any]]:
    """explore.json's `findings`: per violated invariant (in the order of their first failing schedule) the
    findings `pick_findings` chose, numbered from 1 and shrunk, each with its scenario file written."""
    from harness.explore_export import to_scenario
    every: dict[str, list] = {}
    for f in sorted(result.findings, key=lambda f: f.index):
        every.setdefault(f.invariant, []).append(f)
    out: list[dict[str, Any]] = []
    for invariant, found in every.items():
        for f, conditions in pick_findings(settings, found):
            k = len(out) + 1
            say(f"finding {k}: {invariant} in schedule {f.index} ({len(f.actions)} events"
                + (f"; the first of {len(found)} that meets {conditions[1]}" if f is not found[0] else "")
                + f"); shrinking (up to {opts.shrink_budget:g} s)")
            shrunk = _shrink(opts, settings, k, f, conditions, say)
            scenario_name = f"finding-{k}-{_invariant_slug(invariant)}.toml"
            (run.path / scenario_name).write_text(to_scenario(settings, shrunk.small))
            out.append(_finding_json(settings, found, f, shrunk, scenario_name))
    return out


def _shrink(opts: ExploreOptions, settings, k: int, f, conditions: tuple, say) -> _Shrunk:
    """Finding `k` shrunk for at most the options' shrink budget, keeping `conditions` (`shrink_conditions`:
    also, shrunk_for, missing) when the found schedule itself meets them."""
    from simulator.shrink import ShrinkBudget, shrink
    also, shrunk_for, missing = conditions
    s0 = time.monotonic()
    if opts.shrink_budget > 0:
        with heartbeat(say, f"finding {k}: shrinking"):
            try:
                small = shrink(settings, f, budget=ShrinkBudget(opts.shrink_budget), also=also)
            except ValueError:      # the condition does not hold for the schedule itself after all
                also, shrunk_for, missing = None, SAME_ONLY, [FAITHFUL, LE_HOLDS]
                small = shrink(settings, f, budget=ShrinkBudget(opts.shrink_budget))
    else:
        small = f
    shrink_s = time.monotonic() - s0
    if missing:
        say(f"finding {k}: the found schedule does not meet {' / '.join(missing)} (so the shrink "
            f"cannot keep it): shrunk for {shrunk_for}")
    return _Shrunk(small, shrunk_for, shrink_s)


def _finding_json(settings, found: list, f, shrunk: _Shrunk, scenario_name: str) -> dict[str, Any]:
    """One entry of explore.json's `findings`: finding `f` (of `found`, its invariant's findings) as shrunk."""
    from simulator.story import story
    small, invariant = shrunk.small, f.invariant
    return {
        "invariant": invariant, "text": small.text, "first_text": f.text, "seed": f.seed,
        "index": f.index, "first_index": found[0].index,
        "expected": bool(getattr(small, "expected", finding_expected(settings, invariant))),
        "settled": bool(getattr(f, "settled", False)),
        "original_length": len(f.actions), "shrunk_length": len(small.actions),
        "shrunk_for": shrunk.shrunk_for,
        "shrink_s": round(shrunk.shrink_s, 3), "story": list(story(small.actions, settings, settle=True)),
        "actions": [str(a) for a in small.actions], "scenario": scenario_name}


def _explore_doc(opts: ExploreOptions, settings, run, search: _Searched, findings: list, *,
                 elapsed: float) -> dict[str, Any]:
    """explore.json (module docstring)."""
    result, explore_s = search.result, search.explore_s
    counts: dict[str, int] = dict(result.found)        # every failing schedule, kept or not
    # a search that ran no schedule at all (a budget spent before the first chunk came back) checked
    # nothing: unknown, never "nothing found"
    code = EXIT_INVALID if result.findings else (EXIT_VALID if result.schedules else EXIT_UNKNOWN)
    return {
        "format": FORMAT_VERSION,
        "kind": "explore",
        "name": run.name,
        "timestamp": run.timestamp,
        "argv": store.command_line(),
        "code": store.code_version(),
        "options": opts.to_json(),
        "settings": _settings_json(settings),
        "promises": promised(settings),
        "seed": search.seed,
        "schedules": result.schedules,
        "events": result.events,
        "findings_total": sum(counts.values()),
        "findings_by_invariant": counts,
        "unexpected_by_invariant": dict(getattr(result, "unexpected", {}) or {}),
        "stopped": getattr(result, "stopped", ""),
        "explore_s": round(getattr(result, "elapsed_s", explore_s) or explore_s, 3),
        "elapsed_s": round(elapsed, 3),
        "schedules_per_s": round(result.schedules / explore_s, 1) if explore_s > 0 else None,
        "findings": findings,
        "exit_code": code,
    }


def _write_outputs(run, doc: dict[str, Any], results_root: Path, say) -> tuple[Path, Path | None]:
    """explore.json, `latest`, then the exploration's page and the results index (a failure there loses
    no result: it is said, and the page is None). Returns explore.json's path and the page's."""
    path = run.path / EXPLORE_JSON
    runformat.write_json(path, doc)
    store.update_latest(run)
    page = None
    try:
        page = write_explore_page(run.path)
        write_index(results_root)
    except Exception as exc:  # noqa: BLE001 - the exploration stands; say what did not get written
        say(f"could not write the exploration's page or the results index: {type(exc).__name__}: {exc}")
    return path, page


def summary_line(doc: dict[str, Any]) -> str:
    """`FOUND no-acked-loss (expected), hw-within-leo in 4,210 schedules, 210,500 events, 30.0 s`
    or `NOTHING FOUND in ...`: the verdict line of an exploration."""
    where = (f"in {doc.get('schedules', 0):,} schedules, {doc.get('events', 0):,} events, "
             f"{float(doc.get('explore_s') or 0):.1f} s")
    counts = doc.get("findings_by_invariant") or {}
    if not counts:
        if not doc.get("schedules"):
            return f"NOTHING SEARCHED (unknown) {where}"
        return f"NOTHING FOUND {where}"
    unexpected = doc.get("unexpected_by_invariant")
    if unexpected is None:          # an explore.json from before the split: judge by the shrunk findings
        unexpected = {k: 0 if any(f.get("expected") for f in doc.get("findings") or [] if f["invariant"] == k)
                      else n for k, n in counts.items()}

    def label(k: str, n: int) -> str:
        bad = int(unexpected.get(k, 0))
        words = [f"{n} schedules" if n > 1 else "",
                 "expected" if bad == 0 else (f"{bad} not expected" if bad < n else "")]
        words = [w for w in words if w]
        return k + (f" ({', '.join(words)})" if words else "")

    parts = [label(k, n) for k, n in counts.items()]
    return f"FOUND {', '.join(parts)} {where}"


def print_findings(doc: dict[str, Any], run_dir: Path, echo: Callable[[str], None]) -> None:
    for k, f in enumerate(doc.get("findings") or [], start=1):
        note = " (expected: this configuration does not promise it)" if f.get("expected") else ""
        echo(f"finding {k}: {f['invariant']}{note}: {f['text']}")
        echo(f"  schedule {f['index']} of seed {f['seed']}, {f['original_length']} events, shrunk to "
             f"{f['shrunk_length']} (kept: {f.get('shrunk_for', SAME_ONLY)}):")
        for line in f.get("story") or []:
            echo(f"    {line}")
        echo(f"  scenario file: {Path(run_dir) / f['scenario']}")


