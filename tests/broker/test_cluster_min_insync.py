"""Real processes: min.insync.replicas=2 with RF=3 when the followers go away.

- both followers paused while an acks=all batch waits: the leader shrinks the ISR to itself, the HW
  passes the batch, and the producer gets NOT_ENOUGH_REPLICAS_AFTER_APPEND (indefinite: it was written);
- both followers dead (1 of 3 brokers alive): acks=all gets NOT_ENOUGH_REPLICAS (definite: nothing
  appended, the LEO does not move), while acks=1 still succeeds.
"""
from __future__ import annotations

import signal
import time

import pytest

from broker.client import Admin, ClientError, Consumer, Producer
from clusters.bare import BareCluster, wait_until
from real_processes import wait_full_isr

TOPIC = "m"


def test_not_enough_replicas(tmp_path):
    with BareCluster(tmp_path, brokers=3,
                      broker_settings={"min_insync_replicas": 2, "replica_lag_time_max_ms": 800,
                                       "heartbeat_interval_ms": 200},
                      controller_settings={"broker_session_timeout_ms": 1500},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as cluster:
        admin = Admin(cluster.controller_address, timeout_s=1.0)
        info = wait_full_isr(admin, TOPIC, 20, "a full ISR", replica_states=False)
        leader = info.leader
        followers = [b for b in (1, 2, 3) if b != leader]
        producer = Producer(cluster.controller_address, acks="all", timeout_s=10.0)
        assert producer.send(TOPIC, 0, [b"a", b"b"]).offsets == [0, 1]

        for b in followers:
            cluster.signal(b, signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises(ClientError) as err:
            producer.send(TOPIC, 0, [b"c"])
        assert (err.value.code, err.value.definite) == ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", False)
        assert time.monotonic() - t0 < 9.0          # answered on the ISR shrink, not on the timeout
        for b in followers:
            cluster.kill(b)

        info = wait_until(lambda: (lambda d: d if d.isr == [leader] else None)(admin.describe(TOPIC)[0]),
                          20, "the ISR shrunk to the leader")
        assert info.replica_state[leader] == (3, 3)
        with pytest.raises(ClientError) as err:
            producer.send(TOPIC, 0, [b"d", b"e"])
        assert (err.value.code, err.value.definite) == ("NOT_ENOUGH_REPLICAS", True)
        assert admin.describe(TOPIC)[0].replica_state[leader] == (3, 3)   # nothing appended

        one = Producer(cluster.controller_address, acks=1, timeout_s=2.0)
        assert one.send(TOPIC, 0, [b"f"]).offsets == [3]
        fetched = Consumer(cluster.controller_address).fetch(TOPIC, 0, 0)
        assert [(o, v) for o, _e, v in fetched.records] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"f")]
        assert fetched.hw == 4
