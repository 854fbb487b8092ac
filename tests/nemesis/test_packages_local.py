"""Aimed faults and packages driving a local cluster of echo-server processes (real SIGKILL, SIGSTOP and
iptables), with a stand-in admin client whose metadata follows the processes: the steps each package
records, what it does when the state it waits for never comes, and stop() in the middle of one."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.records import Record
from broker.storage.partition_store import PartitionStore
from clusters.base import ClusterSpec, NodeTimeouts
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from nemesis import FAULTS, Aim, FaultPlan, Nemesis
from polling import eventually
from rundir.history import History

_spec = importlib.util.spec_from_file_location(
    "echo_server_for_packages", Path(__file__).resolve().parents[1] / "clusters" / "echo_server.py")
echo_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(echo_server)


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(ClusterSpec(f"pkg-{tmp_path.name}", tmp_path / "run", brokers=3,
                                 broker_settings={"power_loss": True}),
                     registry=Registry(tmp_path / "registry"), command=echo_server.command, timeouts=NodeTimeouts(stop_grace_s=3))
    yield c
    c.teardown()


@pytest.fixture
def history(tmp_path):
    h = History(tmp_path / "history.jsonl")
    yield h
    h.close()


def info(partition, leader, isr, replicas=(1, 2, 3), epoch=1):
    return SimpleNamespace(partition=partition, leader=leader, epoch=epoch, isr=list(isr), replicas=list(replicas))


class Admin:
    """describe() answers `answer(calls)`; close() is a no-op."""
    def __init__(self, answer):
        self.answer, self.calls = answer, 0

    def describe(self, topic):
        self.calls += 1
        return self.answer(self.calls)

    def close(self):
        pass


def _ops(tmp_path):
    ops = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    # every start has one stop, each an invoke and an info completion with the same value
    for inv, done in zip(ops[::2], ops[1::2]):
        assert (inv["type"], done["type"], inv["f"]) == ("invoke", "info", done["f"])
        assert {k: v for k, v in done["value"].items() if k not in ("detail", "damage")} == inv["value"]
        if done["f"] == "corrupt" and not done.get("error"):
            # a corrupt start's completion says what it damaged, per target (the protocol rules read it)
            damage = done["value"]["damage"]
            assert [d["node"] for d in damage] == inv["value"]["targets"], damage
            assert all(d["how"] == inv["value"]["how"] and isinstance(d["partition"], int) for d in damage), damage
            assert all(isinstance(d["offset"], int) == (d["how"] in ("bitflip", "truncate")) for d in damage), damage
    starts = [o["value"]["id"] for o in ops[1::2] if o["value"]["phase"] == "start"]
    stops = [o["value"]["id"] for o in ops[1::2] if o["value"]["phase"] == "stop"]
    assert sorted(starts) == sorted(stops)
    return ops[1::2]


def _schedule(tmp_path, *steps):
    p = tmp_path / "schedule.toml"
    p.write_text("".join("[[step]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in s.items()) for s in steps))
    return p


def _rules(cluster):
    prefix = cluster.brokers()["n1"].host.rsplit(".", 1)[0] + "."
    out = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if ln.startswith("-A HW-") and prefix in ln]


def _whole(cluster):
    return all(cluster.is_running(n) and cluster.process_state(n) in ("S", "R") for n in cluster.nodes())


@pytest.mark.root
def test_isolate_then_kill_leader_kills_once_the_isr_has_shrunk(cluster, history, tmp_path):
    pids = {}

    def answer(calls):
        if not cluster.is_running("n1"):
            return [info(0, None, [1], epoch=2)]
        if cluster.pid("n1") != pids["n1"]:
            return [info(0, 1, [1, 2, 3], epoch=3)]          # restarted and caught up
        return [info(0, 1, [1, 2, 3] if calls <= 2 else [1])]

    sched = _schedule(tmp_path, {"at": 0.1, "fault": "isolate-then-kill-leader", "partition": 0, "duration": 0.5})
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched), aim=Aim(topic="hw"),
                  admin_factory=lambda: Admin(answer))
    cluster.start()
    pids["n1"] = cluster.pid("n1")
    nem.start()
    assert eventually(lambda: nem.active() == ["isolate-then-kill-leader isolate-followers n1"], 10, interval=0.02)
    assert len(_rules(cluster)) == 4                     # n1 <-> n2, n1 <-> n3; both still reach c0
    assert eventually(lambda: nem.stats.stopped == 2 and cluster.pid("n1") != pids["n1"], 10, interval=0.05)
    nem.stop()
    ops = _ops(tmp_path)
    assert [(o["f"], o["value"]["step"], o["value"]["targets"]) for o in ops] == [
        ("partition", "isolate-followers", ["n1"]), ("kill", "kill-leader", ["n1"]),
        ("heal", "isolate-followers", ["n1"]), ("restart", "kill-leader", ["n1"])]
    cut, kill = ops[0]["value"], ops[1]["value"]
    assert {o["value"]["name"] for o in ops} == {"isolate-then-kill-leader"}
    assert {o["value"]["package"] for o in ops} == {1}
    assert (cut["shape"], cut["groups"], cut["partition"]) == ("followers", [["n1"], ["n2", "n3"]], 0)
    assert sorted(map(tuple, cut["drops"])) == [("n1", "n2"), ("n1", "n3"), ("n2", "n1"), ("n3", "n1")]
    assert cut["state"] == {"partition": 0, "leader": "n1", "epoch": 1, "isr": ["n1", "n2", "n3"]}
    assert kill["state"] == {"partition": 0, "leader": "n1", "epoch": 1, "isr": ["n1"]}
    assert kill["detail"].startswith("isolate-then-kill-leader #1, kill-leader: ISR shrank to [n1] after ")
    assert f"SIGKILL n1 pid {pids['n1']}" in kill["detail"]
    assert nem.stats.skipped == [] and nem.stats.errors == [] and nem.error is None
    assert _rules(cluster) == [] and _whole(cluster)


@pytest.mark.root
def test_a_package_whose_state_never_comes_heals_and_says_why(cluster, history, tmp_path):
    sched = _schedule(tmp_path, {"at": 0.1, "fault": "isolate-then-power-loss-leader", "partition": 1, "duration": 5},
                      {"at": 0.2, "fault": "kill", "targets": ["n3"], "duration": 0.3})
    admin = Admin(lambda calls: [info(0, 1, [1, 2, 3]), info(1, 2, [2, 3, 1])])
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched), aim=Aim(topic="hw", partitions=2),
                  admin_factory=lambda: admin)
    nem.isr_wait_s = 0.8
    cluster.start()
    nem.start()
    assert eventually(lambda: nem.stats.stopped == 2, 10, interval=0.05)
    nem.stop()
    ops = _ops(tmp_path)
    # the kill due at 0.2 s started once the package had ended; nothing was killed by the package
    assert [(o["f"], o["value"]["name"], o["value"]["targets"]) for o in ops] == [
        ("partition", "isolate-then-power-loss-leader", ["n2"]), ("heal", "isolate-then-power-loss-leader", ["n2"]),
        ("kill", "kill", ["n3"]), ("restart", "kill", ["n3"])]
    assert ops[1]["value"]["detail"].startswith("ISR did not shrink to [n2] within 0.8 s (hw/1: leader n2, epoch 1, "
                                       "ISR [n2, n3, n1]): power-loss skipped")
    assert nem.stats.skipped == ["isolate-then-power-loss-leader #1: ISR of hw/1 did not shrink to [n2] within 0.8 s"]
    assert ops[2]["time"] > ops[1]["time"]
    assert _rules(cluster) == [] and _whole(cluster)


@pytest.mark.root
def test_stop_in_the_middle_of_a_package_undoes_it_at_once(cluster, history, tmp_path):
    sched = _schedule(tmp_path, {"at": 0.1, "fault": "isolate-then-kill-leader", "duration": 5})
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched), aim=Aim(topic="hw"),
                  admin_factory=lambda: Admin(lambda calls: [info(0, 3, [3, 1, 2])]))
    nem.isr_wait_s = 600
    cluster.start()
    nem.start()
    assert eventually(lambda: len(nem.active()) == 1, 10, interval=0.02)
    t0 = time.monotonic()
    nem.stop()
    assert time.monotonic() - t0 < 3
    assert nem.active() == [] and _rules(cluster) == [] and _whole(cluster)
    assert [(o["f"], o["value"]["targets"]) for o in _ops(tmp_path)] == [("partition", ["n3"]), ("heal", ["n3"])]


def test_pause_leader_until_fenced_resumes_once_the_controller_moved_the_partition(cluster, history, tmp_path):
    seen = {"paused": 0}

    def answer(calls):
        if cluster.process_state("n2") == "T":
            seen["paused"] += 1
            return [info(0, 2, [2, 3, 1])] if seen["paused"] < 3 else [info(0, 3, [3, 1], epoch=2)]
        return [info(0, 3 if seen["paused"] else 2, [3, 1, 2], epoch=2 if seen["paused"] else 1)]

    sched = _schedule(tmp_path, {"at": 0.1, "fault": "pause-leader-until-fenced", "partition": 0, "duration": 30})
    nem = Nemesis(cluster, history, FaultPlan(schedule=sched), aim=Aim(topic="hw"),
                  admin_factory=lambda: Admin(answer))
    cluster.start()
    nem.start()
    assert eventually(lambda: nem.stats.stopped == 1, 10, interval=0.05)
    nem.stop()
    pause, resume = _ops(tmp_path)
    assert (pause["f"], pause["value"]["step"], pause["value"]["targets"]) == ("pause", "pause-leader", ["n2"])
    assert pause["value"]["state"] == {"partition": 0, "leader": "n2", "epoch": 1, "isr": ["n3", "n1", "n2"]}
    assert resume["f"] == "resume"
    assert resume["value"]["detail"].startswith("fenced after ")
    assert resume["value"]["detail"].split(": ", 1)[1].startswith("hw/0: leader n3, epoch 2, ISR [n3, n1]; SIGCONT n2")
    assert seen["paused"] == 3 and _whole(cluster)


def test_aimed_single_faults_read_the_metadata_or_are_skipped_saying_why(cluster, history, tmp_path):
    shrunk = {"now": False}

    def answer(calls):
        return [info(0, 1, [1, 2, 3]), info(1, 2, [2] if shrunk["now"] else [2, 3, 1]), info(2, 3, [3, 1, 2])]

    sched = _schedule(tmp_path, {"at": 0.1, "fault": "kill-sole-isr", "duration": 0.2},
                      {"at": 0.6, "fault": "kill-sole-isr", "duration": 0.2},
                      {"at": 1.0, "fault": "kill-follower", "partition": 2, "duration": 0.2},
                      {"at": 1.4, "fault": "power-loss-all", "duration": 0.3},
                      {"at": 2.0, "fault": "kill-majority", "duration": 0.2})
    nem = Nemesis(cluster, history, FaultPlan(seed=5, schedule=sched), aim=Aim(topic="hw", partitions=3),
                  admin_factory=lambda: Admin(answer))
    cluster.start()
    old = {n: cluster.pid(n) for n in ("n1", "n2", "n3")}
    nem.start()
    assert eventually(lambda: len(nem.stats.skipped) == 1, 10, interval=0.02)
    shrunk["now"] = True
    assert eventually(lambda: nem.stats.stopped == 4, 10, interval=0.05)
    nem.stop()
    ops = _ops(tmp_path)
    assert nem.stats.skipped == ["kill-sole-isr at 0.1s: no eligible target (no partition's ISR has shrunk to its "
                                 "leader alone (ISRs 0: [n1, n2, n3]; 1: [n2, n3, n1]; 2: [n3, n1, n2]))"]
    starts = [o for o in ops if o["value"]["phase"] == "start"]
    assert [(o["f"], o["value"]["name"]) for o in starts] == [
        ("kill", "kill-sole-isr"), ("kill", "kill-follower"), ("power-loss", "power-loss-all"),
        ("kill", "kill-majority")]
    assert starts[0]["value"]["targets"] == ["n2"] and starts[0]["value"]["partition"] == 1
    assert starts[0]["value"]["state"]["isr"] == ["n2"]
    assert starts[1]["value"]["targets"][0] in ("n1", "n2") and starts[1]["value"]["partition"] == 2
    assert starts[2]["value"]["targets"] == ["n1", "n2", "n3"]
    assert re.fullmatch(r"SIGKILL n1 pid \d+; SIGKILL n2 pid \d+; SIGKILL n3 pid \d+", starts[2]["value"]["detail"])
    assert all(cluster.pid(n) != old[n] for n in old)
    assert len(starts[3]["value"]["targets"]) == 2
    assert _whole(cluster)


@pytest.mark.root
def test_the_mix_in_random_mode_meets_every_family_and_leaves_the_cluster_whole(cluster, history, tmp_path):
    whole = Admin(lambda calls: [info(p, p + 1, [1, 2, 3]) for p in range(3)])
    nem = Nemesis(cluster, history, FaultPlan(["mix"], interval_s=0.3, seed=3, quiet_probability=0.0),
                  aim=Aim(topic="hw", partitions=3), admin_factory=lambda: whole)
    nem.isr_wait_s = nem.fence_wait_s = 0.4
    for node in ("n1", "n2", "n3"):        # something for the storage family to damage (echo servers log nothing)
        store = PartitionStore.open(cluster.node_dir(node) / "data", "hw", 0, segment_records=4)
        store.log.append([Record(i, 1, str(i).encode(), None, 0) for i in range(40)])
        store.hw_checkpoint.write(40)
        store.epoch_checkpoint.write([(1, 0)])
        store.close()
    cluster.start()
    nem.start()
    time.sleep(6)
    nem.stop()
    ops = _ops(tmp_path)
    names = [o["value"]["name"] for o in ops if o["value"]["phase"] == "start"]
    kinds = {o["value"]["fault"] for o in ops}
    assert kinds == {"kill", "pause", "partition", "power-loss", "corrupt"}, names
    families = {"process" if FAULTS[n][0] in ("kill", "pause") else FAULTS[n][0] for n in names}
    assert families == {"process", "partition", "package", "power-loss", "corrupt"}, names
    # nothing shrinks or is fenced here: each package ended early, saying so
    assert any("did not shrink" in s or "not fenced" in s for s in nem.stats.skipped)
    assert nem.stats.errors == [] and nem.error is None
    assert _rules(cluster) == [] and _whole(cluster)
