"""The client faults (nemesis/faults.py `client-pause`): a workload client held past its timeouts.

- the workload's side: a held client's next call waits until it is released, the other workers go on,
  and stopping the workload releases every hold (fake clients, counting their calls);
- the nemesis's side: a pause-consumer step picks a consumer, records its window and releases it at the
  stop; without the workload's clients it is refused up front;
- for real: a local run with `--nemesis pause-consumer` holds a consumer for each window (its polls stop
  for the window's length while the other consumer polls on), and the run is valid.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.errors import ConfigError
from clusters.base import ClusterSpec
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from nemesis import Aim, FaultPlan, Nemesis
from nemesis.step import Step
from rundir import formats as runformat
from workloads.workload import Run, Workload

from test_fault_records import Records


class Counting:
    """A producer and consumer client that only counts its calls."""

    def __init__(self, calls: dict[int, int], i: int):
        self.calls, self.i = calls, i

    def send(self, topic, partition, values, **_kw):
        self.calls[self.i] = self.calls.get(self.i, 0) + 1
        time.sleep(0.002)
        return SimpleNamespace(offsets=[self.calls[self.i]], epoch=0)

    def close(self):
        pass


class NullHistory:
    def new_process(self):
        return 0

    def invoke(self, *a, **k):
        pass

    def complete(self, *a, **k):
        pass


def _workload(calls):
    return Workload("producer", Run(NullHistory(), "t", 1, 1, make_producer=lambda i: Counting(calls, i)),
                    SimpleNamespace(rate=2000, concurrency=2, consumers=0))


def test_a_held_client_waits_and_the_others_go_on_and_stop_releases_it():
    calls: dict[int, int] = {}
    w = _workload(calls)
    assert w.client_names() == ["producer-0", "producer-1"]
    w.start()
    try:
        time.sleep(0.2)
        assert w.pause_client("producer-0") == "producer-0 held: its next client call waits"
        time.sleep(0.1)                             # a call under way when it was held may finish
        held, other = calls.get(0, 0), calls.get(1, 0)
        time.sleep(0.3)
        assert calls.get(0, 0) == held and calls.get(1, 0) > other
        assert w.resume_client("producer-0") == "producer-0 released"
        time.sleep(0.2)
        assert calls.get(0, 0) > held
        w.pause_client("producer-1")
    finally:
        assert w.stop(timeout=5) == []              # the held producer-1 is released by the stop


def _cluster(tmp_path):
    return LocalCluster(ClusterSpec("clients", tmp_path / "run", brokers=3), registry=Registry(tmp_path / "reg"))


def test_pause_consumer_holds_a_consumer_and_releases_it_at_the_stop(tmp_path):
    held: list[str] = []

    class Clients:
        def client_names(self):
            return ["producer-0", "consumer-0", "consumer-1"]

        def pause_client(self, name):
            held.append(name)
            return f"{name} held"

        def resume_client(self, name):
            held.remove(name)
            return f"{name} released"
    rec = Records()
    nem = Nemesis(_cluster(tmp_path), rec, FaultPlan(["pause-consumer"], seed=5), aim=Aim(clients=Clients))
    step = Step.timed(1.0, "pause-consumer", 2.0, seed=9)
    nem._start_fault(step, 1.0)
    assert len(held) == 1 and held[0].startswith("consumer-")
    nem._start_fault(Step.timed(1.5, "pause-consumer", 2.0, seed=9), 1.5)    # the other consumer
    assert sorted(held) == ["consumer-0", "consumer-1"]
    nem._start_fault(Step.timed(1.6, "pause-consumer", 2.0, seed=9), 1.6)    # none free: skipped
    assert "no free consumer" in nem.stats.skipped[-1]
    nem.stop()
    assert held == []
    infos = [line for line in rec.lines if '"type": "info"' in line]
    assert len(infos) == 4 and all('"fault": "client-pause"' in line for line in infos)
    assert '"f": "pause-client"' in infos[0] and '"f": "resume-client"' in infos[-1]


def test_a_client_fault_without_the_workload_is_refused_up_front(tmp_path):
    with pytest.raises(ConfigError, match="'pause-client' holds a workload client and needs the workload"):
        Nemesis(_cluster(tmp_path), Records(), FaultPlan(["pause-client"]))


@pytest.mark.slow
def test_a_real_run_holds_a_consumer_for_each_window(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
    from e2e_helpers import load_json, run_dir_from_stdout, run_highwater
    r = run_highwater("run", "--time-limit", "10", "--nemesis", "pause-consumer", "--nemesis-interval", "2.5",
                      "--seed", "3", "--checker", "reference", "--results-dir", str(tmp_path), "--plain",
                      timeout=300)
    assert r.returncode == 0, r.stderr
    run_dir = run_dir_from_stdout(r.stdout)
    ops = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.HISTORY)]
    windows = {}
    for op in ops:
        if op["process"] == runformat.NEMESIS_PROCESS and op["type"] == "info":
            v = op["value"]
            assert v["fault"] == "client-pause" and v["targets"][0].startswith("consumer-") and "error" not in op
            windows.setdefault(v["id"], {})[v["phase"]] = op["time"]
    assert windows and all(set(w) == {"start", "stop"} for w in windows.values())
    polls: dict[int, list[int]] = {}
    for op in ops:
        if op["f"] == "poll" and op["type"] == "invoke":
            polls.setdefault(op["process"], []).append(op["time"])
    last_poll = max(t for ts in polls.values() for t in ts)
    inside = [w for w in windows.values() if w["stop"] + 0.5e9 < last_poll]    # not cut by the run's end
    assert inside
    for w in inside:
        length = w["stop"] - w["start"]
        # a consumer process polls before the window and after it but not during it, and another polls on
        quiet = [p for p, ts in polls.items() if min(ts) < w["start"] and max(ts) > w["stop"]
                 and not any(w["start"] + 0.3e9 < t < w["stop"] - 0.3e9 for t in ts)]
        busy = [p for p, ts in polls.items() if any(w["start"] < t < w["stop"] for t in ts)]
        assert length > 2e9 and quiet and busy, (w, sorted(polls))
    assert load_json(run_dir / runformat.RESULTS_JSON)["valid"] is True
    assert Path(run_dir / runformat.TEST_JSON).exists()
