"""Consumer reads and producer batches against real processes.

- a consumer never sees records at or above the HW: with both followers paused, an acks=1 batch is on
  the leader (LEO moved) but not committed (HW did not), and is invisible until they resume;
- a fetch at the HW long-polls (max_wait_ms) and returns once the HW moves;
- a fetch beyond the LEO is OFFSET_OUT_OF_RANGE; between HW and LEO it is empty with the HW;
- a send() of many values is one PRODUCE: concurrent producers' batches never interleave.
"""
from __future__ import annotations

import signal
import threading
import time

import pytest

from broker.client import Admin, ClientError, Consumer, Producer
from clusters.bare import BareCluster, wait_until
from real_processes import wait_full_isr

TOPIC = "r"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with BareCluster(tmp_path_factory.mktemp("reads"), brokers=3,
                      broker_settings={"min_insync_replicas": 2, "replica_fetch_wait_max_ms": 100, "replica_lag_time_max_ms": 5000},
                      topics=[{"name": TOPIC, "partitions": 2, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address)
        wait_until(lambda: (lambda d: len(d) == 2 and all(p.leader is not None and len(p.isr) == 3 for p in d))(
            admin.describe(TOPIC)), 20, "full ISRs")
        admin.close()
        yield c


def test_uncommitted_records_are_invisible(cluster):
    admin = Admin(cluster.controller_address)
    leader = admin.describe(TOPIC)[0].leader
    followers = [b for b in (1, 2, 3) if b != leader]
    producer = Producer(cluster.controller_address, acks="all")
    consumer = Consumer(cluster.controller_address, timeout_s=5.0)
    assert producer.send(TOPIC, 0, [b"a", b"b"]).offsets == [0, 1]
    for b in followers:
        cluster.signal(b, signal.SIGSTOP)
    try:
        time.sleep(0.3)                     # parked follower fetches answered (empty) before the append
        assert Producer(cluster.controller_address, acks=1).send(TOPIC, 0, [b"c", b"d"]).offsets == [2, 3]
        assert admin.replicas(leader)[(TOPIC, 0)]["leo"] == 4
        f = consumer.fetch(TOPIC, 0, 0)
        assert ([(o, v) for o, _e, v in f.records], f.hw) == ([(0, b"a"), (1, b"b")], 2)
        f = consumer.fetch(TOPIC, 0, 3)     # between HW and LEO: nothing, with the HW
        assert (f.records, f.hw) == ([], 2)
        with pytest.raises(ClientError) as err:
            consumer.fetch(TOPIC, 0, 5)     # beyond the LEO
        assert err.value.code == "OFFSET_OUT_OF_RANGE"
        # a long-poll at the HW, answered when the followers resume and the HW moves
        result = {}
        poller = threading.Thread(target=lambda: result.update(f=consumer.fetch(TOPIC, 0, 2, max_wait_ms=4000)))
        poller.start()
        time.sleep(0.3)
        assert poller.is_alive()
    finally:
        for b in followers:
            cluster.signal(b, signal.SIGCONT)
    poller.join(10)
    f = result["f"]
    assert [(o, v) for o, _e, v in f.records] == [(2, b"c"), (3, b"d")] and f.hw == 4
    for cl in (admin, producer, consumer):
        cl.close()


def test_batches_are_atomic_and_contiguous(cluster):
    results: list = []
    lock = threading.Lock()

    def work(k: int) -> None:
        p = Producer(cluster.controller_address, acks="all")
        for i in range(15):
            vals = [b"%d:%d:%d" % (k, i, j) for j in range(40)]
            r = p.send(TOPIC, 1, vals)
            with lock:
                results.append((r, vals))
        p.close()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 45
    consumer = Consumer(cluster.controller_address)
    got: dict[int, bytes] = {}
    while len(got) < 45 * 40:
        f = consumer.fetch(TOPIC, 1, len(got), max_records=1000, max_wait_ms=1000)
        got.update((o, v) for o, _e, v in f.records)
    assert sorted(got) == list(range(45 * 40))
    for r, vals in results:
        assert r.offsets == list(range(r.offsets[0], r.offsets[0] + 40))
        assert [got[o] for o in r.offsets] == vals


def test_acks_0_and_create_topic(cluster):
    admin = Admin(cluster.controller_address)
    admin.create_topic("fresh", 1, 3)
    admin.create_topic("fresh", 1, 3)          # idempotent
    info = wait_full_isr(admin, "fresh", 20, "the new topic's leader", replica_states=False)
    assert (info.partition, sorted(info.replicas)) == (0, [1, 2, 3])
    fire_and_forget = Producer(cluster.controller_address, acks=0)
    r = fire_and_forget.send("fresh", 0, [b"x", b"y"])
    assert (r.offsets, r.epoch) == ([], None)
    consumer = Consumer(cluster.controller_address)
    f = wait_until(lambda: (lambda f: f if len(f.records) == 2 else None)(
        consumer.fetch("fresh", 0, 0, max_wait_ms=500)), 10, "the acks=0 records committed")
    assert [(o, v) for o, _e, v in f.records] == [(0, b"x"), (1, b"y")] and f.hw == 2
    with pytest.raises(ClientError) as err:
        consumer.fetch("missing", 0, 0)
    assert (err.value.code, err.value.definite) == ("UNKNOWN_PARTITION", True)
    for cl in (admin, fire_and_forget, consumer):
        cl.close()
