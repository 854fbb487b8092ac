"""clusters/local.py with the real broker: a controller and three brokers as `python -m broker` processes."""
from __future__ import annotations

import functools
import json
import re
import subprocess

import pytest

from broker.client import Admin
from clusters.base import ClusterSpec, NodeTimeouts
from clusters.local import LocalCluster
from clusters.run_registry import Registry, proc_state
from polling import wait_until


_until = functools.partial(wait_until, timeout=15.0)


@pytest.fixture
def cluster(tmp_path):
    spec = ClusterSpec(f"broker-{tmp_path.name}", tmp_path / "run", brokers=3,
                       broker_settings={"min_insync_replicas": 2, "replica_lag_time_max_ms": 1500},
                       controller_settings={"broker_session_timeout_ms": 1500,
                                            "topics": [{"name": "hw", "partitions": 1, "replication_factor": 3}]})
    c = LocalCluster(spec, registry=Registry(tmp_path / "registry"), timeouts=NodeTimeouts(ready_s=30))
    c.check_faults(["partition"])
    c.start()
    pids = [c.pid(n) for n in c.nodes()]
    admin = Admin(controller=(c.controller().host, c.controller().port), timeout_s=2.0)
    yield c, admin
    admin.close()
    c.teardown()
    assert all(proc_state(p) is None for p in pids if p)


def _alive(admin) -> dict[int, bool]:
    return {b: info[2] for b, info in admin.brokers().items()}


def _leader(admin):
    (p0,) = admin.describe("hw")
    return p0


def test_real_brokers_start_register_and_connect_from_their_own_addresses(cluster):
    c, admin = cluster
    assert _until(lambda: _alive(admin) == {1: True, 2: True, 3: True}, what="3 live brokers")
    p0 = _until(lambda: (lambda p: p if p.leader is not None and len(p.isr) == 3 else None)(_leader(admin)),
                what="leader with full ISR")
    assert p0.replicas == [1, 2, 3]
    # heartbeats and follower fetches leave from each broker's own loopback address
    pids = {c.pid(n): c.brokers()[n].host for n in ("n1", "n2", "n3")}
    server_ports = {str(a.port) for a in [c.controller(), *c.brokers().values()]}
    out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True).stdout
    outgoing = {}  # broker pid -> source addresses of its connections to a node's server port
    for line in out.splitlines():
        fields = line.split()
        local, peer = fields[2], fields[3]
        owner = [int(m) for m in re.findall(r"pid=(\d+)", line)]
        if owner and owner[0] in pids and peer.rsplit(":", 1)[1] in server_ports \
                and local.rsplit(":", 1)[1] not in server_ports:
            outgoing.setdefault(owner[0], set()).add(local.rsplit(":", 1)[0])
    assert outgoing == {pid: {host} for pid, host in pids.items()}, out


def test_kill_restart_of_the_real_leader_moves_leadership_and_rejoins(cluster):
    c, admin = cluster
    p0 = _until(lambda: (lambda p: p if p.leader is not None and len(p.isr) == 3 else None)(_leader(admin)),
                what="leader with full ISR")
    old = f"n{p0.leader}"
    c.kill(old)
    p1 = _until(lambda: (lambda p: p if p.leader not in (None, p0.leader) else None)(_leader(admin)),
                what="a new leader")
    assert p1.epoch > p0.epoch
    c.restart(old)
    _until(lambda: len(_leader(admin).isr) == 3, timeout=20, what="restarted broker back in the ISR")


@pytest.mark.root
def test_partition_isolating_a_real_broker_fences_it_and_heal_brings_it_back(cluster):
    c, admin = cluster
    _until(lambda: _alive(admin) == {1: True, 2: True, 3: True}, what="3 live brokers")
    others = [n for n in c.nodes() if n != "n2"]
    c.drop([("n2", o) for o in others] + [(o, "n2") for o in others])
    _until(lambda: _alive(admin) == {1: True, 2: False, 3: True}, what="n2 fenced by the controller")
    assert 2 not in _until(lambda: (lambda p: p if 2 not in p.isr else None)(_leader(admin)), what="n2 out of ISR").isr
    c.heal()
    _until(lambda: _alive(admin) == {1: True, 2: True, 3: True}, what="n2 registered again")
    _until(lambda: len(_leader(admin).isr) == 3, timeout=20, what="n2 back in the ISR")


def test_stop_all_is_graceful_and_collect_dumps_every_replica(cluster, tmp_path):
    c, admin = cluster
    # every broker has opened its replica (the controller's ISR alone is set before the brokers act on it)
    _until(lambda: (lambda p: len(p.isr) == 3 and all(v is not None for v in p.replica_state.values()))(
        _leader(admin)), what="full ISR, every replica open")
    c.stop_all()
    assert all(line.endswith("exited 0 after SIGTERM") for line in c.last_stop_report), c.last_stop_report
    c.collect(tmp_path / "run")
    for node in ("n1", "n2", "n3"):
        lines = (tmp_path / "run" / "replicas" / node / "p0.jsonl").read_text().splitlines()
        meta = json.loads(lines[0])
        assert meta["kind"] == "meta" and meta["node"] == node and meta["partition"] == 0
        assert (tmp_path / "run" / "nodes" / node / "stdout.log").exists()
