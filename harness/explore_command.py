"""`highwater explore`: a seeded search over fault schedules in simulation (simulator/), its findings
shrunk, told as stories and written as scenario files, all kept in the run store.

    highwater explore [--truncation hw|leader-epoch] [--acks 1|all] [--min-insync-replicas N]
                      [--unclean-election] [--no-fetch-fencing] [--eligible-leader-replicas]
                      [--flush always|never] [--replicas N] [--length N] [--schedules N]
                      [--budget SECONDS] [--seed N] [--workers N] [--shrink-budget SECONDS]
                      [--name NAME] [--out DIR] [--plain]

This module owns the command and its progress display; the options, the run of the search into the run
store (explore.json and one scenario file per shrunk finding in `<out>/<name>/<timestamp>/`) and the
printed findings are harness/exploration.py's, shared with the suite's `explore` entries. Progress and
findings go to stderr (each finding's numbered story and its scenario file); the last stdout line is
the path of explore.json.

Exit codes (rundir/exits.py): 0 no invariant was violated; 1 a finding (some invariant was violated);
254 bad options; 255 internal error. A violation of an invariant the configuration does not promise
(simulator/invariants.py `promises`: `no-acked-loss` with acks=1, say) is still exit 1: it is a
finding, marked "expected" in the output; whether it was wanted is for a suite's expectation to say.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable

import click

from harness.cli import report_error
from harness.setting_flags import flags
from harness.exploration import (DEFAULT_NAME, OPTIONS, ExploreOptions, check_name, parse_options,
                                 print_findings, run_exploration, summary_line)
from rundir.exits import EXIT_USAGE
from rundir.settings import SettingError


# --- progress ------------------------------------------------------------------------------------

class ExploreProgress:
    """The exploration's progress: schedules, schedules/s, events, findings so far and time left. On a
    terminal one line redrawn in place (rich); otherwise a plain line every `interval_s` and one at the
    end. `__call__` is the `progress` callback of simulator/explore.py `explore` (any of the shapes it
    may pass: an object or dict with schedules, events and findings, or those three as arguments)."""

    def __init__(self, opts: ExploreOptions, *, stream=None, force_plain: bool = False, interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.opts, self.clock, self.interval_s = opts, clock, interval_s
        self.stream = stream or sys.stderr
        self.plain = force_plain or not getattr(self.stream, "isatty", lambda: False)()
        self.started = clock()
        self._last = clock()
        self.schedules = self.events = self.findings = 0
        self.by_invariant: dict[str, int] = {}
        self._lock = threading.Lock()
        self._live = None
        self._closed = False
        self._printed: tuple | None = None      # the counts of the last plain line
        if not self.plain:
            from rich.console import Console
            from rich.live import Live
            self._live = Live(self._render(), console=Console(file=self.stream), refresh_per_second=4,
                              transient=False)
            self._live.start()

    def __call__(self, *args, **kwargs) -> None:
        if args and len(args) >= 3:
            schedules, events, findings = args[:3]
        else:
            src = args[0] if args else kwargs
            get = (src.get if isinstance(src, dict) else lambda k, d=None: getattr(src, k, d))
            schedules, events, findings = get("schedules", 0), get("events", 0), get("findings", 0)
        with self._lock:
            self.schedules, self.events = int(schedules or 0), int(events or 0)
            if isinstance(findings, dict):       # failing schedules per invariant (simulator/explore.py)
                self.by_invariant = {k: int(v) for k, v in findings.items()}
                self.findings = sum(self.by_invariant.values())
            elif isinstance(findings, (list, tuple)):
                self.findings = len(findings)
                self.by_invariant = {}
                for f in findings:
                    inv = getattr(f, "invariant", None) or (f.get("invariant") if isinstance(f, dict) else "?")
                    self.by_invariant[inv] = self.by_invariant.get(inv, 0) + 1
            else:
                self.findings = int(findings or 0)
                self.by_invariant = {}
        self.update()

    def line(self) -> str:
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = self.schedules / elapsed
        found = f"failing schedules {self.findings:,}"
        if self.by_invariant:
            found += " (" + ", ".join(f"{k} {v}" for k, v in sorted(self.by_invariant.items())) + ")"
        left = self.left_s(elapsed, rate)
        left_text = f" · {left:.0f} s left" if left is not None else ""
        return (f"explore: {self.schedules:,} schedules ({rate:,.0f}/s) · {self.events:,} events · "
                f"{found}{left_text}")

    def left_s(self, elapsed: float, rate: float) -> float | None:
        budget = self.opts.budget_s
        lefts = []
        if budget is not None:
            lefts.append(max(0.0, budget - elapsed))
        if self.opts.schedules is not None and rate > 0:
            lefts.append(max(0.0, (self.opts.schedules - self.schedules) / rate))
        return min(lefts) if lefts else None

    def _render(self):
        from rich.text import Text
        return Text(self.line(), no_wrap=True, overflow="ellipsis")

    def update(self, force: bool = False) -> None:
        if self._live is not None:
            self._live.update(self._render())
            return
        now = self.clock()
        state = (self.schedules, self.events, self.findings)
        fresh = state != self._printed and (self._printed is not None or self.schedules > 0)
        if (force and fresh) or now - self._last >= self.interval_s:
            self._last, self._printed = now, state
            print(f"highwater {self.line()}", file=self.stream, flush=True)

    def say(self, message: str) -> None:
        """A line of the exploration's own (its shrinking), under the progress line."""
        print(f"highwater explore: {message}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._live is not None:
            self._live.update(self._render())
            self._live.stop()
            self._live = None
        else:
            self.update(force=True)


# --- the command ---------------------------------------------------------------------------------

FLAG_OF = {name: "--" + name.replace("_", "-") for name in OPTIONS}


@click.command("explore", context_settings={"help_option_names": ["-h", "--help"]})
@flags((name.replace("_", "-"), s) for name, s in OPTIONS.items())
@click.option("--name", "name", default=DEFAULT_NAME, show_default=True, help="results go to OUT/NAME/<timestamp>/")
@click.option("--out", "--results-dir", "out", default="results", show_default=True, help="results directory")
@click.option("--plain", is_flag=True, default=False, help="plain progress lines even on a terminal")
def explore_cmd(name, out, plain, **flags) -> int:
    """Search fault schedules of the simulated broker for invariant violations (simulator/)."""
    try:
        opts = parse_options({k: v for k, v in flags.items() if v is not None}, text=True)
    except SettingError as exc:
        flag = FLAG_OF.get(exc.key, exc.key)
        click.echo(f"highwater: {flag} {exc.problem}", err=True)
        return EXIT_USAGE
    try:
        check_name(name)
    except ValueError as exc:
        click.echo(f"highwater: --name {exc}", err=True)
        return EXIT_USAGE
    say = lambda m: click.echo(f"highwater: {m}", err=True)  # noqa: E731
    display = ExploreProgress(opts, force_plain=plain)
    try:
        outcome = run_exploration(opts, results_root=out, name=name, progress=display, say=say,
                                  searched=display.close)
    except Exception as exc:  # noqa: BLE001 - one line and an exit code
        display.close()
        return report_error(exc)
    finally:
        display.close()
    doc = outcome.doc
    print_findings(doc, outcome.run_dir, say)
    say(f"{summary_line(doc)} (seed {doc['seed']}, exit {outcome.exit_code})")
    click.echo(str(outcome.page or outcome.path))
    return outcome.exit_code


explore = explore_cmd


if __name__ == "__main__":
    sys.exit(explore_cmd.main(standalone_mode=False))
