"""Partitions of the local backend: packets really dropped by the kernel (iptables and nft), heal, teardown."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
import socket
import subprocess

import pytest

import echo_server
from clusters import local_firewall
from clusters.base import ClusterError, ClusterSpec
from clusters.local import LocalCluster
from clusters.run_registry import Registry, this_process_identity

# deleting the nft backend's table unregisters its base chain, and the kernel then drops every packet held
# in a netfilter queue: such tests must not overlap a delay test (tests/conftest.py, marker nfqueue)
TOOLS = [pytest.param(t, marks=pytest.mark.nfqueue(flushes=True)) if t == "nft" else t
         for t in ("iptables", "nft") if shutil.which(t)]


def _tcp_connects(src: str, dst: str, port: int, timeout: float = 0.7) -> bool:
    """Connect from the source address `src` (bound) to dst:port; False if the handshake times out."""
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect((dst, port))
        return True
    except socket.timeout:
        return False
    finally:
        s.close()


def _udp_delivered(src: str, dst: str, timeout: float = 0.5) -> bool:
    """Send one datagram from src to dst; True if it arrives (UDP shows one-way drops exactly)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind((dst, 0))
        rx.settimeout(timeout)
        tx.bind((src, 0))
        tx.sendto(b"hello", rx.getsockname())
        try:
            return rx.recv(10) == b"hello"
        except socket.timeout:
            return False


def _ruleset() -> str:
    out = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout if shutil.which("iptables-save") else ""
    if shutil.which("nft"):
        out += subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return out


def _foreign_rules() -> list[str]:
    """iptables rules not made by highwater (and not counters), to prove we never touch them."""
    out = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True).stdout.splitlines()
    return sorted(line for line in out if "HW-" not in line and "highwater" not in line)


@pytest.fixture(params=TOOLS)
def cluster(request, tmp_path):
    spec = ClusterSpec(f"fw-test-{request.param}-{os.getpid()}", tmp_path / "run", brokers=3)
    c = LocalCluster(spec, registry=Registry(tmp_path / "registry"), command=echo_server.command,
                     firewall_tool=request.param)
    c.check_faults(["partition"])
    c.start()
    yield c
    c.teardown()
    short = local_firewall.short_id(spec.run_id)
    assert short not in _ruleset()


@pytest.mark.root
def test_partition_really_drops_packets_and_heal_restores_them(cluster):
    n1, n2, n3 = (cluster.brokers()[n] for n in ("n1", "n2", "n3"))
    assert _tcp_connects(n1.host, n2.host, n2.port)
    assert cluster.drop([("n1", "n2"), ("n2", "n1")]) == "dropping n1->n2, n2->n1"
    assert not _tcp_connects(n1.host, n2.host, n2.port)
    assert not _tcp_connects(n2.host, n1.host, n1.port)
    # only the named pair is cut
    assert _tcp_connects(n1.host, n3.host, n3.port)
    assert _tcp_connects(n3.host, n2.host, n2.port)
    # clients on 127.0.0.1 are not partitioned
    assert _tcp_connects("127.0.0.1", n2.host, n2.port)
    assert cluster.heal() == "healed (all drop rules removed)"
    assert _tcp_connects(n1.host, n2.host, n2.port)
    assert _tcp_connects(n2.host, n1.host, n1.port)


@pytest.mark.root
def test_one_way_drop_blocks_only_that_direction(cluster):
    n1, n2 = cluster.brokers()["n1"], cluster.brokers()["n2"]
    cluster.drop([("n1", "n2")])
    assert _udp_delivered(n1.host, n2.host) is False
    assert _udp_delivered(n2.host, n1.host) is True
    fw = cluster.firewall()
    if fw.describe()["kind"] == "iptables":
        assert fw.rules() == [f"-A {fw.chain} -s {n1.host}/32 -d {n2.host}/32 -j DROP"]
    else:
        assert fw.rules() == [f"ip saddr {n1.host} ip daddr {n2.host} drop"]
    cluster.heal()
    assert fw.rules() == []
    assert _udp_delivered(n1.host, n2.host) is True


@pytest.mark.root
def test_firewall_objects_are_named_for_the_run_and_registered_then_removed(cluster):
    before = _foreign_rules()
    cluster.drop([("c0", "n3")])
    fw = cluster.firewall()
    entry = cluster.registry.get(cluster.spec.run_id)
    assert entry.firewall == fw.describe()
    text = _ruleset()
    if entry.firewall["kind"] == "iptables":
        chain = f"HW-{local_firewall.short_id(cluster.spec.run_id)}"
        assert entry.firewall["chain"] == chain
        assert "-A OUTPUT" not in [ln[:9] for ln in text.splitlines() if chain in ln]
        pid, start = this_process_identity()  # the jump's comment names the owner: cleanup skips it while alive
        assert (f'-A INPUT -m comment --comment "highwater:{cluster.spec.run_id} owner={pid}:{start}" '
                f'-j {chain}') in text
    else:
        assert f"table inet highwater_{local_firewall.short_id(cluster.spec.run_id)}" in text
    cluster.teardown()
    assert local_firewall.short_id(cluster.spec.run_id) not in _ruleset()
    assert "highwater:" + cluster.spec.run_id not in _ruleset()
    assert _foreign_rules() == before


def test_partition_preflight_names_what_is_missing(monkeypatch, tmp_path):
    c = LocalCluster(ClusterSpec("pre", tmp_path, brokers=1), registry=Registry(tmp_path / "r"))
    c.check_faults(["kill", "pause"])  # no partition: nothing needed
    monkeypatch.setattr(local_firewall.os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match=r"^the partition fault needs root to install packet-drop "
                                                  r"rules \(running as uid 1000\)$"):
        c.check_faults(["partition"])
    monkeypatch.setattr(local_firewall.os, "geteuid", lambda: 0)
    monkeypatch.setattr(local_firewall.shutil, "which", lambda name: None)
    with pytest.raises(ClusterError, match=r"^the partition fault needs iptables or nft on PATH; "
                                                  r"neither was found"):
        c.check_faults(["partition"])
    monkeypatch.setattr(local_firewall.shutil, "which", lambda name: "/usr/sbin/nft" if name == "nft" else None)
    c.check_faults(["partition"])
    assert c.firewall_tool == "nft"


def test_cleanup_refuses_to_touch_a_chain_that_is_not_highwaters():
    with pytest.raises(ValueError, match="refusing to touch non-highwater chain 'DOCKER'"):
        local_firewall.remove_iptables_chain("DOCKER")
    with pytest.raises(ValueError, match="refusing to touch non-highwater table 'filter'"):
        local_firewall.remove_object({"kind": "nft", "family": "ip", "table": "filter"})


@pytest.mark.root
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux) to drop to uid nobody")
def test_partition_preflight_as_a_real_unprivileged_user(tmp_path):
    """The same check as above, for real: a process running as uid 65534 asks for a partition fault."""
    code = ("import sys\n"
            "from pathlib import Path\n"
            "from clusters.base import ClusterSpec, ClusterError\n"
            "from clusters.local import LocalCluster\n"
            "from clusters.run_registry import Registry\n"
            "c = LocalCluster(ClusterSpec('nobody', Path('/tmp'), brokers=1), registry=Registry('/tmp/hw-nobody-reg'))\n"
            "try:\n"
            "    c.check_faults(['partition-isolate'])\n"
            "except ClusterError as e:\n"
            "    print(e); sys.exit(3)\n")
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
                       capture_output=True, text=True, cwd=repo, env={"PYTHONPATH": str(repo), "PATH": "/usr/sbin:/usr/bin:/bin"},
                       timeout=60)
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == "the partition fault needs root to install packet-drop rules (running as uid 65534)"


@pytest.mark.root
def test_partial_heal_removes_exactly_the_named_one_way_drops(cluster):
    b = cluster.brokers()
    hosts = {"c0": cluster.controller().host, **{n: a.host for n, a in b.items()}}
    dropped = [("n1", "n2"), ("n2", "n1"), ("n1", "n3"), ("n3", "c0")]
    cluster.drop(dropped)
    cluster.drop([("n1", "n2")])            # the same pair twice: a partial heal removes both copies
    assert cluster.heal([("n1", "n2"), ("n3", "c0"), ("c0", "n1")]) == "healed n1->n2, n3->c0, c0->n1"
    remaining = {("n2", "n1"), ("n1", "n3")}
    fw = cluster.firewall()
    if fw.describe()["kind"] == "iptables":
        assert sorted(fw.rules()) == sorted(f"-A {fw.chain} -s {hosts[s]}/32 -d {hosts[d]}/32 -j DROP"
                                            for s, d in remaining)
    else:
        assert sorted(fw.rules()) == sorted(f"ip saddr {hosts[s]} ip daddr {hosts[d]} drop" for s, d in remaining)
    # real packets: every ordered pair of nodes drops exactly when it remains dropped
    for s in hosts:
        for d in hosts:
            if s != d:
                assert _udp_delivered(hosts[s], hosts[d]) is ((s, d) not in remaining), (s, d)
    assert cluster.heal([]) == "nothing to heal"
    assert cluster.heal() == "healed (all drop rules removed)"
    assert fw.rules() == []
    assert _udp_delivered(hosts["n2"], hosts["n1"]) and _udp_delivered(hosts["n1"], hosts["n3"])


def test_partial_heal_before_any_drop_and_of_unknown_nodes(tmp_path):
    c = LocalCluster(ClusterSpec("ph", tmp_path / "run", brokers=1), registry=Registry(tmp_path / "r"),
                     command=echo_server.command)
    with pytest.raises(ClusterError, match="no addresses yet"):
        c.heal([("n1", "c0")])
    c.start()
    try:
        assert c.heal([("n1", "c0")]) == "healed n1->c0"   # nothing installed: nothing to remove
        with pytest.raises(ClusterError, match=r"^unknown node 'n7' \(this cluster has c0, n1\)$"):
            c.heal([("n7", "c0")])
    finally:
        c.teardown()
