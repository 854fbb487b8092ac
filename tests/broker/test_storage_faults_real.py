"""Storage faults on real processes (issue 18): for each fault of clusters/storage_faults.STORAGE_FAULTS, a
3-broker cluster (clusters/local.py, real `python -m broker` processes; acks=all, leader-epoch
truncation, min.insync.replicas=2): write, SIGKILL a follower, damage its data files (Corruptible), restart
it and check that it comes up, logs the event the rule of docs/architecture.md "Storage faults and restart"
says (a `truncate` with why=recovery at the damaged record; a `storage-error` with why=checkpoint naming
the file), catches up, and that after a final read every replica holds exactly the acknowledged values
(broker/storage/dump.py). The Docker variant runs a bit flip (the engine's archive API) and a checkpoint deletion (docker exec).
"""
from __future__ import annotations

import json
import re
import time

import pytest

from broker.client import Admin, ClientError, Consumer, Producer
from broker.storage.checkpoints import EPOCH_FILE, HW_FILE, HwCheckpoint
from broker.storage.dump import dump_partition
from clusters.base import ClusterSpec, NodeTimeouts
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from clusters.storage_faults import STORAGE_FAULTS
from polling import wait_until

TOPIC = "hw"
N = 60          # records before the fault: 6 segments of 10
MORE = 5        # records after the restart
BROKER = {"min_insync_replicas": 2, "truncation": "leader-epoch", "segment_records": 10,
          "hw_checkpoint_interval_ms": 100, "heartbeat_interval_ms": 200, "replica_lag_time_max_ms": 3000,
          "replica_fetch_wait_max_ms": 200}
CONTROLLER = {"broker_session_timeout_ms": 2500,
              "topics": [{"name": TOPIC, "partitions": 1, "replication_factor": 3}]}


def value(i: int) -> bytes:
    return str(1_000_000 + i).encode()


def send(producer, values, deadline_s=20.0):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return producer.send(TOPIC, 0, values)
        except ClientError as exc:
            assert exc.definite and time.monotonic() < deadline, f"produce failed: {exc}"
            time.sleep(0.05)


def full_isr(admin):
    d = admin.describe(TOPIC)
    return d[0] if d and d[0].leader is not None and sorted(d[0].isr) == [1, 2, 3] else None


def leos(admin) -> list[int | None]:
    out = []
    for b in (1, 2, 3):
        replicas = admin.replicas(b)
        out.append(None if replicas is None or (TOPIC, 0) not in replicas else replicas[(TOPIC, 0)]["leo"])
    return out


def read_all(consumer, stop, deadline_s=30.0) -> list[bytes]:
    out: list[bytes] = []
    deadline = time.monotonic() + deadline_s
    while len(out) < stop:
        try:
            f = consumer.fetch(TOPIC, 0, len(out), max_records=200)
        except ClientError as exc:
            assert time.monotonic() < deadline, f"no progress at offset {len(out)}: {exc}"
            time.sleep(0.1)
            continue
        out.extend(v for o, _e, v in f.records if o < stop)
    return out


def expected_event(how: str, fault, events: list[dict]) -> dict:
    """The event the restart rule says the damaged broker logs, checked exactly; returned for messages."""
    detail = fault.detail
    assert fault.partition == 0, fault
    if how in ("bitflip", "truncate", "torn-last"):
        cut = int(re.search(r"(?:record of|mid-record of) offset (\d+)", detail).group(1))
        assert fault.offset == cut, fault                            # the offset the history records
        if how == "torn-last":
            assert cut == N - 1, detail                              # exactly the last record
        cuts = [e for e in events if e["event"] == "truncate" and e.get("why") == "recovery"]
        assert [e["to"] for e in cuts] == [cut], cuts
        reason = "CRC mismatch" if how == "bitflip" else "torn record"
        assert reason in cuts[0]["reason"], cuts[0]
        return cuts[0]
    assert fault.offset is None, fault                               # a checkpoint names no record
    name = HW_FILE if how.startswith("hw-") else EPOCH_FILE
    errors = [e for e in events if e["event"] == "storage-error" and e.get("why") == "checkpoint"]
    assert [e["file"] for e in errors] == [name], errors
    assert ("missing" in errors[0]["error"]) == how.endswith("-delete"), errors[0]
    return errors[0]


@pytest.mark.slow
@pytest.mark.parametrize("how", STORAGE_FAULTS)
def test_a_damaged_follower_restarts_catches_up_and_loses_nothing(tmp_path, how):
    spec = ClusterSpec(f"sf-{tmp_path.name}"[:40], tmp_path / "run", brokers=3, broker_settings=BROKER,
                       controller_settings=CONTROLLER)
    c = LocalCluster(spec, registry=Registry(tmp_path / "registry"), timeouts=NodeTimeouts(ready_s=30))
    admin = producer = consumer = None
    try:
        c.start()
        ctrl = (c.controller().host, c.controller().port)
        admin = Admin(controller=ctrl, timeout_s=2.0)
        producer = Producer(controller=ctrl, acks="all", timeout_s=5.0)
        consumer = Consumer(controller=ctrl, timeout_s=2.0)
        info = wait_until(lambda: full_isr(admin), 20, what="a leader with a full ISR")
        for start in range(0, N, 10):
            send(producer, [value(i) for i in range(start, start + 10)])
        wait_until(lambda: leos(admin) == [N] * 3, 20, what="every replica at the log end")
        follower = f"n{[b for b in (1, 2, 3) if b != info.leader][0]}"
        part_dir = c.node_dir(follower) / "data" / f"{TOPIC}-0"
        wait_until(lambda: HwCheckpoint(part_dir / HW_FILE).read() == N, 10, what="the follower's HW checkpoint")

        c.kill(follower)
        with pytest.raises(Exception, match="while it runs"):      # the leader is up: refused
            c.corrupt(f"n{info.leader}", how)
        fault = c.corrupt(follower, how, seed=3)
        assert fault.detail.startswith(f"{follower}: ")
        c.restart(follower)

        wait_until(lambda: full_isr(admin), 30, what=f"{follower} back in the ISR")
        wait_until(lambda: leos(admin) == [N] * 3, 20, what="every replica at the log end again")
        event = expected_event(how, fault, c.events(follower))
        assert event is not None
        send(producer, [value(i) for i in range(N, N + MORE)])
        wait_until(lambda: leos(admin) == [N + MORE] * 3, 20, what="every replica at the new log end")
        acked = [value(i) for i in range(N + MORE)]
        assert read_all(consumer, N + MORE) == acked
    finally:
        for client in (admin, producer, consumer):
            if client is not None:
                client.close()
        c.stop_all()
        c.teardown()
    for node in ("n1", "n2", "n3"):      # offline, after a clean stop: exactly the acknowledged values
        lines = [json.loads(x) for x in dump_partition(c.node_dir(node) / "data" / f"{TOPIC}-0", TOPIC, 0, node)]
        meta, records = lines[0], lines[1:]
        assert (meta["leo"], meta["torn_bytes"]) == (N + MORE, 0), f"{node}: {meta}"
        assert [r["value"] for r in records] == [int(v) for v in acked], f"{node} holds other values"
        assert all(r["crc_ok"] for r in records)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("how", ["bitflip", "hw-checkpoint-delete"])
def test_docker_storage_fault_on_a_down_follower(tmp_path, how):
    """bitflip: files copied out and back (archive API); hw-checkpoint-delete: `docker exec rm` (kill mode
    "process": the container runs, the broker process is dead)."""
    from clusters.docker import DockerCluster
    spec = ClusterSpec(f"sfd-{tmp_path.name}"[:40], tmp_path / "run", brokers=3, broker_settings=BROKER,
                       controller_settings=CONTROLLER)
    c = DockerCluster(spec)
    admin = producer = None
    try:
        c.start()
        ctrl = (c.controller().host, c.controller().port)
        admin = Admin(controller=ctrl, timeout_s=2.0)
        producer = Producer(controller=ctrl, acks="all", timeout_s=5.0)
        info = wait_until(lambda: full_isr(admin), 30, what="a leader with a full ISR")
        for start in range(0, N, 10):
            send(producer, [value(i) for i in range(start, start + 10)])
        wait_until(lambda: leos(admin) == [N] * 3, 20, what="every replica at the log end")
        follower = f"n{[b for b in (1, 2, 3) if b != info.leader][0]}"
        fid = int(follower[1:])
        wait_until(lambda: (admin.replicas(fid) or {}).get((TOPIC, 0), {}).get("hw") == N, 20,
                   what=f"{follower} knowing the HW {N}")
        time.sleep(0.5)          # several HW checkpoint intervals (100 ms): the file exists on the follower
        c.kill(follower)
        fault = c.corrupt(follower, how, seed=3)
        c.restart(follower)
        wait_until(lambda: full_isr(admin), 30, what=f"{follower} back in the ISR")
        wait_until(lambda: leos(admin) == [N] * 3, 20, what="every replica at the log end again")
        expected_event(how, fault, c.events(follower))
    finally:
        for client in (admin, producer):
            if client is not None:
                client.close()
        c.teardown()
