"""simulator/world.py: determinism, each action kind's effect, legality of enabled(), settle(), and the
seeds' KIP-101 case 1 as an explicit action list (an acknowledged write lost with hw truncation, kept
with leader-epoch truncation), on the real PartitionReplica and the real ControllerState."""
import random

import pytest

from broker.controller.state import ControllerState
from broker.replication.replica import PartitionReplica
from simulator import actions as A
from simulator.actions import Action
from simulator.world import SimError, SimSettings, World


def state(w: World) -> tuple:
    """Everything observable that the actions change."""
    return (w.now_ms, w.controller.to_dict(), sorted(w.cuts), [str(a) for a in w.history],
            [(m.id, m.kind, m.src, m.dst) for m in w.in_flight.values()], w.acked, w.outcomes,
            tuple((n.name, n.up, n.inc, n.flushed, n.hw_checkpoint, tuple(n.epoch_checkpoint), n.broker_epoch,
                   w.values(n.name), n.replica.snapshot() if n.replica else None) for n in w.nodes.values()))


def random_run(settings: SimSettings, seed: int, length: int = 60) -> World:
    rng = random.Random(seed)
    w = World(settings)
    for _ in range(length):
        w.apply(rng.choice(w.enabled()))
    return w


def msg(w: World, kind: str, src: str, dst: str) -> int:
    found = [m.id for m in w.in_flight.values() if (m.kind, m.src, m.dst) == (kind, src, dst)]
    assert len(found) == 1, (kind, src, dst, found)
    return found[0]


# --- determinism -------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["hw", "leader-epoch"])
def test_same_actions_give_the_same_state(mode):
    settings = SimSettings(truncation=mode, acks=-1, min_insync_replicas=2, flush="never")
    a = random_run(settings, 11)
    b = random_run(settings, 11)
    assert state(a) == state(b)
    replayed = World(settings).run(list(a.history))     # the recorded list replays exactly
    assert state(replayed) == state(a)
    assert state(random_run(settings, 12)) != state(a)


def test_every_enabled_action_applies_and_others_are_refused():
    settings = SimSettings(truncation="hw", flush="never", unclean_leader_election=True,
                           eligible_leader_replicas=True, min_insync_replicas=2)
    for seed in range(40):
        rng = random.Random(seed)
        w = World(settings)
        for _ in range(80):
            enabled = w.enabled()
            assert len(enabled) == len(set(enabled)) and len(enabled) < 120
            assert all(w.is_enabled(x) for x in enabled)
            w.apply(rng.choice(enabled))
        w.settle()
        assert all(n.up for n in w.nodes.values()) and not w.cuts and not w.in_flight
    w = World(SimSettings())
    for bad in (Action(A.RESTART, "n1"), Action(A.DELIVER, msg=99), Action(A.PRODUCE, "n2"),
                Action(A.HEAL, "n1", "n2"), Action(A.ELECT, "n1", arg=0), Action(A.ADVANCE, arg=0),
                Action(A.POWER_LOSS, "n1"), Action(A.CHECKPOINT, "n1"), Action(A.EXPIRE)):
        with pytest.raises(SimError):
            w.apply(bad)
    assert w.history == []


def test_enabled_order_is_fixed_for_a_fresh_world():
    w = World(SimSettings(replicas=2))
    assert [x.short() for x in w.enabled()] == [
        "n1 produce", "n2 send", "n1 heartbeat", "n2 heartbeat", "n1 crash", "n2 crash", "elect n2",
        "cut n1->n2", "cut n1->c0", "cut n2->n1", "cut n2->c0", "cut c0->n1", "cut c0->n2",
        "advance 100 ms", "advance 2001 ms", "advance 3001 ms"]


# --- the real components -----------------------------------------------------------------------------

def test_the_world_runs_the_real_controller_and_replication_core(monkeypatch):
    w = World(SimSettings())
    assert type(w.controller) is ControllerState
    assert all(type(n.replica) is PartitionReplica for n in w.nodes.values())
    calls = []
    real = ControllerState.expire_sessions

    def spy(self, now_ms):
        calls.append(now_ms)
        return real(self, now_ms)

    monkeypatch.setattr(ControllerState, "expire_sessions", spy)
    w.apply(Action(A.ADVANCE, arg=3001))
    w.apply(Action(A.EXPIRE))
    assert calls == [3001]
    assert w.controller.partition("t", 0).leader is None        # everyone fenced: no leader


# --- each kind ---------------------------------------------------------------------------------------

def test_produce_acks_1_is_acknowledged_on_append():
    w = World(SimSettings(acks=1))
    done = w.apply(Action(A.PRODUCE, "n1"))
    assert str(done) == "n1 appends v1 (acks=1): acknowledged at offset 0"
    assert [(a.value, a.offset, a.epoch, a.leader) for a in w.acked] == [("v1", 0, 0, "n1")]


def test_produce_acks_all_waits_for_the_hw_then_is_acknowledged():
    w = World(SimSettings(acks=-1, min_insync_replicas=2, replicas=2))
    assert str(w.apply(Action(A.PRODUCE, "n1"))) == "n1 appends v1 (acks=all) at offset 0: waiting for the HW"
    assert w.acked == [] and len(w.parked) == 1
    w.apply(Action(A.SEND, "n2"))
    w.apply(Action(A.DELIVER, msg=msg(w, "fetch", "n2", "n1")))      # n2 fetched v1: HW 0
    w.apply(Action(A.DELIVER, msg=msg(w, "fetch-answer", "n1", "n2")))
    assert w.acked == []
    w.apply(Action(A.SEND, "n2"))
    done = w.apply(Action(A.DELIVER, msg=msg(w, "fetch", "n2", "n1")))  # fetch from 1: HW 1
    assert str(done) == "deliver #3: n2's fetch from 1 (epoch 0) reaches n1: HW 1"
    assert [(a.value, a.offset) for a in w.acked] == [("v1", 0)] and w.parked == []


def test_send_deliver_drop_duplicate():
    w = World(SimSettings(replicas=2))
    w.apply(Action(A.PRODUCE, "n1"))
    assert str(w.apply(Action(A.SEND, "n2"))) == "n2 sends n1 a fetch from offset 0 (epoch 0)"
    assert str(w.apply(Action(A.DUPLICATE, msg=1))) == "duplicate #1 as #2: n2's fetch from 0 (epoch 0)"
    assert w.link_count[("n2", "n1")] == 2
    assert Action(A.SEND, "n2") not in w.enabled()                     # at most 2 sends on a link
    w.apply(Action(A.DELIVER, msg=2))
    w.apply(Action(A.DELIVER, msg=1))                                  # both copies are served
    assert sorted(m.kind for m in w.in_flight.values()) == ["fetch-answer", "fetch-answer"]
    first, second = list(w.in_flight)
    w.apply(Action(A.DELIVER, msg=first))
    assert str(w.apply(Action(A.DELIVER, msg=second))).endswith("reaches n2: stale, ignored")
    assert w.values("n2") == ["v1"]
    w.apply(Action(A.SEND, "n2"))
    assert str(w.apply(Action(A.DROP, msg=5))) == "drop #5: n2's fetch from 1 (epoch 0) never reaches n1"
    assert w.in_flight == {} and w.link_count[("n2", "n1")] == 0


def test_cut_blocks_delivery_until_healed():
    w = World(SimSettings(replicas=2))
    w.apply(Action(A.CUT, "n2", "n1"))
    w.apply(Action(A.SEND, "n2"))
    assert Action(A.DELIVER, msg=1) not in w.enabled() and Action(A.DROP, msg=1) in w.enabled()
    with pytest.raises(SimError):
        w.apply(Action(A.DELIVER, msg=1))
    w.apply(Action(A.HEAL, "n2", "n1"))
    w.apply(Action(A.DELIVER, msg=1))
    assert [m.kind for m in w.in_flight.values()] == ["fetch-answer"]


def test_heartbeat_expire_metadata_and_elections_go_through_the_controller():
    w = World(SimSettings())
    w.apply(Action(A.ADVANCE, arg=3001))
    for n in ("n2", "n3"):
        w.apply(Action(A.HEARTBEAT, n))
        w.apply(Action(A.DELIVER, msg=msg(w, "heartbeat", n, "c0")))
    assert str(w.apply(Action(A.EXPIRE))) == (
        "the controller fences n1 (no heartbeat for over 3000 ms); leader n2, epoch 1, ISR {n2,n3}")
    # the change is pushed to the live registered brokers (n1 is up, only fenced: it gets one too)
    assert sorted(m.dst for m in w.in_flight.values() if m.kind == "metadata") == ["n1", "n2", "n3"]
    w.apply(Action(A.DROP, msg=msg(w, "metadata", "c0", "n2")))
    assert Action(A.METADATA, "n2") in w.enabled()
    w.apply(Action(A.METADATA, "n2"))
    w.apply(Action(A.DELIVER, msg=msg(w, "metadata", "c0", "n2")))
    assert (w.nodes["n2"].replica.role, w.nodes["n2"].replica.leader_epoch) == ("leader", 1)
    assert w.leaders() == [("n1", 0), ("n2", 1)]                       # n1 has not heard yet
    assert Action(A.ELECT, "n3", arg=0) in w.enabled()
    assert Action(A.ELECT, "n1", arg=1) not in w.enabled()             # fenced, and no unclean election
    assert str(w.apply(Action(A.ELECT, "n3", arg=0))) == "admin election: n3 leads epoch 2, ISR {n2,n3}"


def test_alter_isr_shrink_and_expand_are_messages_to_the_controller():
    w = World(SimSettings(replicas=2))
    assert Action(A.ALTER_ISR, "n1") not in w.enabled()
    w.apply(Action(A.ADVANCE, arg=2001))
    assert str(w.apply(Action(A.ALTER_ISR, "n1"))) == "n1 proposes ISR {n1} (shrink) to the controller"
    assert str(w.apply(Action(A.DELIVER, msg=1))) == (
        "deliver #1: n1's proposal ISR {n1} (shrink) reaches the controller: ISR {n1} v1")
    w.apply(Action(A.DELIVER, msg=msg(w, "alter-isr-answer", "c0", "n1")))
    assert sorted(w.nodes["n1"].replica.isr) == [1]
    w.apply(Action(A.SEND, "n2"))
    w.apply(Action(A.DELIVER, msg=msg(w, "fetch", "n2", "n1")))          # caught up: expansion proposed
    proposal, _ = w.in_flight[msg(w, "alter-isr", "n1", "c0")].body
    assert (proposal.isr, proposal.kind) == ((1, 2), "expand")


def test_crash_keeps_the_log_power_loss_keeps_the_flushed_part():
    w = World(SimSettings(replicas=2, flush="never"))
    w.apply(Action(A.PRODUCE, "n1"))
    w.apply(Action(A.FLUSH, "n1"))
    w.apply(Action(A.PRODUCE, "n1"))
    w.apply(Action(A.PRODUCE, "n1"))
    assert w.nodes["n1"].flushed == 1
    w.apply(Action(A.CRASH, "n1"))
    assert w.values("n1") == ["v1", "v2", "v3"] and w.nodes["n1"].replica is None
    w.apply(Action(A.RESTART, "n1"))
    assert w.nodes["n1"].replica.leo == 3 and w.nodes["n1"].broker_epoch is None
    assert str(w.apply(Action(A.POWER_LOSS, "n1"))) == "n1 loses power: the unflushed tail from offset 1 is gone"
    assert w.values("n1") == ["v1"]
    done = w.apply(Action(A.RESTART, "n1"))
    assert str(done) == "n1 restarts (LEO 1, HW checkpoint 0) and asks the controller to register it"
    # the first incarnation's registration went with its connection (reset by the power loss)
    [new] = [m.id for m in w.in_flight.values() if m.kind == "register"]
    w.apply(Action(A.DELIVER, msg=new))
    events = [e["event"] for e in w.events[-6:]]
    assert "registered" in events and w.events[-1]["event"] in ("leader-change", "unfenced", "isr-change")
    assert w.nodes["n1"].broker_epoch is not None


def test_checkpoint_writes_the_hw():
    w = World(SimSettings(replicas=1))
    w.apply(Action(A.PRODUCE, "n1"))
    assert w.nodes["n1"].replica.hw == 1 and w.nodes["n1"].hw_checkpoint == 0
    assert str(w.apply(Action(A.CHECKPOINT, "n1"))) == "n1 writes its HW checkpoint: 1"
    assert w.nodes["n1"].hw_checkpoint == 1
    assert w.nodes["n1"].epoch_checkpoint == [(0, 0)]                  # written after every event


def test_settings_are_the_declared_keys_with_their_checks():
    """SimSettings has the broker keys the simulator models (broker/config_keys.py), under their test-file
    names and with the broker's defaults, checked by the same rules; acks has its one spelling."""
    from broker.config_keys import BY_NAME, sim_keys
    s = SimSettings()
    for k in sim_keys():
        assert getattr(s, k.sim_name) == k.default, k.name
    assert s.replica_lag_time_max_ms == BY_NAME["replica_lag_time_max_ms"].default == 2000
    assert SimSettings(acks=-1).acks == SimSettings(acks="-1").acks == SimSettings(acks="all").acks == "all"
    assert SimSettings(truncation="kip-101").truncation == "kip-101"      # the demonstration mode
    with pytest.raises(SimError, match="acks must be 0, 1 or \"all\", got 'some'"):
        SimSettings(acks="some")
    with pytest.raises(SimError, match="replicas must be at most 9, got 10"):
        SimSettings(replicas=10)
    with pytest.raises(SimError, match="truncation must be one of hw, leader-epoch, kip-101, got 'none'"):
        SimSettings(truncation="none")
    with pytest.raises(SimError, match="flush must be one of always, never, got 'interval'"):
        SimSettings(flush="interval")       # the simulator models no flush interval
    with pytest.raises(SimError, match="min_insync_replicas must be at least 1, got 0"):
        SimSettings(min_insync_replicas=0)


# --- KIP-101 case 1 (seed 000 七.1), staged as scenarios/seed-data-loss.toml ---------------------------

def _fetch(node: str, request: int, answer: int, deliver_answer: bool = True) -> list[Action]:
    return [Action(A.SEND, node), Action(A.DELIVER, msg=request),
            Action(A.DELIVER if deliver_answer else A.DROP, msg=answer)]


KIP_101_CASE_1 = (
    [Action(A.PRODUCE, "n1")] + _fetch("n2", 1, 2) + _fetch("n3", 3, 4)     # v1 everywhere
    + [Action(A.PRODUCE, "n1")] + _fetch("n2", 5, 6) + _fetch("n3", 7, 8)   # v2 everywhere, HW 1
    + _fetch("n2", 9, 10) + _fetch("n3", 11, 12, deliver_answer=False)      # n1 HW 2, n2 HW 1, n3 HW 1
    + [Action(A.ADVANCE, arg=3001),                                         # n1 falls silent
       Action(A.HEARTBEAT, "n2"), Action(A.DELIVER, msg=13),
       Action(A.HEARTBEAT, "n3"), Action(A.DELIVER, msg=14),
       Action(A.EXPIRE),                                                    # n1 fenced: n2 leads epoch 1
       Action(A.DELIVER, msg=16), Action(A.DELIVER, msg=17),                # n3 follows n2 (hw: cuts v2)
       Action(A.CRASH, "n2"), Action(A.ADVANCE, arg=3001),
       Action(A.HEARTBEAT, "n3"), Action(A.DELIVER, msg=18),
       Action(A.EXPIRE),                                                    # n2 fenced: n3 leads epoch 2
       Action(A.DELIVER, msg=20)]
)


def committed_losses(w: World) -> list[str]:
    leader = w.leader()
    r = w.nodes[leader].replica
    committed = w.records(leader)[:r.hw]
    return [a.value for a in w.acked
            if a.offset >= len(committed) or committed[a.offset].value.decode() != a.value]


def test_kip_101_case_1_loses_an_acknowledged_write_with_hw_truncation():
    w = World(SimSettings(truncation="hw", acks=1)).run(KIP_101_CASE_1)
    assert [str(a) for a in w.history][26:28] == [
        "deliver #16: metadata v5 (leader n2, epoch 1, ISR {n2,n3}) reaches n2: n2 is leader of epoch 1",
        "deliver #17: metadata v5 (leader n2, epoch 1, ISR {n2,n3}) reaches n3: n3 is follower of epoch 1"]
    assert (w.leader(), w.values("n3"), w.nodes["n3"].replica.leader_epoch) == ("n3", ["v1"], 2)
    assert [(a.value, a.offset) for a in w.acked] == [("v1", 0), ("v2", 1)]
    w.settle()
    assert {n: w.values(n) for n in w.nodes} == {"n1": ["v1"], "n2": ["v1"], "n3": ["v1"]}
    assert committed_losses(w) == ["v2"]


def test_kip_101_case_1_keeps_the_write_with_leader_epoch_truncation():
    w = World(SimSettings(truncation="leader-epoch", acks=1)).run(KIP_101_CASE_1)
    assert (w.leader(), w.values("n3"), w.nodes["n3"].replica.leader_epoch) == ("n3", ["v1", "v2"], 2)
    w.settle()
    assert {n: w.values(n) for n in w.nodes} == {"n1": ["v1", "v2"], "n2": ["v1", "v2"], "n3": ["v1", "v2"]}
    assert committed_losses(w) == []


# --- the old hand-driven simulator runs on the real controller too --------------------------------------

def test_old_sim_elections_and_isr_changes_go_through_controller_state(monkeypatch):
    from broker.replication.config import ReplicationConfig
    from step_sim import Sim
    calls = []
    for name in ("create_topics", "elect_leader", "alter_isr"):
        real = getattr(ControllerState, name)

        def spy(self, *args, _real=real, _name=name, **kw):
            calls.append(_name)
            return _real(self, *args, **kw)
        monkeypatch.setattr(ControllerState, name, spy)
    sim = Sim(["A", "B", "C"], ReplicationConfig(replica_lag_time_max_ms=1000))
    assert type(sim.controller) is ControllerState
    sim.start("A")
    sim.crash("C")
    sim.elect("B")                    # clean: the controller elects B, then C (dead) leaves the ISR
    assert calls == ["create_topics", "elect_leader", "alter_isr"]
    p = sim.controller.partition("t", 0)
    assert (p.leader, p.leader_epoch, p.isr, p.isr_version) == (2, 1, [1, 2], 2)
    assert (sim.leader, sim.epoch, sim.isr, sim.isr_version) == ("B", 1, {"A", "B"}, 2)
    sim.advance(1500)
    proposal = sim.shrink_isr()       # A has not fetched from B: the proposal goes to alter_isr
    assert proposal.isr == (2,) and calls[-1] == "alter_isr"
    assert (sim.controller.partition("t", 0).isr, sim.isr) == ([2], {"B"})


def test_old_sim_starts_with_any_leader_at_epoch_0():
    from step_sim import Sim
    sim = Sim(["A", "B", "C"])
    sim.start("B", isr={"B", "C"})
    p = sim.controller.partition("t", 0)
    assert (p.leader, p.leader_epoch, p.replicas, p.isr) == (2, 0, [2, 1, 3], [2, 3])
    assert (sim.replica("B").role, sim.replica("A").role, sim.replica("A").leader_id) == ("leader", "follower", 2)


def test_a_lost_registration_is_sent_again():
    w = World(SimSettings(replicas=2))
    w.apply(Action(A.CRASH, "n2"))
    w.apply(Action(A.RESTART, "n2"))
    w.apply(Action(A.DROP, msg=msg(w, "register", "n2", "c0")))
    assert w.nodes["n2"].broker_epoch is None and w.nodes["n2"].replica.role == "none"
    assert str(w.apply(Action(A.HEARTBEAT, "n2"))) == "n2 asks the controller to register it again"
    w.apply(Action(A.DELIVER, msg=msg(w, "register", "n2", "c0")))
    assert w.nodes["n2"].broker_epoch == 3                   # n1 1, n2 2 at the start
    w.apply(Action(A.DELIVER, msg=msg(w, "metadata", "c0", "n2")))
    assert (w.nodes["n2"].replica.role, w.nodes["n2"].replica.leader_id) == ("follower", 1)


def _shrink_to_leader_only(w: World) -> None:
    w.apply(Action(A.ADVANCE, arg=2001))
    w.apply(Action(A.ALTER_ISR, "n1"))
    w.apply(Action(A.DELIVER, msg=msg(w, "alter-isr", "n1", "c0")))


def test_unclean_admin_election_only_with_unclean_election_on():
    for unclean in (False, True):
        w = World(SimSettings(replicas=2, unclean_leader_election=unclean))
        _shrink_to_leader_only(w)
        assert w.controller.partition("t", 0).isr == [1]
        assert (Action(A.ELECT, "n2", arg=1) in w.enabled()) == unclean
        assert Action(A.ELECT, "n2", arg=0) not in w.enabled()
    assert str(w.apply(Action(A.ELECT, "n2", arg=1))) == "admin unclean election: n2 leads epoch 1, ISR {n2}"


def test_kip_966_a_restart_registers_as_unclean_and_leaves_the_elr():
    w = World(SimSettings(replicas=2, min_insync_replicas=2, eligible_leader_replicas=True))
    _shrink_to_leader_only(w)
    assert (w.controller.partition("t", 0).isr, w.controller.partition("t", 0).elr) == ([1], [2])
    assert Action(A.ELECT, "n2", arg=0) in w.enabled()             # an ELR member is a clean choice
    w.apply(Action(A.CRASH, "n2"))
    w.apply(Action(A.RESTART, "n2"))
    w.apply(Action(A.DELIVER, msg=msg(w, "register", "n2", "c0")))
    assert [e for e in w.events if e["event"] == "registered"][-1]["clean_shutdown"] is False
    assert [e["event"] for e in w.events].count("unclean-shutdown") == 1
    assert w.controller.partition("t", 0).elr == []
    assert Action(A.ELECT, "n2", arg=0) not in w.enabled()


def test_a_crash_drops_the_messages_to_the_node_and_later_ones_are_lost():
    w = World(SimSettings(replicas=2))
    w.apply(Action(A.SEND, "n2"))
    w.apply(Action(A.DELIVER, msg=1))                                # the answer #2 waits for n2
    w.apply(Action(A.CRASH, "n2"))
    assert w.in_flight == {}
    w.apply(Action(A.RESTART, "n2"))
    w.apply(Action(A.CRASH, "n1"))
    w.apply(Action(A.DELIVER, msg=msg(w, "register", "n2", "c0")))
    w.apply(Action(A.DELIVER, msg=msg(w, "metadata", "c0", "n2")))   # n2 follows n1, which is down
    w.apply(Action(A.SEND, "n2"))
    fetch = msg(w, "fetch", "n2", "n1")
    assert str(w.apply(Action(A.DELIVER, msg=fetch))).endswith("reaches n1: n1 is down: lost")
