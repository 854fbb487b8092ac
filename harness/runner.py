"""The test lifecycle: provision, run workloads and the nemesis, final phase, collect, check, store.

`RunSession` owns one run directory, its History and its cluster, and knows the parts every kind of run
shares (a chaos run here, a scenario in harness/scenario_runner.py):

    provision   cluster from the backend registry, fault preflight, topic ready
    final phase stop the nemesis, heal, resume paused nodes, restart dead ones; bounded wait (polling the
                cluster) for every partition to have a leader, a full ISR and HW = LEO; final reads from 0
                to the HW; one `final-state` operation per partition and final.json
    shutdown    stop brokers, collect logs and replica dumps, tear down (always, whatever happened)
    verdict     the checker and the reports, when available; the exit code

`run_test(cfg)` is a whole chaos run. An interrupt (`session.request_interrupt()`, called by the CLI's
SIGINT/SIGTERM handler) ends the run early: the nemesis still heals, every process is stopped, the
firewall rules are removed and the history is kept; the final wait and reads are skipped.
"""
from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from clusters.base import ClusterSpec
from harness import backends, recovery, verdict
from rundir import formats as runformat, store
from harness import config as config_mod
from rundir.exits import EXIT_INTERNAL, EXIT_UNKNOWN, EXIT_USAGE
from harness.config import TestConfig
from rundir.history import History
from harness.progress import PhaseClock, Stats

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
    def __init__(self, cfg: TestConfig, *, kind: str = "run", extra_record: dict[str, Any] | None = None):
        # the validate step again (the commands run it first): a bad configuration never creates a run
        # directory; a scenario injects its own faults, checked by its command
        config_mod.check(cfg)
        config_mod.preflight(cfg, faults=None if kind == "run" else [])
        self.cfg = cfg.with_seed()
        self.kind = kind
        self.extra_record = dict(extra_record or {})
        self.run = store.create_run_dir(cfg.results_dir, cfg.name)
        self.start_wall_ns = time.time_ns()
        self.history = History(self.run.history_path, mirror=self.run.nemesis_path)
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
        if self.cluster is not None:
            layout = (self.cluster.layout() if hasattr(self.cluster, "layout")
                      else store.cluster_layout(self.cluster, self.cfg.cluster.backend))
        record = store.test_record(self.run, self.cfg.to_dict(), seed=self.cfg.seed,
                                   start_wall_ns=self.start_wall_ns, cluster=layout,
                                   extra={"kind": self.kind, **self.extra_record})
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
        if self.nemesis is not None and hasattr(self.nemesis, "active"):
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
        from broker.client import Admin
        return Admin(controller=self.controller_address(), timeout_s=self.cfg.client.timeout)

    def make_producer(self, acks=None):
        from broker.client import Producer
        return Producer(controller=self.controller_address(),
                        acks=self.cfg.client.acks if acks is None else acks,
                        timeout_s=self.cfg.client.timeout, retries=self.cfg.client.retries)

    def make_consumer(self):
        from broker.client import Consumer
        return Consumer(controller=self.controller_address(), timeout_s=self.cfg.client.timeout)

    # --- provisioning ------------------------------------------------------------------------------------
    def provision(self, faults: list[str]) -> None:
        self.phase = "provision"
        # the checker's driver starts (in the background) while the cluster and the workload run
        verdict.prepare_checker(engine=self.cfg.checker.engine)
        spec = ClusterSpec(run_id=self.run.run_id, run_dir=self.run.path, brokers=self.cfg.cluster.nodes,
                           broker_settings=self.cfg.broker_settings(),
                           controller_settings=self.cfg.controller_settings())
        self.cluster = backends.make_cluster(self.cfg.cluster.backend, spec, cluster_cfg=self.cfg.cluster)
        self.cluster.check_faults(list(faults))

    def start_cluster(self) -> None:
        log.info("run %s: starting the %s cluster (%d brokers)", self.run.run_id, self.cfg.cluster.backend,
                 self.cfg.cluster.nodes)
        self.cluster.start()
        self._write_test_json()
        self.wait_topic_ready(READY_TIMEOUT_S)
        log.info("cluster up, topic %r ready", self.cfg.topic.name)

    def wait_topic_ready(self, timeout_s: float) -> None:
        """Every partition of the test topic has a leader (the controller creates the topic at start-up)."""
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

    # --- final phase --------------------------------------------------------------------------------------
    def stop_activity(self) -> None:
        """Stop the nemesis (it undoes its faults) and the workload. Never raises."""
        if self.nemesis is not None:
            try:
                self.nemesis.stop()
            except Exception as exc:  # noqa: BLE001
                self.problem("nemesis stop failed", exc)
        if self.workload is not None:
            try:
                stuck = self.workload.stop()
                if stuck:
                    self.problem(f"workers still busy after stop: {', '.join(stuck)}")
                for err in self.workload.errors():
                    self.problem(f"worker died: {err}")
            except Exception as exc:  # noqa: BLE001
                self.problem("workload stop failed", exc)

    def heal_everything(self) -> None:
        """Belt and braces after the nemesis: no drop rules, nothing paused, everything running."""
        if self.cluster is None:
            return
        try:
            self.cluster.heal()
        except Exception as exc:  # noqa: BLE001
            self.problem("heal failed", exc)
        try:
            nodes = self.cluster.nodes()
        except Exception as exc:  # noqa: BLE001
            self.problem("cluster has no nodes to heal", exc)
            return
        for node in nodes:
            try:
                if self.cluster.is_running(node):
                    self.cluster.resume(node)
                else:
                    log.info("final phase: %s", self.cluster.restart(node))
            except Exception as exc:  # noqa: BLE001
                self.problem(f"could not bring {node} back", exc)

    def final_phase(self, *, reads: bool = True) -> dict[str, Any]:
        self.phase = "final"
        self.stop_activity()
        self.heal_everything()
        topic, parts = self.cfg.topic.name, list(range(self.cfg.topic.partitions))
        outcome = recovery.WaitOutcome({}, 0.0, True, "skipped")
        reads_done: dict[int, Any] = {}
        if reads and not self.interrupt.is_set() and self.cluster is not None:
            admin = None
            try:
                admin = self.admin()
                interrupted = self.interrupt
                outcome = recovery.wait_recovered(
                    lambda: admin.describe(topic), parts, timeout_s=self.cfg.final_wait,
                    sleep=lambda s: interrupted.wait(s), should_stop=interrupted.is_set)
                if outcome.timed_out:
                    bad = {p: (outcome.states[p].problem() if p in outcome.states else "not described")
                           for p in parts if p not in outcome.states or not outcome.states[p].healthy}
                    self.problem(f"final wait timed out after {outcome.waited_s:.1f}s: {bad}")
                from workloads.final_read import final_reads
                targets = {p: s.hw for p, s in outcome.states.items() if s.healthy}
                if self.interrupt.is_set():
                    raise RuntimeError("interrupted during the final wait")
                self.phase = "final-reads"
                reads_done = final_reads(self.history, self.make_consumer, topic, parts,
                                         chunk=self.cfg.workload.final_read_chunk, targets=targets,
                                         deadline=time.monotonic() + max(30.0, self.cfg.final_wait))
            except Exception as exc:  # noqa: BLE001
                self.problem("final wait/reads failed", exc)
            finally:
                if admin is not None:
                    admin.close()
        partitions = []
        for p in parts:
            r = reads_done.get(p)
            value = recovery.final_state_value(p, outcome.states.get(p), read_to=r.read_to if r else None,
                                               read_covered=bool(r and r.covered))
            partitions.append(value)
            try:
                self.history.complete(runformat.HARNESS_PROCESS, "info", runformat.FINAL_STATE_F, value)
            except Exception as exc:  # noqa: BLE001
                self.problem("could not record final-state", exc)
        log.info("final phase: waited %.1fs (timed out: %s); final reads: %s", outcome.waited_s, outcome.timed_out,
                 {p: (r.read_to, r.covered) for p, r in reads_done.items()})
        self.final = {"partitions": partitions, "waited_s": round(outcome.waited_s, 3),
                      "timed_out": bool(outcome.timed_out), "skipped": not reads or self.interrupt.is_set()}
        runformat.write_json(self.run.path / runformat.FINAL_JSON, self.final)
        return self.final

    # --- shutdown ----------------------------------------------------------------------------------------
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
        return results, verdict.exit_code(results) if check else EXIT_UNKNOWN

    def close_log(self) -> None:
        logging.getLogger().removeHandler(self._log_handler)
        self._log_handler.close()


def run_test(cfg: TestConfig, *, on_tick: Callable[[RunSession], None] | None = None,
             session_hook: Callable[[RunSession], None] | None = None,
             extra_record: dict[str, Any] | None = None) -> RunOutcome:
    """A whole chaos run. `session_hook` gets the session as soon as it exists (the CLI uses it to route
    signals to `request_interrupt`); `on_tick` is called about four times a second while running;
    `extra_record` goes into test.json (`highwater rerun` records "rerun_of")."""
    session = RunSession(cfg, extra_record=extra_record)
    if session_hook is not None:
        session_hook(session)
    internal_error = False
    try:
        try:
            faults = list(cfg.nemesis.faults)
            session.provision(faults)
            if faults or cfg.nemesis.schedule_file:
                session.nemesis = _make_nemesis(session)
        except Exception as exc:  # noqa: BLE001 - bad backend, missing iptables/root, bad schedule file
            session.problem(f"cannot set up the test: {exc}")
            session.shutdown()
            return RunOutcome(session.run.path, EXIT_USAGE, None, session.run.report_path,
                              list(session.problems), False, None)
        try:
            if not session.interrupt.is_set():
                session.start_cluster()
            if not session.interrupt.is_set():
                from workloads.registry import Workload
                w = cfg.workload
                session.workload = Workload(
                    w.name, history=session.history, topic=cfg.topic.name, partitions=cfg.topic.partitions,
                    rate=w.rate, concurrency=w.concurrency, consumers=w.consumers, seed=cfg.seed,
                    make_producer=session.make_producer, make_consumer=session.make_consumer)
                session.phase = "running"
                session.run_started_at = time.monotonic()
                session.workload.start()
                if session.nemesis is not None:
                    session.nemesis.start()
                while not session.interrupt.is_set():
                    if time.monotonic() - session.run_started_at >= cfg.time_limit:
                        break
                    if on_tick is not None:
                        on_tick(session)
                    session.interrupt.wait(0.25)
        except Exception as exc:  # noqa: BLE001 - the final phase and shutdown still run
            internal_error = True
            session.problem("run failed", exc)
        finally:
            try:
                session.final_phase(reads=not internal_error and session.cluster is not None)
            except Exception as exc:  # noqa: BLE001
                internal_error = True
                session.problem("final phase failed", exc)
            session.shutdown()
        results, code = session.verdict(check=not session.interrupt.is_set() and not internal_error)
        interrupted = session.interrupt.is_set()  # a signal during the check or the report counts too
        if internal_error:
            code = EXIT_INTERNAL
        elif interrupted:
            code = EXIT_UNKNOWN
        return RunOutcome(session.run.path, code, results, session.run.report_path, list(session.problems),
                          interrupted, session.final)
    finally:
        session.close_log()


def _make_nemesis(session: RunSession):
    try:
        from nemesis import Nemesis
    except ImportError as exc:
        raise RuntimeError(f"faults {session.cfg.nemesis.faults} requested but the nemesis package "
                           f"is not available: {exc}") from None
    cfg = session.cfg
    schedule = Path(cfg.nemesis.schedule_file) if cfg.nemesis.schedule_file else None
    return Nemesis(session.cluster, session.history, faults=list(cfg.nemesis.faults),
                   interval_s=cfg.nemesis.interval, seed=cfg.seed, schedule=schedule,
                   admin_factory=session.admin, topic=cfg.topic.name, partitions=cfg.topic.partitions)
