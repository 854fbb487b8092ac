"""The design notes' LEO/HW tables (seed 000 sections 六 and 七.1), replayed step by step.

Columns of every row: Leader LEO, Remote LEO (the follower's LEO as the leader keeps it), Leader HW,
Follower LEO, Follower HW. The tables do not depend on the truncation mode, so both modes run them.
"""
import pytest

from broker.replication.config import ReplicationConfig
from step_sim import Sim

MODES = ["hw", "leader-epoch"]


def columns(sim: Sim) -> tuple[int, int, int, int, int]:
    return (sim.leo("A"), sim.remote_leo("B"), sim.hw("A"), sim.leo("B"), sim.hw("B"))


def started(mode: str) -> Sim:
    """A leads, B follows, min.insync.replicas=1. The follower is already fetching when the tables
    start (000 六.1: it keeps sending FETCH requests that find no data), so one empty round has run."""
    sim = Sim(["A", "B"], ReplicationConfig(truncation=mode, min_insync_replicas=1))
    sim.start("A")
    if sim.replica("B").follower_phase == "truncating":      # leader-epoch: nothing to ask about yet
        sim.fetch_round("B")
    r = sim.fetch_round("B")
    assert r.kind == "fetch" and r.response.records == ()
    assert columns(sim) == (0, 0, 0, 0, 0)                    # 六.1 initial state
    return sim


@pytest.mark.parametrize("mode", MODES)
def test_section_6_normal_update(mode):
    sim = started(mode)
    out = sim.produce("A", "m1", acks=1)
    assert out.status == "acked" and out.base_offset == 0
    # PRODUCE处理完成: Leader LEO 1, Remote LEO 0, Leader HW min(1, 0) = 0, follower untouched
    assert columns(sim) == (1, 0, 0, 0, 0)
    # first fetch (offset 0): remote LEO stays 0, HW 0; follower writes m1 (LEO 1), HW min(0, 1) = 0
    r = sim.fetch_round("B")
    assert r.request.fetch_offset == 0 and r.response.high_watermark == 0
    assert columns(sim) == (1, 0, 0, 1, 0)
    # 第二次Follower FETCH处理完成: offset 1 -> Remote LEO 1, Leader HW 1, Follower HW min(1, 1) = 1
    r = sim.fetch_round("B")
    assert r.request.fetch_offset == 1 and r.response.high_watermark == 1
    assert columns(sim) == (1, 1, 1, 1, 1)


@pytest.mark.parametrize("mode", MODES)
def test_section_7_1_three_generations(mode):
    sim = started(mode)
    # 代1: PRODUCE and follower FETCH (offset 0)
    sim.produce("A", "m1", acks=1)
    sim.fetch_round("B")
    assert columns(sim) == (1, 0, 0, 1, 0)
    # 代2: second message, fetch at offset 1
    sim.produce("A", "m2", acks=1)
    sim.fetch_round("B")
    assert columns(sim) == (2, 1, 1, 2, 1)
    # 代3: fetch at offset 2
    sim.fetch_round("B")
    assert columns(sim) == (2, 2, 2, 2, 2)
    assert [v for v, _ in sim.acked] == ["m1", "m2"]


@pytest.mark.parametrize("mode", MODES)
def test_section_7_1_last_row_not_executed(mode):
    """"表中最后一条未执行": the leader processed the third fetch (HW 2) but the answer never reached
    B, whose HW stays 1 although it holds both records: the state the data-loss case starts from."""
    sim = started(mode)
    sim.produce("A", "m1", acks=1)
    sim.fetch_round("B")
    sim.produce("A", "m2", acks=1)
    sim.fetch_round("B")
    sim.fetch_round("B", deliver=False)
    assert columns(sim) == (2, 2, 2, 2, 1)
    assert sim.values("A") == sim.values("B") == ["m1", "m2"]
