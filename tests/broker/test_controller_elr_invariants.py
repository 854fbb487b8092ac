"""Property test of KIP-966 in the controller state machine: random registrations (clean or unclean),
heartbeats, clock advances, ALTER_ISR calls and clean ELECT_LEADER requests, with eligible leader replicas
on, keep the ELR invariants, and a broker back from an unclean shutdown is never eligible (in no ISR, no
ELR, never leader) until a leader takes it back into the ISR."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.controller import messages as m
from broker.controller.state import ControllerState

T = 1000
BROKERS = (1, 2, 3, 4)

op = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(BROKERS), st.booleans()),
    st.tuples(st.just("heartbeat"), st.sampled_from(BROKERS)),
    st.tuples(st.just("advance"), st.integers(1, 2 * T)),
    st.tuples(st.just("alter"), st.integers(0, 2), st.lists(st.sampled_from(BROKERS), max_size=4)),
    st.tuples(st.just("elect"), st.integers(0, 2), st.sampled_from((None, *BROKERS))),
)


def check(s: ControllerState, tainted: set[int]) -> None:
    for p in s.partitions():
        assert len(set(p.isr)) == len(p.isr) and set(p.isr) <= set(p.replicas)
        assert p.isr == [r for r in p.replicas if r in p.isr]
        assert p.elr == [r for r in p.replicas if r in p.elr]             # replica order, no duplicates
        assert not set(p.isr) & set(p.elr)                                # never in both
        assert all(s.is_live(r) for r in p.isr)                           # fenced brokers leave the ISR
        if len(p.isr) >= s.min_insync_replicas:
            assert p.elr == []
        if p.leader is not None:
            assert s.is_live(p.leader) and p.leader in p.isr
        else:
            assert not any(s.is_live(r) for r in p.isr + p.elr)          # leaderless only if none eligible
        assert not tainted & set(p.isr + p.elr), (p, tainted)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(min_isr=st.integers(1, 3), ops=st.lists(op, max_size=40))
def test_random_operations_keep_the_elr_invariants(min_isr, ops):
    s = ControllerState(session_timeout_ms=T, eligible_leader_replicas=True, min_insync_replicas=min_isr)
    now = 0
    epochs = {b: s.register_broker(b, "h", b, now, clean_shutdown=True)[0] for b in BROKERS}
    s.create_topics([m.TopicSpec("t", 3, 3)])
    tainted: set[int] = set()       # back from an unclean shutdown, not yet caught up by a leader
    for o in ops:
        kind = o[0]
        if kind == "register":
            epochs[o[1]], _ = s.register_broker(o[1], "h", o[1], now, clean_shutdown=o[2])
            if not o[2]:
                tainted.add(o[1])
        elif kind == "heartbeat":
            assert s.heartbeat(o[1], epochs[o[1]], now)[0] == m.NONE
        elif kind == "advance":
            now += o[1]
            s.expire_sessions(now)
        elif kind == "alter":
            _, pid, isr = o
            p = s.partition("t", pid)
            if p.leader is None:
                continue
            req = m.AlterIsr("t", pid, p.leader, p.leader_epoch, p.isr_version,
                             tuple(dict.fromkeys([p.leader, *isr])))
            result, _ = s.alter_isr(req)
            if result.error == m.NONE:
                tainted -= set(req.isr)                     # the leader vouches: it caught up
        else:
            _, pid, broker = o
            before = s.partition("t", pid)
            was = (before.isr[:], before.elr[:])
            result, _ = s.elect_leader("t", pid, broker)
            if result.changed:
                assert result.leader in was[0] + was[1]     # clean: from the ISR or the ELR only
        check(s, tainted)
        restored = ControllerState.from_dict(s.to_dict(), now_ms=now, eligible_leader_replicas=True,
                                             min_insync_replicas=min_isr)
        assert restored.metadata() == s.metadata()
