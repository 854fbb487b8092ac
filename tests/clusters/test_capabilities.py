"""The cluster interface's capabilities (clusters/base.py): the real backends have every one, a backend
without one gets a one-line error naming the backend and the fault from whoever asks for it (the
nemesis, the scenario runner), and the local backend's graceful stop (the scenario `stop` step) on real
processes."""
from __future__ import annotations

import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

import echo_server
from clusters import base
from clusters.base import (Cluster, ClusterError, ClusterSpec, Degradable, Killable, NodeAddress, NodeTimeouts,
                           Partitionable, Pausable, Stoppable, capabilities, require)
from clusters.docker import DockerCluster
from clusters.local import LocalCluster
from clusters.run_registry import Registry, proc_state
from clusters.ssh import SshCluster
from clusters.ssh_cluster import RemoteCluster
from harness.scenario_runner import ScenarioRunner, ScenarioSteps
from nemesis import FaultPlan, Nemesis

ALL = ["Killable", "Stoppable", "Pausable", "Partitionable", "Degradable", "EventLogs"]
# storage faults on local and Docker only
LOCAL = ALL + ["Corruptible", "DiskFillable"]
DOCKER = ALL + ["Corruptible", "DiskFillable"]


class CoreOnly(Cluster):
    """A backend with the core interface and no fault capability at all."""
    backend_name = "toy"

    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.addresses = {n: NodeAddress(n, "127.0.0.1", 9000 + i) for i, n in enumerate(["c0", "n1", "n2", "n3"])}

    def start(self): ...
    def stop_all(self): ...
    def teardown(self): ...
    def collect(self, run_dir): ...
    def is_running(self, node): return True
    def controller(self): return self.addresses["c0"]
    def brokers(self): return {n: a for n, a in self.addresses.items() if n != "c0"}


class KillOnly(CoreOnly, Killable):
    backend_name = "kill-only"

    def kill(self, node): return f"killed {node}"
    def restart(self, node): return f"restarted {node}"


class HalfPausable(CoreOnly):
    """Has pause but not resume: structurally not Pausable."""
    backend_name = ""       # unnamed: messages use the class name
    def pause(self, node): return f"paused {node}"


def _spec(tmp_path, **settings) -> ClusterSpec:
    return ClusterSpec("caps", tmp_path / "run", brokers=3, broker_settings=settings)


# --- the real backends -------------------------------------------------------------------------------

def test_the_real_local_cluster_has_every_capability(tmp_path):
    c = LocalCluster(_spec(tmp_path), registry=Registry(tmp_path / "registry"))
    assert capabilities(c) == LOCAL
    for cap in (Killable, Stoppable, Pausable, Partitionable, Degradable):
        assert isinstance(c, cap) and require(c, cap, "x") is c


@pytest.mark.parametrize("cls", [DockerCluster, SshCluster, RemoteCluster, LocalCluster])
def test_every_backend_class_declares_every_capability(cls):
    assert capabilities(cls) == {LocalCluster: LOCAL, DockerCluster: DOCKER}.get(cls, ALL)
    assert base.backend_name(cls) == {DockerCluster: "docker", SshCluster: "ssh", RemoteCluster: "remote",
                                      LocalCluster: "local"}[cls]


def test_the_core_is_small_and_faults_are_not_in_it():
    assert sorted(Cluster.__abstractmethods__) == ["brokers", "collect", "controller", "is_running", "start",
                                                   "stop_all", "teardown"]
    for method in ("kill", "restart", "stop", "pause", "resume", "drop", "heal", "degrade", "restore"):
        assert not hasattr(Cluster, method)


def test_a_backend_that_declares_a_capability_must_implement_it(tmp_path):
    class Forgetful(CoreOnly, Pausable):
        def pause(self, node): return "paused"

    with pytest.raises(TypeError, match="resume"):
        Forgetful(_spec(tmp_path))


# --- a backend without a capability ------------------------------------------------------------------

def test_capabilities_of_partial_backends(tmp_path):
    assert capabilities(CoreOnly(_spec(tmp_path))) == []
    assert capabilities(KillOnly) == ["Killable"]
    assert capabilities(HalfPausable(_spec(tmp_path))) == []


@pytest.mark.parametrize("fault, message", [
    ("pause", "the toy backend cannot inject fault 'pause': it is not Pausable (it has no pause, resume)"),
    ("pause-leader", "the toy backend cannot inject fault 'pause-leader': it is not Pausable (it has no pause, resume)"),
    ("kill", "the toy backend cannot inject fault 'kill': it is not Killable (it has no kill, restart)"),
    ("power-loss", "the toy backend cannot inject fault 'power-loss': it is not Killable (it has no kill, restart)"),
    ("partition-isolate", "the toy backend cannot inject fault 'partition-isolate': it is not Partitionable "
                          "(it has no drop, heal)"),
])
def test_the_nemesis_asks_for_each_fault_s_capability_with_a_one_line_error(tmp_path, fault, message):
    cluster = CoreOnly(_spec(tmp_path, power_loss=True))
    with pytest.raises(ClusterError) as err:
        Nemesis(cluster, None, FaultPlan([fault]), admin_factory=lambda: None)
    assert str(err.value) == message


def test_the_error_names_only_the_missing_methods_and_the_first_fault_lacking_one(tmp_path):
    with pytest.raises(ClusterError) as err:
        Nemesis(HalfPausable(_spec(tmp_path)), None, FaultPlan(["pause"]))
    assert str(err.value) == "the HalfPausable backend cannot inject fault 'pause': it is not Pausable (it has no resume)"
    with pytest.raises(ClusterError) as err:
        Nemesis(KillOnly(_spec(tmp_path)), None, FaultPlan(["kill", "pause", "partition"]))
    assert str(err.value) == ("the kill-only backend cannot inject fault 'pause': it is not Pausable "
                              "(it has no pause, resume)")


def test_a_schedule_file_is_checked_against_the_backend_too(tmp_path):
    sched = tmp_path / "s.toml"
    sched.write_text('[[step]]\nat = 1.0\nfault = "kill"\nduration = 1.0\n'
                     '[[step]]\nat = 5.0\nfault = "partition"\nshape = "isolate"\nduration = 1.0\n')
    with pytest.raises(ClusterError, match=r"^the kill-only backend cannot inject fault 'partition': it is not "
                                           r"Partitionable \(it has no drop, heal\)$"):
        Nemesis(KillOnly(_spec(tmp_path)), None, FaultPlan(schedule=sched))


def test_a_backend_with_the_capabilities_passes_and_power_loss_still_needs_the_setting(tmp_path):
    Nemesis(KillOnly(_spec(tmp_path)), None, FaultPlan(["kill", "kill-controller"]))
    with pytest.raises(Exception, match="power-loss fault needs brokers started with broker setting power_loss = true"):
        Nemesis(KillOnly(_spec(tmp_path)), None, FaultPlan(["power-loss"]))
    Nemesis(KillOnly(_spec(tmp_path, power_loss=True)), None, FaultPlan(["power-loss"]))


def test_the_scenario_stop_step_asks_for_stoppable(tmp_path):
    session = SimpleNamespace(cluster=KillOnly(_spec(tmp_path)),
                              history=SimpleNamespace(new_process=lambda: 1))
    scenario = SimpleNamespace(config=SimpleNamespace(topic=SimpleNamespace(name="hw")))
    runner = ScenarioRunner(session, scenario)
    with pytest.raises(ClusterError) as err:
        runner.do_step(SimpleNamespace(do="stop", args={"node": "n1"}))
    assert str(err.value) == "the kill-only backend cannot inject fault 'stop': it is not Stoppable (it has no stop)"


@pytest.mark.parametrize("do, args, message", [
    ("pause", {"node": "n1"}, "cannot inject fault 'pause': it is not Pausable (it has no pause, resume)"),
    ("partition", {"drop": [("n1", "n2")]}, "cannot inject fault 'partition': it is not Partitionable (it has no drop, heal)"),
    ("heal", {}, "cannot inject fault 'heal': it is not Partitionable (it has no drop, heal)"),
])
def test_every_scenario_node_or_network_step_asks_for_its_capability(tmp_path, do, args, message):
    session = SimpleNamespace(cluster=KillOnly(_spec(tmp_path)), history=SimpleNamespace(new_process=lambda: 1))
    scenario = SimpleNamespace(config=SimpleNamespace(topic=SimpleNamespace(name="hw")))
    runner = ScenarioRunner(session, scenario)
    with pytest.raises(ClusterError) as err:
        runner.do_step(SimpleNamespace(do=do, args=args))
    assert str(err.value) == f"the kill-only backend {message}"


def test_a_scenario_is_checked_against_the_backend_before_the_cluster_starts(tmp_path):
    steps = [SimpleNamespace(do="kill", args={"node": "n1"}), SimpleNamespace(do="sleep", args={"seconds": 1}),
             SimpleNamespace(do="pause", args={"node": "n2"})]
    middle = ScenarioSteps(SimpleNamespace(steps=steps))
    with pytest.raises(ClusterError) as err:
        middle.set_up(SimpleNamespace(cluster=KillOnly(_spec(tmp_path))))
    assert str(err.value) == "the kill-only backend cannot inject fault 'pause': it is not Pausable (it has no pause, resume)"
    ScenarioSteps(SimpleNamespace(steps=steps[:2])).set_up(SimpleNamespace(cluster=KillOnly(_spec(tmp_path))))


def test_the_default_layout_names_the_backend_and_every_node(tmp_path):
    assert CoreOnly(_spec(tmp_path)).layout() == {
        "backend": "toy", "nodes": {"c0": {"host": "127.0.0.1", "port": 9000}, "n1": {"host": "127.0.0.1", "port": 9001},
                                    "n2": {"host": "127.0.0.1", "port": 9002}, "n3": {"host": "127.0.0.1", "port": 9003}}}


# --- the local backend's graceful stop, on real processes --------------------------------------------

@pytest.fixture
def local(tmp_path):
    registry = Registry(tmp_path / "registry")
    c = LocalCluster(ClusterSpec("caps-stop", tmp_path / "run", brokers=2), registry=registry,
                     command=echo_server.command, timeouts=NodeTimeouts(stop_grace_s=3))
    c.start()
    yield c, registry
    c.teardown()


def test_local_stop_is_a_clean_sigterm_and_restart_brings_the_node_back(local):
    c, registry = local
    pid = c.pid("n1")
    assert c.stop("n1") == f"SIGTERM n1 pid {pid} (clean shutdown)"
    assert proc_state(pid) is None and not c.is_running("n1")
    assert pid not in [p.pid for p in registry.get("caps-stop").processes]
    assert c.stop("n1") == "n1: not running"
    assert c.restart("n1").startswith("restarted n1 as pid ")
    assert c.is_running("n1") and c.pid("n1") != pid


def test_local_stop_of_a_paused_node_still_shuts_it_down_cleanly(local):
    c, _ = local
    c.pause("n2")
    pid = c.pid("n2")
    assert c.stop("n2") == f"SIGTERM n2 pid {pid} (clean shutdown)"
    assert proc_state(pid) is None


def test_local_stop_reports_a_node_that_ignores_sigterm(tmp_path):
    def stubborn(node, role, config):
        argv = echo_server.command(node, role, config)
        if node != "n1":
            return argv
        # the same echo server, with SIGTERM ignored
        return [argv[0], "-c", "import signal, runpy, sys; sys.argv = sys.argv[1:]; "
                "signal.signal = lambda *a: None; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}); "
                "runpy.run_path(sys.argv[0], run_name='__main__')", *argv[1:]]

    c = LocalCluster(ClusterSpec("caps-stubborn", tmp_path / "run", brokers=1), registry=Registry(tmp_path / "r"),
                     command=stubborn, timeouts=NodeTimeouts(stop_grace_s=0.5))
    c.start()
    try:
        pid = c.pid("n1")
        detail = c.stop("n1")
        assert detail.startswith(f"SIGTERM n1 pid {pid}: SIGKILLed after the grace period"), detail
        assert proc_state(pid) is None
    finally:
        c.teardown()
