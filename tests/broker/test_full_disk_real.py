"""A broker's disk fills up while it runs, for real: each broker's data directory is a small tmpfs of this
test's own, and one of them is filled to a few KiB free with a filler file, then freed.

- A follower whose appends fail with ENOSPC keeps its fetcher alive, says so (`storage-error`, action
  retrying), and catches up by itself once space returns (action resolved): it never becomes a
  live-looking broker that has silently stopped replicating.
- A leader whose appends fail answers KAFKA_STORAGE_ERROR, a definite error: none of those values is in
  any replica afterwards. When its appends keep failing, it registers again so that leadership moves to a
  broker with a working disk, and producing works again without anyone freeing the space.
Neither broker dies, and neither logs an `internal-error`.
"""
from __future__ import annotations

import subprocess
import time

import pytest

from broker.client import Admin, ClientError, Producer
from broker.server.partitions import OFFLINE_AFTER_S
from broker.storage import SegmentedLog
from broker.storage.partition_store import partition_dir_name
from clusters.bare import BareCluster, wait_until

pytestmark = [pytest.mark.root, pytest.mark.slow]

TOPIC = "full"
FS_SIZE = "4m"


@pytest.fixture(params=[False, True], ids=["page-cache", "power-loss"])
def cluster(tmp_path, request):
    """3 brokers, RF=3, min.insync.replicas=2, each broker's data directory a 4 MiB tmpfs; n1 leads. With
    power-loss emulation appends stay in memory until the flush, so the full disk fails the flush (the
    group commit), not the append."""
    mounts = []
    try:
        for b in (1, 2, 3):
            d = tmp_path / f"n{b}" / "data"
            d.mkdir(parents=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE}", "tmpfs", str(d)], check=True)
            mounts.append(d)
        with BareCluster(tmp_path, brokers=3,
                         broker_settings={"min_insync_replicas": 2, "replica_lag_time_max_ms": 1000,
                                          "power_loss": request.param},
                         topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
            admin = Admin(c.controller_address)
            wait_until(lambda: (lambda d: d and len(d[0].isr) == 3)(admin.describe(TOPIC)), 30, "a full ISR")
            if admin.describe(TOPIC)[0].leader != 1:
                admin.elect_leader(TOPIC, 0, broker=1)
                wait_until(lambda: admin.describe(TOPIC)[0].leader == 1, 15, "n1 leading")
            admin.close()
            yield c
    finally:
        for d in mounts:
            subprocess.run(["umount", "-l", str(d)], check=False)


def _fill(c: BareCluster, broker: int, leave: int = 8192):
    """Fill broker's data filesystem to `leave` bytes free; return the filler file."""
    import os
    d = c.data_dir(broker)
    st = os.statvfs(d)
    filler = d / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def _storage_events(c, broker, action=None):
    return [e for e in c.events(broker) if e.get("event") == "storage-error"
            and (action is None or e.get("action") == action)]


def _values(c, broker) -> list[bytes]:
    """The values in broker's replica of partition 0, read from its files (the broker is stopped)."""
    log = SegmentedLog.open(c.data_dir(broker) / partition_dir_name(TOPIC, 0))
    try:
        return [r.value for r in log.read(0, 1_000_000)]
    finally:
        log.close(flush=False)


def _no_internal_errors(c):
    for b in (1, 2, 3):
        assert [e for e in c.events(b) if e.get("event") == "internal-error"] == [], f"n{b}"
        assert c.brokers[b].running(), f"n{b} died"


def test_a_follower_with_a_full_disk_retries_says_so_and_catches_up_when_space_returns(cluster):
    c = cluster
    producer = Producer(c.controller_address, acks="all", timeout_s=5.0, retries=3)
    value = lambda i: b"%06d-" % i + b"x" * 1000      # noqa: E731
    for i in range(20):
        producer.send(TOPIC, 0, [value(i)])
    filler = _fill(c, 2)
    for i in range(20, 120):                          # ~100 KB: n2 cannot take them; n1 and n3 ack them
        producer.send(TOPIC, 0, [value(i)])
    wait_until(lambda: _storage_events(c, 2, "retrying"), 15, "n2's storage-error (retrying)")
    admin = Admin(c.controller_address)
    wait_until(lambda: 2 not in admin.describe(TOPIC)[0].isr, 15, "n2 out of the ISR")
    time.sleep(1.0)                                   # several failing retries: still one event
    failed = [e for e in _storage_events(c, 2, "retrying") if e["error"].startswith(("append:", "flush:"))]
    assert len(failed) == 1 and "No space left on device" in failed[0]["error"]
    _no_internal_errors(c)

    filler.unlink()
    wait_until(lambda: _storage_events(c, 2, "resolved"), 20, "n2's storage-error (resolved)")
    wait_until(lambda: 2 in admin.describe(TOPIC)[0].isr, 20, "n2 back in the ISR")
    admin.close()
    producer.send(TOPIC, 0, [value(120)])
    _no_internal_errors(c)
    # never a LEO told to the leader over records a failed flush left unflushed (flush=always)
    assert [e for e in c.events(2) if e.get("event") == "leo-reported" and e["leo"] > e["flushed"]] == []
    c.close()
    assert _values(c, 2) == _values(c, 1) == [value(i) for i in range(121)]


def test_a_leader_with_a_full_disk_refuses_then_hands_leadership_over(cluster):
    """Page cache: the append fails, is taken back, and the produce is refused KAFKA_STORAGE_ERROR
    (definite: the value is nowhere afterwards). Power loss: the append lives in memory and the flush
    fails, so the answer is REQUEST_TIMED_OUT (indefinite: not checked). Either way leadership moves."""
    c = cluster
    power_loss = c.broker_settings["power_loss"]
    producer = Producer(c.controller_address, acks="all", timeout_s=5.0)
    good = [b"good-%04d" % i + b"y" * 500 for i in range(10)]
    for v in good:
        producer.send(TOPIC, 0, [v])
    _fill(c, 1, leave=4096)
    refused, indefinite, started = [], [], time.monotonic()
    while time.monotonic() - started < OFFLINE_AFTER_S + 20:
        v = b"big-%04d" % (len(refused) + len(indefinite)) + b"z" * 8000
        try:
            producer.send(TOPIC, 0, [v])
            break                                     # a new leader took it
        except ClientError as exc:
            if exc.code == "KAFKA_STORAGE_ERROR":
                assert exc.definite
                refused.append(v)
            elif not exc.definite:
                indefinite.append(v)
            time.sleep(0.2)
    else:
        pytest.fail("producing never worked again while n1's disk stayed full")
    accepted = v
    if power_loss:
        assert indefinite and _storage_events(c, 1, "retrying"), "n1's flush never failed"
    else:
        assert refused and _storage_events(c, 1, "refused"), "n1 never answered KAFKA_STORAGE_ERROR"
    assert _storage_events(c, 1, "offline")
    admin = Admin(c.controller_address)
    assert admin.describe(TOPIC)[0].leader in (2, 3)
    admin.close()
    _no_internal_errors(c)
    c.close()
    for b in (2, 3):
        values = _values(c, b)
        assert values[:len(good)] == good and accepted in values
        assert not set(refused) & set(values), f"n{b} holds a value that was refused definitely"
    assert not set(refused) & set(_values(c, 1))
