"""workloads/kafka_wire.py: the idempotent wire producer on a real 3-broker cluster (a send, a resend
answered with the first offsets, a resend after the sequence moved on), and its errors without one."""
from __future__ import annotations

import socket

import pytest

from broker.client import Admin, ClientError
from clusters.bare import BareCluster
from tests.broker.real_processes import wait_full_isr
from workloads.kafka_wire import WireProducer

TOPIC = "wire"


def test_bad_bootstrap_is_a_value_error():
    with pytest.raises(ValueError, match="a bootstrap server is host:port, got 'nohost'"):
        WireProducer(["nohost"])
    with pytest.raises(ValueError, match="no bootstrap servers given"):
        WireProducer([])


def test_no_broker_answering_is_a_definite_transport_error():
    with socket.socket() as s:          # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = WireProducer([f"127.0.0.1:{port}"], timeout_s=1.0)
    with pytest.raises(ClientError) as e:
        p.send(TOPIC, 0, [b"v"])
    assert e.value.code == "_TRANSPORT" and e.value.definite
    assert f"127.0.0.1:{port}" in e.value.message
    assert p.sent == []


@pytest.mark.slow
def test_send_and_resend_on_a_real_cluster(tmp_path):
    with BareCluster(tmp_path, brokers=3, broker_settings={"min_insync_replicas": 2},
                     topics=[{"name": TOPIC, "partitions": 2, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        wait_full_isr(admin, TOPIC, 30, "a leader with the full ISR")
        p = WireProducer([f"{c.host}:{port}" for port in c.ports.values()], timeout_s=5.0)
        try:
            assert p.send(TOPIC, 0, [b"a", b"b"]).offsets == [0, 1]
            assert p.send(TOPIC, 0, [b"c"]).offsets == [2]
            assert p.send(TOPIC, 1, [b"d"]).offsets == [0]
            assert p.producer_id >= 0 and p.producer_epoch == 0
            assert [(b.partition, b.base_sequence, b.count, b.offsets) for b in p.sent] == [
                (0, 0, 2, (0, 1)), (0, 2, 1, (2,)), (1, 0, 1, (0,))]
            again = p.resend(p.sent[0])         # within the last 5 batches: answered, not appended
            assert (again.offset, again.same) == (0, True)
            assert p.resend(p.sent[1]).same is True
            assert p.send(TOPIC, 0, [b"e"]).offsets == [3]      # nothing was appended by the resends
        finally:
            p.close()
