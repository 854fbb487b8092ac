"""Unit tests of ELECT_LEADER in the controller's pure state machine (ControllerState.elect_leader): a named
replica from the ISR, refusals (not a replica, fenced, outside the ISR), a one-off unclean election, no
change when the leader is live, and the events and version bump of a change."""
from __future__ import annotations

from broker.controller import messages as m
from broker.controller.state import ControllerState

T = 3000


def make(topic=("t", 1, 3)):
    s = ControllerState(session_timeout_ms=T)
    epochs = {b: s.register_broker(b, "127.0.0.1", 9000 + b, now_ms=0)[0] for b in (1, 2, 3)}
    assert s.create_topics([m.TopicSpec(*topic)])[0] == [(topic[0], m.NONE, "")]
    return s, epochs


def shrink(s, isr, topic="t", p=0):
    r = s.partition(topic, p)
    res, _ = s.alter_isr(m.AlterIsr(topic, p, r.leader, r.leader_epoch, r.isr_version, tuple(isr)))
    assert res.error == m.NONE, res


def state(s, topic="t", p=0):
    r = s.partition(topic, p)
    return r.leader, r.leader_epoch, r.isr


def test_elect_a_named_isr_member_moves_leadership_and_keeps_the_isr():
    s, _ = make()
    version = s.version
    res, events = s.elect_leader("t", 0, broker=2)
    assert res == m.ElectResult(m.NONE, True, 2, 1, (1, 2, 3), (), "broker 2 leads t/0 at epoch 1 (isr election)")
    assert events == [
        {"event": "elect-leader", "topic": "t", "partition": 0, "requested": 2, "unclean": False, "leader": 2,
         "how": "isr"},
        {"event": "leader-change", "topic": "t", "partition": 0, "leader": 2, "epoch": 1, "isr": [1, 2, 3],
         "version": 1},
    ]
    assert s.version == version + 1
    assert s.metadata().partition("t", 0).leader == 2


def test_elect_the_current_leader_or_with_a_live_leader_is_no_change():
    s, _ = make()
    version = s.version
    res, events = s.elect_leader("t", 0, broker=1)
    assert (res.error, res.changed, res.leader, res.leader_epoch, events) == (m.NONE, False, 1, 0, [])
    res, events = s.elect_leader("t", 0)
    assert (res.error, res.changed, events) == (m.NONE, False, [])
    assert res.message == "broker 1 leads t/0 at epoch 0: no election needed"
    assert s.version == version


def test_refusals_name_the_reason_and_change_nothing():
    s, _ = make(("t", 1, 2))                # replicas [1, 2]
    version = s.version
    res, events = s.elect_leader("t", 0, broker=3)
    assert (res.error, res.message, events) == (m.INELIGIBLE_REPLICA, "broker 3 is not a replica of t/0 "
                                                "(replicas [1, 2])", [])
    res, _ = s.elect_leader("nope", 0, broker=1)
    assert (res.error, res.message) == (m.UNKNOWN_PARTITION, "no partition nope/0")
    shrink(s, [1])
    version = s.version
    res, events = s.elect_leader("t", 0, broker=2)
    assert res == m.ElectResult(m.INELIGIBLE_REPLICA, False, 1, 0, (1,), (),
                                "broker 2 is not in the ISR [1] of t/0; only an unclean election may pick it")
    assert events == [] and s.version == version


def test_a_fenced_broker_is_refused_even_for_an_unclean_election():
    s, ep = make()
    for b in (1, 3):
        s.heartbeat(b, ep[b], 2000)
    s.expire_sessions(T + 1)                    # broker 2 fenced
    res, _ = s.elect_leader("t", 0, broker=2, unclean=True)
    assert (res.error, res.message) == (m.INELIGIBLE_REPLICA, "broker 2 is fenced or unregistered")


def test_named_unclean_election_makes_the_replica_the_whole_isr():
    s, _ = make()
    shrink(s, [1, 2])
    res, events = s.elect_leader("t", 0, broker=3, unclean=True)
    assert (res.error, res.changed, res.leader, res.leader_epoch, res.isr) == (m.NONE, True, 3, 1, (3,))
    assert [e["event"] for e in events] == ["elect-leader", "isr-change", "leader-change"]
    assert events[0]["how"] == "unclean"


def test_leaderless_partition_elects_again_unclean_only_for_that_one_election():
    s, ep = make()
    shrink(s, [1])
    for b in (2, 3):
        s.heartbeat(b, ep[b], 2000)
    s.expire_sessions(T + 1)                    # leader 1 fenced, ISR keeps it: no leader
    assert state(s) == (None, 1, [1])
    res, events = s.elect_leader("t", 0)
    assert res.error == m.ELIGIBLE_LEADERS_NOT_AVAILABLE and events == []
    assert res.message == ("no live replica in the ISR [1] of t/0; an unclean election may pick another replica")
    res, events = s.elect_leader("t", 0, unclean=True)
    assert (res.error, res.changed, res.leader, res.leader_epoch, res.isr) == (m.NONE, True, 2, 2, (2,))
    assert events[0] == {"event": "elect-leader", "topic": "t", "partition": 0, "requested": None,
                         "unclean": True, "leader": 2, "how": "unclean"}
    assert s.unclean_leader_election is False   # not a standing setting
    s2, _ = make()
    assert s2.elect_leader("t", 0)[0].changed is False


def test_elect_leader_wire_round_trip():
    req = m.ElectLeader.parse({"topic": "t", "partition": 0, "broker": None})
    assert req == m.ElectLeader("t", 0, None, False)
    assert m.ElectLeader.parse(m.ElectLeader("t", 1, 2, True).to_wire()) == m.ElectLeader("t", 1, 2, True)
    for bad, field in (({"topic": "t", "partition": 0, "broker": 0}, "'broker'"),
                       ({"topic": "t", "partition": 0, "unclean": 1}, "'unclean'"),
                       ({"partition": 0}, "'topic'")):
        try:
            m.ElectLeader.parse(bad)
        except m.BadRequest as exc:
            assert field in str(exc)
        else:
            raise AssertionError(bad)
    r = m.ElectResult(m.NONE, True, 2, 3, (2,), (1,), "x")
    assert m.ElectResult.from_wire(r.to_wire()) == r
