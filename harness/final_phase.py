"""The final phase of every run: stop the middle, heal, wait for the cluster to recover, read back.

`run(session, reads=...)` stops the nemesis and the workload, heals the network, resumes paused nodes
and restarts dead ones, then waits (bounded, polling the cluster) until every partition is recovered:
it has a leader, every replica is in the ISR, and every replica reports the same LEO with HW = LEO
(`wait_recovered`, as its `Polling` says; never a fixed sleep beyond its short poll interval). A cluster reached only through
Kafka clients (the external backend) cannot say what each replica holds: there a partition is recovered
when it has a leader, a full ISR, and its HW (ListOffsets) has not moved for `HW_STABLE_S` with the
workload stopped. Final reads go from 0 to the HW;
one `final-state` operation per partition goes into the history (`final_state_value`) and final.json
into the run directory. The lifecycle (harness/lifecycle.py) calls it after the middle, whatever
happened there.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from nemesis.windows import FaultWindows
from rundir import formats as runformat
from workloads import workload as workload_kinds
from workloads.final_read import ReadPlan, final_reads

log = logging.getLogger("harness")


# without per-replica states: how long leader, epoch, ISR and HW must stay the same to count as settled
HW_STABLE_S = 1.0


def node_name(broker_id: int | None) -> str | None:
    return None if broker_id is None else f"n{broker_id}"


@dataclass
class PartitionState:
    partition: int
    leader: int | None
    epoch: int
    isr: list[int]
    replicas: list[int]
    # broker id -> (LEO, HW) as each replica reports it; None when the cluster cannot say (Kafka Metadata)
    replica_state: dict[int, tuple[int, int] | None] | None = field(default_factory=dict)
    reported_hw: int | None = None    # without replica states: the leader's HW (ListOffsets), if it answered
    stable_s: float = 0.0             # without replica states: how long nothing above changed (wait_recovered)

    def signature(self) -> tuple:
        return (self.leader, self.epoch, tuple(sorted(self.isr)), tuple(sorted(self.replicas)), self.reported_hw)

    @property
    def healthy(self) -> bool:
        if self.leader is None or sorted(self.isr) != sorted(self.replicas):
            return False
        if self.replica_state is None:
            return self.reported_hw is not None and self.stable_s >= HW_STABLE_S
        states = [self.replica_state.get(b) for b in self.replicas]
        if any(s is None for s in states):
            return False
        leos = {s[0] for s in states}
        return len(leos) == 1 and all(s[0] == s[1] for s in states)

    @property
    def hw(self) -> int:
        if self.replica_state is None:
            return -1 if self.reported_hw is None else self.reported_hw
        s = self.replica_state.get(self.leader) if self.leader is not None else None
        return s[1] if s else -1

    def problem(self) -> str:
        if self.leader is None:
            return "no leader"
        missing = sorted(set(self.replicas) - set(self.isr))
        if missing:
            return "not in ISR: " + ", ".join(node_name(b) for b in missing)
        if self.replica_state is None:
            return ("no HW from the leader" if self.reported_hw is None
                    else f"HW {self.reported_hw} settled for {self.stable_s:.1f}s of {HW_STABLE_S:.1f}s")
        silent = [node_name(b) for b in self.replicas if self.replica_state.get(b) is None]
        if silent:
            return "no answer from " + ", ".join(silent)
        return "LEO/HW differ: " + ", ".join(f"{node_name(b)} leo={s[0]} hw={s[1]}"
                                             for b, s in sorted(self.replica_state.items()) if s)


def from_info(info: Any) -> PartitionState:
    """From a native PartitionInfo (broker/client) or a KafkaPartitionInfo (clusters/kafka_metadata.py,
    replica_state None and the leader's `hw`)."""
    if info.replica_state is None:
        return PartitionState(info.partition, info.leader, info.epoch, list(info.isr), list(info.replicas),
                              None, reported_hw=info.hw)
    return PartitionState(info.partition, info.leader, info.epoch, list(info.isr), list(info.replicas),
                          dict(info.replica_state))


@dataclass
class WaitOutcome:
    states: dict[int, PartitionState]
    waited_s: float
    timed_out: bool
    error: str | None = None


@dataclass(frozen=True)
class Polling:
    """How `wait_recovered` waits: for up to `timeout_s`, describing the partitions every `poll_s`; `clock`
    and `sleep` are its time (the final phase sleeps on the session's interrupt event), and it gives up
    as interrupted once `should_stop()` says so."""
    timeout_s: float
    poll_s: float = 0.25
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    should_stop: Callable[[], bool] = lambda: False


def wait_recovered(describe: Callable[[], list[Any]], partitions: list[int], polling: Polling) -> WaitOutcome:
    clock = polling.clock
    start = clock()
    states: dict[int, PartitionState] = {}
    since: dict[int, tuple[tuple, float]] = {}     # partition -> (signature, when it was first seen)
    error = None
    while True:
        try:
            states = {s.partition: s for s in map(from_info, describe())}
            error = None
            now = clock()
            for p, st in states.items():
                sig = st.signature()
                if p not in since or since[p][0] != sig:
                    since[p] = (sig, now)
                st.stable_s = now - since[p][1]
        except Exception as exc:  # noqa: BLE001 - controller briefly unreachable: keep polling
            error = f"{type(exc).__name__}: {exc}"
        done = bool(states) and all(p in states and states[p].healthy for p in partitions)
        if done:
            return WaitOutcome(states, clock() - start, False)
        if clock() - start >= polling.timeout_s:
            return WaitOutcome(states, clock() - start, True, error)
        if polling.should_stop():
            return WaitOutcome(states, clock() - start, True, "interrupted")
        polling.sleep(polling.poll_s)


def final_state_value(partition: int, state: PartitionState | None, *, read_to: int | None,
                      read_covered: bool) -> dict[str, Any]:
    """The `final-state` operation's value (docs/formats.md)."""
    if state is None:
        return {"partition": partition, "recovered": False, "hw": -1, "leader": None, "epoch": -1,
                "isr": [], "replicas": {}, "read_to": read_to}
    return {
        "partition": partition,
        "recovered": bool(state.healthy and read_covered),
        "hw": state.hw,
        "leader": node_name(state.leader),
        "epoch": state.epoch,
        "isr": [node_name(b) for b in state.isr],
        "replicas": ({node_name(b): None for b in sorted(state.replicas)} if state.replica_state is None else
                     {node_name(b): ({"leo": s[0], "hw": s[1]} if s else None)
                      for b, s in sorted(state.replica_state.items())}),
        "read_to": read_to,
    }


# --- the phase ----------------------------------------------------------------------------------------

def stop_activity(session) -> None:
    """Stop the nemesis (it undoes its faults) and the workload. Never raises."""
    if session.nemesis is not None:
        try:
            session.nemesis.stop()
        except Exception as exc:  # noqa: BLE001
            session.problem("nemesis stop failed", exc)
    if session.workload is not None:
        try:
            stuck = session.workload.stop()
            if stuck:
                session.problem(f"workers still busy after stop: {', '.join(stuck)}")
            for err in session.workload.errors():
                session.problem(f"worker died: {err}")
        except Exception as exc:  # noqa: BLE001
            session.problem("workload stop failed", exc)


def heal_everything(session) -> None:
    """Belt and braces after the nemesis: no drop rules, nothing paused, everything running, through the
    fault vocabulary's own undo actions (nemesis/windows.py `recover`, which records a node found down)."""
    if session.cluster is not None:
        FaultWindows(session.cluster, session.history).recover(session.problem)


def workload_final(session, topic: str, parts: list[int], plan: ReadPlan) -> None:
    """The workload's own final operations, after the final reads (workloads/workload.py Kind.final: the
    group workload's `committed` read, through a Kafka client of `[client] library` outside the group)."""
    kind = workload_kinds.KINDS.get(session.cfg.workload.name)
    if kind is None or kind.final is None:
        return
    cfg = session.cfg

    def make_reader():
        from workloads import kafka_client
        return kafka_client.OffsetsReader(cfg.client.library, session.kafka_bootstrap(), timeout_s=cfg.client.timeout)
    session.phase = "final-reads"
    try:
        kind.final(session.history, cfg.workload, make_reader, topic, parts, plan.deadline)
    except Exception as exc:  # noqa: BLE001
        session.problem(f"the {kind.name} workload's final operations failed", exc)


def run(session, *, reads: bool = True) -> dict[str, Any]:
    """The final phase of `session` (a harness/lifecycle.py RunSession); returns final.json's content.
    Without `reads`, or once interrupted, the wait and the reads are skipped (final-state still written)."""
    session.phase = "final"
    stop_activity(session)
    heal_everything(session)
    cfg = session.cfg
    topic, parts = cfg.topic.name, list(range(cfg.topic.partitions))
    outcome = WaitOutcome({}, 0.0, True, "skipped")
    reads_done: dict[int, Any] = {}
    if reads and not session.interrupt.is_set() and session.cluster is not None:
        admin = None
        try:
            admin = session.admin()
            interrupted = session.interrupt
            outcome = wait_recovered(
                lambda: admin.describe(topic), parts,
                Polling(cfg.final_wait, sleep=lambda s: interrupted.wait(s), should_stop=interrupted.is_set))
            if outcome.timed_out:
                bad = {p: (outcome.states[p].problem() if p in outcome.states else "not described")
                       for p in parts if p not in outcome.states or not outcome.states[p].healthy}
                session.problem(f"final wait timed out after {outcome.waited_s:.1f}s: {bad}")
            targets = {p: s.hw for p, s in outcome.states.items() if s.healthy}
            if session.interrupt.is_set():
                raise RuntimeError("interrupted during the final wait")
            session.phase = "final-reads"
            plan = ReadPlan(chunk=cfg.workload.final_read_chunk, deadline=time.monotonic() + max(30.0, cfg.final_wait))
            reads_done = final_reads(session.history, session.make_consumer, topic, parts, plan, targets)
            workload_final(session, topic, parts, plan)
        except Exception as exc:  # noqa: BLE001
            session.problem("final wait/reads failed", exc)
        finally:
            if admin is not None:
                admin.close()
    partitions = []
    for p in parts:
        r = reads_done.get(p)
        value = final_state_value(p, outcome.states.get(p), read_to=r.read_to if r else None,
                                  read_covered=bool(r and r.covered))
        partitions.append(value)
        try:
            session.history.complete(runformat.HARNESS_PROCESS, "info", runformat.FINAL_STATE_F, value)
        except Exception as exc:  # noqa: BLE001
            session.problem("could not record final-state", exc)
    log.info("final phase: waited %.1fs (timed out: %s); final reads: %s", outcome.waited_s, outcome.timed_out,
             {p: (r.read_to, r.covered) for p, r in reads_done.items()})
    final = {"partitions": partitions, "waited_s": round(outcome.waited_s, 3),
             "timed_out": bool(outcome.timed_out), "skipped": not reads or session.interrupt.is_set()}
    session.final = final
    runformat.write_json(session.run.path / runformat.FINAL_JSON, final)
    return final
