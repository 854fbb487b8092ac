"""Static HTML reports for runs, the results index and a small results server.

`write_report(run_dir)` writes RUN_DIR/report.html; `write_index(results_root)` writes the results index.
"""
from __future__ import annotations

from pathlib import Path


def write_report(run_dir: Path) -> Path:
    from reports.render import write_report as _write_report

    return _write_report(run_dir)


def write_index(results_root: Path) -> Path:
    from reports.index import write_index as _write_index

    return _write_index(results_root)
