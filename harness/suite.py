"""Running a suite: its configurations one after another, within an optional time budget, judged
against their expectations, with the suite's artifacts written as it goes.

    results/suites/<suite>/<timestamp>/
      suite.json        the summary below (rewritten after every configuration, so a suite cut short
                        still leaves a readable record; earlier ones feed the suite page's trend)
      junit.xml         harness/junit.py
      suite.html        reports/suite_page.py: the safety matrix, the configurations, the trend
      index.html        the reports' index of this suite's runs
      <configuration>/<timestamp>/   one run directory per repeat (docs/formats.md), with report.html
    results/suites/<suite>/latest -> <timestamp>

Each repeat is a whole run through the run lifecycle (harness/lifecycle.py): `harness.runner.run_test`,
or `harness.scenario_runner.run_scenario` for a configuration that replays a scenario file; an explore
configuration's repeat is one exploration in simulation instead (harness/exploration.py
`run_exploration`: `<configuration>/<timestamp>/explore.json` and its scenario files). The budget
is checked before each configuration: it starts only when all its repeats are expected to fit in what
is left (time limit plus the checking and recovery overhead seen so far); otherwise it is reported as
skipped. A run in progress is never cut.
"""
from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
import fnmatch
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from broker.errors import HighwaterError
from rundir import expectation
from rundir.verdict import verdict_line
from harness import junit
from harness import scenario as scenario_mod
from harness.runner import run_test
from harness.scenario_runner import run_scenario
from harness.suite_expect import (RepeatResult, evaluate, repeat_from_explore, repeat_from_results,
                                  suite_exit_code)
from harness.suite_file import Suite, SuiteConfig
from reports.index import write_index
from reports.suite_page import write_suite_page
from rundir import formats as runformat, store

SUITES_DIR = "suites"
SUMMARY_JSON = "suite.json"
JUNIT_XML = "junit.xml"
SUITE_HTML = "suite.html"
FORMAT_VERSION = 1
# first guess of what a run costs beyond its time limit (start-up, final phase, checker), by checker engine
OVERHEAD_GUESS_S = {"reference": 20.0, "spark": 30.0}
# an explore configuration bounded by a schedule count only: schedules per second assumed for the budget
EXPLORE_RATE_GUESS = 50.0


@dataclass
class ConfigOutcome:
    config: SuiteConfig
    status: str = "pending"
    message: str = "not run yet"
    repeats: list[RepeatResult] = field(default_factory=list)
    elapsed_s: float = 0.0
    planned: int = 0

    def to_json(self) -> dict[str, Any]:
        c = self.config
        out = {"name": c.name, "test": c.test, "row": c.row, "column": c.column, "description": c.description,
               "expect": c.expect.to_json(), "settings": _jsonable(c.settings), "repeats_planned": self.planned,
               "time_limit": c.cfg.time_limit, "status": self.status, "message": self.message,
               "elapsed_s": round(self.elapsed_s, 3), "repeats": [r.to_json() for r in self.repeats]}
        if c.explore is not None:
            out["kind"] = "explore"
            out["explore"] = c.explore.to_json()
        return out


def _jsonable(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.items()}


def select(configs: list[SuiteConfig], only: str | None) -> list[SuiteConfig]:
    """Configurations whose name matches one of the comma-separated patterns (shell globs; a pattern
    without glob characters matches names that contain it)."""
    if not only:
        return list(configs)
    patterns = [p.strip() for p in only.split(",") if p.strip()]
    globs = [p if any(ch in p for ch in "*?[") else f"*{p}*" for p in patterns]
    return [c for c in configs if any(fnmatch.fnmatchcase(c.name, g) for g in globs)]


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class SuiteOptions:
    """What `highwater suite` is asked besides the file: `repeat` runs per configuration (None: each
    configuration's own repeats), `only` the name patterns of the configurations to run (`select`),
    `budget_s` the total time budget (None: no budget)."""
    repeat: int | None = None
    only: str | None = None
    budget_s: float | None = None


@dataclass(frozen=True)
class EntryRunners:
    """How each kind of configuration runs a repeat (None: the real one; tests pass stand-ins):
    `run(cfg, session_hook=..., extra_record=...)` is harness.runner.run_test, `scenario(path, cfg,
    session_hook=..., extra_record=...)` is `run_suite_scenario` and `explore(opts, results_root=...,
    name=...)` is `run_suite_explore` (harness/exploration.py `run_exploration`)."""
    run: Callable[..., Any] | None = None
    scenario: Callable[..., Any] | None = None
    explore: Callable[..., Any] | None = None


@dataclass(frozen=True)
class SuiteDisplay:
    """What the user sees of a suite: `say(line)` for each line of news, `follow(session)` a progress
    display (with close()) for each run, `follow_explore(options)` a progress callback (with close())
    for each exploration; None: no progress display."""
    say: Callable[[str], None] = lambda _m: None
    follow: Callable[[Any], Any] | None = None
    follow_explore: Callable[[Any], Any] | None = None


class SuiteRun:
    """One execution of a suite, with its `SuiteOptions`, its configurations' `EntryRunners` and what it
    shows (`SuiteDisplay`); `clock` times the repeats and the budget."""

    def __init__(self, suite: Suite, results_root: Path | str = "results", options: SuiteOptions = SuiteOptions(),
                 *, runners: EntryRunners = EntryRunners(), display: SuiteDisplay = SuiteDisplay(),
                 clock: Callable[[], float] = time.monotonic):
        self.suite = suite
        self.results_root = Path(results_root)
        self.options = options
        self.say, self.clock = display.say, clock
        self.follow = display.follow                   # session -> a progress display (with close()) for each run
        self.follow_explore = display.follow_explore   # explore options -> a progress callback (with close())
        self.run_fn = runners.run or run_test
        self.scenario_fn = runners.scenario or run_suite_scenario
        self.explore_fn = runners.explore or run_suite_explore
        self.selected = select(suite.configs, options.only)
        self.outcomes = [ConfigOutcome(c, planned=options.repeat or c.repeats) for c in self.selected]
        self.interrupt = threading.Event()
        self.session = None                    # the run in progress (for interrupts)
        self.overheads: dict[str, list[float]] = {}
        self.problems: list[str] = []
        self.dir: store.RunDir | None = None
        self.started_wall = time.time()
        self.started = clock()
        self.finished_wall: float | None = None

    # --- interrupts --------------------------------------------------------------------------------------
    def request_interrupt(self, reason: str) -> None:
        self.interrupt.set()
        session = self.session
        if session is not None:
            session.request_interrupt(reason)

    # --- budget --------------------------------------------------------------------------------------------
    def estimate_run_s(self, c: SuiteConfig) -> float:
        if c.explore is not None:   # the search's bound, and one shrink's budget
            o = c.explore
            search = o.budget_s if o.budget_s is not None else o.schedules / EXPLORE_RATE_GUESS
            if o.budget_s is not None and o.schedules is not None:
                search = min(search, o.schedules / EXPLORE_RATE_GUESS)
            return search + o.shrink_budget + 5.0
        engine = c.cfg.checker.engine
        seen = self.overheads.get(engine)
        overhead = sum(seen) / len(seen) if seen else OVERHEAD_GUESS_S.get(engine, 60.0)
        return c.cfg.time_limit + overhead

    def left_s(self) -> float | None:
        return None if self.options.budget_s is None else self.options.budget_s - (self.clock() - self.started)

    # --- the whole suite ----------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        assert self.dir is not None
        return self.dir.path

    def start(self) -> Path:
        self.dir = store.create_run_dir(self.results_root / SUITES_DIR, self.suite.name)
        self.write_artifacts(status="running")
        return self.dir.path

    def run(self) -> int:
        if self.dir is None:
            self.start()
        total = len(self.outcomes)
        for i, outcome in enumerate(self.outcomes, start=1):
            c = outcome.config
            if self.interrupt.is_set():
                outcome.status, outcome.message = "skipped", "not run: the suite was interrupted"
                continue
            left = self.left_s()
            need = outcome.planned * self.estimate_run_s(c)
            if left is not None and need > left:
                outcome.status = "skipped"
                outcome.message = (f"not run: needs about {need:.0f}s ({outcome.planned} x {c.cfg.time_limit:g}s "
                                   f"runs), {max(0.0, left):.0f}s of the {self.options.budget_s:g}s budget left")
                self.say(f"[{i}/{total}] {c.name}: skipped ({outcome.message})")
                self.write_artifacts(status="running")
                continue
            t0 = self.clock()
            for k in range(1, outcome.planned + 1):
                if self.interrupt.is_set():
                    break
                self.say(f"[{i}/{total}] {c.name}: repeat {k}/{outcome.planned} "
                         f"({c.expect.describe()}, {c.column}, {c.cfg.time_limit:g}s)")
                outcome.repeats.append(self.run_one(c, k))
                r = outcome.repeats[-1]
                line = r.line or verdict_line(None, exit_code=r.exit_code, reasons=r.problems, prefix="")
                self.say(f"[{i}/{total}] {c.name}: repeat {k}: {line} · {r.elapsed_s:.0f} s in all")
            outcome.elapsed_s = self.clock() - t0
            if not outcome.repeats:
                outcome.status, outcome.message = "skipped", "not run: the suite was interrupted"
            else:
                outcome.status, outcome.message = evaluate(c.expect, outcome.repeats)
            self.say(f"[{i}/{total}] {c.name}: {outcome.status.upper()}: {outcome.message}")
            self.write_artifacts(status="running")
        self.finished_wall = time.time()
        code = self.exit_code()
        self.write_artifacts(status="interrupted" if self.interrupt.is_set() else "done")
        return code

    def exit_code(self) -> int:
        return suite_exit_code([o.status for o in self.outcomes])

    def run_one(self, c: SuiteConfig, k: int) -> RepeatResult:
        if c.explore is not None:
            return self.explore_one(c, k)
        cfg = copy.deepcopy(c.cfg)
        cfg.name = c.name
        cfg.results_dir = str(self.path)
        if c.cfg.seed is not None:
            cfg.seed = c.cfg.seed + k - 1
        t0 = self.clock()

        following = []

        def hook(session):
            self.session = session
            if self.follow is not None:
                following.append(self.follow(session))
            if self.interrupt.is_set():
                session.request_interrupt("suite interrupted")

        try:
            if c.scenario is not None:
                outcome = self.scenario_fn(c.scenario, cfg, session_hook=hook, extra_record=expect_record(c))
            else:
                outcome = self.run_fn(cfg, session_hook=hook, extra_record=expect_record(c))
        except HighwaterError as exc:  # refused before it began (its cluster stopped answering): say so
            self.problems.append(f"{c.name} repeat {k}: {exc}")
            return RepeatResult(index=k, exit_code=exc.exit_code, valid=None, seed=cfg.seed,
                                elapsed_s=self.clock() - t0, problems=[f"not run: {exc}"])
        except Exception as exc:  # noqa: BLE001 - run_test cleans up itself; record and go on
            self.problems.append(f"{c.name} repeat {k}: {type(exc).__name__}: {exc}")
            return RepeatResult(index=k, exit_code=255, valid=None, seed=cfg.seed, elapsed_s=self.clock() - t0,
                                problems=[f"internal error: {type(exc).__name__}: {exc}"])
        finally:
            self.session = None
            for display in following:
                display.close()
        elapsed = self.clock() - t0
        if not getattr(outcome, "interrupted", False):  # what a run costs beyond its time limit, checked or not
            self.overheads.setdefault(cfg.checker.engine, []).append(max(0.0, elapsed - cfg.time_limit))
        run_dir = Path(outcome.run_dir)
        report = Path(outcome.report)
        return repeat_from_results(
            k, outcome.exit_code, outcome.results, run_dir=self._rel(run_dir),
            report=self._rel(report) if report.exists() else None, seed=cfg.seed, elapsed_s=elapsed,
            problems=(["interrupted"] if getattr(outcome, "interrupted", False) else []) + list(outcome.problems))

    def explore_one(self, c: SuiteConfig, k: int) -> RepeatResult:
        """One exploration of an explore configuration: repeat k uses seed + k - 1 when the entry has a
        seed, else a fresh one (recorded in explore.json and suite.json)."""
        opts = c.explore
        if opts.seed is not None:
            opts = dataclasses.replace(opts, seed=opts.seed + k - 1)
        t0 = self.clock()
        display = self.follow_explore(opts) if self.follow_explore is not None else None
        try:
            out = (self.explore_fn(opts, results_root=self.path, name=c.name) if display is None else
                   self.explore_fn(opts, results_root=self.path, name=c.name, progress=display))
        except Exception as exc:  # noqa: BLE001 - record and go on
            if display is not None:
                display.close()
            self.problems.append(f"{c.name} repeat {k}: {type(exc).__name__}: {exc}")
            return repeat_from_explore(k, 255, None, seed=opts.seed, elapsed_s=self.clock() - t0,
                                       problems=[f"internal error: {type(exc).__name__}: {exc}"])
        if display is not None:
            display.close()
        return repeat_from_explore(k, out.exit_code, out.doc, run_dir=self._rel(out.run_dir),
                                   report=self._rel(out.page or out.path), seed=out.doc.get("seed"),
                                   elapsed_s=self.clock() - t0)

    def _rel(self, p: Path) -> str:
        try:
            return Path(p).resolve().relative_to(self.path.resolve()).as_posix()
        except ValueError:
            return str(p)

    # --- artifacts ----------------------------------------------------------------------------------------
    def summary(self, status: str) -> dict[str, Any]:
        statuses = [o.status for o in self.outcomes]
        return {
            "format": FORMAT_VERSION,
            "suite": self.suite.name,
            "description": self.suite.description,
            "file": str(self.suite.path),
            "timestamp": self.dir.timestamp if self.dir else None,
            "started_iso": _iso(self.started_wall),
            "finished_iso": _iso(self.finished_wall) if self.finished_wall else None,
            "elapsed_s": round(self.clock() - self.started, 3),
            "budget_s": self.options.budget_s,
            "repeat_override": self.options.repeat,
            "only": self.options.only,
            "results_dir": str(self.results_root),
            "status": status,
            "exit_code": suite_exit_code(statuses) if status != "running" else None,
            "counts": {s: statuses.count(s) for s in ("passed", "failed", "error", "skipped", "pending")},
            "problems": list(self.problems),
            "configs": [o.to_json() for o in self.outcomes],
        }

    def write_artifacts(self, *, status: str) -> None:
        """suite.json, junit.xml and suite.html; a page that fails to render is a problem, not a crash."""
        doc = self.summary(status)
        runformat.write_json(self.path / SUMMARY_JSON, doc)
        junit.write(doc, self.path / JUNIT_XML)
        try:
            write_suite_page(self.path)
            write_index(self.results_root)      # the results index lists the suite and its runs as they come
        except Exception as exc:  # noqa: BLE001
            msg = f"suite page failed: {type(exc).__name__}: {exc}"
            if msg not in self.problems:
                self.problems.append(msg)
                self.say(msg)
        if status != "running" and self.dir is not None:
            _point_latest(self.dir.root / self.suite.name / store.LATEST, self.dir.timestamp)


def run_suite_explore(opts, *, results_root: Path, name: str, progress=None):
    """One exploration for a suite configuration (harness/exploration.py); the suite prints its own line
    per repeat, and `progress` (harness/explore_command.ExploreProgress) follows the search. Returns an
    ExploreRun."""
    from harness.exploration import run_exploration
    close = getattr(progress, "close", None)
    say = getattr(progress, "say", None) or (lambda _m: None)     # the shrinking's lines (its heartbeat)
    return run_exploration(opts, results_root=results_root, name=name, progress=progress, searched=close,
                           say=say)


def expect_record(c: SuiteConfig) -> dict[str, Any] | None:
    """test.json's "expect" for a run of configuration `c` (rundir/expectation.py): the suite's
    expectation, so that its report and the index say whether the run showed it."""
    if c.expect.explore is not None or not (c.expect.safe or c.expect.finds):
        return None
    return {"expect": expectation.record(c.expect.finds, by="suite", mode=c.cfg.broker.truncation)}


def run_suite_scenario(path: Path, cfg, *, session_hook=None, extra_record=None):
    """Replay the scenario file `path` for a suite configuration: the scenario's own settings, with the
    configuration's truncation mode, checker engine, name and results directory. Returns a RunOutcome."""
    sc = scenario_mod.load(path, truncation=cfg.broker.truncation)
    sc.config.name = cfg.name
    sc.config.results_dir = cfg.results_dir
    sc.config.checker.engine = cfg.checker.engine
    outcome, _runner = run_scenario(sc, session_hook=session_hook, extra_record=extra_record)
    return outcome


def _point_latest(link: Path, target: str) -> None:
    """Replace a relative symlink atomically (temp link + rename)."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, link)

