"""Replay a parsed scenario (harness/scenario.py) against a real cluster, recording the history.

Node and network steps are played by nemesis/windows.py `FaultWindows`, which opens and closes their
fault windows, records them as nemesis operations and undoes what is still open before the final phase.
Produce steps are ordinary `send` operations; flush, elect and assert steps are not in the history, and
neither is a resend step: the retry of a wire produce step's batches, which the checker judges by what the
logs hold (a retry stored twice is a `duplicate`).
A produce with `wait = false` sends in the background: one thread, one Producer and one history process
per send; the step returns once every send's invoke is recorded, and the completions are recorded when
the answers come. An `await` step joins them (its timeout) and checks their `expect`; when the steps
end, whatever is still under way is awaited the same way (a timeline entry "do": "await", "step":
null), before the faults are undone and the final phase starts.

A step with `mode` plays only in those truncation modes; in the others it is recorded as skipped.
Each step's outcome (ok, failed, skipped), detail and timing (history time and wall clock: an assert's
`since` compares the wall clock with the event logs' `ts`) go to `scenario.json` in the run directory.
A failed step (an assertion that did not hold, a wait that timed out, ...) ends the scenario: `failed`
says `file:line: step N (...) did not play out: ...` with what was expected and what was seen, the
final phase still runs, and the outcome is unknown (exit 2), never "as expected".

`run_scenario(scenario)` plays a scenario through the run lifecycle (harness/lifecycle.py) with
`ScenarioSteps` driving the middle; `highwater scenario`, `highwater rerun` and suites all call it.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from broker.client import Admin, ClientError, Consumer, Producer
from clusters.base import EventLogs, require
from rundir import expectation, formats as runformat
from rundir.settings import at_line
from harness import config as config_mod, lifecycle
from harness.scenario import GROUP_ACTIONS, Scenario, Step
from harness.scenario_groups import BackgroundCommit, GroupSteps
from nemesis.faults import KINDS, NEEDS, verb_kind
from nemesis.windows import FAULT_STEPS, FaultWindows
from workloads.pacing import ValueSource
from workloads.producer import send_op

log = logging.getLogger("harness.scenario")

SCENARIO_JSON = runformat.SCENARIO_JSON
POLL_S = 0.1
COUNT_SETTLE_S = 0.5     # an exact-count assert is judged again this much later before it passes


MAX_SEEN = 400          # characters of "what was seen" in a failed assertion's one-line message


class StepFailed(RuntimeError):
    """A step did not play out as written (a wait timed out, a produce had another outcome). For an
    assert step whose condition did not hold within its timeout, `expected` and `seen` say how."""

    def __init__(self, message: str, *, expected: str | None = None, seen: str | None = None):
        super().__init__(message)
        self.expected, self.seen = expected, seen

    @classmethod
    def assertion(cls, expected: str, seen: str, timeout: float) -> "StepFailed":
        return cls(f"assertion failed after {timeout:g}s: expected {expected}; saw {seen}", expected=expected,
                   seen=seen)


def step_needs(step) -> type | None:
    """The capability a step asks of the backend, None when it needs none."""
    if step.do == "assert":
        return EventLogs if "event" in step.args else None
    return NEEDS.get(step.do)


# answers to a resent batch that another try would get again: the broker judged the batch itself
RESEND_FINAL = ("OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH", "CORRUPT_MESSAGE", "INVALID_RECORD")


class ScenarioRunner:
    def __init__(self, session, scenario: Scenario):
        self.session = session
        self.scenario = scenario
        self.cluster = session.cluster
        self.history = session.history
        self.topic = scenario.config.topic.name
        self.values = ValueSource()
        self.process = self.history.new_process()
        self.faults = FaultWindows(self.cluster, self.history)    # the node and network steps (nemesis/)
        self.timeline: list[dict[str, Any]] = []
        self.failed: str | None = None
        self.started_wall_ns: dict[int, int] = {}        # step number -> wall clock when it started
        self.background: list[tuple[Step, list["_Send"]]] = []   # produce steps with wait = false, not awaited
        self.wire = None                # the scenario's one WireProducer (produce steps with client = "wire")
        self.wire_batches: dict[int, list] = {}     # produce step number -> the SentBatches it sent
        self._groups: GroupSteps | None = None      # the join, poll, commit, ... steps' members, once needed

    # --- actions --------------------------------------------------------------------------------------
    def do_step(self, step: Step) -> str:
        a = step.args
        need = step_needs(step)
        if need is not None:            # one line naming the backend and the step if it cannot do it
            require(self.cluster, need, step.do)
        if step.do in FAULT_STEPS:      # node and network steps: the nemesis's fault windows
            return self.faults.play(step.do, a)
        if step.do == "flush":
            return self._admin(lambda admin: admin.flush(
                int(a["node"][1:]), self.topic if "partition" in a else None, a.get("partition")))
        if step.do == "elect":
            broker = int(a["node"][1:]) if "node" in a else None
            return self._admin(lambda admin: admin.elect_leader(a.get("topic", self.topic), a["partition"], broker,
                                                                unclean=a["unclean"]))
        if step.do in GROUP_ACTIONS:
            return self._group_step(step)
        if step.do == "assert":
            return self._assert(step)
        if step.do == "sleep":
            self.session.interrupt.wait(a["seconds"])
            return f"slept {a['seconds']}s"
        if step.do == "produce":
            if not step.args.get("wait", True):
                return self._produce_background(step)
            return self._produce(step)
        if step.do == "resend":
            return self._resend(step)
        if step.do == "await":
            return self._await(float(step.args["timeout"]))
        if step.do == "wait":
            return self._wait(step)
        raise StepFailed(f"unknown action {step.do!r}")

    @property
    def groups(self) -> GroupSteps:
        if self._groups is None:
            session, cfg = self.session, self.scenario.config
            def consumer():
                return Consumer(controller=session.controller_address(), timeout_s=float(cfg.client.timeout))
            self._groups = GroupSteps(self.history, lambda: session.kafka_bootstrap(), self.topic,
                                      cfg.topic.partitions, consumer, StepFailed)
        return self._groups

    def _group_step(self, step: Step) -> str:
        if step.do == "commit" and step.args.get("wait") is False:
            commit = BackgroundCommit(self.groups, step.args, name=f"scenario-step-{step.number}")
            commit.start()
            if not commit.invoked.wait(commit.timeout_s + 5.0):
                raise StepFailed(f"{commit.what} was not invoked within {commit.timeout_s + 5.0:g}s")
            self.background.append((step, [commit]))
            return f"started {commit.what} in the background (timeout {commit.timeout_s:g}s)"
        return getattr(self.groups, step.do)(step.args)

    def _admin(self, action) -> str:
        admin = Admin(controller=self.session.controller_address(),
                      timeout_s=float(self.scenario.config.client.timeout))
        try:
            return action(admin)
        finally:
            admin.close()

    def _producer(self, a: dict, timeout_s: float):
        """The step's client: the native Producer (no retries), or the [client] section's Kafka library
        with its retries and idempotence (workloads/kafka_client.py)."""
        cfg = self.scenario.config
        if a.get("client") == "wire":
            if self.wire is None:
                from workloads.kafka_wire import WireProducer
                self.wire = WireProducer(self.session.kafka_bootstrap(), timeout_s=timeout_s)
            self.wire.timeout_s = timeout_s
            return self.wire
        if a.get("client") == "kafka":
            from workloads import kafka_client
            return kafka_client.make_producer(cfg.client.library, self.session.kafka_bootstrap(), acks=a["acks"],
                                              timeout_s=timeout_s, retries=cfg.client.retries,
                                              idempotence=cfg.client.idempotence)
        return Producer(controller=self.session.controller_address(), acks=a["acks"], timeout_s=timeout_s,
                        retries=0)

    def _produce(self, step: Step) -> str:
        a = step.args
        cfg = self.scenario.config
        producer = self._producer(a, float(a.get("timeout", cfg.client.timeout)))
        kept = len(producer.sent) if producer is self.wire else 0
        outcomes = []
        try:
            for _ in range(a["count"]):
                kind = send_op(self.history, self.process, producer, self.topic, a["partition"], self.values.next())
                outcomes.append(kind)
                if kind == "info":
                    self.process = self.history.new_process()
        finally:
            if producer is self.wire:       # kept open: a resend step sends its batches again
                self.wire_batches[step.number] = producer.sent[kept:]
            else:
                producer.close()
        want = a["expect"]
        if want != "any" and any(k != want for k in outcomes):
            raise StepFailed(f"expected every send to be {want}, got {outcomes}")
        return f"sent {a['count']} with acks={a['acks']}: {outcomes}"

    def _resend(self, step: Step) -> str:
        """Send the batches of an earlier wire produce step again, unchanged, to the partition's leader now
        (trying again, up to `timeout`, until a leader answers: no leader, a stale one, a broken connection).
        Each answer goes to the step's detail: the first offset again (the retry was recognised), a new one
        (appended a second time), or the broker's refusal."""
        batches = self.wire_batches.get(step.args["step"])
        if not batches:
            raise StepFailed(f"step {step.args['step']} sent no batch in this run (skipped in this mode?)")
        deadline = time.monotonic() + float(step.args["timeout"])
        answers = []
        for batch in batches:
            while True:
                try:
                    got = self.wire.resend(batch)
                except ClientError as exc:     # sent again until answered: it is the same batch every time
                    if exc.code not in RESEND_FINAL and time.monotonic() < deadline:
                        self.session.interrupt.wait(0.2)
                        continue
                    answers.append(f"seq {batch.base_sequence}: {exc.code}")
                    break
                if got.same is None:
                    answers.append(f"seq {batch.base_sequence}: answered with offset {got.offset} by n{got.leader} "
                                   f"(the first attempt had no answer)")
                elif got.same:
                    answers.append(f"seq {batch.base_sequence}: answered with its first offset {got.offset} "
                                   f"by n{got.leader}")
                else:
                    answers.append(f"seq {batch.base_sequence}: appended again at offset {got.offset} by "
                                   f"n{got.leader} (first at {batch.offsets[0]})")
                break
        return f"resent {len(batches)} batch{'es' if len(batches) != 1 else ''} of step {step.args['step']}: " \
               + "; ".join(answers)

    def _produce_background(self, step: Step) -> str:
        """Start the step's sends, each in its own thread; return once each invoke is recorded."""
        a = step.args
        timeout_s = float(a.get("timeout", self.scenario.config.client.timeout))
        sends = []
        for _ in range(a["count"]):
            producer = self._producer(a, timeout_s)
            send = _Send(self.history, producer, self.topic, a["partition"], self.values.next(),
                         name=f"scenario-step-{step.number}")
            sends.append(send)
            send.start()
            if not send.invoked.wait(timeout_s + 5.0):
                raise StepFailed(f"the send of value {send.value} was not invoked within {timeout_s + 5.0:g}s")
        self.background.append((step, sends))
        return f"started {a['count']} with acks={a['acks']} in the background (timeout {timeout_s:g}s)"

    def _await(self, timeout: float) -> str:
        """Wait for every background send (up to `timeout` seconds), then check each produce's `expect`."""
        if not self.background:
            return "nothing under way"
        deadline = time.monotonic() + timeout
        for _step, sends in self.background:
            for send in sends:
                send.join(max(0.0, deadline - time.monotonic()))
        waiting = [(st, [s for s in sends if s.is_alive()]) for st, sends in self.background]
        waiting = [(st, left) for st, left in waiting if left]
        if waiting:
            raise StepFailed(f"timed out after {timeout:g}s: " + "; ".join(
                f"{len(left)} send{'s' if len(left) != 1 else ''} of step {st.number} still unanswered"
                for st, left in waiting))
        done, self.background = self.background, []
        details, wrong = [], []
        for st, sends in done:
            outcomes = [s.outcome for s in sends]
            details.append(f"step {st.number}: {outcomes}")
            want = st.args["expect"]
            if want != "any" and any(k != want for k in outcomes):
                wrong.append(f"step {st.number} ({st.do}) expected every {'send' if st.do == 'produce' else st.do} "
                             f"to be {want}, got {outcomes}")
        if wrong:
            raise StepFailed("; ".join(wrong))
        return "; ".join(details)

    def drain(self) -> None:
        """Before the faults are undone: let every background send finish (each is bounded by its
        client timeout), so none is answered only after the final phase heals. Never raises."""
        for _step, sends in self.background:
            for send in sends:
                send.join(send.timeout_s + 5.0)
                if send.is_alive():
                    self.session.problem(f"scenario: {send.what} in the background did not end",
                                         RuntimeError("still running"))
        if self.wire is not None:
            self.wire.close()
        if self._groups is not None:
            self._groups.close()

    # --- wait conditions ------------------------------------------------------------------------------
    def _observe(self, admin, step: Step) -> tuple[bool, str]:
        a = step.args
        parts = {p.partition: p for p in admin.describe(a.get("topic", self.topic))}
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

    # --- assert steps -------------------------------------------------------------------------------------
    def _assert(self, step: Step) -> str:
        """Poll the condition until it holds (the detail says what was seen) or the timeout passes
        (StepFailed with what was expected and what was seen last)."""
        a = step.args
        timeout = float(a["timeout"])
        if "event" in a:
            logs = require(self.cluster, EventLogs, "assert")
            since = self.started_wall_ns.get(a["since"]) if "since" in a else None

            def observe() -> tuple[bool, str, str]:
                return _judge_events(logs.events(a["node"]), a, since)
        else:
            admin = Admin(controller=self.session.controller_address(), timeout_s=1.0)

            def observe() -> tuple[bool, str, str]:
                return _judge_epochs(admin.replicas(int(a["node"][1:])), self.topic, a)
        start = time.monotonic()
        try:
            while True:
                try:
                    ok, expected, seen = observe()
                except Exception as exc:  # noqa: BLE001 - node briefly unreachable: keep polling
                    ok, expected, seen = False, _expected(a), f"{type(exc).__name__}: {exc}"
                if ok and "event" in a and a.get("count") is not None:
                    # an exact count must still hold a moment later: a duplicate logged just after the
                    # first poll that saw the count would otherwise go unnoticed
                    self.session.interrupt.wait(COUNT_SETTLE_S)
                    try:
                        ok, expected, seen = observe()
                    except Exception as exc:  # noqa: BLE001
                        ok, expected, seen = False, _expected(a), f"{type(exc).__name__}: {exc}"
                if ok:
                    return f"after {time.monotonic() - start:.2f}s: {seen}"
                if time.monotonic() - start >= timeout or self.session.interrupt.is_set():
                    raise StepFailed.assertion(expected, _clip(seen), timeout)
                time.sleep(POLL_S)
        finally:
            if "event" not in a:
                admin.close()

    # --- whole scenario ---------------------------------------------------------------------------------
    def run(self) -> bool:
        """Play every step; stop at the first that fails. Returns True when all steps played out."""
        mode = self.scenario.config.broker.truncation
        for step in self.scenario.steps:
            if self.session.interrupt.is_set():
                self.failed = "interrupted"
                break
            self.started_wall_ns[step.number] = time.time_ns()
            entry = {"step": step.number, "do": step.do, "args": _jsonable(step.args), "note": step.note,
                     "start_ns": self.history.elapsed_ns(), "start_wall_ns": self.started_wall_ns[step.number],
                     "first_index": self.history.next_index}
            if step.modes is not None:
                entry["mode"] = list(step.modes)
            if not step.plays_in(mode):
                entry.update(outcome="skipped", detail=f"plays only in {' and '.join(step.modes)} mode, "
                                                       f"this run is {mode}", end_ns=entry["start_ns"])
                log.info("%s: skipped (%s mode)", step.describe(), mode)
                self.timeline.append(entry)
                continue
            phases = getattr(self.session, "phases", None)
            if phases is not None:          # the progress display names the step being played
                phases.step(step.describe())
            try:
                detail = self.do_step(step)
                entry.update(outcome="ok", detail=detail)
                log.info("%s: %s", step.describe(), detail)
            except Exception as exc:  # noqa: BLE001 - recorded, the final phase still runs
                entry.update(outcome="failed", detail=f"{type(exc).__name__}: {exc}")
                if isinstance(exc, StepFailed) and exc.expected is not None:
                    entry.update(expected=exc.expected, seen=exc.seen)
                self.failed = f"{at_line(self.scenario.path, step.line)}: {step.describe()} did not play out: {exc}"
                log.error("%s", self.failed)
            entry["end_ns"] = self.history.elapsed_ns()
            entry["end_index"] = self.history.next_index     # the step wrote history [first_index, end_index)
            self.timeline.append(entry)
            self.write_timeline()
            if self.failed:
                break
        if self.failed is None and self.background:
            self._await_at_end()
        return self.failed is None

    def _await_at_end(self) -> None:
        """The end of the steps awaits the produce steps still under way (default await timeout)."""
        from harness.scenario import NUMBERS
        entry: dict[str, Any] = {"step": None, "do": "await", "args": {}, "start_ns": self.history.elapsed_ns(),
                                 "note": "the end of the steps awaits the produce steps started with wait = false",
                                 "start_wall_ns": time.time_ns(), "first_index": self.history.next_index}
        try:
            entry.update(outcome="ok", detail=self._await(float(NUMBERS["timeout"].default)))
        except Exception as exc:  # noqa: BLE001 - recorded, the final phase still runs
            entry.update(outcome="failed", detail=f"{type(exc).__name__}: {exc}")
            self.failed = f"{self.scenario.path}: the end of the steps (await) did not play out: {exc}"
            log.error("%s", self.failed)
        entry["end_ns"] = self.history.elapsed_ns()
        entry["end_index"] = self.history.next_index
        self.timeline.append(entry)
        self.write_timeline()

    def close_faults(self) -> None:
        """Heal, resume and restart whatever the scenario left broken, recording each stop. Never raises."""
        self.faults.undo_all(lambda what, exc: self.session.problem(f"scenario: {what}", exc))

    def write_timeline(self) -> None:
        runformat.write_json(self.session.run.path / SCENARIO_JSON,
                             {"scenario": str(self.scenario.path), "name": self.scenario.name,
                              "truncation": self.scenario.config.broker.truncation,
                              "steps": self.timeline, "failed": self.failed})


class _Send(threading.Thread):
    """One background send (a produce step with wait = false), as a fresh client process of the history:
    `invoked` is set once its invoke is in the history (or it ended without one), `outcome` is ok / fail /
    info when it ends."""

    def __init__(self, history, producer, topic: str, partition: int, value: int, *, name: str):
        super().__init__(name=name, daemon=True)
        self.history, self.process, self.producer = history, history.new_process(), producer
        self.topic, self.partition, self.value = topic, partition, value
        self.timeout_s, self.what = producer.timeout_s, f"the send of value {value}"
        self.invoked = threading.Event()
        self.outcome: str | None = None

    def run(self) -> None:
        outer = self

        class Noting:                       # the history, telling the step when the invoke is recorded
            def invoke(self, *args, **kwargs):
                try:
                    return outer.history.invoke(*args, **kwargs)
                finally:
                    outer.invoked.set()

            def complete(self, *args, **kwargs):
                return outer.history.complete(*args, **kwargs)

        try:
            self.outcome = send_op(Noting(), self.process, self.producer, self.topic, self.partition, self.value)
        except Exception as exc:  # noqa: BLE001 - the history itself failed: no outcome to check against
            log.error("background send of %s failed: %r", self.value, exc)
            self.outcome = f"error: {type(exc).__name__}"
        finally:
            self.invoked.set()
            self.producer.close()


def _jsonable(args: dict[str, Any]) -> dict[str, Any]:
    return {k: ([list(p) for p in v] if k == "drop" else v) for k, v in args.items()}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SEEN else text[:MAX_SEEN - 3] + "..."


def _fields(match: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in match.items())


def _expected(a: dict[str, Any]) -> str:
    if "epochs" in a:
        return f"{a['node']}'s epoch cache for partition {a['partition']} = {a['epochs']}"
    count = a.get("count")
    amount = "at least one" if count is None else ("no" if count == 0 else f"exactly {count}")
    match = f" with {_fields(a['match'])}" if a.get("match") else ""
    since = f" since step {a['since']} started" if "since" in a else ""
    plural = "" if count in (None, 1) else "s"
    return f"{amount} {a['event']!r} event{plural} on {a['node']}{match}{since}"


def _judge_events(events: list[dict], a: dict[str, Any], since_ns: int | None) -> tuple[bool, str, str]:
    """(holds, expected, seen) for an assert on an event log: the events named, logged at or after
    `since_ns` (wall clock), whose fields equal every field of `match`, counted."""
    named = [e for e in events if e.get("event") == a["event"]
             and (since_ns is None or (isinstance(e.get("ts"), int) and e["ts"] >= since_ns))]
    match = a.get("match") or {}
    hits = [e for e in named if all(k in e and e[k] == v for k, v in match.items())]
    count = a.get("count")
    ok = len(hits) >= 1 if count is None else len(hits) == count
    shown = hits or named           # the matching events, else the ones of that name (what did not match)
    listed = "; ".join("{" + ", ".join(f"{k}={v!r}" for k, v in e.items() if k not in ("ts", "node", "event"))
                       + "}" for e in shown[-3:])
    seen = f"{len(hits)} matching of {len(named)} {a['event']!r} event{'' if len(named) == 1 else 's'}"
    if listed:
        seen += f" ({'last ' if len(shown) > 3 else ''}{listed})"
    return ok, _expected(a), seen


def _judge_epochs(report: dict | None, topic: str, a: dict[str, Any]) -> tuple[bool, str, str]:
    """(holds, expected, seen) for an assert on a broker's epoch cache (DESCRIBE_REPLICAS "epochs")."""
    if report is None:
        return False, _expected(a), f"{a['node']} did not answer DESCRIBE_REPLICAS"
    entry = report.get((topic, a["partition"]))
    if entry is None:
        return False, _expected(a), f"{a['node']} holds no replica of {topic}/{a['partition']}"
    if "epochs" not in entry:
        return False, _expected(a), (f"{a['node']}'s DESCRIBE_REPLICAS answer has no 'epochs' (this broker does "
                                     f"not report its epoch cache)")
    epochs = [list(e) for e in entry["epochs"]]
    return epochs == a["epochs"], _expected(a), f"epochs {epochs}"


# --- the scenario as the lifecycle's middle -----------------------------------------------------------

def scenario_faults(scenario: Scenario) -> list[str]:
    """The faults a scenario injects (its partition steps need the firewall, its degrade steps the
    backend's degradation tools), for the backend preflight."""
    kinds = [verb_kind(s.do) for s in scenario.steps]
    return [k.name for k in KINDS.values() if k.on == "links" and k in kinds]


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
        mode = getattr(getattr(getattr(self.scenario, "config", None), "broker", None), "truncation", None)
        for step in self.scenario.steps:
            if mode is not None and not step.plays_in(mode):
                continue
            need = step_needs(step)
            if need is not None:
                require(session.cluster, need, step.do)

    def play(self, session) -> None:
        session.phase = "steps"
        self.runner = ScenarioRunner(session, self.scenario)
        self.runner.run()

    def wind_down(self, session) -> None:
        if self.runner is not None:
            self.runner.drain()
            self.runner.close_faults()
            self.runner.write_timeline()

    def unfinished(self) -> str | None:
        return self.runner.failed if self.runner is not None else None


def scenario_record(scenario: Scenario) -> dict[str, Any]:
    """test.json's "scenario": the file, its expectation and its steps (`highwater rerun` compares them)."""
    return {"path": str(scenario.path), "name": scenario.name, "description": scenario.description,
            "expect": scenario.expect,
            "steps": [{"step": s.number, "do": s.do, "note": s.note, **({"modes": list(s.modes)} if s.modes else {})}
                      for s in scenario.steps]}


def run_scenario(scenario: Scenario, *, session_hook=None, extra_record=None):
    """Play a loaded Scenario end to end. Returns (RunOutcome, ScenarioRunner or None). `extra_record`
    goes into test.json beside the scenario (`highwater rerun` records "rerun_of")."""
    steps = ScenarioSteps(scenario)
    mode = scenario.config.broker.truncation
    expect = ({"expect": expectation.record(scenario.expect[mode], by="scenario", mode=mode)}
              if mode in scenario.expect else {})
    outcome = lifecycle.run(scenario.config, steps, session_hook=session_hook,
                            extra_record={"scenario": scenario_record(scenario), **expect, **(extra_record or {})})
    return outcome, steps.runner
