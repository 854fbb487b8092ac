"""Degradation on the Docker backend across a container crash (clusters/docker.py): links degraded into a
node are installed again when its container starts, and degrade/restore of links into a crashed node are
remembered/forgotten as drops and heals are. Unit test: the engine and the nodes' RemoteDegradation are
stand-ins that record what they are asked; the real counterpart is
test_docker_netem.py::test_degradation_comes_back_after_a_container_crash."""
from __future__ import annotations

import pytest

from clusters import ssh_cluster
from clusters.base import ClusterSpec, NodeAddress
from clusters.docker import DockerCluster


class Hosts:
    def __init__(self):
        self.state = {n: "running" for n in ("c0", "n1", "n2")}
        self.containers = dict.fromkeys(self.state)

    def status(self, node):
        return self.state[node]

    def start(self, node):
        self.state[node] = "running"


class Ssh:
    def close(self):
        pass

    connect = close


class Deg:
    """Stands in for ssh_control.RemoteDegradation on one node: records its degrade/restore calls."""
    made: list = []

    def __init__(self, ssh, run_id, rdir, python):
        self.links, self.delayers, self.installed, self.calls = {}, {}, False, []
        Deg.made.append(self)

    def degrade(self, sources, delay_ms, jitter_ms, loss_pct, seed):
        self.installed = True
        self.calls.append(("degrade", sorted(sources), delay_ms, jitter_ms, loss_pct))
        self.delayers[(delay_ms, jitter_ms)] = (1, "pid")
        for s in sources:
            self.links[s] = (float(delay_ms), float(jitter_ms), float(loss_pct), 1)    # queue 1, as the real one

    def restore(self, sources=None):
        self.calls.append(("restore", sources))
        for s in (list(self.links) if sources is None else sources):
            self.links.pop(s, None)


@pytest.fixture
def c(tmp_path, monkeypatch):
    monkeypatch.setattr(ssh_cluster, "RemoteDegradation", Deg)
    Deg.made = []
    c = DockerCluster(ClusterSpec("dkdown", tmp_path, brokers=2), client=object())
    c.hosts = Hosts()
    c._addresses = {n: NodeAddress(n, f"10.9.0.{i + 2}", 9092) for i, n in enumerate(("c0", "n1", "n2"))}
    c._ssh = {n: Ssh() for n in c._addresses}
    return c


def test_degraded_links_come_back_when_a_crashed_container_starts(c):
    c.degrade([("n1", "n2"), ("c0", "n2")], delay_ms=50, jitter_ms=5)
    c.degrade([("n1", "n2")], delay_ms=80)          # n1->n2 takes a new setting
    c.hosts.state["n2"] = "exited"                  # docker kill: rules and delayers gone
    c.degrade([("n1", "n2")], delay_ms=30, loss_pct=10)   # while down: remembered, nothing run on n2
    assert c.degrade([("c0", "n1")], delay_ms=20) == "degrading c0->n1: 20ms+-0ms loss 0%"
    old = c._degradations["n2"]
    assert len(old.calls) == 2 and old.installed is False and old.delayers == {}
    c._reachable("n2")                              # restart: docker start, then the remembered links
    new = c._degradations["n2"]
    assert new is not old
    assert sorted(new.calls) == [("degrade", ["10.9.0.2"], 50.0, 5.0, 0.0), ("degrade", ["10.9.0.3"], 30.0, 0.0, 10.0)]
    assert new.links == {"10.9.0.2": (50.0, 5.0, 0.0, 1), "10.9.0.3": (30.0, 0.0, 10.0, 1)}


def test_restore_of_links_into_a_crashed_node_forgets_them(c):
    c.degrade([("n1", "n2"), ("c0", "n2"), ("n2", "n1")], delay_ms=50)
    c.hosts.state["n2"] = "exited"
    assert c.restore([("n1", "n2")]) == "restored n1->n2"     # only forgotten: nothing to run on n2
    assert c._degradations["n2"].calls == [("degrade", ["10.9.0.2", "10.9.0.3"], 50, 0.0, 0.0)]
    c._reachable("n2")
    assert c._degradations["n2"].links == {"10.9.0.2": (50.0, 0.0, 0.0, 1)}    # c0->n2 only
    c.hosts.state["n2"] = "exited"
    assert c.restore() == "restored (all degradation removed)"    # n1 restored for real; n2 forgotten
    assert c._degradations["n1"].calls[-1] == ("restore", None)
    c._reachable("n2")
    assert "n2" not in c._degradations            # nothing to install again
