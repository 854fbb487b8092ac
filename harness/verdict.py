"""After a run: the checker (checkers/check.py) and the report writers (reports/), and the exit code
the checker's verdict means.

Neither a failing checker nor a failing report loses the run: each failure comes back as a problem
line, the run's data stays, and the verdict is unknown when there are no results.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from checkers.check import CheckOptions, check_run, prepare, release_prepared
from reports import write_index, write_report

log = logging.getLogger(__name__)


def run_checker(run_dir: Path, **options) -> tuple[dict[str, Any] | None, str | None]:
    """(results, problem). results is None when the checker failed."""
    try:
        return check_run(Path(run_dir), CheckOptions(**options)), None
    except Exception as exc:  # noqa: BLE001 - the run's data is kept; the verdict is unknown
        log.exception("checker failed on %s", run_dir)
        return None, f"checker failed: {type(exc).__name__}: {exc}"


def prepare_checker(**options) -> None:
    """Let the checker get ready for a check that will come later (it starts its Spark driver in the
    background); a failure here is only logged: the check itself will say what is wrong."""
    try:
        prepare(**options)
    except Exception:  # noqa: BLE001
        log.exception("preparing the checker failed")


def release_checker() -> None:
    """The run no longer needs the checker kept ready (prepare_checker's hold on the shared driver)."""
    release_prepared()


def write_reports(run_dir: Path, results_root: Path | None) -> list[str]:
    """The run's report.html and (unless `results_root` is None) the results index; a problem line for
    each that failed."""
    problems = []
    writes = [("write_report", write_report, run_dir)]
    if results_root is not None:
        writes.append(("write_index", write_index, results_root))
    for name, write, arg in writes:
        try:
            write(Path(arg))
        except Exception as exc:  # noqa: BLE001
            log.exception("%s failed", name)
            problems.append(f"{name} failed: {type(exc).__name__}: {exc}")
    return problems
