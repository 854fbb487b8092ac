"""The disk-full fault on the local backend, for real (root): each broker's data directory is a tmpfs of
its own when the run's faults include it; the fault fills it to a few KiB free while the broker runs (its
produces are then refused KAFKA_STORAGE_ERROR) and frees it; teardown copies the data back and unmounts,
leaving the files in the run directory; `highwater cleanup` unmounts the tmpfs of a run whose owner died."""
from __future__ import annotations

import os
import subprocess

import pytest

from broker.client import Admin, ClientError, Producer
from broker.storage import SegmentedLog
from broker.storage.partition_store import partition_dir_name
from clusters import local_disks
from clusters.base import ClusterError, ClusterSpec
from clusters.bare import wait_until
from clusters.leftovers import clean
from clusters.local import LocalCluster
from clusters.run_registry import Registry

# leftovers: a cleanup elsewhere (another registry) would count this run's mounts as a dead run's
pytestmark = [pytest.mark.root, pytest.mark.leftovers]

TOPIC = "disk"


def _ours(short_id: str) -> list[dict]:
    return [m for m in local_disks.find_leftovers() if m["short_id"] == short_id]


def test_disk_full_fills_and_frees_a_brokers_own_filesystem_and_teardown_keeps_the_data(tmp_path):
    spec = ClusterSpec(f"disk-full-{os.getpid()}", tmp_path / "run", brokers=1,
                       broker_settings={"min_insync_replicas": 1},
                       controller_settings={"topics": [{"name": TOPIC, "partitions": 1, "replication_factor": 1}]})
    c = LocalCluster(spec, registry=Registry(tmp_path / "registry"))
    c.check_faults(["disk-full"])
    c.start()
    try:
        short = c._disks.short_id
        assert [m["path"] for m in _ours(short)] == [str(c.node_dir("n1") / "data")]
        ctl = (c.controller().host, c.controller().port)
        with Admin(ctl) as admin:
            wait_until(lambda: admin.describe(TOPIC)[0].leader is not None, 20, "a leader")
        producer = Producer(ctl, acks=1, timeout_s=5.0, retries=2)
        for i in range(10):
            producer.send(TOPIC, 0, [b"before-%d" % i])
        detail = c.fill_disk("n1")
        free = int(detail.split(": ")[1].split()[0])     # "filled n1's data filesystem: N bytes free of ..."
        assert free <= 64 * 1024, detail
        with pytest.raises(ClientError) as refused:
            producer.send(TOPIC, 0, [b"x" * 40_000])
        assert refused.value.code == "KAFKA_STORAGE_ERROR" and refused.value.definite
        assert "freed n1's data filesystem" in c.free_disk("n1")
        sent = producer.send(TOPIC, 0, [b"after"])
        assert sent.offsets == [10]
        producer.close()
    finally:
        c.stop_all()
        c.teardown()
    assert _ours(short) == []
    log = SegmentedLog.open(c.node_dir("n1") / "data" / partition_dir_name(TOPIC, 0))
    try:
        assert [r.value for r in log.read(0, 100)] == [b"before-%d" % i for i in range(10)] + [b"after"]
    finally:
        log.close()
    assert not (c.node_dir("n1") / "data" / local_disks.FILLER).exists()
    assert not (c.node_dir("n1") / "data" / local_disks.MARKER).exists()


def test_a_cluster_started_without_it_refuses_to_fill(tmp_path):
    spec = ClusterSpec(f"no-disk-full-{os.getpid()}", tmp_path / "run", brokers=1)
    c = LocalCluster(spec, registry=Registry(tmp_path / "registry"))
    c.start()
    try:
        with pytest.raises(ClusterError, match="started without it"):
            c.fill_disk("n1")
    finally:
        c.stop_all()
        c.teardown()


def _plant(path, source: str) -> None:
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", source, str(path)], check=True)
    (path / "kept.txt").write_text("x")


def test_a_mount_names_its_owner_process():
    from clusters.run_registry import this_process_identity
    source = local_disks.source_name("0123abcd", "n2")
    assert source == "highwater-0123abcd-n2@%d.%d" % this_process_identity()
    assert local_disks.parse_source(source) == ("0123abcd", this_process_identity())
    assert local_disks.parse_source("highwater-0123abcd-n2") == ("0123abcd", None)     # an older name
    assert local_disks.parse_source("tmpfs") is None


def test_cleanup_unmounts_the_tmpfs_of_a_dead_run(tmp_path):
    """A mount whose owner process is gone (a killed harness's), or, named the older way without an owner,
    whose run no live owner holds, is listed by a dry run, then unmounted; one of a live run (local, in
    the registry, or any other whose owner runs, as a Docker run's does) is kept."""
    dead, unowned, alive = tmp_path / "dead" / "data", tmp_path / "unowned" / "data", tmp_path / "alive" / "data"
    registry = Registry(tmp_path / "registry")
    keep = LocalCluster(ClusterSpec(f"live-disk-{os.getpid()}", tmp_path / "live-run", brokers=1), registry=registry)
    keep.check_faults(["disk-full"])
    keep.start()
    try:
        _plant(dead, "highwater-deadbeef-n1@999999999.1")      # no process has that pid
        _plant(unowned, "highwater-feedf00d-n1")
        _plant(alive, local_disks.source_name("0badcafe", "n1"))   # this process: not in the registry
        dry = clean(registry, dry_run=True)
        assert f"would remove tmpfs {dead} (highwater-deadbeef-n1@999999999.1)" in dry.removed
        assert f"would remove tmpfs {unowned} (highwater-feedf00d-n1)" in dry.removed
        assert not any(str(keep.node_dir("n1")) in line or str(alive) in line for line in dry.removed)
        assert _ours("deadbeef") and _ours("feedf00d")
        report = clean(registry)
        assert f"removed tmpfs {dead} (highwater-deadbeef-n1@999999999.1)" in report.removed, report
        assert _ours("deadbeef") == [] and _ours("feedf00d") == []
        assert _ours(keep._disks.short_id) != [] and _ours("0badcafe") != []
    finally:
        for path in (dead, unowned, alive):
            subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
        keep.stop_all()
        keep.teardown()
