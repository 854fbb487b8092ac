"""`check_run(run_dir, options)`: the checker end to end (ingest, analyse, verdict, results.json).

The harness's `run` and the `highwater check` command both call this, with a `CheckOptions` saying how.
`engine="spark"` (default) runs the PySpark checker; `engine="reference"` runs the single-process
reference (tests and benchmarks); both are checkers/engines.py `Engine`s.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rundir import formats as rf
from rundir.opened import OpenedRun
from checkers import coverage
from checkers import ingest as ingest_mod
from checkers import policy, protocol_trace, results
from checkers.engines import open_engine

VERSION = "0.1.0"
log = logging.getLogger("checkers.spark")


@dataclass(frozen=True)
class CheckOptions:
    """How to check a run: the engine and its Spark master (or a `spark` session to use, as tests share
    one), --lenient, the examples kept per kind, the kinds made to fail or allowed, whether to write
    results.json (to `output` instead, when given), and `step`, told each phase's name as it starts."""

    engine: str = "spark"
    spark_master: str | None = None
    lenient: bool = False
    examples: int = 10
    fail_on: tuple[str, ...] | list[str] = ()
    allow: tuple[str, ...] | list[str] = ()
    write: bool = True
    output: Path | str | None = None
    spark: Any = None
    step: Callable[[str], None] | None = None


class _Phases:
    """Tells `step` each phase's name as it starts and keeps how long each took."""

    def __init__(self, step: Callable[[str], None] | None):
        self.step = step
        self.seconds: dict[str, float] = {}
        self._name: str | None = None
        self._since = time.monotonic()

    def start(self, name: str | None) -> None:
        now = time.monotonic()
        if self._name is not None:
            self.seconds[self._name] = round(self.seconds.get(self._name, 0.0) + now - self._since, 3)
        self._name, self._since = name, now
        if name is not None and self.step is not None:
            self.step(name)


def prepare(*, engine: str = "spark", spark_master: str | None = None) -> threading.Thread | None:
    """Start the shared Spark driver in a background thread if a later check will use it (a run calls
    this before its workload, so the check finds the driver up). Returns the thread, or None."""
    if engine != "spark":
        return None
    from checkers import spark_service, spark_session

    spark_session.mark_driver_logs()
    if not spark_session.uses_service(spark_master):
        return None
    # the run holds the shared driver in use from now to its check (`release_prepared`): `highwater
    # cleanup` or the idle timer stopping it meanwhile would cost the check a cold start (~25 s)
    release_prepared()
    _prepared.append(spark_service.Lease())

    def start() -> None:
        try:
            spark_service.ensure(warm_up=True)
            # the Connect client's modules, so the check does not wait for them either (~0.6 s)
            import pyspark.sql.connect.functions  # noqa: F401
            import pyspark.sql.connect.session  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - the check will start it again and report
            log.warning("starting the shared Spark driver failed: %s", exc)

    thread = threading.Thread(target=start, name="spark-service-start", daemon=True)
    thread.start()
    return thread


_prepared: list = []       # the lease `prepare` took, until `release_prepared`


def release_prepared() -> None:
    """Give back the shared driver's lease `prepare` took (a run calls it once its check is done); a no-op
    when there is none. A process that ends gives it back anyway (the lease is a lock on an open file)."""
    while _prepared:
        _prepared.pop().release()


def check_run(run_dir: Path | str, options: CheckOptions | None = None) -> dict[str, Any]:
    """Check one run directory and return (and by default write) its results.json document.

    Raises FormatError for malformed input and policy.ConfigError for unknown anomaly kinds. What the
    Spark driver logs meanwhile is passed to the `checkers.spark` logger (a run's harness.log), never
    printed.
    """
    t0 = time.monotonic()
    o = options or CheckOptions()
    run_dir = Path(run_dir)
    fail_on, allow, examples = o.fail_on, o.allow, o.examples
    phases = _Phases(o.step)
    say = phases.start
    opened = OpenedRun.open(run_dir)      # test.json, read once for the whole check
    config, declared = opened.config, opened.evidence
    failing = policy.failing_kinds(config, fail_on=fail_on, allow=allow)
    say("reading input")
    ing = ingest_mod.ingest(run_dir, lenient=o.lenient, opened=opened)
    facts = protocol_trace.run_facts(opened, ing.columnar_dir)
    # what the run promises depends on what it did (power cut, disks damaged): the policy again, with that
    failing = policy.failing_kinds(config, fail_on=fail_on, allow=allow, rules=facts["settings"])
    checker = open_engine(o.engine, spark_master=o.spark_master, spark=o.spark, say=say,
                          rows=ingest_mod.table_rows(ing.columnar_dir))
    try:
        findings = checker.analyze(ing.columnar_dir, examples=examples, facts=facts, say=say)
        info = dict(checker.info)
    finally:
        checker.close()
    # what was checked: a kind whose evidence is out of the backend's scope or of the run's format reports
    # nothing, and is named (checkers/coverage.py)
    statuses = coverage.kind_statuses(declared, ing.problems, ing.columnar_dir)
    coverage.apply(findings["anomalies"], statuses)
    phases.start(None)
    info.update(elapsed_s=round(time.monotonic() - t0, 3), version=VERSION, examples=examples,
                phases_s=phases.seconds)
    doc = results.build(findings, failing=failing, checker=info, input_info=ing.as_json(), statuses=statuses)
    if o.write:
        rf.write_json(Path(o.output) if o.output else run_dir / rf.RESULTS_JSON, doc)
    return doc
