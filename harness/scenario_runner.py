"""Replay a parsed scenario (harness/scenario.py) against a real cluster, recording the history.

Node and network actions are recorded as nemesis operations (process "nemesis", docs/formats.md): a
kill / power-loss / stop opens a fault window on that node that the matching restart closes, pause /
resume likewise, partition / heal likewise. Before the final phase every window still open is closed
(heal, resume, restart), so each `start` has its `stop`. Produce steps are ordinary `send` operations.
Each step's outcome and timing go to `scenario.json` in the run directory.

`run_scenario(scenario)` plays a scenario through the run lifecycle (harness/lifecycle.py) with
`ScenarioSteps` driving the middle; `highwater scenario`, `highwater rerun` and suites all call it.
"""
from __future__ import annotations

import itertools
import logging
import time
from typing import Any

from broker.client import Admin, Producer
from clusters.base import Killable, Partitionable, Pausable, Stoppable, require
from rundir import formats as runformat
from harness import config as config_mod, lifecycle
from harness.scenario import Scenario, Step
from workloads.pacing import ValueSource
from workloads.producer import send_op

log = logging.getLogger("harness.scenario")

SCENARIO_JSON = "scenario.json"
POLL_S = 0.1


class StepFailed(RuntimeError):
    """A step did not play out as written (a wait timed out, a produce had another outcome)."""


# what each node or network step asks of the backend (clusters/base.py)
STEP_NEEDS: dict[str, type] = {"kill": Killable, "power-loss": Killable, "restart": Killable, "start": Killable,
                               "stop": Stoppable, "pause": Pausable, "resume": Pausable,
                               "partition": Partitionable, "heal": Partitionable}


class ScenarioRunner:
    def __init__(self, session, scenario: Scenario):
        self.session = session
        self.scenario = scenario
        self.cluster = session.cluster
        self.history = session.history
        self.topic = scenario.config.topic.name
        self.values = ValueSource()
        self.process = self.history.new_process()
        self._ids = itertools.count(1)
        self.open: dict[str, tuple[str, int]] = {}      # node -> (fault, id) for kill/power-loss/stop/pause
        self.partitions: list[tuple[int, list[tuple[str, str]]]] = []
        self.timeline: list[dict[str, Any]] = []
        self.failed: str | None = None

    # --- nemesis records -----------------------------------------------------------------------------
    def _record(self, f: str, fault: str, phase: str, fid: int, targets: list[str], action, **extra) -> str:
        value = {"fault": fault, "phase": phase, "id": fid, "targets": targets, **extra}
        self.history.invoke(runformat.NEMESIS_PROCESS, f, value)
        try:
            detail = action()
        except Exception as exc:
            self.history.complete(runformat.NEMESIS_PROCESS, "info", f, {**value, "detail": f"failed: {exc}"},
                                  error=type(exc).__name__)
            raise
        self.history.complete(runformat.NEMESIS_PROCESS, "info", f, {**value, "detail": detail})
        return detail

    def _open(self, node: str, fault: str, f: str, action) -> str:
        if node in self.open and self.open[node][0] == "pause" and fault != "pause":
            # killing a stopped process ends its pause window (the restarted process runs)
            self._close(node, "resume", lambda: f"pause of {node} ends: it is being killed while stopped")
        if node in self.open:
            raise StepFailed(f"{node} already has an open {self.open[node][0]} fault; restart/resume it first")
        fid = next(self._ids)
        detail = self._record(f, fault, "start", fid, [node], action)
        self.open[node] = (fault, fid)
        return detail

    def _close(self, node: str, f: str, action) -> str:
        fault, fid = self.open.pop(node)
        return self._record(f, fault, "stop", fid, [node], action)

    # --- actions --------------------------------------------------------------------------------------
    def _stop_node(self, node: str) -> str:
        """SIGTERM (a clean shutdown), SIGKILL after the backend's stop grace: the backend's Stoppable."""
        return require(self.cluster, Stoppable, "stop").stop(node)

    def do_step(self, step: Step) -> str:
        a, c = step.args, self.cluster
        need = STEP_NEEDS.get(step.do)
        if need is not None:            # one line naming the backend and the step if it cannot do it
            c = require(c, need, step.do)
        if step.do == "kill":
            return self._open(a["node"], "kill", "kill", lambda: c.kill(a["node"]))
        if step.do == "power-loss":
            return self._open(a["node"], "power-loss", "power-loss", lambda: c.kill(a["node"]))
        if step.do == "stop":
            return self._open(a["node"], "kill", "stop", lambda: self._stop_node(a["node"]))
        if step.do in ("restart", "start"):
            node = a["node"]
            if node in self.open and self.open[node][0] != "pause":
                return self._close(node, "restart", lambda: c.restart(node))
            return c.restart(node)
        if step.do == "pause":
            return self._open(a["node"], "pause", "pause", lambda: c.pause(a["node"]))
        if step.do == "resume":
            node = a["node"]
            if node in self.open and self.open[node][0] == "pause":
                return self._close(node, "resume", lambda: c.resume(node))
            return c.resume(node)
        if step.do == "partition":
            pairs = a["drop"]
            fid = next(self._ids)
            targets = sorted({n for p in pairs for n in p})
            detail = self._record("partition", "partition", "start", fid, targets, lambda: c.drop(pairs),
                                  drop=[list(p) for p in pairs])
            self.partitions.append((fid, pairs))
            return detail
        if step.do == "heal":
            return self._heal()
        if step.do == "sleep":
            self.session.interrupt.wait(a["seconds"])
            return f"slept {a['seconds']}s"
        if step.do == "produce":
            return self._produce(step)
        if step.do == "wait":
            return self._wait(step)
        raise StepFailed(f"unknown action {step.do!r}")

    def _heal(self) -> str:
        if not self.partitions:
            return self.cluster.heal()
        details = []
        for i, (fid, pairs) in enumerate(self.partitions):
            targets = sorted({n for p in pairs for n in p})
            action = self.cluster.heal if i == 0 else (lambda: "healed with the first")
            details.append(self._record("heal", "partition", "stop", fid, targets, action))
        self.partitions = []
        return details[0]

    def _produce(self, step: Step) -> str:
        a = step.args
        cfg = self.scenario.config
        producer = Producer(controller=self.session.controller_address(), acks=a["acks"],
                            timeout_s=float(a.get("timeout", cfg.client.timeout)), retries=0)
        outcomes = []
        try:
            for _ in range(a["count"]):
                kind = send_op(self.history, self.process, producer, self.topic, a["partition"], self.values.next())
                outcomes.append(kind)
                if kind == "info":
                    self.process = self.history.new_process()
        finally:
            producer.close()
        want = a["expect"]
        if want != "any" and any(k != want for k in outcomes):
            raise StepFailed(f"expected every send to be {want}, got {outcomes}")
        return f"sent {a['count']} with acks={a['acks']}: {outcomes}"

    # --- wait conditions ------------------------------------------------------------------------------
    def _observe(self, admin, step: Step) -> tuple[bool, str]:
        a = step.args
        parts = {p.partition: p for p in admin.describe(self.topic)}
        info = parts.get(a["partition"])
        if info is None:
            return False, f"partition {a['partition']} not described"
        seen, ok = [], True

        def check(cond: bool, text: str):
            nonlocal ok
            ok = ok and cond
            seen.append(text)

        leader = f"n{info.leader}" if info.leader is not None else "none"
        if "leader" in a:
            check(leader == a["leader"], f"leader {leader}")
        if "isr" in a:
            isr = sorted(f"n{b}" for b in info.isr)
            check(isr == sorted(a["isr"]), f"isr {isr}")
        if "hw" in a:
            st = info.replica_state.get(info.leader) if info.leader is not None else None
            hw = st[1] if st else None
            check(hw is not None and hw >= a["hw"], f"hw {hw}")
        if "fenced" in a or "alive" in a:
            brokers = admin.brokers()
            for key, want_alive in (("fenced", False), ("alive", True)):
                if key in a:
                    entry = brokers.get(int(a[key][1:]))
                    alive = bool(entry and entry[2])
                    check(alive == want_alive, f"{a[key]} {'alive' if alive else 'fenced'}")
        if "node" in a:
            st = info.replica_state.get(int(a["node"][1:]))
            if "leo" in a:
                check(st is not None and st[0] == a["leo"], f"{a['node']} leo {st[0] if st else None}")
            if "node_hw" in a:
                check(st is not None and st[1] == a["node_hw"], f"{a['node']} hw {st[1] if st else None}")
        return ok, ", ".join(seen)

    def _wait(self, step: Step) -> str:
        timeout = float(step.args["timeout"])
        admin = Admin(controller=self.session.controller_address(), timeout_s=1.0)
        start = time.monotonic()
        last = "nothing observed"
        try:
            while True:
                try:
                    ok, last = self._observe(admin, step)
                except Exception as exc:  # noqa: BLE001 - controller briefly unreachable: keep polling
                    ok, last = False, f"{type(exc).__name__}: {exc}"
                if ok:
                    return f"after {time.monotonic() - start:.2f}s: {last}"
                if time.monotonic() - start >= timeout or self.session.interrupt.is_set():
                    raise StepFailed(f"timed out after {timeout:g}s; last seen: {last}")
                time.sleep(POLL_S)
        finally:
            admin.close()

    # --- whole scenario ---------------------------------------------------------------------------------
    def run(self) -> bool:
        """Play every step; stop at the first that fails. Returns True when all steps played out."""
        for step in self.scenario.steps:
            if self.session.interrupt.is_set():
                self.failed = "interrupted"
                break
            entry = {"step": step.number, "do": step.do, "args": _jsonable(step.args), "note": step.note,
                     "start_ns": self.history.elapsed_ns()}
            phases = getattr(self.session, "phases", None)
            if phases is not None:          # the progress display names the step being played
                phases.step(step.describe())
            try:
                detail = self.do_step(step)
                entry.update(outcome="ok", detail=detail)
                log.info("%s: %s", step.describe(), detail)
            except Exception as exc:  # noqa: BLE001 - recorded, the final phase still runs
                entry.update(outcome="failed", detail=f"{type(exc).__name__}: {exc}")
                self.failed = f"{self.scenario.path}: {step.describe()} did not play out: {exc}"
                log.error("%s", self.failed)
            entry["end_ns"] = self.history.elapsed_ns()
            self.timeline.append(entry)
            self.write_timeline()
            if self.failed:
                break
        return self.failed is None

    def close_faults(self) -> None:
        """Heal, resume and restart whatever the scenario left broken, recording each stop. Never raises."""
        try:
            if self.partitions:
                self._heal()
        except Exception as exc:  # noqa: BLE001
            self.session.problem("scenario: heal failed", exc)
        for node in list(self.open):
            fault = self.open[node][0]
            try:
                if fault == "pause":
                    self._close(node, "resume", lambda n=node: self.cluster.resume(n))
                else:
                    self._close(node, "restart", lambda n=node: self.cluster.restart(n))
            except Exception as exc:  # noqa: BLE001
                self.session.problem(f"scenario: could not undo {fault} of {node}", exc)

    def write_timeline(self) -> None:
        runformat.write_json(self.session.run.path / SCENARIO_JSON,
                             {"scenario": str(self.scenario.path), "name": self.scenario.name,
                              "truncation": self.scenario.config.broker.truncation,
                              "steps": self.timeline, "failed": self.failed})


def _jsonable(args: dict[str, Any]) -> dict[str, Any]:
    return {k: ([list(p) for p in v] if k == "drop" else v) for k, v in args.items()}


# --- the scenario as the lifecycle's middle -----------------------------------------------------------

def scenario_faults(scenario: Scenario) -> list[str]:
    """The faults a scenario injects (its partition steps need the firewall), for the backend preflight."""
    return ["partition"] if any(s.do == "partition" for s in scenario.steps) else []


def validate_scenario(scenario: Scenario, where: str) -> None:
    """The validate step of a scenario run: the settings it ends up with (after the command's overrides),
    the backend and the faults its steps inject; raises ConfigError naming `where`."""
    config_mod.check(scenario.config, source=where)
    config_mod.preflight(scenario.config, where=lambda _key: where, faults=scenario_faults(scenario))


class ScenarioSteps(lifecycle.Middle):
    """The scenario's steps, one after another (ScenarioRunner); what they left broken is undone before
    the final phase, and a step that did not play out makes the outcome unknown."""

    kind, what, failure = "scenario", "scenario", "scenario run failed"

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.runner: ScenarioRunner | None = None

    def faults(self, session) -> list[str]:
        return scenario_faults(self.scenario)

    def set_up(self, session) -> None:
        """Every node or network step's capability, before the cluster starts (as the nemesis does):
        a backend that cannot do one is a setup error, not a step failing mid-run."""
        for step in self.scenario.steps:
            need = STEP_NEEDS.get(step.do)
            if need is not None:
                require(session.cluster, need, step.do)

    def play(self, session) -> None:
        session.phase = "steps"
        self.runner = ScenarioRunner(session, self.scenario)
        self.runner.run()

    def wind_down(self, session) -> None:
        if self.runner is not None:
            self.runner.close_faults()
            self.runner.write_timeline()

    def unfinished(self) -> str | None:
        return self.runner.failed if self.runner is not None else None


def scenario_record(scenario: Scenario) -> dict[str, Any]:
    """test.json's "scenario": the file, its expectation and its steps (`highwater rerun` compares them)."""
    return {"path": str(scenario.path), "name": scenario.name, "description": scenario.description,
            "expect": scenario.expect,
            "steps": [{"step": s.number, "do": s.do, "note": s.note} for s in scenario.steps]}


def run_scenario(scenario: Scenario, *, session_hook=None, extra_record=None):
    """Play a loaded Scenario end to end. Returns (RunOutcome, ScenarioRunner or None). `extra_record`
    goes into test.json beside the scenario (`highwater rerun` records "rerun_of")."""
    steps = ScenarioSteps(scenario)
    outcome = lifecycle.run(scenario.config, steps, session_hook=session_hook,
                            extra_record={"scenario": scenario_record(scenario), **(extra_record or {})})
    return outcome, steps.runner
