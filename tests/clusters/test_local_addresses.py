"""Loopback address/port allocation and the run registry (clusters/addresses.py, clusters/run_registry.py)."""
from __future__ import annotations

import json
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import time

import pytest

from clusters.addresses import Allocation, allocate
from clusters.base import ClusterError
from clusters.run_registry import ProcessRecord, Registry, proc_start_time, proc_state, same_process


def _allocate_in_child(registry_dir: str, run_id: str, queue) -> None:
    # every child starts from the same RNG seed: only the registry lock keeps them apart
    alloc = allocate(Registry(registry_dir), run_id, 4, rng=random.Random(7))
    queue.put((run_id, alloc.prefix, alloc.ports))


def test_concurrent_allocations_in_separate_processes_never_collide(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_allocate_in_child, args=(str(tmp_path), f"run-{i}", queue)) for i in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    prefixes = [r[1] for r in results]
    ports = [port for r in results for port in r[2]]
    assert len(set(prefixes)) == 4
    assert len(set(ports)) == 16
    for _, prefix, block in results:
        assert prefix.startswith("127.") and len(block) == 4
        assert block == list(range(block[0], block[0] + 4))
    entries = {e.run_id: e for e in Registry(tmp_path).entries()}
    assert sorted(entries) == ["run-0", "run-1", "run-2", "run-3"]
    for run_id, prefix, block in results:
        assert entries[run_id].prefix == prefix and entries[run_id].ports == block


def test_two_allocations_with_the_same_rng_get_different_prefixes_and_ports(tmp_path):
    reg = Registry(tmp_path)
    a = allocate(reg, "a", 4, rng=random.Random(1))
    b = allocate(reg, "b", 4, rng=random.Random(1))
    assert a.prefix != b.prefix
    assert not set(a.ports) & set(b.ports)
    assert a.host(0) == a.prefix + ".1" and a.host(3) == a.prefix + ".4"


def test_allocation_records_owner_and_rejects_a_duplicate_run_id(tmp_path):
    reg = Registry(tmp_path)
    allocate(reg, "dup", 2, run_dir="/x/y")
    entry = reg.get("dup")
    assert entry.owner_pid == os.getpid()
    assert entry.owner_start_time == proc_start_time(os.getpid())
    assert entry.owner_alive() is True
    assert entry.boot_id == open("/proc/sys/kernel/random/boot_id").read().strip()
    entry.boot_id = "another-boot"
    assert entry.owner_alive() is False
    assert entry.run_dir == "/x/y"
    with pytest.raises(ClusterError, match="run id 'dup' is already registered"):
        allocate(reg, "dup", 2)


def test_an_address_port_in_use_is_never_handed_out(tmp_path):
    # occupy the first candidate the seeded RNG would produce, then allocate with the same seed
    probe = allocate(Registry(tmp_path / "probe"), "probe", 1, rng=random.Random(5))
    with socket.socket() as busy:
        busy.bind((probe.host(0), probe.port(0)))
        busy.listen()
        got = allocate(Registry(tmp_path / "real"), "real", 1, rng=random.Random(5))
        assert (got.host(0), got.port(0)) != (probe.host(0), probe.port(0))


def test_proc_helpers_see_a_real_stopped_process_and_a_reused_pid_is_not_the_same_process():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = proc_start_time(p.pid)
        assert start is not None and same_process(p.pid, start)
        assert not same_process(p.pid, start + 1)
        os.kill(p.pid, 19)  # SIGSTOP
        deadline = time.monotonic() + 5
        while proc_state(p.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc_state(p.pid) == "T"
    finally:
        p.kill()
        p.wait()
    assert not same_process(p.pid, start)
    assert proc_start_time(p.pid) is None


def test_registry_process_records_round_trip(tmp_path):
    reg = Registry(tmp_path)
    allocate(reg, "r", 2)
    reg.add_process("r", ProcessRecord("n1", 123, 456, ["x", "y"]))
    reg.add_process("r", ProcessRecord("c0", 124, 457, ["z"]))
    reg.drop_process("r", 123)
    entry = reg.get("r")
    assert [(p.node, p.pid, p.start_time, p.argv) for p in entry.processes] == [("c0", 124, 457, ["z"])]
    raw = json.loads(next(tmp_path.glob("run-*.json")).read_text())
    assert raw["processes"][0]["node"] == "c0"
    reg.remove("r")
    assert reg.get("r") is None and reg.entries() == []


def test_allocation_value_helpers():
    a = Allocation("127.80.1", [20000, 20001, 20002])
    assert [a.host(i) for i in range(3)] == ["127.80.1.1", "127.80.1.2", "127.80.1.3"]
    assert [a.port(i) for i in range(3)] == [20000, 20001, 20002]
