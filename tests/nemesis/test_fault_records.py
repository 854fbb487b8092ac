"""What the nemesis records, byte for byte: every fault's start and stop operations, as the random nemesis,
a schedule's steps and a scenario's steps play them, compared with tests/nemesis/fault_records.jsonl.

The cluster is a local cluster that is never started: its actions only say what they would do, so the
same seed gives the same records on any machine. (The same actions against real brokers are tested in
tests/nemesis/test_nemesis_local.py and the e2e runs.) When a change to the records is intended, and
named as a fix, rewrite the file with HIGHWATER_REWRITE_RECORDS=1 and review its diff.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.errors import StateError
from clusters.base import ClusterError, ClusterSpec, DiskFillable
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from clusters.storage_faults import StorageFault
from nemesis import Aim, FaultPlan, Nemesis
from nemesis.faults import KINDS
from nemesis.schedule import FAULTS, load_schedule
from nemesis.windows import FaultWindows, Window

GOLDEN = Path(__file__).with_name("fault_records.jsonl")


class Records:
    """A history that keeps every nemesis operation as one JSON line, its value's keys in the order they
    were written (as rundir/history.py writes them)."""

    def __init__(self):
        self.lines: list[str] = []

    def invoke(self, process, f, value):
        self.lines.append(json.dumps({"type": "invoke", "process": process, "f": f, "value": value}))

    def complete(self, process, typ, f, value, error=None):
        self.lines.append(json.dumps({"type": typ, "process": process, "f": f, "value": value,
                                     "error": error}))

    def note(self, text: str) -> None:
        self.lines.append(json.dumps({"note": text}))


class Sayer(LocalCluster, DiskFillable):
    """A local cluster that is not started: each action returns what it would do; `fail` names the actions
    (action name or "action node") that raise ClusterError instead."""

    def __init__(self, spec, registry, fail=()):
        super().__init__(spec, registry=registry)
        self.fail, self.down = set(fail), set()

    def _say(self, what: str, node: str = "") -> str:
        if what in self.fail or f"{what} {node}" in self.fail:
            raise ClusterError(f"{what} {node} refused".strip())
        return f"{what} {node}".strip()

    def check_faults(self, faults):
        pass

    def kill(self, node):
        self.down.add(node)
        return self._say("kill", node)

    def stop(self, node):
        self.down.add(node)
        return self._say("stop", node)

    def restart(self, node):
        self.down.discard(node)
        return self._say("restart", node)

    def pause(self, node):
        return self._say("pause", node)

    def resume(self, node):
        return self._say("resume", node)

    def is_running(self, node):
        return node not in self.down

    def drop(self, pairs):
        return self._say("drop", ",".join(f"{a}>{b}" for a, b in pairs))

    def heal(self, pairs=None):
        return self._say("heal", "all" if pairs is None else ",".join(f"{a}>{b}" for a, b in pairs))

    def degrade(self, pairs, *, delay_ms, jitter_ms=0.0, loss_pct=0.0):
        return self._say("degrade", f"{len(pairs)} links {delay_ms}/{jitter_ms}/{loss_pct}")

    def restore(self, pairs=None):
        return self._say("restore", "all" if pairs is None else str(len(pairs)))

    def corrupt(self, node, how, *, partition=None, seed=0):
        self._say("corrupt", node)
        return StorageFault(how, f"{node}: {how} p{partition} s{seed}", partition=partition or 0, offset=seed % 7)

    def fill_disk(self, node):
        return self._say("fill", node)

    def free_disk(self, node):
        return self._say("free", node)


class Admin:
    """The controller's metadata, fixed: partition p led by broker p+1, every broker in the ISR except
    partition 1's, which has shrunk to its leader."""

    def describe(self, topic):
        return [SimpleNamespace(partition=p, leader=p + 1, epoch=3 + p, isr=[p + 1] if p == 1 else [1, 2, 3, 4, 5],
                                replicas=[1, 2, 3, 4, 5]) for p in range(3)]

    def close(self):
        pass


def _cluster(tmp_path, fail=()):
    spec = ClusterSpec("records", tmp_path / "run", brokers=5, broker_settings={"power_loss": True})
    return Sayer(spec, Registry(tmp_path / "reg"), fail)


def _drawn(tmp_path, rec: Records) -> None:
    """Random mode: 40 drawn steps over every fault of the cluster that is no package (packages wait on the
    cluster) and needs no consumer group (the coordinator's: `_coordinator`)."""
    names = [f for f, (kind, who) in FAULTS.items() if kind not in ("package", "mix")
             and KINDS[kind].party == "cluster" and who != "coordinator"]
    nem = Nemesis(_cluster(tmp_path, fail={"pause n4", "restart n2"}), rec, FaultPlan(names, interval_s=2.0, seed=7),
                  aim=Aim(partitions=3), admin_factory=Admin)
    steps = nem.steps()
    for _ in range(40):
        step = next(steps)
        nem._stop_due(step.at)
        nem._start_fault(step, step.at)
    nem.stop()
    rec.note(f"skipped: {nem.stats.skipped}")


def _scheduled(tmp_path, rec: Records) -> None:
    """A schedule file's steps, overlapping."""
    path = tmp_path / "schedule.toml"
    path.write_text("""
[[step]]
at = 1
fault = "partition"
shape = "halves"
targets = ["n1", "n2"]
duration = 5
[[step]]
at = 2
fault = "kill"
targets = ["n3"]
duration = 2
[[step]]
at = 2.5
fault = "degrade-leader"
partition = 2
delay_ms = 40
duration = 1
[[step]]
at = 3
fault = "corrupt-truncate"
targets = ["n4"]
duration = 2
[[step]]
at = 4
fault = "disk-full"
targets = ["n5"]
duration = 3
[[step]]
at = 6.5
fault = "partition-one-way"
targets = ["n3"]
duration = 1
""")
    nem = Nemesis(_cluster(tmp_path), rec, FaultPlan(seed=3, schedule=path), aim=Aim(partitions=3),
                  admin_factory=Admin)
    for step in load_schedule(path, ["c0", "n1", "n2", "n3", "n4", "n5"], partitions=3, seed=3):
        nem._stop_due(step.at)
        nem._start_fault(step, step.at)
    nem._stop_due(8.0)
    nem.stop()


def _elect(tmp_path, rec: Records) -> None:
    """An elect window (the move-leader package's), and one whose move is refused."""
    def elect(partition, node):
        if node == "n3":
            raise ClusterError("ELECT_LEADER hw/0 n3: not in the ISR")
        return f"elected {node} for {partition}"
    windows = FaultWindows(_cluster(tmp_path), rec, elect=elect)
    step = SimpleNamespace(fault="move-leader", seed=1)
    for node in ("n2", "n3"):
        window = Window("elect", [node], {"partition": 0}, step, 10.0, "move")
        windows.open_window(window, "move")
        windows.close_window(window, "settled")


SCENARIO = [
    ("kill", {"node": "n1"}), ("restart", {"node": "n1"}), ("stop", {"node": "n2"}), ("start", {"node": "n2"}),
    ("pause", {"node": "n3"}), ("kill", {"node": "n3"}), ("restart", {"node": "n3"}),
    ("resume", {"node": "n4"}), ("restart", {"node": "n4"}),
    ("power-loss", {"node": "n1"}),
    ("corrupt", {"node": "n1", "how": "bitflip", "partition": 2, "seed": 5}),
    ("corrupt", {"node": "n2", "how": "bitflip", "seed": 1}),       # running: refused
    ("kill", {"node": "n1"}),                                       # already down: refused
    ("restart", {"node": "n1"}),
    ("partition", {"drop": [("n1", "n2"), ("n2", "n1"), ("n1", "c0")]}),
    ("partition", {"drop": [("n3", "n4")]}),
    ("heal", {"drop": [("n1", "c0"), ("n3", "n4")]}),
    ("heal", {"drop": [("n5", "n4")]}),
    ("heal", {}),
    ("heal", {}),
    ("degrade", {"drop": [("n1", "n2"), ("n2", "n3")], "delay_ms": 30.0, "jitter_ms": 0.0, "loss_pct": 1.0}),
    ("restore", {"drop": [("n2", "n3")]}),
    ("restore", {}),
    ("pause", {"node": "n5"}), ("kill", {"node": "n4"}),
    ("partition", {"drop": [("n2", "n5")]}),
    ("degrade", {"drop": [("n4", "n5")], "delay_ms": 10.0, "jitter_ms": 2.0, "loss_pct": 0.0}),
]


def _scenario(tmp_path, rec: Records, steps=SCENARIO, fail=()) -> None:
    """A scenario's node and network steps, one at a time, then undo_all with windows still open."""
    windows = FaultWindows(_cluster(tmp_path, fail), rec)
    for do, args in steps:
        try:
            rec.note(f"{do}: {windows.play(do, dict(args))}")
        except (StateError, ClusterError) as exc:
            rec.note(f"{do}: {type(exc).__name__}: {exc}")
    windows.undo_all(lambda what, exc: rec.note(f"problem: {what}: {exc}"))


def _failing_scenario(tmp_path, rec: Records) -> None:
    """Steps whose action fails: the window opens, the failure is recorded, undo_all still closes it."""
    _scenario(tmp_path, rec, [("partition", {"drop": [("n1", "n2")]}), ("kill", {"node": "n2"}),
                              ("pause", {"node": "n3"})], fail={"drop", "kill n2", "resume"})


class Clients:
    """The workload's side of the client faults: three clients, consumer-1 refusing to be held."""

    def client_names(self):
        return ["producer-0", "consumer-0", "consumer-1"]

    def pause_client(self, name):
        if name == "consumer-1":
            raise ClusterError("consumer-1 cannot be held")
        return f"{name} held"

    def resume_client(self, name):
        return f"{name} released"


def _clients(tmp_path, rec: Records) -> None:
    """Client faults drawn at random, overlapping, one refused."""
    nem = Nemesis(_cluster(tmp_path), rec, FaultPlan(["pause-client", "pause-consumer"], interval_s=1.0, seed=4),
                  aim=Aim(clients=Clients))
    steps = nem.steps()
    for _ in range(8):
        step = next(steps)
        step.duration = 2.5
        nem._stop_due(step.at)
        nem._start_fault(step, step.at)
    nem.stop()
    rec.note(f"skipped: {nem.stats.skipped}")


class OffsetsAdmin(Admin):
    """Admin's test topic, and a `__consumer_offsets` of three partitions led by n3, n4 and n5 that exists
    from the third look on, its group's partition without a leader the third time."""

    def __init__(self):
        self.looks = 0

    def describe(self, topic):
        if topic != "__consumer_offsets":
            return super().describe(topic)
        self.looks += 1
        if self.looks <= 2:
            return []
        return [SimpleNamespace(partition=p, leader=None if self.looks == 3 else p + 3, epoch=1 + p,
                                isr=[p + 3, 1] if self.looks > 3 else [], replicas=[p + 3, 1, 2]) for p in range(3)]


def _coordinator(tmp_path, rec: Records) -> None:
    """The coordinator's faults drawn at random for group highwater-group (offsets partition 0, led by n3):
    skipped while the offsets topic does not exist or its partition has no leader, then aimed at n3."""
    names = [f for f, (kind, who) in FAULTS.items() if who == "coordinator" and kind != "package"]
    nem = Nemesis(_cluster(tmp_path), rec, FaultPlan(names, interval_s=2.0, seed=3), aim=Aim(partitions=3,
                  group="highwater-group"), admin_factory=OffsetsAdmin)
    steps = nem.steps()
    for _ in range(10):
        step = next(steps)
        nem._stop_due(step.at)
        nem._start_fault(step, step.at)
    nem.stop()
    rec.note(f"skipped: {nem.stats.skipped}")


def _final_heal(tmp_path, rec: Records) -> None:
    """The final heal: n2 died by itself (no window), n3 cannot be resumed; only n2's restart is recorded."""
    cluster = _cluster(tmp_path, fail={"resume n3"})
    cluster.nodes = lambda: ["c0", "n1", "n2", "n3"]
    cluster.down.add("n2")
    FaultWindows(cluster, rec).recover(lambda what, exc: rec.note(f"problem: {what}: {exc}"))
    rec.note(f"down after: {sorted(cluster.down)}")


PARTS = {"drawn": _drawn, "scheduled": _scheduled, "elect": _elect, "scenario": _scenario,
         "failing-scenario": _failing_scenario, "final-heal": _final_heal, "clients": _clients,
         "coordinator": _coordinator}


def _records(tmp_path) -> list[str]:
    rec = Records()
    for name, play in PARTS.items():
        rec.note(f"--- {name}")
        (tmp_path / name).mkdir()
        play(tmp_path / name, rec)
    return rec.lines


def test_the_nemesis_records_what_it_recorded_before(tmp_path):
    lines = _records(tmp_path)
    if os.environ.get("HIGHWATER_REWRITE_RECORDS") == "1":
        GOLDEN.write_text("\n".join(lines) + "\n")
    want = GOLDEN.read_text().splitlines()
    for i, (got, expected) in enumerate(zip(lines, want), start=1):
        assert got == expected, f"fault_records.jsonl line {i} differs"
    assert len(lines) == len(want)


@pytest.mark.parametrize("part", sorted(PARTS))
def test_every_part_records_something(tmp_path, part):
    rec = Records()
    PARTS[part](tmp_path, rec)
    assert sum('"invoke"' in line for line in rec.lines) >= 2 or part == "final-heal"
    assert sum('"info"' in line for line in rec.lines) >= 1
