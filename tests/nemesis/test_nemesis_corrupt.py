"""The corrupt-* nemesis faults on a real local cluster (echo-server processes with real broker data
directories written by the store): the step SIGKILLs the broker, damages its files while it is down,
records kind "corrupt" with `how` and the detail, restarts it at the stop, and never takes down or
damages more than a minority of the brokers at once."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from broker.records import Record
from broker.storage.partition_store import PartitionStore
from broker.storage.scan import scan_partition
from clusters.base import ClusterSpec, NodeTimeouts
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from nemesis import ConfigError, FaultPlan, Nemesis
from nemesis.schedule import CORRUPT_HOW, corrupt_how, load_schedule
from polling import eventually
from rundir.history import History

_spec = importlib.util.spec_from_file_location(
    "echo_server_for_corrupt", Path(__file__).resolve().parents[1] / "clusters" / "echo_server.py")
echo_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(echo_server)


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(ClusterSpec(f"cor-{tmp_path.name}", tmp_path / "run", brokers=3),
                     registry=Registry(tmp_path / "registry"), command=echo_server.command, timeouts=NodeTimeouts(stop_grace_s=3))
    yield c
    c.teardown()


def _data(cluster, node, n=12):
    d = cluster.node_dir(node) / "data"
    store = PartitionStore.open(d, "hw", 0, segment_records=4)
    store.log.append([Record(i, 1, str(i).encode(), None, 0) for i in range(n)])
    store.hw_checkpoint.write(n)
    store.epoch_checkpoint.write([(1, 0)])
    store.close()
    return d / "hw-0"


def _schedule(tmp_path, *steps):
    p = tmp_path / "schedule.toml"
    p.write_text("".join("[[step]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in s.items()) for s in steps))
    return p


def test_corrupt_step_kills_damages_restarts_and_keeps_a_majority(cluster, tmp_path):
    sched = _schedule(tmp_path,
                      {"at": 0.2, "fault": "corrupt-bitflip", "targets": ["n2"], "duration": 1.5},
                      {"at": 0.5, "fault": "corrupt-truncate", "targets": ["n3"], "duration": 0.5})
    history = History(tmp_path / "history.jsonl")
    nem = Nemesis(cluster, history, FaultPlan(seed=4, schedule=sched))
    cluster.start()
    parts = {n: _data(cluster, n) for n in ("n2", "n3")}
    old = cluster.pid("n2")
    nem.start()
    assert eventually(lambda: not cluster.is_running("n2"), 10, interval=0.02)
    assert eventually(lambda: cluster.is_running("n2") and cluster.pid("n2") != old and not nem.active(), 10,
                      interval=0.05)
    nem.stop()
    history.close()
    ops = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [(o["f"], o["value"]["fault"], o["value"]["phase"], o["value"]["targets"]) for o in ops[::2]] == [
        ("corrupt", "corrupt", "start", ["n2"]), ("restart", "corrupt", "stop", ["n2"])]
    start = ops[1]["value"]
    assert (start["how"], start["partition"], start["name"]) == ("bitflip", None, "corrupt-bitflip")
    assert start["detail"].startswith(f"SIGKILL n2 pid {old}; n2: bit ")
    assert "flipped in hw-0/" in start["detail"] and ops[1].get("error") is None
    # the second step was skipped: n2 down + n3 would be a majority of 3 brokers
    assert nem.stats.skipped == ["corrupt-truncate at 0.5s: no eligible target (skipped n3 (a majority of "
                                 "brokers must stay up and intact))"]
    assert scan_partition(parts["n2"]).reason is not None       # n2's log really is damaged
    assert scan_partition(parts["n3"]).reason is None           # n3 untouched


def test_corrupt_refuses_a_running_node_and_the_controller(cluster, tmp_path):
    from clusters.base import ClusterError
    cluster.start()
    _data(cluster, "n1")
    with pytest.raises(ClusterError, match="n1: cannot corrupt its data files while it runs"):
        cluster.corrupt("n1", "bitflip")
    with pytest.raises(ClusterError, match="c0: corrupt applies to brokers"):
        cluster.corrupt("c0", "bitflip")
    cluster.kill("n1")
    fault = cluster.corrupt("n1", "hw-checkpoint-delete")
    assert (fault.detail, fault.partition, fault.offset) == ("n1: deleted hw-0/hw.checkpoint (29 bytes)", 0, None)
    with pytest.raises(ClusterError, match="n1: .*no hw.checkpoint to corrupt"):
        cluster.corrupt("n1", "hw-checkpoint-corrupt")


def test_corrupt_checkpoint_choices_and_schedule_checks(tmp_path):
    assert CORRUPT_HOW["corrupt-checkpoint"] == ("hw-checkpoint-delete", "hw-checkpoint-corrupt",
                                                  "epoch-checkpoint-delete", "epoch-checkpoint-corrupt")
    assert {corrupt_how("corrupt-checkpoint", s) for s in range(40)} == set(CORRUPT_HOW["corrupt-checkpoint"])
    assert corrupt_how("corrupt-bitflip", 5) == "bitflip"
    p = _schedule(tmp_path, {"at": 1, "fault": "corrupt-checkpoint", "targets": ["c0"], "duration": 1})
    with pytest.raises(ConfigError, match="step 1: field 'targets': corrupt applies to brokers only"):
        load_schedule(p, ["c0", "n1", "n2", "n3"])
