"""The Nemesis driving a real local cluster (echo-server processes): real SIGKILL/SIGSTOP/iptables, the
history it records, and stop() undoing every active fault."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from polling import eventually
from clusters.base import ClusterSpec, NodeTimeouts
from clusters.local import LocalCluster
from clusters.run_registry import Registry, proc_state
from rundir.history import History
from nemesis import Aim, ConfigError, FaultPlan, Nemesis

_spec = importlib.util.spec_from_file_location(
    "echo_server_for_nemesis", Path(__file__).resolve().parents[1] / "clusters" / "echo_server.py")
echo_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(echo_server)


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(ClusterSpec(f"nem-{tmp_path.name}", tmp_path / "run", brokers=3,
                                 broker_settings={"power_loss": True}),
                     registry=Registry(tmp_path / "registry"), command=echo_server.command, timeouts=NodeTimeouts(stop_grace_s=3))
    yield c
    c.teardown()


@pytest.fixture
def history(tmp_path):
    h = History(tmp_path / "history.jsonl", mirror=tmp_path / "nemesis.jsonl")
    yield h
    h.close()


def _ops(tmp_path):
    return [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]


def _assert_paired(ops):
    """Every start has exactly one stop with the same id, after it; each is invoke then info."""
    starts, stops = {}, {}
    for i in range(0, len(ops), 2):
        inv, done = ops[i], ops[i + 1]
        assert inv["type"] == "invoke" and done["type"] == "info"
        assert inv["process"] == done["process"] == "nemesis" and inv["f"] == done["f"]
        assert {k: v for k, v in done["value"].items() if k != "detail"} == inv["value"]
        bucket = starts if inv["value"]["phase"] == "start" else stops
        assert inv["value"]["id"] not in bucket
        bucket[inv["value"]["id"]] = inv["index"]
    assert set(starts) == set(stops)
    assert all(starts[i] < stops[i] for i in starts)
    return starts


def _eventually(predicate, timeout=10.0):
    return eventually(predicate, timeout, interval=0.02)


def _schedule(tmp_path, *steps: dict):
    """A schedule file with one [[step]] a dict, its keys in the order given."""
    p = tmp_path / "schedule.toml"
    p.write_text("".join("[[step]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in step.items())
                         for step in steps))
    return p


def test_scheduled_kill_and_pause_really_change_processes_and_are_recorded(cluster, history, tmp_path):
    sched = _schedule(tmp_path, {"at": 0.2, "fault": "kill", "targets": ["n2"], "duration": 1.0},
                      {"at": 0.3, "fault": "pause-controller", "duration": 1.0})
    nem = Nemesis(cluster, history, FaultPlan(seed=1, schedule=sched))
    cluster.start()
    old_n2, c0 = cluster.pid("n2"), cluster.pid("c0")
    nem.start()
    assert _eventually(lambda: not cluster.is_running("n2"))
    assert _eventually(lambda: proc_state(c0) == "T")
    assert sorted(nem.active()) == ["kill n2", "pause-controller c0"]
    assert _eventually(lambda: cluster.is_running("n2") and proc_state(c0) in ("S", "R"), timeout=5)
    assert _eventually(lambda: nem.active() == [])
    assert cluster.pid("n2") != old_n2
    nem.stop()
    ops = _ops(tmp_path)
    _assert_paired(ops)
    assert [(o["f"], o["value"]["fault"], o["value"]["phase"], o["value"]["targets"]) for o in ops[::2]] == [
        ("kill", "kill", "start", ["n2"]), ("pause", "pause", "start", ["c0"]),
        ("restart", "kill", "stop", ["n2"]), ("resume", "pause", "stop", ["c0"])]
    assert ops[1]["value"]["detail"] == f"SIGKILL n2 pid {old_n2}"
    assert ops[3]["value"]["detail"] == f"SIGSTOP c0 pid {c0}"
    assert ops[5]["value"]["detail"] == f"restarted n2 as pid {cluster.pid('n2')}"
    # the nemesis mirror holds exactly the nemesis operations
    assert (tmp_path / "nemesis.jsonl").read_text() == (tmp_path / "history.jsonl").read_text()


def test_stop_undoes_every_active_fault_and_records_the_stops(cluster, history, tmp_path):
    sched = _schedule(tmp_path, {"at": 0.1, "fault": "pause", "targets": ["n1"], "duration": 600},
                      {"at": 0.1, "fault": "power-loss", "targets": ["n3"], "duration": 600})
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched))
    cluster.start()
    n1 = cluster.pid("n1")
    nem.start()
    assert _eventually(lambda: len(nem.active()) == 2)
    assert proc_state(n1) == "T" and not cluster.is_running("n3")
    nem.stop()
    assert nem.active() == []
    assert proc_state(n1) in ("S", "R") and cluster.is_running("n3")
    ops = _ops(tmp_path)
    _assert_paired(ops)
    assert [o["f"] for o in ops[::2]] == ["pause", "power-loss", "restart", "resume"]
    nem.stop()  # idempotent: nothing more recorded
    assert len(_ops(tmp_path)) == len(ops)


def test_random_mode_pairs_every_start_with_a_stop_and_leaves_the_cluster_whole(cluster, history, tmp_path):
    nem = Nemesis(cluster, history,
                  FaultPlan(["kill", "pause", "kill-controller", "power-loss"], interval_s=0.3, seed=11,
                            quiet_probability=0.2))
    cluster.start()
    nem.start()
    time.sleep(2.5)
    nem.stop()
    starts = _assert_paired(_ops(tmp_path))
    assert len(starts) >= 4
    assert nem.stats.errors == [] and nem.error is None
    assert all(cluster.is_running(n) and cluster.process_state(n) in ("S", "R") for n in cluster.nodes())
    # one fault at a time: each stop comes before the next start
    phases = [o["value"]["phase"] for o in _ops(tmp_path)[::2]]
    assert phases == ["start", "stop"] * len(starts)


@pytest.mark.root
def test_scheduled_partition_installs_kernel_drops_and_heals(cluster, history, tmp_path):
    sched = _schedule(tmp_path, {"at": 0.1, "fault": "partition", "shape": "isolate", "targets": ["n1"],
                                 "duration": 1.5})
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched))
    cluster.start()
    nem.start()
    n1 = cluster.brokers()["n1"]
    chain = lambda: subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    assert _eventually(lambda: nem.active() == ["partition isolate n1"])
    prefix = n1.host.rsplit(".", 1)[0] + "."        # this run's rules only: other runs may have theirs
    rules = [ln for ln in chain().splitlines() if ln.startswith("-A HW-") and f"-s {prefix}" in ln]
    assert len(rules) == 6 and sum(f"-s {n1.host}/32" in r for r in rules) == 3
    assert _eventually(lambda: nem.active() == [], timeout=5)
    assert not [ln for ln in chain().splitlines() if ln.startswith("-A HW-")
                and cluster.controller().host.rsplit(".", 1)[0] in ln]
    nem.stop()
    ops = _ops(tmp_path)
    _assert_paired(ops)
    assert ops[0]["value"]["shape"] == "isolate"
    assert sorted(map(tuple, ops[0]["value"]["drops"])) == sorted(
        [("n1", x) for x in ("c0", "n2", "n3")] + [(x, "n1") for x in ("c0", "n2", "n3")])
    assert [o["f"] for o in ops[::2]] == ["partition", "heal"]


def test_leader_targeting_uses_the_admin_describe(cluster, history, tmp_path):
    calls = []

    class FakeAdmin:  # the admin's real counterpart is the broker client; here only its answer matters
        def describe(self, topic):
            calls.append(topic)
            return [SimpleNamespace(partition=0, leader=3, epoch=7), SimpleNamespace(partition=1, leader=1, epoch=2)]

        def close(self):
            pass

    sched = _schedule(tmp_path, {"at": 0.1, "fault": "kill-leader", "partition": 0, "duration": 0.5})
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched), aim=Aim(topic="hw", partitions=2),
                  admin_factory=FakeAdmin)
    cluster.start()
    nem.start()
    assert _eventually(lambda: not cluster.is_running("n3"))
    assert _eventually(lambda: cluster.is_running("n3"))
    nem.stop()
    ops = _ops(tmp_path)
    _assert_paired(ops)
    assert ops[0]["value"]["targets"] == ["n3"] and ops[0]["value"]["partition"] == 0
    assert ops[1]["value"]["detail"].startswith("leader of hw/0 (epoch 7); SIGKILL n3 pid ")
    assert calls == ["hw"]


def test_constructor_validation_happens_before_start(cluster, history, tmp_path):
    with pytest.raises(ConfigError, match="unknown fault 'explode'"):
        Nemesis(cluster, history, FaultPlan(["explode"]))
    with pytest.raises(ConfigError, match="fault 'kill-leader' targets a partition leader and needs admin_factory"):
        Nemesis(cluster, history, FaultPlan(["kill-leader"]))
    plain = LocalCluster(ClusterSpec("np", tmp_path / "np", brokers=1), registry=Registry(tmp_path / "r2"))
    with pytest.raises(ConfigError, match="power-loss fault needs brokers started with broker setting power_loss = true"):
        Nemesis(plain, history, FaultPlan(["power-loss"]))
    with pytest.raises(ConfigError, match="interval must be positive"):
        Nemesis(cluster, history, FaultPlan(["kill"], interval_s=0))
    assert _ops(tmp_path) == []
