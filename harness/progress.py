"""Live progress of a run: operation counts from the history, the run's phases and their times, and a
display that follows the run to its end.

`Stats` listens to the History and counts client completions by type. `PhaseClock` knows which phase a
run is in (setting up, workload, final wait, collecting replicas, checking and the checker's own phases,
writing report), since when, and how long each finished phase took. `Display` shows elapsed/remaining
time, ok/fail/info counts, the active faults and the current phase with its elapsed time: a rich live
panel on a terminal, redrawn by its own thread so it never freezes while the run is busy; otherwise
(logs, CI) plain lines, so that a log is never silent for long: a line when a phase (or a step within
it, such as the checker's) has gone on for `announce_after_s` (1 s: a quicker one gets only its end line),
one every `interval_s` (5 s) while it lasts (the operation counts during the workload, the phase and its
elapsed time otherwise), and one with its time when it ends. On `close()` it prints a summary of the
phase times.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable

from rundir import formats as runformat

# what the display calls each phase (RunSession.phase names, see harness/lifecycle.py)
PHASE_LABELS = {
    "setup": "setting up",
    "provision": "provisioning",
    "running": "workload",
    "steps": "scenario steps",
    "final": "final wait",
    "final-reads": "final reads",
    "collect": "collecting replicas",
    "check": "checking",
    "report": "writing report",
    "done": "done",
}


def phase_label(name: str | None) -> str:
    return PHASE_LABELS.get(name or "", name or "?")


class Stats:
    def __init__(self):
        self._lock = threading.Lock()
        self.counts: dict[str, dict[str, int]] = {}
        self.nemesis_ops = 0

    def __call__(self, op: dict[str, Any]) -> None:
        if op["type"] == "invoke":
            return
        with self._lock:
            if op["process"] == runformat.NEMESIS_PROCESS:
                self.nemesis_ops += 1
                return
            if op["process"] == runformat.HARNESS_PROCESS:
                return
            per = self.counts.setdefault(op["f"], {"ok": 0, "fail": 0, "info": 0})
            per[op["type"]] += 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {f: dict(c) for f, c in self.counts.items()}


class PhaseClock:
    """The current phase (and step within it, e.g. the checker's phases), since when, and the time every
    finished phase took, in order. `start(name)` ends the current phase; `step(text)` starts a step
    within it; `finish()` ends the last. Thread-safe: the run sets phases, the display reads them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self.name: str | None = None
        self._since = clock()
        self.detail: str | None = None
        self._detail_since = self._since
        self.durations: list[tuple[str, float]] = []       # (phase name, seconds), in order
        self.steps: list[tuple[str, str, float]] = []       # (phase name, step, seconds), in order
        self.ended: list[tuple[str, str | None, float]] = []  # both, as they ended (step None: the phase)

    def _end_step(self, now: float) -> None:
        if self.detail is not None and self.name is not None:
            self.steps.append((self.name, self.detail, now - self._detail_since))
            self.ended.append(self.steps[-1])
        self.detail = None

    def start(self, name: str | None) -> None:
        with self._lock:
            now = self.clock()
            if name == self.name:
                return
            self._end_step(now)
            if self.name is not None:
                self.durations.append((self.name, now - self._since))
                self.ended.append((self.name, None, now - self._since))
            self.name, self._since, self._detail_since = name, now, now

    def step(self, text: str) -> None:
        with self._lock:
            now = self.clock()
            self._end_step(now)
            self.detail, self._detail_since = text, now

    def finish(self) -> None:
        self.start(None)

    def snapshot(self) -> dict[str, Any]:
        """{"name", "label", "elapsed", "detail", "detail_elapsed", "durations", "steps", "ended"}."""
        with self._lock:
            now = self.clock()
            return {"name": self.name, "label": phase_label(self.name), "elapsed": now - self._since,
                    "detail": self.detail, "detail_elapsed": now - self._detail_since if self.detail else None,
                    "durations": list(self.durations), "steps": list(self.steps),
                    "ended": list(self.ended)}


def step_text(label: str, step: str) -> str:
    """A step within a phase: `checking: statistics` (a step already naming its phase stays as it is)."""
    return step if step.startswith(label) else f"{label}: {step}"


def phase_text(ph: dict[str, Any]) -> str:
    """The current phase with its elapsed time: `final wait 12.3 s`, `checking: statistics 3.2 s`."""
    if ph.get("detail"):
        return f"{step_text(ph['label'], ph['detail'])} {ph['detail_elapsed']:.1f} s"
    return f"{ph['label']} {ph['elapsed']:.1f} s"


def phases_summary(durations: list[tuple[str, float]]) -> str:
    """`phases: workload 20.0 s · final wait 12.3 s · ... (total 38.1 s)`."""
    shown = [(n, s) for n, s in durations if n not in ("done", None)]
    total = sum(s for _n, s in durations)
    return ("phases: " + " · ".join(f"{phase_label(n)} {s:.1f} s" for n, s in shown)
            + f" (total {total:.1f} s)")


def summary_line(p: dict[str, Any]) -> str:
    counts = p.get("counts", {})
    parts = []
    for f in ("send", "poll", "final-read"):
        if f in counts:
            c = counts[f]
            parts.append(f"{f} ok={c['ok']} fail={c['fail']} info={c['info']}")
    faults = ", ".join(p.get("faults") or []) or "none"
    remaining = p.get("remaining")
    rem = f" remaining {remaining:5.1f}s" if remaining is not None else ""
    return f"[{p.get('phase', '?'):>8}] elapsed {p.get('elapsed', 0):5.1f}s{rem} | {' | '.join(parts) or 'no ops yet'} | faults: {faults}"


class _Renderable:
    """Rebuilt on every refresh of the live panel (so its own thread shows the current phase)."""

    def __init__(self, display: "Display"):
        self.display = display

    def __rich__(self):
        return self.display._render()


class Display:
    """Follows a run from `source()` (RunSession.progress: name, phase, elapsed, remaining, counts, faults
    and `phases`, a PhaseClock snapshot). Call `update()` as often as you like; `start()` runs a thread
    that keeps it going while the run is busy elsewhere; `close()` at the end."""

    def __init__(self, source: Callable[[], dict[str, Any]], *, stream=None, interval_s: float = 5.0,
                 force_plain: bool = False, clock: Callable[[], float] = time.monotonic,
                 announce_after_s: float = 1.0):
        self.source = source
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self.announce_after_s = announce_after_s   # a phase or step over sooner gets only its end line
        self.clock = clock
        self.plain = force_plain or not getattr(self.stream, "isatty", lambda: False)()
        self._last = float("-inf")
        self._lock = threading.Lock()
        self._printed = 0                 # ended phases and steps already printed as lines (plain)
        self._current: tuple[str | None, str | None] = (None, None)   # the phase and step last announced
        self._last_p: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live = None
        if not self.plain:
            from rich.console import Console
            from rich.live import Live
            self._console = Console(file=self.stream)
            self._live = Live(_Renderable(self), console=self._console, refresh_per_second=4, transient=False)
            self._live.start()

    def _render(self):
        from rich.console import Group
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text
        p = self.source()
        ph = p.get("phases")
        doing = phase_text(ph) if ph and ph.get("name") else p.get("phase", "?")
        head = Text(f"highwater {p.get('name', '')} · {doing}", style="bold", no_wrap=True, overflow="ellipsis")
        if "counts" not in p:             # a command with phases only (`highwater check`)
            return head
        t = Table(show_header=True)
        t.add_column("op")
        for col in ("ok", "fail", "info"):
            t.add_column(col, justify="right")
        for f, c in sorted(p.get("counts", {}).items()):
            t.add_row(f, str(c["ok"]), str(c["fail"]), str(c["info"]))
        remaining = p.get("remaining")
        t.caption = (f"elapsed {p.get('elapsed', 0):.1f}s"
                     + (f"  remaining {remaining:.1f}s" if remaining is not None else "")
                     + escape(f"  faults: {', '.join(p.get('faults') or []) or 'none'}"))
        return Group(head, t)

    def _plain_phase_lines(self, p: dict[str, Any]) -> list[str]:
        """One line per phase (and checker step) finished since the last call."""
        ph = p.get("phases")
        if not ph:
            return []
        ended = ph.get("ended") or []
        lines = [f"highwater: {step_text(phase_label(name), step) if step else phase_label(name)} {s:.1f} s"
                 for name, step, s in ended[self._printed:]]
        self._printed = len(ended)
        return lines

    def _plain_lines(self, p: dict[str, Any], now: float, force: bool) -> list[str]:
        """The lines due now: phases and steps ended since the last call, the start of a new one, and a
        line every `interval_s` while one lasts (the counts during the workload)."""
        lines = self._plain_phase_lines(p)
        ph = p.get("phases")
        current = (ph.get("name"), ph.get("detail")) if ph else (p.get("phase"), None)
        active = current[0] not in (None, "done")
        running = p.get("phase") == "running"
        if active and current != self._current:
            name, step = current
            lasted = (ph["detail_elapsed"] if step else ph["elapsed"]) if ph else float("inf")
            if lasted >= self.announce_after_s:
                self._current, self._last = current, now
                lines.append(f"highwater: {step_text(phase_label(name), step) if step else phase_label(name)} ...")
        elif force and "counts" in p:
            self._last = now
            lines.append(summary_line(p))
        elif active and now - self._last >= self.interval_s:
            self._last = now
            lines.append(summary_line(p) if running or not ph else f"highwater: {phase_text(ph)} so far")
        return lines

    def update(self, force: bool = False) -> None:
        if self._live is not None:
            self._live.refresh()
            return
        with self._lock:
            p = self.source()
            self._last_p = p
            for line in self._plain_lines(p, self.clock(), force):
                print(line, file=self.stream, flush=True)

    def _tick(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.update()
            except Exception:  # noqa: BLE001 - the display must never break a run
                pass

    def start(self, every_s: float = 0.25) -> "Display":
        """Keep the display going from a thread of its own (the run's final phases block the caller)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._tick, args=(every_s,), name="progress", daemon=True)
            self._thread.start()
        return self

    def close(self, *, quiet: bool = False) -> None:
        """Stop, with a last update and the phase times; `quiet` (a command that failed says so in
        its own one line): only the lines of the steps that ended before the failure, so what is
        printed does not depend on when the display's thread last ticked."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if quiet and self._live is not None:
            self._live.transient = True
            self._live.stop()
            self._live = None
            return
        if quiet:
            with self._lock:
                for line in self._plain_phase_lines(self.source()):
                    print(line, file=self.stream, flush=True)
            return
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None
            p = self.source()
        else:
            self.update(force=True)
            p = self._last_p or self.source()
        ph = p.get("phases")
        if ph and ph["durations"]:
            print(f"highwater: {phases_summary(ph['durations'])}", file=self.stream, flush=True)


class heartbeat:
    """`with heartbeat(say, "finding 1: shrinking"):` says "<what> 5 s so far" every `every_s` while the
    block runs, from a thread of its own: for long work that reports nothing itself (a shrink), so a CI
    log never goes silent."""

    def __init__(self, say: Callable[[str], None], what: str, every_s: float = 5.0):
        self.say, self.what, self.every_s = say, what, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.every_s):
            self.say(f"{self.what} {time.monotonic() - started:.0f} s so far")

    def __enter__(self) -> "heartbeat":
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
