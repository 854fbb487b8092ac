"""Property test of the controller state machine: random sequences of registrations, heartbeats, clock
advances (session expiry) and ALTER_ISR calls (current or stale) keep Kafka's invariants."""
from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.controller import messages as m
from broker.controller.state import ControllerState

T = 1000
BROKERS = (1, 2, 3, 4)

op = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(BROKERS)),
    st.tuples(st.just("heartbeat"), st.sampled_from(BROKERS)),
    st.tuples(st.just("advance"), st.integers(1, 2 * T)),
    st.tuples(st.just("alter"), st.integers(0, 2), st.lists(st.sampled_from(BROKERS), max_size=4),
              st.booleans(), st.booleans()),
)


def snapshot(s):
    return {(p.topic, p.partition): (p.leader, p.leader_epoch, list(p.isr), p.isr_version) for p in s.partitions()}


def check_invariants(s: ControllerState, before: dict, unclean: bool, events: list) -> None:
    for p in s.partitions():
        key = (p.topic, p.partition)
        leader, epoch, isr, version = before[key]
        assert p.isr and len(set(p.isr)) == len(p.isr) and set(p.isr) <= set(p.replicas)
        assert p.isr == [r for r in p.replicas if r in p.isr]            # ISR kept in replica order
        if p.leader is not None:
            assert s.is_live(p.leader) and p.leader in p.isr
        elif not unclean:
            assert not any(s.is_live(r) for r in p.isr)                   # leaderless only if no live ISR
        else:
            assert not any(s.is_live(r) for r in p.replicas)
        fenced_in_isr = [r for r in p.isr if not s.is_live(r)]
        assert not fenced_in_isr or p.isr == fenced_in_isr == [fenced_in_isr[0]]   # only as the last member
        # epochs and versions: a leader change bumps the epoch (at most two changes per operation: a bounce
        # fences then unfences), any partition change bumps the ISR version
        assert epoch <= p.leader_epoch <= epoch + 2 and p.isr_version >= version
        if p.leader != leader:
            assert p.leader_epoch > epoch
        if (p.leader, p.isr) != (leader, isr):
            assert p.isr_version > version
        else:
            assert (p.leader_epoch, p.isr_version) == (epoch, version) or p.leader_epoch == epoch + 2
        if p.leader != leader and p.leader is not None and not unclean:
            assert p.leader in isr                                        # clean: elected from the old ISR
    changed = snapshot(s) != before
    if changed:
        assert events, "a partition changed without an event"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unclean=st.booleans(), ops=st.lists(op, max_size=40))
def test_random_operations_keep_the_invariants(unclean, ops):
    s = ControllerState(session_timeout_ms=T, unclean_leader_election=unclean)
    now = 0
    epochs = {b: s.register_broker(b, "h", b, now)[0] for b in BROKERS}
    s.create_topics([m.TopicSpec("t", 3, 3)])
    for o in ops:
        before, version = snapshot(s), s.version
        kind = o[0]
        if kind == "register":
            epochs[o[1]], events = s.register_broker(o[1], "h", o[1], now)
        elif kind == "heartbeat":
            error, events = s.heartbeat(o[1], epochs[o[1]], now)
            assert error == m.NONE
        elif kind == "advance":
            now += o[1]
            events = s.expire_sessions(now)
        else:
            _, pid, isr, stale_version, stale_epoch = o
            p = s.partition("t", pid)
            leader = p.leader if p.leader is not None else 1
            req = m.AlterIsr("t", pid, leader, p.leader_epoch - stale_epoch, p.isr_version - stale_version,
                             tuple(dict.fromkeys([leader, *isr])))
            old = copy.deepcopy(p)
            result, events = s.alter_isr(req)
            if stale_epoch or stale_version or p.leader is None:
                assert result.error != m.NONE and events == [] and s.partition("t", pid) == old
            if result.error == m.NONE:
                assert s.partition("t", pid).isr == [r for r in p.replicas if r in req.isr]
                assert s.partition("t", pid).leader_epoch == old.leader_epoch
        assert (s.version > version) == bool(events) and s.version - version in (0, 1)
        check_invariants(s, before, unclean, events)
        restored = ControllerState.from_dict(s.to_dict(), now_ms=now)
        assert restored.metadata() == s.metadata()
