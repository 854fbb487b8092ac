"""Unit tests of KIP-966 in the controller's pure state machine (broker/controller/state.py): who joins and
leaves the eligible leader replicas (ELR), the election order ISR -> ELR -> unclean -> none, an ISR that may
become empty, unclean-shutdown detection at registration, ELECT_LEADER of an ELR member, and the durable
form. Each rule is also run with KIP-966 off where the answer differs (the unsafe behaviour it fixes)."""
from __future__ import annotations

from broker.controller import messages as m
from broker.controller.state import ControllerState

T = 3000


def make(*, elr=True, min_isr=2, rf=3):
    s = ControllerState(session_timeout_ms=T, eligible_leader_replicas=elr, min_insync_replicas=min_isr)
    epochs = {b: s.register_broker(b, "127.0.0.1", 9000 + b, now_ms=0)[0] for b in (1, 2, 3)}
    assert s.create_topics([m.TopicSpec("t", 1, rf)])[0] == [("t", m.NONE, "")]
    return s, epochs


def alter(s, isr):
    r = s.partition("t", 0)
    res, events = s.alter_isr(m.AlterIsr("t", 0, r.leader, r.leader_epoch, r.isr_version, tuple(isr)))
    assert res.error == m.NONE, res
    return events


def fence(s, epochs, brokers, now=T + 1):
    """Fence `brokers` at `now` (every other broker heartbeats just before)."""
    for b in (1, 2, 3):
        if b not in brokers and not s.brokers[b].fenced:
            assert s.heartbeat(b, epochs[b], now - 1)[0] == m.NONE
    return s.expire_sessions(now)


def view(s):
    r = s.partition("t", 0)
    return r.leader, r.isr, r.elr


def test_members_leaving_an_isr_below_min_isr_join_the_elr():
    s, _ = make()
    assert alter(s, [1, 2]) == [{"event": "isr-change", "topic": "t", "partition": 0, "isr": [1, 2], "version": 1,
                                 "elr": []}]                       # 2 = min ISR: 3 may lack what 1, 2 committed
    assert alter(s, [1]) == [{"event": "isr-change", "topic": "t", "partition": 0, "isr": [1], "version": 2,
                              "elr": [2]}]
    assert view(s) == (1, [1], [2])
    assert s.metadata().partition("t", 0).elr == (2,)
    off, _ = make(elr=False)
    alter(off, [1, 2])
    assert alter(off, [1]) == [{"event": "isr-change", "topic": "t", "partition": 0, "isr": [1], "version": 2}]
    assert view(off) == (1, [1], [])


def test_elr_is_cleared_at_min_isr_and_never_holds_an_isr_member():
    s, _ = make(min_isr=3)
    alter(s, [1, 2])
    assert view(s) == (1, [1, 2], [3])
    alter(s, [1])
    assert view(s) == (1, [1], [2, 3])
    alter(s, [1, 2])                                # 2 back in the ISR, still under min ISR
    assert view(s) == (1, [1, 2], [3])
    alter(s, [1, 2, 3])
    assert view(s) == (1, [1, 2, 3], [])


def test_fencing_the_last_isr_member_elects_a_live_elr_member():
    s, ep = make()
    alter(s, [1, 2])
    alter(s, [1])
    events = fence(s, ep, [1])
    assert view(s) == (2, [2], [1])                 # 1 stays eligible: fenced, not unclean
    assert s.partition("t", 0).leader_epoch == 1
    assert events[1:] == [
        {"event": "isr-change", "topic": "t", "partition": 0, "isr": [2], "version": 3, "elr": [1]},
        {"event": "leader-change", "topic": "t", "partition": 0, "leader": 2, "epoch": 1, "isr": [2],
         "version": 3, "elr": [1]},
    ]
    off, ep_off = make(elr=False)
    alter(off, [1, 2])
    alter(off, [1])
    fence(off, ep_off, [1])
    assert view(off) == (None, [1], [])             # without KIP-966: the ISR keeps 1, no leader


def test_isr_may_become_empty_and_a_clean_return_is_elected_from_the_elr():
    s, ep = make()
    alter(s, [1, 2])
    alter(s, [1])
    fence(s, ep, [1, 2])                            # 3 is live but was never eligible
    assert view(s) == (None, [], [1, 2])
    _, events = s.register_broker(1, "127.0.0.1", 9001, now_ms=T + 10, clean_shutdown=True)
    assert view(s) == (1, [1], [2])
    assert "unclean-shutdown" not in [e["event"] for e in events]


def test_an_unclean_return_leaves_the_elr_and_is_not_elected():
    s, ep = make()
    alter(s, [1, 2])
    alter(s, [1])
    fence(s, ep, [1, 2])
    _, events = s.register_broker(1, "127.0.0.1", 9001, now_ms=T + 10, clean_shutdown=False)
    assert [e["event"] for e in events] == ["registered", "unclean-shutdown", "isr-change", "unfenced"]
    assert events[0]["clean_shutdown"] is False
    assert events[1] == {"event": "unclean-shutdown", "broker": 1, "partitions": ["t/0"]}
    assert events[2] == {"event": "isr-change", "topic": "t", "partition": 0, "isr": [], "version": 4, "elr": [2]}
    assert view(s) == (None, [], [2])
    s.register_broker(2, "127.0.0.1", 9002, now_ms=T + 20, clean_shutdown=True)
    assert view(s) == (2, [2], [])


def test_without_kip966_an_unclean_return_of_the_last_isr_member_leads_again():
    s, ep = make(elr=False)
    alter(s, [1, 2])
    alter(s, [1])
    fence(s, ep, [1, 2])
    assert view(s) == (None, [1], [])
    _, events = s.register_broker(1, "127.0.0.1", 9001, now_ms=T + 10, clean_shutdown=False)
    assert "unclean-shutdown" not in [e["event"] for e in events]
    assert view(s) == (1, [1], [])                  # the "last replica standing" leads with a cut log


def test_an_unclean_sole_isr_member_of_a_leaderless_partition_leaves_the_isr():
    old, ep = make(elr=False)                       # state written without KIP-966: ISR [1], no leader
    alter(old, [1])
    fence(old, ep, [1])
    assert view(old) == (None, [1], [])
    s = ControllerState.from_dict(old.to_dict(), now_ms=T + 5, session_timeout_ms=T, eligible_leader_replicas=True,
                                  min_insync_replicas=2)
    s.register_broker(1, "127.0.0.1", 9001, now_ms=T + 10, clean_shutdown=False)
    assert view(s) == (None, [], [])
    clean = ControllerState.from_dict(old.to_dict(), now_ms=T + 5, session_timeout_ms=T,
                                      eligible_leader_replicas=True, min_insync_replicas=2)
    clean.register_broker(1, "127.0.0.1", 9001, now_ms=T + 10, clean_shutdown=True)
    assert view(clean) == (1, [1], [])


def test_an_unclean_bounce_of_the_leader_moves_leadership_and_drops_it_from_the_elr():
    s, _ = make()
    alter(s, [1, 2])
    alter(s, [1])                                   # ISR [1], ELR [2]; 1 restarts before its session ends
    s.register_broker(1, "127.0.0.1", 9001, now_ms=10, clean_shutdown=False)
    assert view(s) == (2, [2], [])


def test_min_isr_one_keeps_only_the_last_member_eligible():
    s, ep = make(min_isr=1)
    alter(s, [1, 2])
    alter(s, [1])
    assert view(s) == (1, [1], [])                  # 1 >= min ISR: the HW moved without 2
    fence(s, ep, [1])
    assert view(s) == (None, [], [1])               # 2 and 3 may lack records 1 committed alone


def test_elect_leader_names_an_elr_member_and_the_old_isr_joins_the_elr():
    s, _ = make()
    alter(s, [1, 2])
    alter(s, [1])
    res, events = s.elect_leader("t", 0, broker=2)
    assert (res.error, res.leader, res.isr, res.elr) == (m.NONE, 2, (2,), (1,))
    assert events[0]["how"] == "elr"
    res, _ = s.elect_leader("t", 0, broker=3)
    assert res.error == m.INELIGIBLE_REPLICA
    assert res.message == "broker 3 is not in the ISR [2] or the ELR [1] of t/0; only an unclean election may pick it"
    res, _ = s.elect_leader("t", 0, broker=3, unclean=True)
    assert (res.error, res.leader, res.isr, res.elr) == (m.NONE, 3, (3,), ())


def test_elr_survives_the_durable_form_and_old_files_without_it_load():
    s, ep = make()
    alter(s, [1, 2])
    alter(s, [1])
    saved = s.to_dict()
    assert saved["topics"][0]["partitions"][0]["elr"] == [2]
    r = ControllerState.from_dict(saved, now_ms=0, eligible_leader_replicas=True, min_insync_replicas=2)
    assert view(r) == (1, [1], [2]) and r.to_dict() == saved
    del saved["topics"][0]["partitions"][0]["elr"]
    assert view(ControllerState.from_dict(saved, now_ms=0)) == (1, [1], [])


def test_register_broker_wire_carries_clean_shutdown():
    assert m.RegisterBroker.parse({"broker_id": 1, "host": "h", "port": 1}).clean_shutdown is None
    req = m.RegisterBroker(1, "h", 2, False)
    assert req.to_wire() == {"broker_id": 1, "host": "h", "port": 2, "clean_shutdown": False}
    assert m.RegisterBroker.parse(req.to_wire()) == req
    try:
        m.RegisterBroker.parse({"broker_id": 1, "host": "h", "port": 1, "clean_shutdown": "no"})
    except m.BadRequest as exc:
        assert "'clean_shutdown'" in str(exc)
    else:
        raise AssertionError("accepted a string clean_shutdown")
