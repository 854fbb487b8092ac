"""The controller's durable state file: `<data_dir>/controller-state.json`, replaced atomically on every
change (broker.atomic_file), so a crash at any point leaves either the old or the new state, never a torn one.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.atomic_file import replace_atomically
from broker.errors import ConfigError

STATE_FILE = "controller-state.json"


class StateStore:
    def __init__(self, data_dir: str | Path):
        self.dir = Path(data_dir)
        self.path = self.dir / STATE_FILE
        self.writes = 0

    def load(self) -> dict[str, Any] | None:
        """The saved state, or None when there is none yet."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read: {exc.strerror}") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{self.path}: line {exc.lineno}: not JSON: {exc.msg}") from None

    def save(self, state: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        data = json.dumps(state, separators=(",", ":"), sort_keys=True).encode()
        replace_atomically(self.path, data)
        self.writes += 1
