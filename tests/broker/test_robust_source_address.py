"""Real brokers on their own 127.x addresses make their outgoing connections (controller link, follower
fetches) leave from their own address, with no launcher shim: seen from the accepting side with `ss`."""
from __future__ import annotations

import functools
import subprocess
import sys
import time
from pathlib import Path

from broker.client import Admin
from clusters.base import ClusterSpec
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from polling import wait_until


def plain_broker_command(node: str, role: str, config: Path) -> list[str]:
    return [sys.executable, "-m", "broker", role, "--config", str(config)]


_until = functools.partial(wait_until, timeout=30.0)


def accepted_peers(host: str, port: int) -> set[str]:
    """Remote addresses of the established connections accepted on host:port."""
    out = subprocess.run(["ss", "-tnH", "state", "established", "sport", "=", f":{port}"],
                         capture_output=True, text=True, check=True).stdout
    peers = set()
    for line in out.splitlines():
        fields = line.split()
        local, peer = fields[-2], fields[-1]
        if local == f"{host}:{port}":
            peers.add(peer.rsplit(":", 1)[0])
    return peers


def peers_settle(host: str, port: int, want: set[str], timeout: float = 15.0) -> set[str]:
    """accepted_peers(host, port) once it equals `want`, or its last value at the timeout."""
    deadline = time.monotonic() + timeout
    got = accepted_peers(host, port)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.2)
        got = accepted_peers(host, port)
    return got


def test_accepted_connections_come_from_each_brokers_own_address(tmp_path):
    spec = ClusterSpec(f"srcaddr-{tmp_path.name}", tmp_path / "run", brokers=3,
                       broker_settings={"min_insync_replicas": 2},
                       controller_settings={"broker_session_timeout_ms": 3000,
                                            "topics": [{"name": "hw", "partitions": 1, "replication_factor": 3}]})
    with LocalCluster(spec, registry=Registry(tmp_path / "registry"), command=plain_broker_command) as c:
        c.start()
        ctl = c.controller()
        with Admin(controller=(ctl.host, ctl.port), timeout_s=2.0) as admin:
            p0 = _until(lambda: (lambda p: p if p.leader is not None and len(p.isr) == 3 else None)(
                admin.describe("hw")[0]), what="a leader with the full ISR")
        hosts = {n: a.host for n, a in c.brokers().items()}
        assert len(set(hosts.values())) == 3 and all(h.startswith("127.") and h != "127.0.0.1"
                                                     for h in hosts.values())
        # the controller sees each broker's control-plane connection coming from that broker's address
        assert peers_settle(ctl.host, ctl.port, set(hosts.values())) == set(hosts.values())
        # the leader sees its two followers' fetch connections coming from their addresses
        leader = c.brokers()[f"n{p0.leader}"]
        followers = {h for n, h in hosts.items() if n != f"n{p0.leader}"}
        assert peers_settle(leader.host, leader.port, followers) == followers
