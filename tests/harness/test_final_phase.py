"""Unit tests for harness/final_phase.py: the final wait polls until every partition is healthy or times
out, and final-state values have the docs/formats.md shape. (The real wait runs in the e2e tests.)"""
from __future__ import annotations

from broker.client import PartitionInfo

from harness import final_phase


def info(p, leader, isr, state, replicas=(1, 2, 3), epoch=4):
    return PartitionInfo(p, leader, epoch, list(isr), list(replicas), 7, state)


HEALTHY = {1: (10, 10), 2: (10, 10), 3: (10, 10)}


def test_healthy_rules():
    assert final_phase.from_info(info(0, 1, [1, 2, 3], HEALTHY)).healthy
    assert not final_phase.from_info(info(0, None, [1, 2, 3], HEALTHY)).healthy
    s = final_phase.from_info(info(0, 1, [1, 2], HEALTHY))
    assert (s.healthy, s.problem()) == (False, "not in ISR: n3")
    s = final_phase.from_info(info(0, 1, [1, 2, 3], {1: (10, 10), 2: (10, 9), 3: (10, 10)}))
    assert (s.healthy, s.problem()) == (False, "LEO/HW differ: n1 leo=10 hw=10, n2 leo=10 hw=9, n3 leo=10 hw=10")
    s = final_phase.from_info(info(0, 1, [1, 2, 3], {1: (10, 10), 2: None, 3: (10, 10)}))
    assert (s.healthy, s.problem()) == (False, "no answer from n2")


def test_wait_polls_until_healthy():
    answers = [[info(0, None, [1], HEALTHY)], RuntimeError("controller down"),
               [info(0, 1, [1, 2, 3], {1: (10, 10), 2: (8, 8), 3: (10, 10)})],
               [info(0, 1, [1, 2, 3], HEALTHY)]]
    t = [0.0]

    def describe():
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a
    out = final_phase.wait_recovered(describe, [0], final_phase.Polling(10, clock=lambda: t[0],
                                                                     sleep=lambda s: t.__setitem__(0, t[0] + s)))
    assert (out.timed_out, out.waited_s, answers) == (False, 0.75, [])
    assert out.states[0].hw == 10


def test_wait_times_out_and_final_state_says_so():
    t = [0.0]
    out = final_phase.wait_recovered(lambda: [info(0, 2, [2], {1: None, 2: (5, 3), 3: None})], [0],
                                     final_phase.Polling(1.0, clock=lambda: t[0],
                                                         sleep=lambda s: t.__setitem__(0, t[0] + s)))
    assert out.timed_out and out.waited_s == 1.0
    v = final_phase.final_state_value(0, out.states[0], read_to=3, read_covered=True)
    assert v == {"partition": 0, "recovered": False, "hw": 3, "leader": "n2", "epoch": 4, "isr": ["n2"],
                 "replicas": {"n1": None, "n2": {"leo": 5, "hw": 3}, "n3": None}, "read_to": 3}
    assert final_phase.final_state_value(1, None, read_to=None, read_covered=False)["recovered"] is False


def test_wait_stops_when_told():
    calls = []
    out = final_phase.wait_recovered(lambda: calls.append(1) or [info(0, None, [1], HEALTHY)], [0],
                                     final_phase.Polling(100, sleep=lambda s: None,
                                                         should_stop=lambda: len(calls) >= 3))
    assert (out.timed_out, out.error, len(calls)) == (True, "interrupted", 3)
