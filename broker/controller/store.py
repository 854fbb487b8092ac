"""The controller's durable state file: `<data_dir>/controller-state.json`, replaced atomically on every
change (broker.atomic_file), so a crash at any point leaves either the old or the new state, never a torn one.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.atomic_file import replace_atomically
from broker.config_file import read_json

STATE_FILE = "controller-state.json"


class StateStore:
    def __init__(self, data_dir: str | Path):
        self.dir = Path(data_dir)
        self.path = self.dir / STATE_FILE
        self.writes = 0

    def load(self) -> dict[str, Any] | None:
        """The saved state, or None when there is none yet."""
        if not self.path.exists():
            return None
        return read_json(self.path)

    def save(self, state: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        data = json.dumps(state, separators=(",", ":"), sort_keys=True).encode()
        replace_atomically(self.path, data)
        self.writes += 1
