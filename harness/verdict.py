"""After a run: call the checker and the report writers (when their packages provide them) and map the
verdict to the exit code.

The checker helper provides `check_run(run_dir, **options) -> dict` (results.json's content) and the
reports `write_report(run_dir)` / `write_index(results_root)`. They are looked up by name so that a
checkout without them still runs tests and says plainly what it could not do.
"""
from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any, Callable

from rundir.exits import EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID

log = logging.getLogger(__name__)

CHECKER_MODULES = ("checkers.api", "checkers.run", "checkers.check", "checkers")
REPORT_MODULES = ("reports.api", "reports.report", "reports.write", "reports")
INDEX_MODULES = ("reports.api", "reports.index", "reports")


def find(modules: tuple[str, ...], attr: str) -> Callable[..., Any] | None:
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue
            raise
        fn = getattr(module, attr, None)
        if callable(fn):
            return fn
    return None


def run_checker(run_dir: Path, **options) -> tuple[dict[str, Any] | None, str | None]:
    """(results, problem). results is None when no checker is available or it failed."""
    check_run = find(CHECKER_MODULES, "check_run")
    if check_run is None:
        return None, "no checker available (checkers provides no check_run)"
    try:
        return check_run(Path(run_dir), **options), None
    except Exception as exc:  # noqa: BLE001 - the run's data is kept; the verdict is unknown
        log.exception("checker failed on %s", run_dir)
        return None, f"checker failed: {type(exc).__name__}: {exc}"


def prepare_checker(**options) -> None:
    """Let the checker get ready for a check that will come later (it starts its Spark driver in the
    background); a checker without `prepare`, or one that fails here, is simply not prepared."""
    prepare = find(CHECKER_MODULES, "prepare")
    if prepare is None:
        return
    try:
        prepare(**options)
    except Exception:  # noqa: BLE001 - the check itself will say what is wrong
        log.exception("preparing the checker failed")


def write_reports(run_dir: Path, results_root: Path) -> list[str]:
    problems = []
    for modules, attr, arg in ((REPORT_MODULES, "write_report", run_dir), (INDEX_MODULES, "write_index", results_root)):
        fn = find(modules, attr)
        if fn is None:
            problems.append(f"no {attr} available in reports")
            continue
        try:
            fn(Path(arg))
        except Exception as exc:  # noqa: BLE001
            log.exception("%s failed", attr)
            problems.append(f"{attr} failed: {type(exc).__name__}: {exc}")
    return problems


def exit_code(results: dict[str, Any] | None) -> int:
    if results is None:
        return EXIT_UNKNOWN
    valid = results.get("valid")
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    if valid == "unknown":
        return EXIT_UNKNOWN
    return EXIT_INTERNAL
