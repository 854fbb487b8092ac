"""A run directory opened once: its test.json document, that document's config and cluster, and the
evidence it declares (rundir/evidence.py), for every reader of the run to share.

The checker opens the run at the start of a check (`OpenedRun.open`) and hands the object to ingest,
the protocol rules' adapter and the coverage of kinds, so test.json is parsed, and its evidence section
validated, once. A run without a test.json (a generated or hand-built one) opens with an empty
document. `open` is strict: a test.json that is not a JSON object, a `config` that is not one, or a
malformed evidence section is the run directory's FormatError naming the file and field.
`lenient` opens what it can instead (a broken document reads as empty), for readers that report the
problem elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rundir import evidence as ev
from rundir import formats as rf


@dataclass(frozen=True)
class OpenedRun:
    """One run directory's test.json, read once (module docstring)."""

    path: Path
    test: dict[str, Any] = field(default_factory=dict)     # test.json's document ({}: none)
    evidence: ev.Evidence = field(default_factory=lambda: ev.parse({}))

    @classmethod
    def open(cls, run_dir: Path | str) -> "OpenedRun":
        path = Path(run_dir)
        test = _document(path)
        if not isinstance(test.get("config") or {}, dict):
            raise rf.FormatError(path / rf.TEST_JSON, None, "field 'config' must be an object")
        return cls(path, test, ev.parse_in(test, path / rf.TEST_JSON))

    @classmethod
    def lenient(cls, run_dir: Path | str) -> "OpenedRun":
        """What can be read: a missing or broken test.json is an empty document; a malformed evidence
        section still raises (the checker cannot say what the run holds without it)."""
        path = Path(run_dir)
        try:
            test = _document(path)
        except (OSError, ValueError, rf.FormatError):
            test = {}
        return cls(path, test, ev.parse_in(test, path / rf.TEST_JSON))

    @property
    def config(self) -> dict[str, Any]:
        """test.json's `config` ({} without one)."""
        cfg = self.test.get("config")
        return cfg if isinstance(cfg, dict) else {}

    @property
    def cluster(self) -> dict[str, Any]:
        """test.json's `cluster` (the backend's layout; {} without one)."""
        c = self.test.get("cluster")
        return c if isinstance(c, dict) else {}

    @property
    def backend(self) -> str | None:
        """The backend the run's cluster ran on (None: a run without a cluster)."""
        b = self.cluster.get("backend")
        return b if isinstance(b, str) else None

    @property
    def nodes(self) -> list[str]:
        """The nodes the run's cluster lists, sorted."""
        nodes = self.cluster.get("nodes")
        return sorted(str(n) for n in nodes) if isinstance(nodes, dict) else []

    @property
    def start_wall_ns(self) -> int | None:
        """History time 0 on the brokers' clock (None: not recorded)."""
        s = self.test.get("start_wall_ns")
        return s if isinstance(s, int) else None


def _document(path: Path) -> dict[str, Any]:
    file = path / rf.TEST_JSON
    if not file.exists():
        return {}
    data = rf.load_json(file)
    if not isinstance(data, dict):
        raise rf.FormatError(file, None, "expected a JSON object")
    return data
