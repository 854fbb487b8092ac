"""clusters/local.py process control on real processes (a tiny TCP echo server standing in for the broker)."""
from __future__ import annotations

import json
import socket
import sys

import pytest

import echo_server
from clusters.base import ClusterError, ClusterSpec, NodeTimeouts
from clusters.local import LocalCluster
from clusters.run_registry import Registry, proc_state


@pytest.fixture
def registry(tmp_path):
    return Registry(tmp_path / "registry")


@pytest.fixture
def cluster(tmp_path, registry):
    spec = ClusterSpec("proc-test", tmp_path / "run", brokers=3,
                       broker_settings={"truncation": "hw"}, controller_settings={"topics": []})
    c = LocalCluster(spec, registry=registry, command=echo_server.command, timeouts=NodeTimeouts(stop_grace_s=5))
    c.start()
    pids = [c.pid(n) for n in c.nodes()]
    yield c
    c.teardown()
    for pid in pids:
        assert proc_state(pid) is None, f"pid {pid} survived teardown"


def _echo(addr, payload=b"ping\n"):
    with socket.create_connection((addr.host, addr.port), timeout=2) as s:
        s.sendall(payload)
        return s.recv(100)


def test_start_gives_each_node_its_own_loopback_address_config_and_registry_record(cluster, registry, tmp_path):
    c0, brokers = cluster.controller(), cluster.brokers()
    assert c0.name == "c0" and list(brokers) == ["n1", "n2", "n3"]
    prefix = c0.host.rsplit(".", 1)[0]
    assert [b.host for b in brokers.values()] == [f"{prefix}.2", f"{prefix}.3", f"{prefix}.4"]
    assert c0.host == f"{prefix}.1"
    assert len({c0.port, *(b.port for b in brokers.values())}) == 4
    for addr in [c0, *brokers.values()]:
        assert _echo(addr) == b"ping\n"
    cfg = json.loads((tmp_path / "run/nodes/n2/broker.json").read_text())
    assert cfg == {"node_id": 2, "host": brokers["n2"].host, "port": brokers["n2"].port,
                   "data_dir": str(tmp_path / "run/nodes/n2/data"), "log_file": str(tmp_path / "run/nodes/n2/broker.log"),
                   "controller_host": c0.host, "controller_port": c0.port, "truncation": "hw"}
    ccfg = json.loads((tmp_path / "run/nodes/c0/controller.json").read_text())
    assert ccfg["host"] == c0.host and ccfg["topics"] == []
    entry = registry.get("proc-test")
    assert entry.prefix == prefix
    assert sorted((p.node, p.pid) for p in entry.processes) == sorted((n, cluster.pid(n)) for n in cluster.nodes())
    assert "READY" in (tmp_path / "run/nodes/n1/stdout.log").read_text()


def test_kill_then_restart_changes_the_real_process(cluster, registry):
    old = cluster.pid("n2")
    detail = cluster.kill("n2")
    assert detail == f"SIGKILL n2 pid {old}"
    assert cluster.is_running("n2") is False
    assert proc_state(old) is None
    with pytest.raises(OSError):
        _echo(cluster.brokers()["n2"])
    assert old not in [p.pid for p in registry.get("proc-test").processes]
    detail = cluster.restart("n2")
    new = cluster.pid("n2")
    assert new != old and detail == f"restarted n2 as pid {new}"
    assert _echo(cluster.brokers()["n2"]) == b"ping\n"
    assert new in [p.pid for p in registry.get("proc-test").processes]
    assert cluster.restart("n2") == f"n2 already running (pid {new})"


def test_pause_stops_the_process_and_resume_continues_it(cluster):
    pid = cluster.pid("n1")
    assert cluster.pause("n1") == f"SIGSTOP n1 pid {pid}"
    assert proc_state(pid) == "T"
    assert cluster.process_state("n1") == "T"
    with pytest.raises(socket.timeout):
        # the kernel completes the handshake, but a stopped process never answers
        with socket.create_connection((cluster.brokers()["n1"].host, cluster.brokers()["n1"].port), timeout=1) as s:
            s.sendall(b"x\n")
            s.recv(10)
    assert cluster.resume("n1") == f"SIGCONT n1 pid {pid}"
    assert proc_state(pid) in ("S", "R")
    assert _echo(cluster.brokers()["n1"]) == b"ping\n"


def test_kill_of_a_paused_node_and_controller_restart(cluster):
    cluster.pause("n3")
    cluster.kill("n3")
    assert cluster.is_running("n3") is False
    cluster.kill("c0")
    cluster.restart("c0")
    assert _echo(cluster.controller()) == b"ping\n"
    cluster.restart("n3")
    assert cluster.is_running("n3")


def test_signals_on_a_dead_node_and_unknown_names_are_clear_errors(cluster):
    cluster.kill("n1")
    with pytest.raises(ClusterError, match=r"^n1: not running, cannot send SIGSTOP$"):
        cluster.pause("n1")
    with pytest.raises(ClusterError, match=r"unknown node 'n9' \(this cluster has c0, n1, n2, n3\)"):
        cluster.kill("n9")


def test_stop_all_terminates_gracefully_even_paused_nodes(cluster, registry):
    pids = {n: cluster.pid(n) for n in cluster.nodes()}
    cluster.pause("n2")
    cluster.stop_all()
    assert all(proc_state(p) is None for p in pids.values())
    assert sorted(cluster.last_stop_report) == sorted(
        f"{n} pid {p} exited 0 after SIGTERM" for n, p in pids.items())
    assert registry.get("proc-test").processes == []


def test_stop_all_stops_a_paused_node_that_has_clients_connected(cluster, registry):
    """A node with connections open runs more threads than the one in accept(). The SIGTERM sent while it
    is paused waits in the process's queue, and after SIGCONT any thread may take it; the node must act on
    it anyway. Before the stand-in blocked SIGTERM in its serving threads, it hung here in 8 runs of 8 (the
    main thread stayed in accept() with the signal flagged) and was SIGKILLed after the grace period."""
    addr = cluster.brokers()["n1"]
    clients = [socket.create_connection((addr.host, addr.port)) for _ in range(16)]
    try:
        for c in clients:                       # each is served by its own thread by now
            c.sendall(b"ping\n")
            assert c.recv(16) == b"ping\n"
        pid = cluster.pid("n1")
        cluster.pause("n1")
        cluster.stop_all()
        assert f"n1 pid {pid} exited 0 after SIGTERM" in cluster.last_stop_report, cluster.last_stop_report
    finally:
        for c in clients:
            c.close()


def test_stop_all_sigkills_a_process_that_ignores_sigterm(tmp_path, registry):
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(
        "import signal, runpy, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"sys.argv = [{echo_server.__file__!r}] + sys.argv[1:]\n"
        "real = signal.signal\n"
        "signal.signal = lambda s, h: None  # keep SIGTERM ignored\n"
        f"runpy.run_path({echo_server.__file__!r}, run_name='__main__')\n")
    def cmd(node, role, cfg):
        if node == "n1":
            return [sys.executable, str(stubborn), role, "--config", str(cfg)]
        return echo_server.command(node, role, cfg)
    c = LocalCluster(ClusterSpec("stubborn", tmp_path / "run", brokers=1), registry=registry, command=cmd,
                     timeouts=NodeTimeouts(stop_grace_s=0.5))
    c.start()
    try:
        pid, c0 = c.pid("n1"), c.pid("c0")
        c.stop_all()
        assert c.last_stop_report == [f"n1 pid {pid} SIGKILLed after the grace period (stacks dumped to "
                                      f"{tmp_path / 'run/nodes/n1/stdout.log'})",
                                      f"c0 pid {c0} exited 0 after SIGTERM"]
        dump = (tmp_path / "run/nodes/n1/stdout.log").read_text()
        assert "Fatal Python error: Aborted" in dump and "in main" in dump
        assert proc_state(pid) is None
    finally:
        c.teardown()


def test_a_node_that_exits_at_start_fails_start_naming_the_node_and_its_output(tmp_path, registry):
    def cmd(node, role, cfg):
        if node == "n2":
            return [sys.executable, "-c", "import sys; print('boom: bad key port'); sys.exit(2)"]
        return echo_server.command(node, role, cfg)
    c = LocalCluster(ClusterSpec("dies", tmp_path / "run", brokers=3), registry=registry, command=cmd)
    with pytest.raises(ClusterError) as exc:
        c.start()
    msg = str(exc.value)
    assert msg.startswith("n2 exited with status 2 before it was ready")
    assert "boom: bad key port" in msg and str(tmp_path / "run/nodes/n2/stdout.log") in msg
    # start() failing tears everything down: no process, no registry entry
    assert registry.get("dies") is None
    assert all(not c.is_running(n) for n in c.nodes())


def test_a_node_that_never_prints_ready_times_out_with_a_clear_error(tmp_path, registry):
    def cmd(node, role, cfg):
        return [sys.executable, "-c", "import time; print('starting', flush=True); time.sleep(60)"]
    c = LocalCluster(ClusterSpec("silent", tmp_path / "run", brokers=1), registry=registry, command=cmd,
                     timeouts=NodeTimeouts(ready_s=1.0, stop_grace_s=1.0))
    with pytest.raises(ClusterError) as exc:
        c.start()
    msg = str(exc.value)
    assert msg.startswith("c0 was not ready within 1s: it printed no 'READY ")
    assert "    starting" in msg
    assert not c.is_running("c0")
    assert registry.get("silent") is None


def test_teardown_is_idempotent_and_releases_the_registry_entry(tmp_path, registry):
    c = LocalCluster(ClusterSpec("idem", tmp_path / "run", brokers=1), registry=registry, command=echo_server.command)
    c.start()
    pid = c.pid("n1")
    c.teardown()
    c.teardown()
    assert proc_state(pid) is None
    assert registry.get("idem") is None


def test_two_clusters_run_side_by_side_without_collision(tmp_path, registry):
    a = LocalCluster(ClusterSpec("side-a", tmp_path / "a", brokers=2), registry=registry, command=echo_server.command)
    b = LocalCluster(ClusterSpec("side-b", tmp_path / "b", brokers=2), registry=registry, command=echo_server.command)
    with a, b:
        a.start()
        b.start()
        hosts_a = {x.host for x in [a.controller(), *a.brokers().values()]}
        hosts_b = {x.host for x in [b.controller(), *b.brokers().values()]}
        assert not hosts_a & hosts_b
        assert _echo(a.brokers()["n1"]) == _echo(b.brokers()["n1"]) == b"ping\n"
