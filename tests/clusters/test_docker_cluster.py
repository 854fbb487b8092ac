"""clusters/docker.py on a real Docker engine: containers, sshd, real SIGKILL / docker kill / docker pause,
iptables inside the containers, replica dumps collected over SFTP, and teardown by label."""
from __future__ import annotations

import functools
import json
import secrets
import subprocess
import time

import pytest

from broker.client import Admin, Producer
from clusters.base import ClusterSpec
from clusters.docker_hosts import LABEL_RUN
from polling import wait_until

pytestmark = pytest.mark.docker


_until = functools.partial(wait_until, timeout=20.0)


def _labelled(kind: str, run_id: str) -> list[str]:
    r = subprocess.run(["docker", kind, "ls", *(["-a"] if kind == "container" else []), "-q",
                        "--filter", f"label={LABEL_RUN}={run_id}"], capture_output=True, text=True, check=True)
    return r.stdout.split()


@pytest.fixture
def cluster(tmp_path):
    from clusters.docker import DockerCluster
    run_id = f"dk-{tmp_path.name[-40:]}-{secrets.token_hex(3)}"
    spec = ClusterSpec(run_id, tmp_path / "run", brokers=3,
                       broker_settings={"min_insync_replicas": 2, "replica_lag_time_max_ms": 1500},
                       controller_settings={"broker_session_timeout_ms": 1500, "expected_brokers": 3,
                                            "topics": [{"name": "hw", "partitions": 1, "replication_factor": 3}]})
    c = DockerCluster(spec)
    c.start()
    admin = Admin(controller=(c.controller().host, c.controller().port), timeout_s=2.0)
    yield c, admin
    admin.close()
    c.teardown()
    started = time.monotonic()
    c.teardown()                        # idempotent, and quick: nothing is left to stop
    assert time.monotonic() - started < 5
    assert _labelled("container", run_id) == []
    assert _labelled("network", run_id) == []


def _partition(admin):
    (p0,) = admin.describe("hw")
    return p0


def _reach(c, src: str, dst: str, tries: int = 3) -> bool:
    """Can src open a TCP connection to dst's server port (run inside src's container)? Up to `tries`
    tries of 2 s each (a busy machine can lose a SYN); a dropped path fails every one."""
    a = c.brokers()[dst] if dst != "c0" else c.controller()
    code = ("import socket, sys\n"
            f"for _ in range({tries}):\n"
            "    try:\n"
            f"        socket.create_connection(('{a.host}', {a.port}), 2.0).close(); sys.exit(0)\n"
            "    except OSError:\n"
            "        pass\n"
            "sys.exit(1)\n")
    r = c.ssh(src).run("python3 -", check=False, timeout_s=20, stdin=code.encode())
    return r.exit_status == 0


def test_docker_cluster_layout_faults_collect_and_teardown(cluster, tmp_path):
    c, admin = cluster
    layout = c.layout()
    assert layout["backend"] == "docker"
    assert sorted(layout["nodes"]) == ["c0", "n1", "n2", "n3"]
    prefix = layout["subnet"].rsplit(".", 1)[0]
    assert layout["subnet"].startswith("10.213.") and layout["subnet"].endswith(".0/24")
    assert [layout["nodes"][n]["host"] for n in ("c0", "n1", "n2", "n3")] == [f"{prefix}.{i}" for i in (2, 3, 4, 5)]
    assert c.controller().port == 9000 and {a.port for a in c.brokers().values()} == {9092}
    # the control plane is reachable on the run's own network only: an internal network, no published
    # ports, and every daemon listens on its container's address on it (not on all interfaces)
    net = c.client.networks.get(c.hosts.network_name)
    assert net.attrs["Internal"] is True
    for node in ("c0", "n1", "n2", "n3"):
        info = c.client.api.inspect_container(c.hosts.container_name(node))
        assert not info["HostConfig"].get("PortBindings") and not info["HostConfig"].get("PublishAllPorts")
        assert list(info["NetworkSettings"]["Networks"]) == [c.hosts.network_name]
        config = json.loads((tmp_path / "run" / "nodes" / node /
                             ("controller.json" if node == "c0" else "broker.json")).read_text())
        assert config["host"] == layout["nodes"][node]["host"]
    # host keys were recorded before the first connection: the known_hosts file has one line per node
    known = (tmp_path / "run" / "ssh" / "known_hosts").read_text().splitlines()
    assert sorted(line.split()[0] for line in known) == sorted(a["host"] for a in layout["nodes"].values())

    p0 = _until(lambda: (lambda p: p if p.leader is not None and len(p.isr) == 3 else None)(_partition(admin)),
                what="leader and full ISR")
    prod = Producer(controller=(c.controller().host, c.controller().port), acks="all", timeout_s=3.0, retries=10)
    assert prod.send("hw", 0, [b"10", b"11"]).offsets == [0, 1]

    # SIGKILL of the broker process; restart with the same data
    victim = f"n{p0.leader}"
    pid = c.remote_pid(victim)
    assert pid is not None
    assert c.kill(victim) == f"SIGKILL {victim} pid {pid}"
    assert c.is_running(victim) is False
    assert c.container_status(victim) == "running"
    assert c.restart(victim).startswith(f"restarted {victim} as pid ")
    assert c.is_running(victim) is True

    # freeze: docker pause of the whole container
    assert c.pause("n2") == f"docker pause {c.hosts.container_name('n2')} (n2)"
    assert c.container_status("n2") == "paused" and c.is_running("n2") is True
    c.resume("n2")
    assert c.container_status("n2") == "running"

    # graceful stop (the scenario `stop` step), of a frozen node too: unpaused, SIGTERM; restart
    pid = c.remote_pid("n2")
    c.pause("n2")
    assert c.stop("n2") == f"n2: pid {pid} stopped by SIGTERM"
    assert c.container_status("n2") == "running" and c.is_running("n2") is False
    assert c.stop("n2") == "n2: not running"
    assert c.restart("n2").startswith("restarted n2 as pid ")

    # partitions: iptables in the receiving container; n1 -> n2 dropped, n3 -> n2 still fine
    assert _reach(c, "n1", "n2") and _reach(c, "n3", "n2")
    c.drop([("n1", "n2")])
    assert c.drop_rules("n2") == [f"-A HW-{c.hosts.short} -s {c.brokers()['n1'].host}/32 -j DROP"]
    assert _reach(c, "n1", "n2", tries=1) is False
    assert _reach(c, "n3", "n2") is True
    assert _reach(c, "n2", "c0") is True        # only packets from n1 into n2 are dropped
    # partial heal: only the named one-way drops go
    c.drop([("n3", "n2"), ("n1", "c0")])
    assert c.heal([("n1", "n2"), ("n1", "c0")]) == "healed n1->n2, n1->c0"
    assert c.drop_rules("n2") == [f"-A HW-{c.hosts.short} -s {c.brokers()['n3'].host}/32 -j DROP"]
    assert c.drop_rules("c0") == []
    assert _reach(c, "n1", "n2") is True and _reach(c, "n3", "n2", tries=1) is False
    assert c.heal() == "healed (all drop rules removed)"
    assert c.drop_rules("n2") == []
    assert _reach(c, "n1", "n2") is True and _reach(c, "n3", "n2") is True

    # whole-node crash: docker kill, then docker start + daemon restart
    assert c.crash("n3") == f"docker kill {c.hosts.container_name('n3')} (n3)"
    assert c.container_status("n3") == "exited" and c.is_running("n3") is False
    assert c.restart("n3").startswith(f"docker start {c.hosts.container_name('n3')}; restarted n3 as pid ")
    assert c.container_status("n3") == "running" and c.is_running("n3") is True

    # firewall on a frozen node (from the host, in its network namespace) and on a crashed one
    # (remembered, installed when its container starts again)
    n1_rule = f"-A HW-{c.hosts.short} -s {c.brokers()['n1'].host}/32 -j DROP"
    c.pause("n2")
    c.drop([("n1", "n2")])
    assert c.container_status("n2") == "paused"
    assert c.drop_rules("n2") == [n1_rule]
    c.heal()
    assert c.drop_rules("n2") == []
    c.resume("n2")
    c.crash("n3")
    assert c.drop([("n1", "n3"), ("c0", "n3")]) == "dropping n1->n3, c0->n3"
    assert c.heal([("c0", "n3")]) == "healed c0->n3"     # forgotten while down: not put back at restart
    # pids restart from 1 in the new container: the stale pid file must not pass for a live daemon
    assert c.restart("n3").startswith(f"docker start {c.hosts.container_name('n3')}; restarted n3 as pid ")
    assert c.drop_rules("n3") == [n1_rule]
    assert _reach(c, "n1", "n3", tries=1) is False and _reach(c, "c0", "n3") is True
    c.heal()
    assert c.drop_rules("n3") == [] and _reach(c, "n1", "n3") is True

    # a paused node's daemon can still be SIGKILLed (signal while frozen, then thaw)
    c.pause("n1")
    assert "SIGKILL n1 (paused container" in c.kill("n1")
    assert c.container_status("n1") == "running" and c.is_running("n1") is False
    c.restart("n1")
    _until(lambda: len(_partition(admin).isr) == 3, what="full ISR after restarts")
    assert prod.send("hw", 0, [b"12"]).offsets == [2]
    prod.close()

    c.stop_all()
    assert [line.split(":")[0] for line in c.last_stop_report if line.endswith("stopped by SIGTERM")] == \
        ["n1", "n2", "n3", "c0"], c.last_stop_report
    run_dir = tmp_path / "run"
    c.collect(run_dir)
    for node in ("c0", "n1", "n2", "n3"):
        assert (run_dir / "nodes" / node / "broker.log").stat().st_size > 0
        assert "READY" in (run_dir / "nodes" / node / "stdout.log").read_text()
    assert (run_dir / "nodes" / "n3" / "stdout.prev.log").read_text().count("READY") == 2   # before 2 crashes
    assert json.loads((run_dir / "nodes" / "n1" / "broker.json").read_text())["controller_host"] == c.controller().host
    for node in ("n1", "n2", "n3"):
        lines = (run_dir / "replicas" / node / "p0.jsonl").read_text().splitlines()
        header, records = json.loads(lines[0]), [json.loads(x) for x in lines[1:]]
        assert (header["kind"], header["node"], header["leo"]) == ("meta", node, 3)
        assert [(r["offset"], r["value"]) for r in records] == [(0, 10), (1, 11), (2, 12)]
