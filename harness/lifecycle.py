"""The one run lifecycle that `highwater run`, `highwater scenario` and every suite repeat go through.

    provision    a run directory (test.json, harness.log, latest), the checker's driver warming up, the
                 cluster from the backend registry with its fault preflight; then the middle's set-up
                 (the nemesis); a failure here is a setup error (exit 254)
    start        the cluster, until every partition of the test topic has a leader
    middle       what drives the run: the workload under the nemesis (harness/runner.py) or a
                 scenario's steps (harness/scenario_runner.py); then its wind-down, whatever happened
    final phase  stop, heal, bounded recovery wait, final reads, final-state (harness/final_phase.py)
    collect      stop the brokers, collect logs and replica dumps, tear the cluster down (always)
    check        the checker (harness/verdict.py), unless interrupted or the harness itself failed
    report       the run's report and the results index (harness/verdict.py)

`run(cfg, middle)` plays it and returns a RunOutcome; the kinds of run differ only in their `Middle`. An
interrupt (`session.request_interrupt()`, called by the CLI's SIGINT/SIGTERM handler) ends the run
early: the nemesis still heals, every process is stopped, the firewall rules are removed and the
history is kept; the final wait and reads and the check are skipped, and the outcome is unknown (2).
"""
from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from broker.client import Admin, Consumer, Producer
from clusters.base import ClusterSpec
from harness import backends, final_phase, verdict
from harness import config as config_mod
from harness.config import TestConfig
from harness.progress import PhaseClock, Stats
from rundir import evidence as rundir_evidence
from rundir import store
from rundir.exits import EXIT_INTERNAL, EXIT_UNKNOWN, EXIT_USAGE
from rundir.history import History
from rundir.verdict import verdict_exit_code

log = logging.getLogger("harness")

READY_TIMEOUT_S = 30.0


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int
    results: dict[str, Any] | None
    report: Path
    problems: list[str] = field(default_factory=list)
    interrupted: bool = False
    final: dict[str, Any] | None = None


class RunSession:
    """One run directory, its History and its cluster, and the phases every kind of run shares."""

    def __init__(self, cfg: TestConfig, *, kind: str = "run", extra_record: dict[str, Any] | None = None):
        # the validate step again (the commands run it first): a bad configuration never creates a run
        # directory; a scenario injects its own faults, checked by its command
        config_mod.check(cfg)
        config_mod.preflight(cfg, faults=None if kind == "run" else [])
        # and nothing either when the cluster's engine, hosts or brokers do not answer (a few seconds)
        backends.reach(cfg.cluster.backend, cfg.cluster, brokers=cfg.cluster.nodes)
        self.cfg = cfg.with_seed()
        self.kind = kind
        self.extra_record = dict(extra_record or {})
        self.run = store.create_run_dir(cfg.results_dir, cfg.name)
        self.history = History(self.run.history_path, mirror=self.run.nemesis_path)
        self.start_wall_ns = self.history.wall_t0   # history time 0 on the wall clock (node logs' ts)
        self.stats = Stats()
        self.history.listeners.append(self.stats)
        self.interrupt = threading.Event()
        self.interrupt_reason: str | None = None
        self.phases = PhaseClock()           # `phase` below sets it; the display shows it with its times
        self.phase = "setup"
        self.cluster = None
        self.nemesis = None
        self.workload = None
        self.problems: list[str] = []
        self.final: dict[str, Any] | None = None
        self.collected: dict[str, int] | None = None   # the collected files' sizes (test.json evidence)
        self.started_at = time.monotonic()
        self.run_started_at: float | None = None
        self._log_handler = self._attach_log()
        self._write_test_json()
        store.update_latest(self.run)

    # --- bookkeeping ------------------------------------------------------------------------------------
    def _attach_log(self) -> logging.Handler:
        handler = logging.FileHandler(self.run.path / "harness.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        return handler

    def _write_test_json(self) -> None:
        layout = {"backend": self.cfg.cluster.backend, "nodes": {}}
        evidence = {}
        if self.cluster is not None:
            try:
                layout = self.cluster.layout()      # every backend has one (clusters/base.py)
            except Exception as exc:  # noqa: BLE001 - a cluster that never started has no addresses: say so
                layout["error"] = f"{type(exc).__name__}: {exc}"
            # what the run's directory holds, in which formats (rundir/evidence.py)
            declared = self.cluster.evidence()
            if self.collected is not None:
                declared = declared.with_collected(self.collected)
            evidence = {rundir_evidence.SECTION: declared.as_json()}
        record = store.test_record(self.run, self.cfg.recorded(), seed=self.cfg.seed,
                                   start_wall_ns=self.start_wall_ns, cluster=layout,
                                   extra={"kind": self.kind, **evidence, **self.extra_record})
        store.write_test_json(self.run, record)

    def problem(self, what: str, exc: BaseException | None = None) -> None:
        text = f"{what}: {type(exc).__name__}: {exc}" if exc is not None else what
        self.problems.append(text)
        if exc is not None:
            log.error("%s\n%s", text, "".join(traceback.format_exception(exc)))
        else:
            log.warning("%s", text)

    def request_interrupt(self, reason: str) -> None:
        if not self.interrupt.is_set():
            self.interrupt_reason = reason
            log.warning("interrupted: %s", reason)
        self.interrupt.set()

    @property
    def phase(self) -> str | None:
        return self.phases.name

    @phase.setter
    def phase(self, name: str) -> None:
        self.phases.start(name)
        log.info("phase: %s", name)

    def progress(self) -> dict[str, Any]:
        elapsed = time.monotonic() - (self.run_started_at or self.started_at)
        remaining = None
        if self.phase == "running" and self.run_started_at is not None:
            remaining = max(0.0, self.cfg.time_limit - elapsed)
        faults: list[str] = []
        if self.nemesis is not None:
            try:
                faults = list(self.nemesis.active())
            except Exception:  # noqa: BLE001
                faults = ["?"]
        return {"name": self.cfg.name, "phase": self.phase, "elapsed": elapsed, "remaining": remaining,
                "counts": self.stats.snapshot(), "faults": faults,
                "phases": self.phases.snapshot()}

    # --- clients --------------------------------------------------------------------------------------------
    def controller_address(self) -> tuple[str, int]:
        c = self.cluster.controller()
        return (c.host, c.port)

    def admin(self):
        """What the health checks ask (`describe(topic)`, `close()`): the native Admin at the controller,
        or, for a cluster reached only through Kafka clients (the external backend), its Kafka Metadata
        (clusters/kafka_metadata.py: leaders, ISR and HW, but no per-replica LEO/HW)."""
        if backends.kafka_reached(self.cluster):
            return self.cluster.metadata(timeout_s=self.cfg.client.timeout)
        return Admin(controller=self.controller_address(), timeout_s=self.cfg.client.timeout)

    def kafka_client(self, worker: int | None = None) -> bool:
        """Whether a client uses a real Kafka client (`client.kind = "kafka"`, or a cluster reached only
        through Kafka clients) instead of the native one. With `client.kind = "mixed"` the workload's
        odd-numbered producers and consumers (`worker`) do; the final reads and every other client
        (worker None) stay native, so the final log's records carry their leader epochs."""
        if self.cfg.client.kind == "kafka" or backends.kafka_reached(self.cluster):
            return True
        return self.cfg.client.kind == "mixed" and worker is not None and worker % 2 == 1

    def kafka_bootstrap(self) -> list[str]:
        """host:port of every broker's client listener (an external cluster: its bootstrap servers)."""
        if backends.kafka_reached(self.cluster):
            return self.cluster.bootstrap_servers().split(",")
        return [f"[{a.host}]:{a.port}" if ":" in a.host else f"{a.host}:{a.port}"
                for a in self.cluster.brokers().values()]

    def make_producer(self, acks=None, worker: int | None = None):
        """A producer with the run's client settings: the native Producer, or the Kafka adapter
        (workloads/kafka_client.py) with the same calls (`kafka_client` says which)."""
        acks = self.cfg.client.acks if acks is None else acks
        if self.kafka_client(worker):
            from workloads import kafka_client
            return kafka_client.make_producer(self.cfg.client.library, self.kafka_bootstrap(), acks=acks,
                                              timeout_s=self.cfg.client.timeout, retries=self.cfg.client.retries,
                                              idempotence=self.cfg.client.idempotence)
        return Producer(controller=self.controller_address(), acks=acks,
                        timeout_s=self.cfg.client.timeout, retries=self.cfg.client.retries)

    def make_consumer(self, worker: int | None = None):
        if self.kafka_client(worker):
            from workloads import kafka_client
            return kafka_client.make_consumer(self.cfg.client.library, self.kafka_bootstrap(),
                                              timeout_s=self.cfg.client.timeout)
        return Consumer(controller=self.controller_address(), timeout_s=self.cfg.client.timeout)

    # --- provision and start -------------------------------------------------------------------------------
    def provision(self, faults: list[str]) -> None:
        self.phase = "provision"
        # the checker's driver starts (in the background) while the cluster and the workload run
        verdict.prepare_checker(engine=self.cfg.checker.engine)
        spec = ClusterSpec(run_id=self.run.run_id, run_dir=self.run.path, brokers=self.cfg.cluster.nodes,
                           broker_settings=self.cfg.broker_settings(),
                           controller_settings=self.cfg.controller_settings())
        self.cluster = backends.make_cluster(self.cfg.cluster.backend, spec, cluster_cfg=self.cfg.cluster)
        self.cluster.check_faults(list(faults))
        if backends.kafka_reached(self.cluster):
            # a cluster someone else runs: reaching it and making (or checking) the topic is set-up
            self.cluster.prepare()

    def start_cluster(self) -> None:
        log.info("run %s: starting the %s cluster (%d brokers)", self.run.run_id, self.cfg.cluster.backend,
                 self.cfg.cluster.nodes)
        self.cluster.start()
        self._write_test_json()
        self.wait_topic_ready(READY_TIMEOUT_S)
        log.info("cluster up, topic %r ready", self.cfg.topic.name)

    def wait_topic_ready(self, timeout_s: float) -> None:
        """Every partition of the test topic has a leader (the controller creates the topic at start-up;
        on an external cluster, the backend's start)."""
        admin = self.admin()
        try:
            deadline = time.monotonic() + timeout_s
            last = "no answer"
            while time.monotonic() < deadline and not self.interrupt.is_set():
                try:
                    parts = admin.describe(self.cfg.topic.name)
                    if len(parts) == self.cfg.topic.partitions and all(p.leader is not None for p in parts):
                        return
                    last = f"{len(parts)} partitions, leaders {[p.leader for p in parts]}"
                except Exception as exc:  # noqa: BLE001
                    last = f"{type(exc).__name__}: {exc}"
                time.sleep(0.1)
            if not self.interrupt.is_set():
                raise RuntimeError(f"topic {self.cfg.topic.name!r} not ready within {timeout_s:.0f}s ({last})")
        finally:
            admin.close()

    # --- final phase, collect, check, report -----------------------------------------------------------
    def final_phase(self, *, reads: bool = True) -> dict[str, Any]:
        return final_phase.run(self, reads=reads)

    def shutdown(self) -> None:
        """Stop brokers, collect ground truth, tear down. Never raises; safe to call twice."""
        self.phase = "collect"
        cluster = self.cluster
        if cluster is not None:
            try:
                cluster.stop_all()
            except Exception as exc:  # noqa: BLE001
                self.problem("stopping the cluster failed", exc)
            try:
                cluster.collect(self.run.path)
            except Exception as exc:  # noqa: BLE001
                self.problem("collecting logs and replica dumps failed", exc)
            else:
                # their sizes now, so that a file cut short later (a copy of the run directory that did
                # not finish) is named by the checker instead of read as the whole log
                try:
                    self.collected = rundir_evidence.collected_files(self.run.path)
                    self._write_test_json()
                except Exception as exc:  # noqa: BLE001
                    self.problem("recording the collected files failed", exc)
            try:
                cluster.teardown()
            except Exception as exc:  # noqa: BLE001
                self.problem("teardown failed", exc)
        try:
            self.history.close()
        except Exception as exc:  # noqa: BLE001
            self.problem("closing the history failed", exc)

    def verdict(self, *, check: bool = True) -> tuple[dict[str, Any] | None, int]:
        self.phase = "check"
        results = None
        if check:
            results, problem = verdict.run_checker(self.run.path, engine=self.cfg.checker.engine,
                                                   step=self.phases.step)
            if problem:
                self.problem(problem)
        self.phase = "report"
        for problem in verdict.write_reports(self.run.path, Path(self.cfg.results_dir)):
            self.problem(problem)
        self.phase = "done"
        return results, verdict_exit_code(results) if check else EXIT_UNKNOWN

    def close_log(self) -> None:
        verdict.release_checker()        # the run is over, checked or not: the shared driver may idle
        logging.getLogger().removeHandler(self._log_handler)
        self._log_handler.close()


class Middle:
    """What drives a run between the cluster's start and the final phase; the lifecycle calls, in order:
    `set_up` (after provisioning: an error there is a setup error), `play` (the cluster is up, unless the
    run was interrupted first: an error there is an internal one), `wind_down` (always, after `play` or
    its error; never raises) and `unfinished` (a reason the outcome is unknown although it was checked)."""

    kind = "run"             # test.json's "kind"
    what = "test"            # "cannot set up the <what>: ..."
    failure = "run failed"   # the problem recorded when `play` raises

    def faults(self, session: RunSession) -> list[str]:
        """The faults the run will inject, for the backend's preflight."""
        return []

    def set_up(self, session: RunSession) -> None:
        pass

    def play(self, session: RunSession) -> None:
        raise NotImplementedError

    def wind_down(self, session: RunSession) -> None:
        pass

    def unfinished(self) -> str | None:
        return None


def run(cfg: TestConfig, middle: Middle, *, session_hook: Callable[[RunSession], None] | None = None,
        extra_record: dict[str, Any] | None = None) -> RunOutcome:
    """The whole lifecycle with `middle` driving it. `session_hook` gets the session as soon as it
    exists (the CLI routes signals to `request_interrupt` and starts its display; a suite keeps it for
    its own interrupts); `extra_record` goes into test.json."""
    session = RunSession(cfg, kind=middle.kind, extra_record=extra_record)
    if session_hook is not None:
        session_hook(session)
    internal_error = False
    try:
        try:
            session.provision(middle.faults(session))
            middle.set_up(session)
        except Exception as exc:  # noqa: BLE001 - bad backend, missing iptables/root, bad schedule file
            session.problem(f"cannot set up the {middle.what}: {exc}")
            session.shutdown()
            return RunOutcome(session.run.path, EXIT_USAGE, None, session.run.report_path,
                              list(session.problems), False, None)
        try:
            if not session.interrupt.is_set():
                session.start_cluster()
            middle.play(session)
        except Exception as exc:  # noqa: BLE001 - the final phase and shutdown still run
            internal_error = True
            session.problem(middle.failure, exc)
        finally:
            middle.wind_down(session)
            try:
                session.final_phase(reads=not internal_error and session.cluster is not None)
            except Exception as exc:  # noqa: BLE001
                internal_error = True
                session.problem("final phase failed", exc)
            session.shutdown()
        results, code = session.verdict(check=not session.interrupt.is_set() and not internal_error)
        interrupted = session.interrupt.is_set()  # a signal during the check or the report counts too
        unfinished = middle.unfinished()
        if internal_error:
            code = EXIT_INTERNAL
        elif interrupted or unfinished:
            code = EXIT_UNKNOWN
            if unfinished:
                session.problems.insert(0, unfinished)
        return RunOutcome(session.run.path, code, results, session.run.report_path, list(session.problems),
                          interrupted, session.final)
    finally:
        session.close_log()
