"""Degradation on the Docker backend (clusters/ssh_control.RemoteDegradation): in the receiving container, its
mangle chain and a delayer daemon; delay measured with real TCP handshakes between containers, then restore."""
from __future__ import annotations

import secrets
import subprocess

import pytest

from clusters.base import ClusterSpec
from clusters.docker_hosts import LABEL_RUN

pytestmark = pytest.mark.docker


def _connect_ms(c, src: str, dst: str, n: int = 7) -> float:
    """Median time (ms) of a TCP connect from inside src's container to dst's server port."""
    a = c.brokers()[dst] if dst != "c0" else c.controller()
    code = ("import socket, statistics, time\n"
            "ts = []\n"
            f"for _ in range({n}):\n"
            "    t = time.monotonic()\n"
            f"    socket.create_connection(('{a.host}', {a.port}), 5.0).close()\n"
            "    ts.append((time.monotonic() - t) * 1000)\n"
            "print(statistics.median(ts))\n")
    return float(c.ssh(src).run("python3 -", timeout_s=60, stdin=code.encode()).stdout.strip())


@pytest.fixture
def cluster(tmp_path):
    from clusters.docker import DockerCluster
    run_id = f"dkn-{tmp_path.name[-30:]}-{secrets.token_hex(3)}"
    c = DockerCluster(ClusterSpec(run_id, tmp_path / "run", brokers=2))
    c.start()
    yield c
    c.teardown()
    r = subprocess.run(["docker", "container", "ls", "-a", "-q", "--filter", f"label={LABEL_RUN}={run_id}"],
                       capture_output=True, text=True, check=True)
    assert r.stdout.split() == []


def test_degrade_delays_one_link_between_containers_and_restore_removes_it(cluster):
    c = cluster
    assert _connect_ms(c, "n1", "n2") < 20
    assert c.degrade([("n1", "n2")], delay_ms=80, jitter_ms=0) == "degrading n1->n2: 80ms+-0ms loss 0%"
    deg = c._degradations["n2"]
    ((queue, pidfile),) = deg.delayers.values()
    n1 = c.brokers()["n1"].host
    assert c.degrade_rules("n2") == [f"-A {deg.chain} -s {n1}/32 -j NFQUEUE --queue-num {queue} --queue-bypass"]
    assert c.ssh("n2").pid_of(pidfile) is not None
    assert 78 <= _connect_ms(c, "n1", "n2") < 200       # the SYN n1 -> n2 waits; the SYN-ACK does not
    assert _connect_ms(c, "c0", "n2") < 20              # another source into n2: not degraded
    # from n2 to n1 the SYN is prompt and the SYN-ACK (n1 -> n2) waits once; c0 <-> n1 is not touched
    assert 78 <= _connect_ms(c, "n2", "n1") < 200
    assert _connect_ms(c, "n1", "c0") < 20
    assert c.restore([("n1", "n2")]) == "restored n1->n2"
    assert c.degrade_rules("n2") == [] and deg.delayers == {}
    assert c.ssh("n2").pid_of(pidfile) is None          # its delayer had no link left: stopped
    assert _connect_ms(c, "n1", "n2") < 20
    # loss and a restore of everything
    c.degrade([("c0", "n1")], delay_ms=0, loss_pct=20)
    assert len(c.degrade_rules("n1")) == 2
    assert c.restore() == "restored (all degradation removed)"
    assert c.degrade_rules("n1") == []


@pytest.mark.slow
def test_degradation_comes_back_after_a_container_crash(cluster):
    c = cluster
    c.degrade([("n1", "n2")], delay_ms=80)
    c.crash("n2")                                       # docker kill: its rules and delayer die with it
    c.degrade([("c0", "n2")], delay_ms=60)              # into the crashed node: remembered
    c.restart("n2")                                     # docker start: both links installed again
    deg = c._degradations["n2"]
    queues = {k: q for k, (q, _) in deg.delayers.items()}
    hosts = {n: (c.controller() if n == "c0" else c.brokers()[n]).host for n in ("c0", "n1")}
    assert sorted(c.degrade_rules("n2")) == sorted(
        f"-A {deg.chain} -s {hosts[n]}/32 -j NFQUEUE --queue-num {queues[(ms, 0.0)]} --queue-bypass"
        for n, ms in (("n1", 80.0), ("c0", 60.0)))
    assert 78 <= _connect_ms(c, "n1", "n2") < 200
    c.crash("n2")
    assert c.restore([("n1", "n2")]) == "restored n1->n2"      # into the crashed node: forgotten
    c.restart("n2")
    assert c.degrade_rules("n2") == [
        f"-A {c._degradations['n2'].chain} -s {hosts['c0']}/32 -j NFQUEUE "
        f"--queue-num {next(iter(c._degradations['n2'].delayers.values()))[0]} --queue-bypass"]
    assert _connect_ms(c, "n1", "n2") < 20
