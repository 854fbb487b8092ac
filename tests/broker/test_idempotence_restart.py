"""The idempotent producer's state across restarts of a real broker, through producer snapshots
(broker/storage/producer_snapshots.py): a clean stop writes one at the log end and the restart replays
nothing; a SIGKILL leaves the last one and the restart replays the records after it; damaged snapshots are
reported and the whole log is read instead. Each time, the retry of a batch from before the restart is
answered with its first offset, not appended again. Driven with raw Kafka requests."""
from __future__ import annotations

import pytest

from broker.client import Admin
from broker.kafka import errors as E
from broker.kafka import versions as V
from broker.kafka.records import decode_batches
from broker.storage.producer_snapshots import ProducerSnapshots, snapshot_name
from clusters.bare import BareCluster, wait_until
from tests.broker.real_processes import wait_full_isr
from tests.broker.test_idempotence_truncation import _batch
from tests.broker.test_kafka_listener import KafkaConn, fetch_body, fetched, produce_body, produced

pytestmark = pytest.mark.slow

TOPIC = "ks"


def _send(c, records) -> dict:
    def attempt():
        conn = KafkaConn(c.brokers[1].address)
        try:
            r = produced(conn.request(V.PRODUCE, 8, produce_body([], -1, topic=TOPIC, records=records)))
        finally:
            conn.close()
        return r if r["error_code"] not in (E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE) else None
    return wait_until(attempt, 30, "the broker answering as leader")


def _loaded(c) -> list[dict]:
    return [{k: e[k] for k in ("snapshot", "replayed", "producers", "why", "rejected")}
            for e in c.events(1) if e["event"] == "producers-loaded"]


def _restart(c, admin, *, clean: bool) -> None:
    if clean:
        c.brokers[1].terminate()
    else:
        c.kill(1)
    c.start_broker(1)
    wait_full_isr(admin, TOPIC, 30, "the broker leading again", isr_size=1)


def test_a_retry_after_restarts_is_recognised_through_snapshots(tmp_path):
    settings = {"min_insync_replicas": 1, "heartbeat_interval_ms": 200}
    with BareCluster(tmp_path, brokers=1, broker_settings=settings,
                     topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 1}]) as c:
        admin = Admin(c.controller_address, timeout_s=2.0)
        wait_full_isr(admin, TOPIC, 30, "a leader", isr_size=1)
        conn = KafkaConn(c.brokers[1].address)
        pid = conn.request(V.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 1})["producer_id"]
        conn.close()
        xs = [_batch([f"x{i}".encode()], pid, i) for i in range(4)]
        assert [_send(c, x)["base_offset"] for x in xs[:3]] == [0, 1, 2]
        assert _send(c, _batch([b"plain"]))["base_offset"] == 3
        snaps = ProducerSnapshots(c.data_dir(1) / f"{TOPIC}-0")
        assert snaps.offsets() == []                        # none due yet: 4 records

        # 1. a clean stop writes a snapshot at the log end; the restart starts from it and replays nothing
        _restart(c, admin, clean=True)
        assert snaps.offsets() == [4]
        again = _send(c, xs[2])
        assert (again["error_code"], again["base_offset"]) == (0, 2)
        assert _loaded(c) == [     # the first: the fresh log's empty table, then the restart's
            {"snapshot": None, "replayed": 0, "producers": 0, "why": "opened", "rejected": None},
            {"snapshot": 4, "replayed": 0, "producers": 1, "why": "opened", "rejected": None}]

        # 2. after a SIGKILL the last snapshot is older than the log: the records after it are replayed
        assert _send(c, xs[3])["base_offset"] == 4
        _restart(c, admin, clean=False)
        assert snaps.offsets() == [4]
        assert _send(c, xs[3])["base_offset"] == 4
        assert _loaded(c)[-1] == {"snapshot": 4, "replayed": 1, "producers": 1, "why": "opened", "rejected": None}

        # 3. damaged snapshots: each is reported, and the whole log is read instead
        c.brokers[1].terminate()
        assert snaps.offsets() == [4, 5]
        for offset in (4, 5):
            snaps.path(offset).write_bytes(b"\x00garbage")
        c.start_broker(1)
        wait_full_isr(admin, TOPIC, 30, "the broker leading again", isr_size=1)
        assert _send(c, xs[1])["base_offset"] == 1
        assert _loaded(c)[-1] == {"snapshot": None, "replayed": 5, "producers": 1, "why": "opened", "rejected": None}
        bad = [e for e in c.events(1) if e["event"] == "storage-error" and e.get("file", "").endswith(".producers")]
        assert sorted(e["file"] for e in bad) == [snapshot_name(4), snapshot_name(5)]
        assert all(e["action"] == "an older snapshot or the whole log is read instead" for e in bad)
        conn = KafkaConn(c.brokers[1].address)
        try:
            p = fetched(conn.request(V.FETCH, 11, fetch_body(0, topic=TOPIC)))
        finally:
            conn.close()
        values = [r.value for b in decode_batches(p["records"]) for r in b.records]
        assert values == [b"x0", b"x1", b"x2", b"plain", b"x3"]       # each retry answered, none appended
