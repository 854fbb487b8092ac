"""The checker's engines: one small protocol, two implementations.

An engine turns a run's columnar tables (checkers/ingest.py) and its facts (checkers/protocol_trace.py
`run_facts`) into findings, the dict checkers/results.py makes results.json of. Both engines find the
same anomalies with the same examples; tests hold them to it.

    engine = open_engine("spark", spark_master=None, spark=None, say=print)
    try:
        findings = engine.analyze(col_dir, examples=10, facts=facts, say=print)
        info = engine.info        # {"engine": ..., "master": ...}: results.json's checker block
    finally:
        engine.close()            # stops a Spark session the engine started itself

- `reference` (checkers/reference.py): one process, no Spark; for tests, benchmarks and small runs.
- `spark` (checkers/anomalies/engine.py): PySpark, on a local master, the shared driver service
  (checkers/spark_service.py), a standalone cluster or Spark Connect; `spark` lends it an open session
  (tests share one), which it then leaves open.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

log = logging.getLogger("checkers.spark")
Say = Callable[[str], None]


@runtime_checkable
class Engine(Protocol):
    name: str
    info: dict[str, Any]

    def analyze(self, col_dir: Path, *, examples: int, facts: dict[str, Any], say: Say) -> dict[str, Any]: ...

    def close(self) -> None: ...


class ReferenceEngine:
    name = "reference"

    def __init__(self) -> None:
        self.info = {"engine": "reference", "master": None}

    def analyze(self, col_dir: Path, *, examples: int, facts: dict[str, Any], say: Say) -> dict[str, Any]:
        from checkers import reference
        say("checking (reference)")
        return reference.analyze(col_dir, examples=examples, facts=facts)

    def close(self) -> None:
        pass


class SparkEngine:
    name = "spark"

    def __init__(self, spark_master: str | None = None, spark: Any = None, say: Say = lambda _m: None,
                 rows: int | None = None):
        from checkers import spark_session
        self._spark_session = spark_session
        self.master = spark_master
        self._own = spark is None
        if self._own:
            say("starting Spark" if not spark_session.uses_service(spark_master) else "connecting to Spark")
        with spark_session.driver_log_to(log):
            self.session = spark if spark is not None else spark_session.get_session(spark_master, rows=rows)
        self.info = {"engine": "spark", "master": None}

    def analyze(self, col_dir: Path, *, examples: int, facts: dict[str, Any], say: Say) -> dict[str, Any]:
        from checkers.anomalies import engine as spark_engine
        with self._spark_session.driver_log_to(log):
            self.info = {"engine": "spark", "master": self._spark_session.describe(self.session, self.master),
                         "jvm_profile": self._spark_session.profile_of(self.session, self.master)}
            return spark_engine.analyze(self.session, col_dir, examples=examples, step=say, facts=facts)

    def close(self) -> None:
        if self._own and self.session is not None:
            with self._spark_session.driver_log_to(log):
                self._spark_session.stop(self.session)
            self.session = None


ENGINES = ("spark", "reference")


def open_engine(name: str, *, spark_master: str | None = None, spark: Any = None,
                say: Say = lambda _m: None, rows: int | None = None) -> Engine:
    """The engine called `name`, ready to analyze (a Spark session open; `rows`, the input's size,
    picks a new local driver's JIT profile)."""
    if name == "reference":
        return ReferenceEngine()
    if name == "spark":
        return SparkEngine(spark_master, spark, say, rows)
    raise ValueError(f"unknown engine {name!r} (known: {', '.join(ENGINES)})")
