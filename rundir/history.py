"""The history writer: appends operations to history.jsonl as they happen, one flushed line each.

Thread-safe: workload workers, the nemesis and the harness share one `History`. Each line is written and
flushed under a lock, so a harness that crashes leaves a file that parses up to its last line. Indexes are
dense and times are nanoseconds since the history was opened (monotonic clock). The format is documented
in docs/formats.md.
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable

from rundir import formats as runformat


class History:
    def __init__(self, path: Path, *, clock: Callable[[], int] = time.monotonic_ns, mirror: Path | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", buffering=1024 * 64)
        self._mirror = Path(mirror).open("a", buffering=1024 * 16) if mirror else None
        self._clock = clock
        self._t0 = clock()
        # the wall clock at history time 0, read next to it: test.json's start_wall_ns, which maps the
        # history's times onto the node event logs' wall-clock `ts` (the protocol rules compare them)
        self.wall_t0 = time.time_ns()
        self._lock = threading.Lock()
        self._index = 0
        self._process_ids = itertools.count()
        self._closed = False
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    # --- processes ---------------------------------------------------------------------------
    def new_process(self) -> int:
        """A fresh client process id, never reused (Jepsen: after an `info` a worker takes a new one)."""
        return next(self._process_ids)

    def elapsed_ns(self) -> int:
        return self._clock() - self._t0

    @property
    def next_index(self) -> int:
        """The index the next operation will get (so the ones written since a moment are [then, now))."""
        with self._lock:
            return self._index

    # --- operations --------------------------------------------------------------------------
    def invoke(self, process: int | str, f: str, value: dict[str, Any]) -> dict[str, Any]:
        return self._write(process, "invoke", f, value, None)

    def complete(self, process: int | str, type_: str, f: str, value: dict[str, Any],
                 error: str | None = None) -> dict[str, Any]:
        if type_ not in runformat.COMPLETIONS:
            raise ValueError(f"completion type must be one of {runformat.COMPLETIONS}, got {type_!r}")
        return self._write(process, type_, f, value, error)

    def _write(self, process, type_, f, value, error) -> dict[str, Any]:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"history {self.path} is closed")
            op: dict[str, Any] = {"index": self._index, "time": self.elapsed_ns(), "process": process,
                                  "type": type_, "f": f, "value": value}
            if error is not None:
                op["error"] = error
            line = json.dumps(op, separators=(",", ":")) + "\n"
            self._fh.write(line)
            self._fh.flush()
            if self._mirror is not None and process == runformat.NEMESIS_PROCESS:
                self._mirror.write(line)
                self._mirror.flush()
            self._index += 1
        for listener in self.listeners:
            listener(op)
        return op

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._fh.flush()
            self._fh.close()
            if self._mirror is not None:
                self._mirror.close()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
