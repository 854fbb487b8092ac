"""A deliberately broken broker is caught by a default run, per family of protocol rules.

Each case copies this checkout's tracked files to a temporary tree, applies one mutant of the project's
corpus (benchmarks/mutants/: a small bug written from a protocol promise) there, never here, and runs a
default `highwater run` (safe settings, the default nemesis) from that copy, as the mutation benchmark
does (benchmarks/mutation.py; its `child_env` puts the copy first on every process's import path, the
brokers' included). The run must be INVALID with one of the family's protocol kinds among the failed
ones; the unmodified copy's default run, with the same seed, is VALID (and benchmarks/false_alarms.py
runs twenty more). Two families run in every CI; the others carry the nightly marker. The storage family
replays a short scenario instead (a follower's disk damaged while it is down: a default run draws a
bitflip in about one run of three), in every CI: both copies take about 7 s.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():
    spec = importlib.util.spec_from_file_location("mutation_benchmark_for_tests", ROOT / "benchmarks" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


mb = _benchmark()
MUTANTS = {m.name: m for m in mb.load_corpus()}

# family -> (mutant, the protocol kinds that show it, marks)
FAMILIES = {
    "reads": ("consumer-reads-to-leo", {"read-uncommitted"}, ()),
    "epochs": ("epoch-bump-only-offline", {"epoch-not-increasing", "epoch-two-leaders"}, ()),
    "acknowledgements": ("ack-at-hw-equal", {"ack-above-hw"}, (pytest.mark.nightly,)),
    "watermarks": ("leader-hw-moves-back", {"leader-hw-decrease"}, (pytest.mark.nightly,)),
    "durability": ("group-commit-stale-leo", {"acked-not-durable"}, (pytest.mark.nightly,)),
    "elections": ("fence-elects-from-replicas", {"election-outside-isr"}, (pytest.mark.nightly,)),
}


@pytest.fixture(scope="module")
def base_tree(tmp_path_factory) -> Path:
    """This checkout's tracked files as they are now (uncommitted edits included), outside the checkout."""
    dest = tmp_path_factory.mktemp("tree")
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(src.read_bytes())
    return dest


def _copy(base: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(base, dest, symlinks=True)
    return dest


def default_run(tree: Path, results: Path) -> tuple[subprocess.CompletedProcess, Path, dict]:
    """`highwater run` with the defaults (30 s, seed 11, reference checker) from `tree`."""
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "run",
         "--time-limit", "30", "--seed", "11", "--checker", "reference", "--results-dir", str(results), "--plain"],
        cwd=tree, env=mb.child_env(tree), capture_output=True, text=True, timeout=600)
    run_dir = Path(proc.stdout.strip().splitlines()[-1]).parent
    assert tree not in run_dir.parents and results in run_dir.parents
    return proc, run_dir, json.loads((run_dir / "results.json").read_text())


@pytest.mark.slow
def test_the_unmodified_copy_is_valid(base_tree, tmp_path):
    proc, _run_dir, doc = default_run(_copy(base_tree, tmp_path / "tree"), tmp_path / "results")
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert doc["valid"] is True and doc["failed_kinds"] == []


@pytest.mark.slow
@pytest.mark.parametrize("family", [pytest.param(f, marks=FAMILIES[f][2]) for f in FAMILIES])
def test_a_broken_broker_is_caught_by_a_default_run(family, base_tree, tmp_path):
    name, kinds, _marks = FAMILIES[family]
    tree = _copy(base_tree, tmp_path / "tree")
    mutated = mb.apply_mutant(MUTANTS[name], tree)
    assert tree in mutated.parents
    proc, run_dir, doc = default_run(tree, tmp_path / "results")
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    found = set(doc["failed_kinds"])
    assert found & kinds, f"{name}: failed kinds {sorted(found)}, none of {sorted(kinds)}"
    # the brokers ran the mutated copy: their event logs came from it (every node wrote one)
    assert sorted(p.name for p in (run_dir / "nodes").iterdir()) == ["c0", "n1", "n2", "n3"]


# a follower's disk damaged while it is down: ten records committed on all three, n3 crashes, one bit of
# one of its records flips (the seed picks a timestamp byte, which only the CRC covers), n3 restarts
DAMAGED_FOLLOWER = """
name = "damaged-follower"
description = "n3 crashes with ten committed records; a bit of one of them flips on its disk; it restarts"
final_wait = 20

[cluster]
nodes = 3

[topic]
partitions = 1
replication_factor = 3

[broker]
min_insync_replicas = 2

[client]
acks = "all"

[checker]
engine = "reference"

[expect]
leader-epoch = []

[[step]]
do = "wait"
leader = "n1"
isr = ["n1", "n2", "n3"]
timeout = 30

[[step]]
do = "produce"
count = 10

[[step]]
do = "wait"
node = "n3"
leo = 10
timeout = 10

[[step]]
do = "kill"
node = "n3"

[[step]]
do = "corrupt"
node = "n3"
how = "bitflip"
seed = %(seed)d

[[step]]
do = "restart"
node = "n3"

[[step]]
do = "wait"
isr = ["n1", "n2", "n3"]
timeout = 30
"""
DAMAGED_FOLLOWER_SEED = 7      # ten 38-byte records: bit 0 of byte 27 of offset 2, in its timestamp


def scenario_run(tree: Path, results: Path, text: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`highwater scenario` of `text` from `tree` (reference checker); its results.json."""
    path = results.parent / "scenario.toml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "scenario", str(path),
         "--checker", "reference", "--results-dir", str(results), "--plain"],
        cwd=tree, env=mb.child_env(tree), capture_output=True, text=True, timeout=600)
    found = sorted(results.rglob("results.json"))
    assert len(found) == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc, json.loads(found[0].read_text())


@pytest.mark.slow
def test_a_recovery_that_keeps_a_damaged_record_is_caught(base_tree, tmp_path):
    """Storage family: the unmodified copy's recovery cuts n3's log at the flipped record and the scenario
    passes; a copy whose start-up scan skips the CRC (recovery-skips-crc) reopens the log with the damaged
    record in it, which the rule damaged-record-kept names."""
    text = DAMAGED_FOLLOWER % {"seed": DAMAGED_FOLLOWER_SEED}
    (tmp_path / "clean").mkdir()
    proc, doc = scenario_run(_copy(base_tree, tmp_path / "clean" / "tree"), tmp_path / "clean" / "results", text)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert doc["valid"] is True and doc["anomalies"]["damaged-record-kept"]["count"] == 0
    (tmp_path / "mutant").mkdir()
    tree = _copy(base_tree, tmp_path / "mutant" / "tree")
    mb.apply_mutant(MUTANTS["recovery-skips-crc"], tree)
    proc, doc = scenario_run(tree, tmp_path / "mutant" / "results", text)
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "damaged-record-kept" in doc["failed_kinds"], doc["failed_kinds"]
    [example] = doc["anomalies"]["damaged-record-kept"]["examples"]
    assert example["node"] == "n3" and "whose record a storage fault had damaged" in example["detail"]
