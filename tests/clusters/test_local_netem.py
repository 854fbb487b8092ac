"""Degradation of the local backend (clusters/local_netem.py): real iptables rules, a real delayer bound to a
netfilter queue, real packets timed and counted on loopback; restore, teardown and `highwater cleanup`."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import echo_server
from clusters import local_netem
from clusters.base import ClusterError, ClusterSpec, Degradable, require
from clusters.local import LocalCluster
from clusters.local_firewall import short_id
from clusters.run_registry import Registry, proc_state

REPO = Path(__file__).resolve().parents[2]

# held packets are timed and counted here: no test may delete an nft base chain meanwhile (tests/conftest.py)
pytestmark = pytest.mark.nfqueue


def _lo_state() -> tuple[str, str, str]:
    """What must be the same before and after: lo's qdiscs and filters, and the mangle table's rules."""
    run = lambda *a: subprocess.run(a, capture_output=True, text=True).stdout   # noqa: E731
    mangle = "\n".join(x for x in run("iptables", "-w", "-t", "mangle", "-S").splitlines() if "HWN-" not in x)
    return run("tc", "qdisc", "show", "dev", "lo"), run("tc", "filter", "show", "dev", "lo"), mangle


def _mangle() -> str:
    return subprocess.run(["iptables", "-w", "-t", "mangle", "-S"], capture_output=True, text=True).stdout


def _one_way_ms(src: str, dst: str, n: int = 25, timeout: float = 1.0) -> tuple[float, int]:
    """Median one-way time (ms) of n datagrams src -> dst, and how many never arrived."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind((dst, 0))
        rx.settimeout(timeout)
        tx.bind((src, 0))
        times, lost = [], 0
        for i in range(n):
            t0 = time.monotonic()
            tx.sendto(str(i).encode(), rx.getsockname())
            try:
                while rx.recv(16) != str(i).encode():
                    pass
                times.append((time.monotonic() - t0) * 1000)
            except socket.timeout:
                lost += 1
        return (statistics.median(times) if times else float("inf")), lost


def _loss(src: str, dst: str, n: int) -> int:
    """Send n datagrams src -> dst in a burst; how many did not arrive within 1 s of the last."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        rx.bind((dst, 0))
        rx.settimeout(1.0)
        tx.bind((src, 0))
        for i in range(n):
            tx.sendto(b"%d" % i, rx.getsockname())
            if i % 50 == 49:
                time.sleep(0.002)
        got = set()
        try:
            while len(got) < n:
                got.add(rx.recv(16))
        except socket.timeout:
            pass
        return n - len(got)


@pytest.fixture
def cluster(request, tmp_path):
    before = _lo_state()
    spec = ClusterSpec(f"netem-{request.node.name}-{os.getpid()}", tmp_path / "run", brokers=3)
    c = LocalCluster(spec, registry=Registry(tmp_path / "registry"), command=echo_server.command)
    c.check_faults(["degrade"])
    c.start()
    yield c
    c.teardown()
    assert f"HWN-{short_id(spec.run_id)}" not in _mangle()
    assert _lo_state() == before


def _hosts(c) -> dict[str, str]:
    return {"c0": c.controller().host, **{n: a.host for n, a in c.brokers().items()}}


@pytest.mark.root
def test_delay_applies_to_the_degraded_link_only(cluster):
    h = _hosts(cluster)
    base, _ = _one_way_ms(h["n1"], h["n2"])
    assert base < 5
    assert require(cluster, Degradable, "degrade") is cluster
    assert cluster.degrade([("n1", "n2")], delay_ms=60) == "degrading n1->n2: 60ms+-0ms loss 0%"
    delayed, lost = _one_way_ms(h["n1"], h["n2"])
    assert 58 <= delayed < 80 and lost == 0, delayed
    assert _one_way_ms(h["n2"], h["n1"])[0] < 5          # one-way: the reverse link is not delayed
    assert _one_way_ms(h["n3"], h["n2"])[0] < 5          # another pair of the run is unaffected
    assert _one_way_ms("127.0.0.1", "127.0.0.1")[0] < 5  # so is other loopback traffic
    # TCP over the degraded link: the handshake's SYN waits once (n1 -> n2), the SYN-ACK does not
    t0 = time.monotonic()
    s = socket.socket()
    s.bind((h["n1"], 0))
    s.connect((h["n2"], cluster.brokers()["n2"].port))
    s.close()
    assert 55 <= (time.monotonic() - t0) * 1000 < 150
    # a new setting replaces the old one on that link; jitter spreads the delay around it
    cluster.degrade([("n1", "n2")], delay_ms=30, jitter_ms=10)
    med, _ = _one_way_ms(h["n1"], h["n2"], n=40)
    assert 22 <= med < 45, med
    assert len(cluster.degradation().rules()) == 1 and len(cluster.degradation().delayers) == 1
    assert cluster.restore() == "restored (all degradation removed)"
    assert cluster.degradation().rules() == [] and cluster.degradation().delayers == {}
    assert _one_way_ms(h["n1"], h["n2"])[0] < 5


@pytest.mark.root
def test_loss_drops_about_that_share_and_partial_restore_keeps_the_rest(cluster):
    h = _hosts(cluster)
    d = cluster.degradation
    cluster.degrade([("n1", "n2"), ("n3", "n2")], delay_ms=0, loss_pct=30)
    lost = _loss(h["n1"], h["n2"], 1000)
    assert 230 <= lost <= 370, lost                      # 30 % of 1000, +- 5 standard deviations
    chain = f"HWN-{short_id(cluster.spec.run_id)}"
    queue = next(iter(d().delayers.values())).queue
    assert d().rules() == [
        f"-A {chain} -s {h[s]}/32 -d {h['n2']}/32 {what}"
        for s in ("n1", "n3")
        for what in ("-m statistic --mode random --probability 0.29999999981 -j DROP",
                     f"-j NFQUEUE --queue-num {queue} --queue-bypass")]
    assert cluster.restore([("n1", "n2")]) == "restored n1->n2"
    assert _loss(h["n1"], h["n2"], 300) == 0
    assert 30 <= _loss(h["n3"], h["n2"], 500) <= 270
    assert [r.split(" -d ")[0] for r in d().rules()] == [f"-A {chain} -s {h['n3']}/32"] * 2


@pytest.mark.root
def test_delayers_are_registered_and_gone_after_restore_and_teardown(cluster):
    cluster.degrade([("n1", "n2")], delay_ms=5)
    cluster.degrade([("n2", "n1")], delay_ms=7, jitter_ms=1)
    delayers = list(cluster.degradation().delayers.values())
    assert len(delayers) == 2 and len({x.queue for x in delayers}) == 2
    recorded = {p.node: p.pid for p in cluster.registry.get(cluster.spec.run_id).processes}
    assert {f"delay-{x.queue}": x.proc.pid for x in delayers}.items() <= recorded.items()
    cluster.restore([("n1", "n2")])                   # its delayer has no link left: stopped
    assert proc_state(delayers[0].proc.pid) is None
    assert proc_state(delayers[1].proc.pid) not in (None, "Z")
    assert f"delay-{delayers[0].queue}" not in {p.node for p in cluster.registry.get(cluster.spec.run_id).processes}
    cluster.teardown()
    assert proc_state(delayers[1].proc.pid) is None


def test_degrade_preflight_and_bad_values(monkeypatch, tmp_path):
    c = LocalCluster(ClusterSpec("pre", tmp_path, brokers=1), registry=Registry(tmp_path / "r"))
    monkeypatch.setattr(local_netem.os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match=r"^the degrade fault needs root to install its iptables rules and "
                                           r"bind a netfilter queue \(running as uid 1000\)$"):
        c.check_faults(["degrade"])
    c.check_faults(["partition-random"] if os.geteuid() == 0 else ["kill"])
    with pytest.raises(ClusterError, match=r"^degrade: delay_ms and jitter_ms must be >= 0 and loss_pct in "
                                           r"0..100, got delay_ms=-1, jitter_ms=0, loss_pct=0$"):
        local_netem.Degradation("x").degrade([], delay_ms=-1, jitter_ms=0, loss_pct=0)


OWNER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    import echo_server
    from pathlib import Path
    from clusters.base import ClusterSpec
    from clusters.local import LocalCluster
    from clusters.run_registry import Registry
    c = LocalCluster(ClusterSpec({run_id!r}, Path({run_dir!r}), brokers=2), registry=Registry({reg!r}),
                     command=echo_server.command)
    c.start()
    c.degrade([("n1", "n2")], delay_ms=20, loss_pct=5)
    print("UP", " ".join(str(d.proc.pid) for d in c.degradation().delayers.values()), flush=True)
    time.sleep(300)
""")


@pytest.mark.root
@pytest.mark.leftovers
def test_cleanup_removes_the_chain_and_delayer_of_a_sigkilled_owner(tmp_path):
    before = _lo_state()
    run_id = f"netem-leftover-{os.getpid()}-{time.monotonic_ns() % 100000}"
    chain = f"HWN-{short_id(run_id)}"
    script = OWNER.format(tests=str(Path(echo_server.__file__).parent), run_id=run_id,
                          run_dir=str(tmp_path / "run"), reg=str(tmp_path / "registry"))
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    line = owner.stdout.readline()
    assert line.startswith("UP "), line
    (delayer,) = [int(x) for x in line.split()[1:]]
    try:
        # alive: another registry's cleanup leaves the chain (its jump names a live owner)
        r = subprocess.run([sys.executable, "-m", "harness.cli", "cleanup", "--no-docker", "--keep-spark",
                            "--registry", str(tmp_path / "other")], capture_output=True, text=True, cwd=REPO,
                           timeout=120)
        assert chain not in r.stdout and chain in _mangle()
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert proc_state(delayer) not in (None, "Z") and chain in _mangle()
        r = subprocess.run([sys.executable, "-m", "harness.cli", "cleanup", "--no-docker", "--keep-spark",
                            "--registry", str(tmp_path / "registry")], capture_output=True, text=True, cwd=REPO,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert f"removed iptables chain {chain} (table mangle)" in lines, r.stdout
        assert any(x.startswith("process delay-") and f" pid {delayer} (run {run_id}): " in x for x in lines), r.stdout
        assert proc_state(delayer) in (None, "Z")          # gone (a zombie until its new parent reaps it)
        assert chain not in _mangle() and f"highwater:{run_id}" not in _mangle()
        assert _lo_state() == before
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        from clusters.leftovers import clean
        clean(Registry(tmp_path / "registry"))


@pytest.mark.root
def test_the_nemesis_degrade_fault_delays_a_node_s_links_and_restores_them(cluster, tmp_path):
    import json

    from nemesis import FaultPlan, Nemesis
    from rundir.history import History
    (tmp_path / "schedule.toml").write_text('[[step]]\nat = 0.1\nfault = "degrade"\ntargets = ["n1"]\n'
                                            'duration = 2.5\ndelay_ms = 40\njitter_ms = 0\nloss_pct = 0\n')
    h = History(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, h, FaultPlan(seed=1, schedule=tmp_path / "schedule.toml"))
    hosts = _hosts(cluster)
    nem.start()
    try:
        deadline = time.monotonic() + 5
        while not nem.active() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert nem.active() == ["degrade n1"]
        assert 38 <= _one_way_ms(hosts["n2"], hosts["n1"], n=10)[0] < 60     # into n1
        assert 38 <= _one_way_ms(hosts["n1"], hosts["c0"], n=10)[0] < 60     # out of n1
        assert _one_way_ms(hosts["n2"], hosts["n3"], n=10)[0] < 5            # not about n1
    finally:
        nem.stop()
        h.close()
    assert cluster.degradation().rules() == [] and cluster.degradation().delayers == {}
    ops = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [(o["type"], o["f"], o["value"]["phase"]) for o in ops] == [
        ("invoke", "degrade", "start"), ("info", "degrade", "start"),
        ("invoke", "restore", "stop"), ("info", "restore", "stop")]
    v = ops[1]["value"]
    assert (v["fault"], v["name"], v["targets"], v["delay_ms"], v["jitter_ms"], v["loss_pct"]) == \
        ("degrade", "degrade", ["n1"], 40.0, 0.0, 0.0)
    assert sorted(map(tuple, v["links"])) == sorted([("n1", x) for x in ("c0", "n2", "n3")] +
                                                   [(x, "n1") for x in ("c0", "n2", "n3")])
    assert v["detail"].startswith("degrading n1->c0, n1->n2, n1->n3, c0->n1, n2->n1, n3->n1: 40ms+-0ms loss 0%")
    assert ops[3]["value"]["detail"] == "restored n1->c0, n1->n2, n1->n3, c0->n1, n2->n1, n3->n1"
    assert ops[3].get("error") is None


@pytest.mark.root
def test_a_delayer_dying_inside_a_nemesis_window_is_that_window_s_error(cluster, tmp_path):
    import json

    from nemesis import FaultPlan, Nemesis
    from rundir.history import History
    (tmp_path / "schedule.toml").write_text('[[step]]\nat = 0.1\nfault = "degrade"\ntargets = ["n1"]\n'
                                            'duration = 1.0\ndelay_ms = 40\njitter_ms = 0\nloss_pct = 0\n')
    h = History(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, h, FaultPlan(seed=1, schedule=tmp_path / "schedule.toml"))
    hosts = _hosts(cluster)
    nem.start()
    try:
        deadline = time.monotonic() + 5
        while not nem.active() and time.monotonic() < deadline:
            time.sleep(0.02)
        ((d,),) = [list(cluster.degradation().delayers.values())]
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(5)
        assert _one_way_ms(hosts["n2"], hosts["n1"], n=5)[0] < 5     # queue bypass: undelayed, not cut
        deadline = time.monotonic() + 5
        while nem.active() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        nem.stop()
        h.close()
    assert cluster.degradation().rules() == [] and cluster.degradation().delayers == {}
    ops = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [(o["type"], o["f"], o["value"]["phase"]) for o in ops][2:] == [("invoke", "restore", "stop"),
                                                                          ("info", "restore", "stop")]
    links = ", ".join(f"{hosts[s]}->{hosts[t]}" for s, t in sorted(
        [("n1", x) for x in ("c0", "n2", "n3")] + [(x, "n1") for x in ("c0", "n2", "n3")],
        key=lambda p: (hosts[p[0]], hosts[p[1]])))
    assert ops[3]["error"] == (f"degrade: the delayer of queue {d.queue} (40ms+-0ms) exited with code -9: "
                               f"{links} passed undelayed")
    assert nem.stats.errors == [ops[3]["error"]]


@pytest.mark.root
def test_two_runs_degrade_at_once_without_touching_each_other(cluster, tmp_path):
    other = LocalCluster(ClusterSpec(f"netem-other-{os.getpid()}", tmp_path / "run2", brokers=1),
                         registry=Registry(tmp_path / "registry2"), command=echo_server.command)
    other.start()
    try:
        h, o = _hosts(cluster), _hosts(other)
        cluster.degrade([("n1", "n2")], delay_ms=40)
        other.degrade([("n1", "c0")], delay_ms=40)    # the same setting: still its own chain, queue, delayer
        mine, theirs = cluster.degradation(), other.degradation()
        assert mine.chain != theirs.chain
        assert next(iter(mine.delayers.values())).queue != next(iter(theirs.delayers.values())).queue
        assert 38 <= _one_way_ms(h["n1"], h["n2"], n=8)[0] < 60
        assert 38 <= _one_way_ms(o["n1"], o["c0"], n=8)[0] < 60
        other.teardown()                               # removes only its own jump, chain and delayer
        assert theirs.chain not in _mangle() and mine.chain in _mangle()
        assert 38 <= _one_way_ms(h["n1"], h["n2"], n=8)[0] < 60
        assert _one_way_ms(o["n1"], o["c0"], n=8)[0] < 5
    finally:
        other.teardown()


@pytest.mark.root
@pytest.mark.nfqueue(flushes=True)
@pytest.mark.skipif(not shutil.which("nft"), reason="needs nft")
def test_a_base_chain_deleted_anywhere_drops_the_packets_a_delayer_holds(cluster):
    """The kernel fact behind the `nfqueue` test lock and the caveat in clusters/local_netem.py: unregistering
    any netfilter hook of the namespace (here another program's nft table with a base chain) flushes every
    netfilter queue, so a packet being delayed is lost; an iptables user chain added and removed is not."""
    h = _hosts(cluster)
    cluster.degrade([("n1", "n2")], delay_ms=1500)

    def held_packet_survives(meanwhile: list[str]) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            rx.bind((h["n2"], 0))
            rx.settimeout(3.0)
            tx.bind((h["n1"], 0))
            tx.sendto(b"held", rx.getsockname())
            time.sleep(0.3)                            # it is in the delayer's queue now
            subprocess.run(["sh", "-c", "; ".join(meanwhile)], check=True, capture_output=True)
            try:
                return rx.recv(16) == b"held"
            except socket.timeout:
                return False

    table = f"hwtest_flush_{os.getpid()}"
    chain = f"HWTEST-{os.getpid()}"
    assert held_packet_survives([f"iptables -w -N {chain}", f"iptables -w -X {chain}"])
    assert not held_packet_survives([
        f"nft add table inet {table}",
        f"nft add chain inet {table} c '{{ type filter hook input priority 0 ; }}'",
        f"nft delete table inet {table}"])
    assert held_packet_survives([])                    # the delayer itself is fine: the next packet waits
