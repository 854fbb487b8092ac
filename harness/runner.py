"""`highwater run`'s middle: the workload under the nemesis for the test's time limit.

`run_test(cfg)` is a whole chaos run: the lifecycle of harness/lifecycle.py (provision, start, final
phase, collect, check, report, teardown) with `ChaosWorkload` driving the middle. Its set-up builds the
nemesis (an unavailable nemesis or a bad schedule file is a setup error); its play starts the workload
and the nemesis and runs until the time limit or an interrupt.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from harness import lifecycle
from harness.config import TestConfig, workload_group
from harness.lifecycle import RunOutcome, RunSession
from nemesis import Aim, FaultPlan, Nemesis, expand_faults
from nemesis.faults import on_the_cluster
from workloads.workload import Run, Workload


class ChaosWorkload(lifecycle.Middle):
    """The configured workload and faults, for `time_limit` seconds. `on_tick` is called about four
    times a second while they run."""

    kind, what, failure = "run", "test", "run failed"

    def __init__(self, on_tick: Callable[[RunSession], None] | None = None):
        self.on_tick = on_tick

    def faults(self, session: RunSession) -> list[str]:
        return on_the_cluster(expand_faults(list(session.cfg.nemesis.faults)))

    def set_up(self, session: RunSession) -> None:
        cfg = session.cfg
        if cfg.nemesis.faults or cfg.nemesis.schedule_file:
            schedule = Path(cfg.nemesis.schedule_file) if cfg.nemesis.schedule_file else None
            session.nemesis = Nemesis(session.cluster, session.history,
                                      FaultPlan(list(cfg.nemesis.faults), interval_s=cfg.nemesis.interval,
                                                seed=cfg.seed, schedule=schedule),
                                      aim=Aim(topic=cfg.topic.name, partitions=cfg.topic.partitions,
                                              clients=lambda: session.workload, group=workload_group(cfg)),
                                      admin_factory=session.admin)

    def play(self, session: RunSession) -> None:
        if session.interrupt.is_set():
            return
        cfg, w = session.cfg, session.cfg.workload
        run = Run(session.history, cfg.topic.name, cfg.topic.partitions, cfg.seed,
                  make_producer=lambda i: session.make_producer(worker=i),
                  make_consumer=lambda i: session.make_consumer(worker=i),
                  make_group_consumer=lambda i, group, mode: _group_consumer(session, group, mode))
        session.workload = Workload(w.name, run, w)
        session.phase = "running"
        session.run_started_at = time.monotonic()
        session.workload.start()
        if session.nemesis is not None:
            session.nemesis.start()
        while not session.interrupt.is_set():
            if time.monotonic() - session.run_started_at >= cfg.time_limit:
                break
            if self.on_tick is not None:
                self.on_tick(session)
            session.interrupt.wait(0.25)


def _group_consumer(session: RunSession, group: str, mode: str):
    """A group workload member: always a Kafka client of `[client] library` (the native client has no
    group API), whatever `[client] kind` says (workloads/kafka_client.py make_group_consumer)."""
    from workloads import kafka_client
    cfg = session.cfg
    return kafka_client.make_group_consumer(cfg.client.library, session.kafka_bootstrap(), topic=cfg.topic.name,
                                            group=group, mode=mode, timeout_s=cfg.client.timeout)


def run_test(cfg: TestConfig, *, on_tick: Callable[[RunSession], None] | None = None,
             session_hook: Callable[[RunSession], None] | None = None,
             extra_record: dict[str, Any] | None = None) -> RunOutcome:
    """A whole chaos run. `session_hook` gets the session as soon as it exists (the CLI uses it to route
    signals to `request_interrupt`); `on_tick` is called about four times a second while running;
    `extra_record` goes into test.json (`highwater rerun` records "rerun_of")."""
    return lifecycle.run(cfg, ChaosWorkload(on_tick), session_hook=session_hook, extra_record=extra_record)
