"""A step: one thing a fault plan does, the same object whichever file format or generator made it.

A schedule file's `[[step]]`, a random draw and a scenario's `[[step]]` are all `Step`s:

- `do`: what it does: a fault name (nemesis/faults.py NAMES) for a schedule or a draw, a scenario action
  (harness/scenario.py ACTIONS) for a scenario;
- `args`: its fields, validated by the parser of its format (targets, shape, partition and degradation
  for a timed fault; node, drop, count, ... for a scenario step);
- `at` and `duration`: when a timed fault starts, in seconds after the nemesis started, and how long it
  lasts (None for a scenario's steps, which play in order);
- `seed`: for the choices made when it starts; `number` and `line`: where it is in its file (None when
  drawn); `note` and `modes`: a scenario step's free text and the truncation modes it plays in.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemesis.faults import NAMES
from rundir.settings import at_line


@dataclass
class Step:
    do: str
    args: dict[str, Any] = field(default_factory=dict)
    at: float | None = None
    duration: float | None = None
    seed: int = 0
    number: int | None = None       # 1-based entry in its file; None when drawn at random
    line: int | None = None
    note: str = ""
    modes: tuple[str, ...] | None = None      # truncation modes it plays in (None: every mode)

    @classmethod
    def timed(cls, at: float, fault: str, duration: float, seed: int = 0, number: int | None = None,
              **args: Any) -> "Step":
        """A fault at a time: `args` are its targets, shape, partition and degradation, those not None."""
        return cls(fault, {k: v for k, v in args.items() if v is not None}, float(at), float(duration), seed,
                   number)

    # --- a timed fault's fields ---------------------------------------------------------------------
    @property
    def fault(self) -> str:
        return self.do

    @property
    def kind(self) -> str | None:
        """The window kind of its fault (or "package" / "mix"); None for a scenario action that is none."""
        return NAMES[self.do][0] if self.do in NAMES else None

    @property
    def targets(self) -> list[str] | None:
        """None: chosen when the step starts (a random broker, the leader, c0)."""
        return self.args.get("targets")

    @property
    def shape(self) -> str | None:
        return self.args.get("shape")

    @property
    def partition(self) -> int | None:
        """The topic partition whose leader (follower, ...) the fault aims at."""
        return self.args.get("partition")

    @property
    def degradation(self) -> dict | None:
        """Degrade faults: {delay_ms, jitter_ms, loss_pct}."""
        return self.args.get("degradation")

    def key(self) -> tuple:
        """Everything the seed decides, for comparing sequences."""
        return (round(self.at or 0.0, 6), self.do, tuple(self.targets or ()), self.shape, self.partition,
                self.seed, round(self.duration or 0.0, 6), tuple(sorted((self.degradation or {}).items())))

    # --- a scenario step's ----------------------------------------------------------------------------
    def plays_in(self, mode: str) -> bool:
        return self.modes is None or mode in self.modes

    def where(self, path: Path | str) -> str:
        """`file:line: step N (do)`, the start of every message about this step."""
        return f"{at_line(path, self.line)}: step {self.number} ({self.do})"

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.args.items()]
        return f"step {self.number} ({self.do}{': ' + ', '.join(parts) if parts else ''})"
