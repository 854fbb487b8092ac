"""Real processes: controller + 3 brokers, RF=3, acks=all, min.insync.replicas=2. SIGKILL the leader
right after it appended a batch no follower has; a new leader takes over with a higher epoch; producing
goes on; the old leader restarts, truncates its unreplicated tail (event log), rejoins the ISR, and every
acknowledged write is readable up to the HW, in order, without gaps.

How the old leader gets a tail no follower has, deterministically: SIGSTOP both followers, wait until
their parked fetches were answered (empty) by the leader, send an acks=all batch (it times out: not
acknowledged, appended only on the leader), SIGKILL the leader, SIGCONT the followers. The pause is
shorter than replica_lag_time_max_ms and the controller's session timeout, so both stay in the ISR.
"""
from __future__ import annotations

import signal
import time

import pytest

from broker.client import Admin, ClientError, Consumer, Producer
from clusters.bare import BareCluster, wait_until

TOPIC = "t"
BROKER = {"min_insync_replicas": 2, "heartbeat_interval_ms": 200, "replica_lag_time_max_ms": 4000,
          "replica_fetch_wait_max_ms": 200, "hw_checkpoint_interval_ms": 100}
CONTROLLER = {"broker_session_timeout_ms": 2500}


def full_isr(admin: Admin):
    d = admin.describe(TOPIC)
    if d and d[0].leader is not None and sorted(d[0].isr) == [1, 2, 3]:
        return d[0]
    return None


def send_until_acked(producer: Producer, values: list[bytes], timeout_s: float = 20.0):
    """Retry definite failures (no leader yet) until acknowledged; an indefinite failure fails the test."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return producer.send(TOPIC, 0, values)
        except ClientError as exc:
            assert exc.definite, f"indefinite failure while the cluster should be available: {exc}"
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def read_all(consumer: Consumer, hw: int) -> list[tuple[int, int, bytes]]:
    out: list[tuple[int, int, bytes]] = []
    while len(out) < hw:
        f = consumer.fetch(TOPIC, 0, len(out), max_records=500)
        assert all(o < f.hw for o, _, _ in f.records)
        assert f.records, f"no records at offset {len(out)} below hw {hw}"
        out.extend(f.records)
    return out


def run_failover(tmp_path, truncation: str):
    with BareCluster(tmp_path, brokers=3, broker_settings={**BROKER, "truncation": truncation},
                      controller_settings=CONTROLLER,
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as cluster:
        admin = Admin(cluster.controller_address, timeout_s=1.0)
        producer = Producer(cluster.controller_address, acks="all", timeout_s=2.0)
        consumer = Consumer(cluster.controller_address, timeout_s=2.0)
        info = wait_until(lambda: full_isr(admin), 20, "a leader with a full ISR")
        old_leader, old_epoch = info.leader, info.epoch
        followers = [b for b in (1, 2, 3) if b != old_leader]

        acked: dict[int, bytes] = {}
        counter = iter(range(10**9))
        for _ in range(20):
            vals = [str(next(counter)).encode() for _ in range(25)]
            r = producer.send(TOPIC, 0, vals)
            assert r.epoch == old_epoch
            acked.update(zip(r.offsets, vals))
        acked_before = len(acked)
        assert sorted(acked) == list(range(acked_before))

        # a batch that only the leader gets
        for b in followers:
            cluster.signal(b, signal.SIGSTOP)
        try:
            time.sleep(0.5)            # > replica_fetch_wait_max_ms: parked follower fetches answered empty
            short = Producer(cluster.controller_address, acks="all", timeout_s=0.3)
            with pytest.raises(ClientError) as err:
                short.send(TOPIC, 0, [b"unacked-%d" % i for i in range(7)])
            assert (err.value.code, err.value.definite) == ("REQUEST_TIMED_OUT", False)
            short.close()
            cluster.kill(old_leader)
        finally:
            for b in followers:
                cluster.signal(b, signal.SIGCONT)

        # a new leader with a higher epoch; producing goes on
        info = wait_until(lambda: (lambda d: d if d.leader in followers else None)(admin.describe(TOPIC)[0]),
                          20, "a new leader")
        assert info.epoch > old_epoch
        for _ in range(10):
            vals = [str(next(counter)).encode() for _ in range(25)]
            r = send_until_acked(producer, vals)
            assert r.epoch >= info.epoch
            acked.update(zip(r.offsets, vals))

        # the old leader comes back, truncates, rejoins
        cluster.start_broker(old_leader)
        info = wait_until(lambda: full_isr(admin), 30, "the old leader back in the ISR")
        truncates = [e for e in cluster.events(old_leader) if e["event"] == "truncate" and e["why"] == truncation]
        assert truncates, "the restarted old leader logged no truncate event"
        assert (truncates[-1]["partition"], truncates[-1]["from"], truncates[-1]["to"]) == \
            (0, acked_before + 7, acked_before)

        # every acknowledged write is readable below the HW, in order, without gaps
        total = len(acked)
        stable = wait_until(lambda: (lambda d: d if d.replica_state[d.leader][1] >= total and
                                     len({s for s in d.replica_state.values()}) == 1 else None)(admin.describe(TOPIC)[0]),
                            20, "all replicas at the same LEO/HW")
        hw = stable.replica_state[stable.leader][1]
        records = read_all(consumer, hw)
        assert [o for o, _, _ in records] == list(range(hw))
        assert hw == total
        assert {o: v for o, _, v in records} == acked
        epochs = [e for _, e, _ in records]
        assert epochs == sorted(epochs) and epochs[0] == old_epoch and epochs[-1] > old_epoch
        for c in (admin, producer, consumer):
            c.close()


def test_leader_epoch_failover_keeps_every_acked_write(tmp_path):
    run_failover(tmp_path, "leader-epoch")


def test_hw_mode_failover_truncates_to_hw_on_restart(tmp_path):
    run_failover(tmp_path, "hw")
