"""Live progress of a run: operation counts from the history, and a display.

`Stats` listens to the History and counts client completions by type; `Display` shows elapsed/remaining
time, ok/fail/info counts and the active faults: a rich live panel on a terminal, a plain line every few
seconds otherwise (logs, CI).
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable

from harness import runformat


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


class Display:
    """Call `update()` periodically from the main thread; `close()` at the end."""

    def __init__(self, source: Callable[[], dict[str, Any]], *, stream=None, interval_s: float = 5.0,
                 force_plain: bool = False):
        self.source = source
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self.plain = force_plain or not getattr(self.stream, "isatty", lambda: False)()
        self._last = float("-inf")
        self._live = None
        if not self.plain:
            from rich.console import Console
            from rich.live import Live
            self._live = Live(self._render(), console=Console(file=self.stream), refresh_per_second=4,
                              transient=False)
            self._live.start()

    def _render(self):
        from rich.markup import escape
        from rich.table import Table
        p = self.source()
        t = Table(title=escape(f"highwater {p.get('name', '')} [{p.get('phase', '?')}]"), show_header=True)
        t.add_column("op")
        for col in ("ok", "fail", "info"):
            t.add_column(col, justify="right")
        for f, c in sorted(p.get("counts", {}).items()):
            t.add_row(f, str(c["ok"]), str(c["fail"]), str(c["info"]))
        remaining = p.get("remaining")
        t.caption = (f"elapsed {p.get('elapsed', 0):.1f}s"
                     + (f"  remaining {remaining:.1f}s" if remaining is not None else "")
                     + escape(f"  faults: {', '.join(p.get('faults') or []) or 'none'}"))
        return t

    def update(self, force: bool = False) -> None:
        if self._live is not None:
            self._live.update(self._render())
            return
        now = time.monotonic()
        if force or now - self._last >= self.interval_s:
            self._last = now
            print(summary_line(self.source()), file=self.stream, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.stop()
            self._live = None
        else:
            self.update(force=True)
