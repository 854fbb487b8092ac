"""The disk-full fault on the Docker backend, for real (root and a local engine): each broker's data
directory is a tmpfs on this host bind-mounted into its container; filling it from the host makes the
broker in the container refuse produces with KAFKA_STORAGE_ERROR, freeing it lets them through again,
the data outlives a whole-container crash, and teardown unmounts it and removes its mount point."""
from __future__ import annotations

import json
import secrets

import pytest

from broker.client import Admin, ClientError, Producer
from clusters import local_disks
from clusters.base import ClusterError, ClusterSpec
from polling import wait_until

# leftovers: a cleanup elsewhere must not take this run's mounts (it would not: their owner runs; the
# marker keeps the tests that plant dead mounts from counting ours)
pytestmark = [pytest.mark.docker, pytest.mark.root, pytest.mark.leftovers]

TOPIC = "disk"


def _ours(short_id: str) -> list[dict]:
    return [m for m in local_disks.find_leftovers() if m["short_id"] == short_id]


def test_disk_full_in_a_container_refuses_produces_frees_and_survives_a_crash(tmp_path):
    from clusters.docker import DockerCluster
    spec = ClusterSpec(f"dk-disk-{secrets.token_hex(4)}", tmp_path / "run", brokers=1,
                       broker_settings={"min_insync_replicas": 1},
                       controller_settings={"expected_brokers": 1,
                                            "topics": [{"name": TOPIC, "partitions": 1, "replication_factor": 1}]})
    c = DockerCluster(spec, kill_mode="node")
    c.check_faults(["disk-full-leader"])
    short = c._disks.short_id
    c.start()
    try:
        host_dir = tmp_path / "run" / "disks" / "n1"
        assert [m["path"] for m in _ours(short)] == [str(host_dir)]
        ctl = (c.controller().host, c.controller().port)
        with Admin(ctl, timeout_s=2.0) as admin:
            wait_until(lambda: admin.describe(TOPIC)[0].leader is not None, timeout=20.0, what="a leader")
        producer = Producer(ctl, acks=1, timeout_s=5.0, retries=2)
        for i in range(5):
            producer.send(TOPIC, 0, [b"%d" % i])
        with pytest.raises(ClusterError, match="not the controller"):
            c.fill_disk("c0")
        detail = c.fill_disk("n1")
        assert int(detail.split(": ")[1].split()[0]) <= 64 * 1024, detail
        with pytest.raises(ClientError) as refused:
            producer.send(TOPIC, 0, [b"7" * 40_000])
        assert refused.value.code == "KAFKA_STORAGE_ERROR" and refused.value.definite
        assert "freed n1's data filesystem" in c.free_disk("n1")
        assert producer.send(TOPIC, 0, [b"5"]).offsets == [5]
        producer.close()
        # a whole-container crash: the tmpfs lives on this host, so the records are there after it
        c.crash("n1")
        c.restart("n1")
        with Admin(ctl, timeout_s=2.0) as admin:
            wait_until(lambda: admin.describe(TOPIC)[0].leader == 1, timeout=30.0, what="n1 leading again")
        c.stop_all()
        c.collect(tmp_path / "run")
    finally:
        c.teardown()
    assert _ours(short) == [] and not host_dir.parent.exists()
    lines = (tmp_path / "run" / "replicas" / "n1" / "p0.jsonl").read_text().splitlines()
    assert [(r["offset"], r["value"]) for r in map(json.loads, lines[1:])] == [(i, i) for i in range(6)]


def test_disk_full_needs_the_engine_on_this_machine(tmp_path, monkeypatch):
    """A remote engine (DOCKER_HOST over TCP) would bind a path on its own host: refused up front."""
    from clusters.docker import DockerCluster
    from clusters.docker_hosts import engine
    c = DockerCluster(ClusterSpec("dk-disk-remote", tmp_path / "run", brokers=1), client=engine())
    c.check_faults(["partition", "kill"])             # nothing of the host needed
    assert c._disks is None
    monkeypatch.setattr(c.client.api, "base_url", "http://10.0.0.9:2375")
    with pytest.raises(ClusterError, match=r"needs the Docker engine on this machine.*10\.0\.0\.9:2375"):
        c.check_faults(["disk-full"])
