"""Admin.describe with paused brokers (real processes, SIGSTOP): a partial answer (None for each paused
broker) within about one per-broker deadline, however many brokers are paused; whole again after SIGCONT."""
from __future__ import annotations

import signal
import time

from broker.client import Admin, Producer
from clusters.bare import BareCluster, wait_until
from real_processes import wait_full_isr

TOPIC = "adm"
BROKER_TIMEOUT_S = 1.0


def test_describe_with_two_paused_brokers_is_partial_and_bounded(tmp_path):
    with BareCluster(tmp_path, brokers=3, broker_settings={"min_insync_replicas": 1},
                      controller_settings={"broker_session_timeout_ms": 10_000},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
        with Admin(c.controller_address, timeout_s=2.0) as admin:
            info = wait_full_isr(admin, TOPIC, 30, "a leader with the full ISR")
            with Producer(c.controller_address, acks="all", timeout_s=5.0) as p:
                assert p.send(TOPIC, 0, [b"a", b"b"]).offsets == [0, 1]
            wait_until(lambda: set(admin.describe(TOPIC)[0].replica_state.values()) == {(2, 2)}, 10,
                       "every replica at LEO 2, HW 2")
            paused = [b for b in (1, 2, 3) if b != info.leader]
            for b in paused:
                c.signal(b, signal.SIGSTOP)
            try:
                with Admin(c.controller_address, timeout_s=BROKER_TIMEOUT_S) as fast:
                    started = time.monotonic()
                    (d,) = fast.describe(TOPIC)                 # per-broker deadline = the client's timeout
                    took = time.monotonic() - started
                assert took < 1.8 * BROKER_TIMEOUT_S, took  # one deadline for both paused brokers, not two
                started = time.monotonic()
                (d2,) = admin.describe(TOPIC, broker_timeout_s=0.5)
                took2 = time.monotonic() - started
            finally:
                for b in paused:
                    c.signal(b, signal.SIGCONT)
            assert d.leader == info.leader
            assert d.replica_state == {info.leader: (2, 2), paused[0]: None, paused[1]: None}
            assert d2.replica_state == d.replica_state and took2 < 0.9, took2
            (again,) = wait_until(lambda: (lambda d: d if None not in d[0].replica_state.values() else None)(
                admin.describe(TOPIC, broker_timeout_s=BROKER_TIMEOUT_S)), 10, "every broker answering again")
            assert again.replica_state == {1: (2, 2), 2: (2, 2), 3: (2, 2)}
