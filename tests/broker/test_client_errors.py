"""The client library's failure classification and metadata refresh, against real processes.

definite (certainly not written): CONTROLLER_NOT_AVAILABLE, BROKER_NOT_AVAILABLE (connection refused),
NOT_LEADER; indefinite: TIMEOUT (a paused leader). Metadata is refreshed after NOT_LEADER and
connection errors, and `retries` (tenacity) hides definite failures during a leader change.
"""
from __future__ import annotations

import signal
import time

import pytest

from broker.client import Admin, ClientError, Consumer, Producer
from clusters.bare import BareCluster, free_port, wait_until

TOPIC = "e"


def test_unreachable_controller_is_definite():
    p = Producer(("127.0.0.1", free_port()), acks="all", timeout_s=0.5)
    with pytest.raises(ClientError) as err:
        p.send(TOPIC, 0, [b"x"])
    assert (err.value.code, err.value.definite) == ("CONTROLLER_NOT_AVAILABLE", True)


def leader_info(admin, *, not_in=(), full=False):
    d = admin.describe(TOPIC)
    if not d or d[0].leader is None or d[0].leader in not_in:
        return None
    if full and sorted(d[0].isr) != [1, 2, 3]:
        return None
    return d[0]


def test_errors_and_refresh_across_a_leader_change(tmp_path):
    with BareCluster(tmp_path, brokers=3,
                      broker_settings={"min_insync_replicas": 2, "heartbeat_interval_ms": 200},
                      controller_settings={"broker_session_timeout_ms": 2000},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address, timeout_s=1.0)
        first = wait_until(lambda: leader_info(admin, full=True), 20, "a full ISR")
        stale = Producer(c.controller_address, acks="all", timeout_s=2.0, retries=0)
        patient = Producer(c.controller_address, acks="all", timeout_s=2.0, retries=50)
        assert stale.send(TOPIC, 0, [b"0"]).offsets == [0]
        assert patient.send(TOPIC, 0, [b"1"]).offsets == [1]

        believer = Producer(c.controller_address, acks="all", timeout_s=2.0)
        believer.refresh_metadata()          # caches first.leader as the leader, used only much later
        c.kill(first.leader)
        # the dead broker's replica state is unknown, the others still answer
        state = admin.describe(TOPIC)[0].replica_state
        assert state[first.leader] is None
        assert all(state[b][0] == 2 and 1 <= state[b][1] <= 2 for b in state if b != first.leader)  # follower HW lags
        # the retrying producer rides through the election (definite failures retried with fresh metadata)
        r = patient.send(TOPIC, 0, [b"2"])
        assert r.offsets == [2] and r.epoch > first.epoch
        # the non-retrying one fails definitely on the dead leader, then finds the new one
        with pytest.raises(ClientError) as err:
            stale.send(TOPIC, 0, [b"never"])
        assert (err.value.code, err.value.definite) == ("BROKER_NOT_AVAILABLE", True)
        assert stale.send(TOPIC, 0, [b"3"]).offsets == [3]

        # old leader back as a follower: a client still believing it leads gets NOT_LEADER (definite)
        c.start_broker(first.leader)
        wait_until(lambda: leader_info(admin, full=True), 20, "the old leader back in the ISR")
        with pytest.raises(ClientError) as err:
            believer.send(TOPIC, 0, [b"never"])
        assert (err.value.code, err.value.definite) == ("NOT_LEADER", True)
        assert believer.send(TOPIC, 0, [b"4"]).offsets == [4]      # refreshed after NOT_LEADER

        # a paused leader: the request was sent, no answer -> TIMEOUT, indefinite
        leader = leader_info(admin).leader
        quick = Producer(c.controller_address, acks=1, timeout_s=0.3)
        quick.refresh_metadata()
        reader = Consumer(c.controller_address, timeout_s=0.2)
        reader.refresh_metadata()
        c.signal(leader, signal.SIGSTOP)
        try:
            # (the reader first: it tries twice, well before the controller fences the paused leader)
            with pytest.raises(ClientError) as err:
                reader.fetch(TOPIC, 0, 0)
            assert (err.value.code, err.value.definite) == ("TIMEOUT", False)
            t0 = time.monotonic()
            with pytest.raises(ClientError) as err:
                quick.send(TOPIC, 0, [b"maybe"])
            assert (err.value.code, err.value.definite) == ("TIMEOUT", False)
            assert time.monotonic() - t0 < 3.0
        finally:
            c.signal(leader, signal.SIGCONT)
        for cl in (admin, stale, patient, believer, quick, reader):
            cl.close()
