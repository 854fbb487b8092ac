"""KIP-101 scenario 1 (seed 000, 七.1) on real processes: a follower restarts, truncates to its stale
high watermark, and becomes leader before it could fetch again: with `truncation = "hw"` an acknowledged
write is lost; with leader-epoch truncation the same fault sequence keeps it.

Two brokers, RF=2, acks=1, min.insync.replicas=1, flush="always". Broker B's on-disk HW checkpoint is stale
(hw_checkpoint_interval_ms=60 s, as Kafka's checkpoint lags its in-memory HW), which is what a restarted
broker recovers. Fault sequence, each step timed by what the brokers report (Admin / DESCRIBE_REPLICAS):
  1. leader A acknowledges m0..m4 (acks=1); wait until B reports LEO 5 and HW 5;
  2. SIGSTOP A (it stops answering; it is fenced only after the session timeout), SIGKILL B, restart B;
  3. wait until restarted B reports itself follower of A: in "hw" mode it truncated to its recovered HW
     (0) on becoming follower; in leader-epoch mode it asks A (paused) where its epoch ends and keeps its log;
  4. SIGKILL A; the controller fences it and, A being the only ISR member left (this controller removes a
     bounced broker from the ISR when it registers again), elects B (unclean_leader_election=true, the
     same in both modes);
  5. read the partition from B, the new leader.
"""
from __future__ import annotations

import signal

import pytest

from broker.client import Admin, Consumer, Producer
from clusters.bare import BareCluster, wait_until
from real_processes import wait_full_isr

TOPIC = "kip101"
VALUES = [b"m0", b"m1", b"m2", b"m3", b"m4"]


def replica(admin: Admin, broker: int) -> dict | None:
    rep = admin.replicas(broker)
    return None if rep is None else rep.get((TOPIC, 0))


def run_scenario(tmp_path, truncation: str):
    with BareCluster(tmp_path, brokers=2,
                      broker_settings={"truncation": truncation, "min_insync_replicas": 1, "flush": "always",
                                       "hw_checkpoint_interval_ms": 60_000, "heartbeat_interval_ms": 300,
                                       "replica_lag_time_max_ms": 30_000},
                      controller_settings={"broker_session_timeout_ms": 8000, "unclean_leader_election": True},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 2}]) as c:
        admin = Admin(c.controller_address, timeout_s=1.0)
        info = wait_full_isr(admin, TOPIC, 30, "a leader with both replicas in the ISR", isr_size=2)
        a = info.leader
        b = 3 - a
        # 1. acknowledged by A alone (acks=1); B replicates everything, HW 5 in memory, not on disk
        with Producer(c.controller_address, acks=1, timeout_s=2.0) as p:
            acked = p.send(TOPIC, 0, VALUES)
        assert (acked.offsets, acked.epoch) == ([0, 1, 2, 3, 4], info.epoch)
        wait_until(lambda: (lambda r: r and (r["leo"], r["hw"]) == (5, 5))(replica(admin, b)), 10,
                   "B at LEO 5, HW 5")
        # 2. A stops answering; B crashes and comes back
        c.signal(a, signal.SIGSTOP)
        try:
            c.kill(b)
            c.start_broker(b)
            # 3. B follows A again (A is not fenced yet)
            seen = wait_until(lambda: (lambda r: r if r and r["role"] == "follower" and r["leader"] == a
                                       else None)(replica(admin, b)), 6, "restarted B following A")
        finally:
            c.kill(a)                    # 4. (SIGKILL works on a stopped process)
        follower_leo = seen["leo"]
        # B becomes leader (unclean: A was the only ISR member left)
        d = wait_until(lambda: (lambda d: d if d.leader == b else None)(admin.describe(TOPIC)[0]), 20,
                       "B elected leader")
        assert d.epoch > seen["leader_epoch"]
        wait_until(lambda: (lambda r: r and r["role"] == "leader")(replica(admin, b)), 10, "B acting as leader")
        # 5. what the new leader serves
        with Consumer(c.controller_address, timeout_s=2.0) as consumer:
            f = consumer.fetch(TOPIC, 0, 0, max_records=100)
        truncates = [(e["why"], e["from"], e["to"]) for e in c.events(b)
                     if e["event"] == "truncate" and e.get("why") != "recovery"]
        admin.close()
        return follower_leo, f, truncates


@pytest.mark.slow
def test_hw_truncation_loses_an_acknowledged_write(tmp_path):
    follower_leo, f, truncates = run_scenario(tmp_path, "hw")
    assert follower_leo == 0                 # truncated to the stale HW on becoming follower
    assert truncates == [("hw", 5, 0)]
    assert (f.records, f.hw) == ([], 0)      # m0..m4 were acknowledged and are gone


@pytest.mark.slow
def test_leader_epoch_truncation_keeps_it_under_the_same_faults(tmp_path):
    follower_leo, f, truncates = run_scenario(tmp_path, "leader-epoch")
    assert follower_leo == 5                 # waited for the leader's answer instead of cutting to the HW
    assert truncates == []
    assert [v for _o, _e, v in f.records] == VALUES and f.hw == 5
