"""The idempotent producer's state across a truncation, on a real 3-broker cluster, in both truncation modes,
driven with raw Kafka requests so every step is deterministic.

The staging: a producer's batch X is committed on all three replicas; the leader A then appends a record
only it holds and stops (SIGSTOP) before any follower copies it; another replica is elected; A comes back
as a follower and truncates that record away (by leader epoch, or to its HW). A is then elected leader
again, and the producer retries X, as it does when it never saw the first answer. X is still in A's log,
so Kafka's promise is that the retry is answered with X's first offset and not appended again.
With `producer_state_rebuilt_after_truncation = false` (the planted effect of KAFKA-5435) A forgot every
producer at the truncation and appends X a second time: the duplicate an idempotent run must fail on."""
from __future__ import annotations

import signal
import time

import pytest

from broker.client import Admin
from broker.kafka import errors as E
from broker.kafka import versions as V
from broker.kafka.records import decode_batches, encode_batch
from clusters.bare import BareCluster, wait_until
from tests.broker.real_processes import wait_full_isr
from tests.broker.test_kafka_listener import KafkaConn, fetch_body, fetched, produce_body, produced

pytestmark = pytest.mark.slow

TOPIC = "kt"


def _batch(values, pid=-1, seq=-1):
    return encode_batch(0, -1, [(int(time.time() * 1000), None, v) for v in values],
                        producer=(pid, 0 if pid >= 0 else -1, seq))


def _leader(admin, exclude=()):
    def ready():
        d = admin.describe(TOPIC)
        return d[0] if d and d[0].leader is not None and d[0].leader not in exclude else None
    return wait_until(ready, 30, f"a leader other than {list(exclude)}")


@pytest.mark.parametrize("rebuilt", [True, False], ids=["rebuilt", "KAFKA-5435"])
@pytest.mark.parametrize("truncation", ["leader-epoch", pytest.param("hw", marks=pytest.mark.nightly)])
def test_a_retry_after_the_replica_truncated(tmp_path, truncation, rebuilt):
    settings = {"min_insync_replicas": 1, "heartbeat_interval_ms": 200, "replica_fetch_wait_max_ms": 100,
                "truncation": truncation, "producer_state_rebuilt_after_truncation": rebuilt}
    with BareCluster(tmp_path, brokers=3, broker_settings=settings,
                     topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        a = wait_full_isr(admin, TOPIC, 30, "a leader with the full ISR").leader
        followers = [b for b in sorted(c.brokers) if b != a]
        conn = KafkaConn(c.brokers[a].address)
        pid = conn.request(V.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 1})["producer_id"]
        x = _batch([b"x0", b"x1", b"x2"], pid, 0)
        first = produced(conn.request(V.PRODUCE, 8, produce_body([], -1, records=x)))
        assert first["error_code"] == 0
        start = first["base_offset"]
        # a record only A holds, then A stops before any follower copies it
        for b in followers:
            c.signal(b, signal.SIGSTOP)
        time.sleep(0.5)   # their fetches already waiting at A (100 ms long-polls) are answered empty first
        assert produced(conn.request(V.PRODUCE, 8, produce_body([], 1, records=_batch([b"only-on-a"]))))["error_code"] == 0
        c.signal(a, signal.SIGSTOP)
        conn.close()
        for b in followers:
            c.signal(b, signal.SIGCONT)
        _leader(admin, exclude=(a,))
        c.signal(a, signal.SIGCONT)
        # A rejoins as a follower, truncating its extra record, and catches up
        wait_until(lambda: any(e.get("event") == "truncate" for e in c.events(a)), 30, "A's truncation")
        wait_full_isr(admin, TOPIC, 30, "A back in the ISR")
        admin.elect_leader(TOPIC, 0, broker=a)
        info = wait_until(lambda: (lambda d: d if d.leader == a else None)(admin.describe(TOPIC)[0]), 30, "A leading")
        conn = KafkaConn(c.brokers[a].address)

        def retry():
            r = produced(conn.request(V.PRODUCE, 8, produce_body([], -1, records=x)))
            return r if r["error_code"] != E.NOT_LEADER_OR_FOLLOWER else None
        again = wait_until(retry, 30, "A answering as leader")
        assert again["error_code"] == 0
        p = fetched(conn.request(V.FETCH, 11, fetch_body(start, epoch=info.epoch)))
        values = [r.value for b in decode_batches(p["records"]) for r in b.records]
        conn.close()
        if rebuilt:
            assert again["base_offset"] == start                      # the first append's offset
            assert values.count(b"x0") == 1
        else:
            assert again["base_offset"] > start                       # appended again: a duplicate
            assert values.count(b"x0") == 2
