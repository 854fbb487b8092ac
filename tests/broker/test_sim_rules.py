"""The protocol rules caught in the simulator: a deliberately broken replication core or controller (a
small bug, patched in for one test) makes a short safe-settings search break exactly the rule the bug
breaks, while the unbroken core breaks none (tests/broker/test_rules.py has the rules' known answers on
hand-written rows; the same rule code runs here, fed by simulator/observe.py)."""
from __future__ import annotations

import pytest

from broker.controller import state as controller_state
from broker.replication import truncation
from broker.replication.errors import ErrorCode
from broker.replication.messages import ProduceStatus
from broker.replication.replica import LEADER, PartitionReplica
from simulator import explore as ex
from simulator.world import SimSettings

SAFE = SimSettings(truncation="leader-epoch", acks=-1, min_insync_replicas=2)


def found(schedules: int = 400, stop: bool = True) -> dict[str, int]:
    """{rule or invariant: first schedule} of a search of `schedules` safe schedules (seed 1), stopping at
    the first finding unless `stop` is False."""
    result = ex.explore(SAFE, ex.SearchSpace(1), ex.Budget(schedules=schedules), keep=ex.Keep(stop_on_finding=stop))
    assert not [f for f in result.findings if f.expected], "a safe search meets only broken promises"
    return {f.invariant: f.index for f in result.findings}


def test_the_unbroken_core_breaks_no_rule():
    assert found(400, stop=False) == {}


def test_follower_hw_ahead_when_a_follower_takes_max_instead_of_min(monkeypatch):
    def append_as_follower(self, records, leader_hw):
        if records:
            self.log.append(list(records))
            self._note_epochs(records)
        self._set_hw(max(leader_hw, self.leo) if leader_hw > 0 else 0)      # bug: max, not min
    monkeypatch.setattr(PartitionReplica, "append_as_follower", append_as_follower)
    assert set(found()) == {"follower-hw-ahead"}


def test_ack_above_hw_when_the_purgatory_compares_with_ge(monkeypatch):
    def produce_status(self, last_offset, epoch):
        if self.role != LEADER or self._leader is None or self.leader_epoch != epoch:
            return ProduceStatus("failed", ErrorCode.NOT_LEADER)
        if self.hw >= last_offset and len(self._leader.isr) >= self.config.min_insync_replicas:   # bug: >=
            return ProduceStatus("complete", hw=self.hw, isr=tuple(sorted(self._leader.isr)))
        return ProduceStatus("waiting")
    monkeypatch.setattr(PartitionReplica, "produce_status", produce_status)
    assert "ack-above-hw" in found()


def test_ack_below_min_isr_when_completion_forgets_the_isr(monkeypatch):
    def produce_status(self, last_offset, epoch):
        if self.role != LEADER or self._leader is None or self.leader_epoch != epoch:
            return ProduceStatus("failed", ErrorCode.NOT_LEADER)
        if self.hw > last_offset:                                             # bug: no min ISR check
            return ProduceStatus("complete", hw=self.hw, isr=tuple(sorted(self._leader.isr)))
        return ProduceStatus("waiting")
    monkeypatch.setattr(PartitionReplica, "produce_status", produce_status)
    assert "ack-below-min-isr" in found()


def test_leader_hw_decrease_when_the_leader_takes_any_candidate(monkeypatch):
    def maybe_increment_hw(self, now_ms):
        candidate = self._leader.hw_candidate(self.broker_id, self.leo, now_ms, self.config.replica_lag_time_max_ms)
        if candidate != self._hw:                                             # bug: != instead of >
            self._set_hw(candidate)
    monkeypatch.setattr(PartitionReplica, "_maybe_increment_hw", maybe_increment_hw)
    assert "leader-hw-decrease" in found()


def test_election_outside_isr_when_the_controller_elects_any_live_replica(monkeypatch):
    elect = controller_state.ControllerState._elect

    def any_live(self, p, isr, elr=None, unclean=None):
        return elect(self, p, isr, elr, True)                                 # bug: always "unclean"
    monkeypatch.setattr(controller_state.ControllerState, "_elect", any_live)
    assert "election-outside-isr" in found()


def test_epoch_rules_when_a_leaderless_partition_reuses_its_epoch(monkeypatch):
    change = controller_state.ControllerState._change

    def keep_epoch(self, p, events, **kw):
        had_leader = p.leader is not None
        epoch = p.leader_epoch
        before = len(events)
        change(self, p, events, **kw)
        if not had_leader and p.leader_epoch != epoch:                        # bug: no bump from "no leader"
            p.leader_epoch = epoch
            for e in events[before:]:
                if e["event"] == "leader-change":
                    e["epoch"] = epoch
    monkeypatch.setattr(controller_state.ControllerState, "_change", keep_epoch)
    assert "epoch-not-increasing" in found(1500)


def test_truncate_below_hw_when_the_epoch_answer_is_cut_one_short(monkeypatch):
    after = truncation.after_epoch_answer

    def one_short(mode, cache, leo, hw, answer):
        step = after(mode, cache, leo, hw, answer)
        if step.truncate_to is not None and step.truncate_to > 0:            # bug: off by one
            return truncation.TruncationStep(step.truncate_to - 1, step.why, step.ask_again_epoch)
        return step
    monkeypatch.setattr(truncation, "after_epoch_answer", one_short)
    assert "truncate-below-hw" in found()


def test_hw_above_leo_when_a_lagging_follower_takes_the_leaders_hw(monkeypatch):
    def append_as_follower(self, records, leader_hw):
        if records:
            self.log.append(list(records))
            self._note_epochs(records)
        self._set_hw(leader_hw)                                               # bug: no min with our LEO
    monkeypatch.setattr(PartitionReplica, "append_as_follower", append_as_follower)
    # the bug shows only while a follower lags by more than one fetch: one record per fetch
    result = ex.explore(SimSettings(truncation="leader-epoch", acks=-1, min_insync_replicas=2, replica_fetch_max_records=1),
                        ex.SearchSpace(1), ex.Budget(schedules=600), keep=ex.Keep(stop_on_finding=True))
    assert "hw-above-leo" in {f.invariant for f in result.findings}


def test_ack_before_flush_on_the_rows_the_simulator_writes():
    """The group commit lives in the broker's I/O shell, which the simulator models (flush "always": the
    flush finishes within the step, before the answer) rather than runs; an acknowledgement the model
    would let out unflushed is caught on the rows its observer writes."""
    from simulator.observe import Acked, RuleObserver

    obs = RuleObserver(SAFE)
    obs.ack("n1", Acked(0, 3, 0, -1, 4, (1, 2, 3), 2, flushed=2))
    assert [v.kind for v in obs.pending] == ["ack-before-flush"]


@pytest.mark.parametrize("rule", ["epoch-two-leaders", "leader-not-elected"])
def test_two_leaders_of_one_epoch_on_the_rows_the_simulator_writes(rule):
    """The simulated core refuses a second leader of one epoch twice over (the controller names one, the
    replica refuses a stale epoch), so a one-line bug does not reach these rules there; the rows the
    simulator's observer would write for it are caught all the same."""
    from simulator.observe import RuleObserver

    class Role:
        name = "role"

        def fields(self):
            return {"partition": 0, "role": "leader", "epoch": 0}

    obs = RuleObserver(SAFE)
    obs.controller_events([{"event": "leader-change", "partition": 0, "leader": 1, "epoch": 0, "isr": [1, 2, 3],
                            "version": 0}])
    obs.replica_events("n1", [Role()])
    obs.replica_events("n2", [Role()])
    obs.finish()
    assert rule in {v.kind for v in obs.pending}


def test_read_uncommitted_when_a_leader_serves_consumers_up_to_its_leo(monkeypatch):
    from broker.replication.messages import ConsumerRead

    def read_for_consumer(self, offset, max_records, current_leader_epoch=None):
        error = self._leader_check(current_leader_epoch)
        if error is not None:
            return ConsumerRead(error, leader_epoch=self.leader_epoch)
        n = min(max_records, self.leo - offset)                              # bug: LEO, not HW
        records = tuple(self.log.read(offset, n)) if n > 0 else ()
        return ConsumerRead(None, records, self.hw, self.leader_epoch)
    monkeypatch.setattr(PartitionReplica, "read_for_consumer", read_for_consumer)
    assert "read-uncommitted" in found()


def test_stale_epoch_served_when_fencing_checks_only_older_epochs(monkeypatch):
    from broker.replication import replica as replica_module
    from broker.replication.errors import check_leader_epoch

    def older_only(current_leader_epoch, my_epoch):
        if current_leader_epoch is not None and current_leader_epoch > my_epoch:
            return None                                                       # bug: a newer epoch is served
        return check_leader_epoch(current_leader_epoch, my_epoch)
    monkeypatch.setattr(replica_module, "check_leader_epoch", older_only)
    assert "stale-epoch-served" in found()


def test_isr_join_lagging_when_the_join_check_is_one_short(monkeypatch):
    def maybe_expand_isr(self, remote):
        st = self._leader
        if (st.pending is not None or remote.broker_id in st.isr or remote.broker_id not in st.replicas
                or remote.broker_id in self._fenced_brokers):
            return
        leo = remote.leo if remote.leo is not None else -1
        if leo + 1 < self.hw:                                                 # bug: one record short is enough
            return
        if self.config.isr_join_requires_epoch_start and leo < st.epoch_start_offset:
            return
        from broker.replication.events import IsrExpandProposed
        self._events.append(IsrExpandProposed(self.partition, remote.broker_id, leo, self.hw, st.epoch_start_offset))
        self._propose(tuple(sorted(st.isr | {remote.broker_id})), "expand")
    monkeypatch.setattr(PartitionReplica, "_maybe_expand_isr", maybe_expand_isr)
    assert "isr-join-lagging" in found(1500)


def test_epoch_outlived_restart_when_a_bounced_broker_is_not_fenced(monkeypatch):
    register = controller_state.ControllerState.register_broker

    def keep_old(self, broker_id, host, port, now_ms, *args, **kw):
        old = self.brokers.get(broker_id)
        if old is not None:
            old.fenced = True                                                 # bug: the old incarnation is
        return register(self, broker_id, host, port, now_ms, *args, **kw)    # never fenced: it keeps leading
    monkeypatch.setattr(controller_state.ControllerState, "register_broker", keep_old)
    assert "epoch-outlived-restart" in found(1500)


def test_hw_reported_ahead_when_a_leader_reports_its_leo_to_consumers(monkeypatch):
    from broker.replication.messages import ConsumerRead

    def read_for_consumer(self, offset, max_records, current_leader_epoch=None):
        error = self._leader_check(current_leader_epoch)
        if error is not None:
            return ConsumerRead(error, leader_epoch=self.leader_epoch)
        n = min(max_records, self.hw - offset)
        records = tuple(self.log.read(offset, n)) if n > 0 else ()
        return ConsumerRead(None, records, self.leo, self.leader_epoch)       # bug: the LEO as the HW
    monkeypatch.setattr(PartitionReplica, "read_for_consumer", read_for_consumer)
    assert "hw-reported-ahead" in found()


def test_durability_rules_on_the_rows_the_simulator_writes():
    """The flush before a follower's next fetch, and the flushed offset's drop at a truncation, live in
    the broker's I/O shell (broker/server), which the simulator models rather than runs (flush "always":
    a log is flushed within each step, and a cut lowers its flushed offset): the rows its observer writes
    for a fetch reported unflushed, or a cut that kept the flushed offset, are caught."""
    from broker.replication.events import Truncate
    from simulator.observe import RuleObserver

    obs = RuleObserver(SAFE)
    obs.leo_reported("n2", 5, 3, 0)
    obs.replica_events("n3", [Truncate(0, 6, 4, "leader-epoch")], flushed=6)
    obs.replica_events("n3", [Truncate(0, 4, 2, "leader-epoch")], flushed=2)
    assert [v.kind for v in obs.pending] == ["reported-before-flush", "flushed-past-truncation"]


def test_the_simulated_shell_reports_only_flushed_offsets(monkeypatch):
    """The simulator's own rows of a safe search: every follower fetch it sends writes a leo-reported row
    (with flush "always", flushed to its LEO) and every cut a flushed offset; none breaks a rule."""
    from simulator.observe import RuleObserver

    rows: list[str] = []
    feed = RuleObserver._row

    def spy(self, src, node, event, fields):
        if event == "leo-reported" or (event == "truncate" and "flushed" in fields):
            rows.append(event)
        return feed(self, src, node, event, fields)
    monkeypatch.setattr(RuleObserver, "_row", spy)
    assert found(200, stop=False) == {}
    assert "leo-reported" in rows and "truncate" in rows


def test_ack_undecided_when_the_shell_answers_a_parked_produce_on_append(monkeypatch):
    """A shell bug (as a wire handler that answers success for an appended produce whatever the core
    decided): the simulated client is told an acks=all write succeeded as soon as it is appended, with
    no `ack` from the core. The `sent` rows the observer writes for it show no leader decided it."""
    from simulator.world import Ack, World

    original = World._do_produce

    def do_produce(self, a):
        before = len(self.parked)
        text = original(self, a)
        if len(self.parked) > before:                                   # bug: success on append
            p = self.parked.pop()
            self._told_acked(Ack(p.value, p.offset, p.epoch, p.node))
        return text

    monkeypatch.setattr(World, "_do_produce", do_produce)
    result = ex.explore(SAFE, ex.SearchSpace(1), ex.Budget(schedules=50), keep=ex.Keep(stop_on_finding=False))
    assert {f.invariant for f in result.findings} == {"ack-undecided"}
