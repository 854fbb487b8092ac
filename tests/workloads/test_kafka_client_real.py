"""The Kafka-client adapters (workloads/kafka_client.py) against real highwater brokers speaking the Kafka
protocol, for each library (confluent-kafka, kafka-python):

  (a) acks=all, RF=3, min.insync.replicas=2, leader-epoch truncation: a stream of sends through a SIGKILL
      of the partition leader; every acknowledged value is in the final committed log, read back with the
      same library from offset 0, in acknowledgement order;
  (b) a consumer assigned from offset 0 (small chunks) sees exactly the committed log the native client
      reads, in order;
  (c) hw truncation, acks=1: the KIP-101 staging of tests/broker/test_hw_loss_real.py (a follower restarts,
      truncates to its stale HW and becomes leader) loses the writes the Kafka client had acknowledged,
      as it does for the native client; the leader-epoch counterpart keeps them (nightly).

The staging uses the native Admin (the harness's view of the cluster); every write and read under test
goes through the Kafka library.
"""
from __future__ import annotations

import signal
import threading
import time

import pytest

from broker.client import Admin, ClientError, Consumer
from clusters.bare import BareCluster, wait_until
from workloads import kafka_client as kc

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")

LIBRARIES = list(kc.LIBRARIES)
TOPIC = "t"
BROKER = {"min_insync_replicas": 2, "heartbeat_interval_ms": 200, "replica_lag_time_max_ms": 4000,
          "replica_fetch_wait_max_ms": 200, "hw_checkpoint_interval_ms": 100, "truncation": "leader-epoch"}
CONTROLLER = {"broker_session_timeout_ms": 2000}


def wait_full_isr(admin: Admin, topic: str, timeout_s: float, what: str, *, isr_size: int = 3):
    """Partition 0 of `topic` once it has a leader and `isr_size` in-sync replicas."""
    def ready():
        d = admin.describe(topic)
        return d[0] if d and d[0].leader is not None and len(d[0].isr) == isr_size else None
    return wait_until(ready, timeout_s, what)


def bootstrap(cluster: BareCluster) -> list[str]:
    return [f"{cluster.host}:{port}" for port in cluster.ports.values()]


def read_log(consumer, topic: str, hw: int, chunk: int = 500, timeout_s: float = 20.0) -> list[tuple[int, bytes]]:
    """[0, hw) of partition 0 with `consumer`, in chunks; offsets must be contiguous from 0."""
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < hw:
        try:
            f = consumer.fetch(topic, 0, len(out), max_records=chunk, max_wait_ms=100)
        except ClientError:
            assert time.monotonic() < deadline, f"no read at {len(out)} below hw {hw} within {timeout_s}s"
            time.sleep(0.1)
            continue
        for o, _e, v in f.records:
            assert o == len(out), f"offset {o} where {len(out)} was expected"
            out.append((o, v))
        assert time.monotonic() < deadline, f"read stuck at {len(out)} below hw {hw}"
    return out


@pytest.mark.slow
@pytest.mark.parametrize("library", LIBRARIES)
def test_acks_all_through_a_leader_kill_loses_nothing_and_assign_reads_the_committed_log(tmp_path, library):
    with BareCluster(tmp_path, brokers=3, broker_settings=BROKER, controller_settings=CONTROLLER,
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as cluster:
        admin = Admin(cluster.controller_address, timeout_s=1.0)
        first = wait_full_isr(admin, TOPIC, 30, "a leader with the full ISR")
        producer = kc.make_producer(library, bootstrap(cluster), acks="all", timeout_s=1.0)
        acked: list[tuple[int, bytes]] = []      # (offset, value) in acknowledgement order
        outcomes = {"ok": 0, "fail": 0, "info": 0}
        killed = threading.Event()
        after_kill = 0
        value = 0
        deadline = time.monotonic() + 40
        try:
            while time.monotonic() < deadline and after_kill < 30:
                if len(acked) >= 30 and not killed.is_set():
                    cluster.kill(first.leader)              # SIGKILL of the partition leader mid-stream
                    killed.set()
                v = str(value).encode()
                value += 1
                try:
                    r = producer.send(TOPIC, 0, [v])
                except ClientError as exc:
                    outcomes["fail" if exc.definite else "info"] += 1
                    time.sleep(0.05)
                    continue
                outcomes["ok"] += 1
                assert len(r.offsets) == 1 and r.epoch == kc.UNKNOWN_EPOCH
                acked.append((r.offsets[0], v))
                after_kill += killed.is_set()
        finally:
            producer.close()
        assert killed.is_set() and after_kill >= 30, (outcomes, len(acked))
        now = wait_until(lambda: (lambda d: d if d and d[0].leader not in (None, first.leader) else None)(
            admin.describe(TOPIC)), 20, "a new leader")[0]
        assert now.epoch > first.epoch
        # the committed log: the native client's read (the reference) and the library's own read
        hw = wait_until(lambda: (lambda d: d[0].replica_state.get(now.leader))(admin.describe(TOPIC)), 10,
                        "the leader's state")[1]
        native = Consumer(cluster.controller_address, timeout_s=2.0)
        try:
            reference = [(o, v) for o, _e, v in native.fetch(TOPIC, 0, 0, max_records=100_000).records][:hw]
        finally:
            native.close()
        consumer = kc.make_consumer(library, bootstrap(cluster), timeout_s=2.0)
        try:
            log = read_log(consumer, TOPIC, hw, chunk=7)           # (b): small chunks from offset 0
        finally:
            consumer.close()
        admin.close()
    assert log == reference                                        # (b) every committed record, in order
    where = {v: o for o, v in log}
    lost = [v for _o, v in acked if v not in where]
    assert lost == []                                              # (a) nothing acknowledged is lost
    assert [where[v] for _o, v in acked] == [o for o, _v in acked]  # ... and each where its ack said
    assert [o for o, _v in acked] == sorted(o for o, _v in acked)


# --- (c): KIP-101 scenario 1 with a Kafka client (tests/broker/test_hw_loss_real.py's staging) ---------
HW_TOPIC = "kip101"
VALUES = [b"m0", b"m1", b"m2", b"m3", b"m4"]


def _replica(admin: Admin, broker: int) -> dict | None:
    rep = admin.replicas(broker)
    return None if rep is None else rep.get((HW_TOPIC, 0))


def kip101_with_kafka_client(tmp_path, library: str, truncation: str):
    with BareCluster(tmp_path, brokers=2,
                      broker_settings={"truncation": truncation, "min_insync_replicas": 1, "flush": "always",
                                       "hw_checkpoint_interval_ms": 60_000, "heartbeat_interval_ms": 300,
                                       "replica_lag_time_max_ms": 30_000},
                      controller_settings={"broker_session_timeout_ms": 8000, "unclean_leader_election": True},
                      topics=[{"name": HW_TOPIC, "partitions": 1, "replication_factor": 2}]) as c:
        admin = Admin(c.controller_address, timeout_s=1.0)
        info = wait_full_isr(admin, HW_TOPIC, 30, "a leader with both replicas in the ISR", isr_size=2)
        a = info.leader
        b = 3 - a
        # 1. acknowledged by A alone (acks=1), through the Kafka client
        producer = kc.make_producer(library, bootstrap(c), acks=1, timeout_s=2.0)
        try:
            acked = [producer.send(HW_TOPIC, 0, [v]).offsets[0] for v in VALUES]
        finally:
            producer.close()
        assert acked == [0, 1, 2, 3, 4]
        wait_until(lambda: (lambda r: r and (r["leo"], r["hw"]) == (5, 5))(_replica(admin, b)), 10,
                   "B at LEO 5, HW 5")
        # 2. A stops answering; B crashes and comes back, 3. and follows A again
        c.signal(a, signal.SIGSTOP)
        try:
            c.kill(b)
            c.start_broker(b)
            wait_until(lambda: (lambda r: r if r and r["role"] == "follower" and r["leader"] == a
                                else None)(_replica(admin, b)), 6, "restarted B following A")
        finally:
            c.kill(a)                    # 4. B becomes leader (unclean: A was the only ISR member left)
        wait_until(lambda: admin.describe(HW_TOPIC)[0].leader == b, 20, "B elected leader")
        wait_until(lambda: (lambda r: r and r["role"] == "leader")(_replica(admin, b)), 10, "B acting as leader")
        # 5. what the new leader serves, read through the Kafka client from offset 0
        consumer = kc.make_consumer(library, [f"{c.host}:{c.ports[b]}"], timeout_s=2.0)
        try:
            f = wait_until(lambda: _try_fetch(consumer), 15, "a read from B")
        finally:
            consumer.close()
        admin.close()
    return f


def _try_fetch(consumer):
    try:
        return consumer.fetch(HW_TOPIC, 0, 0, max_records=100, max_wait_ms=200)
    except ClientError:
        return None


@pytest.mark.slow
@pytest.mark.parametrize("library", LIBRARIES)
def test_hw_truncation_loses_writes_the_kafka_client_acknowledged(tmp_path, library):
    f = kip101_with_kafka_client(tmp_path, library, "hw")
    assert (f.records, f.hw) == ([], 0)          # m0..m4 were acknowledged (acks=1) and are gone


@pytest.mark.slow
@pytest.mark.parametrize("library", LIBRARIES)
def test_leader_epoch_truncation_keeps_them_under_the_same_faults(tmp_path, library):
    f = kip101_with_kafka_client(tmp_path, library, "leader-epoch")
    assert [v for _o, _e, v in f.records] == VALUES and f.hw == 5
