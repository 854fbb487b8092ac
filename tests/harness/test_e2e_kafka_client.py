"""End to end on real processes with a real Kafka client driving the workload (`highwater run --client
kafka`, confluent-kafka; workloads/kafka_client.py): a short chaos run in hw mode with acks=1 under kill
and leader-partition faults loses acknowledged writes, and the safe configuration (leader-epoch, acks=all,
min.insync.replicas=2) is valid. Both are checked by the reference engine (no Spark needed)."""
from __future__ import annotations

import json

import pytest

from rundir.verdict import failing_kinds
from rundir import formats as runformat
from e2e_helpers import firewall_leftovers, load_json, processes_mentioning, run_dir_from_stdout, run_highwater

pytest.importorskip("confluent_kafka")

HW_TEST = """name = "kafka-hw"
[broker]
truncation = "hw"
min_insync_replicas = 1
hw_checkpoint_interval_ms = 60000     # a restarted broker recovers a stale HW and truncates to it
replica_lag_time_max_ms = 10000
[client]
kind = "kafka"
acks = 1
[nemesis]
# partition-leader: the isolated leader keeps acknowledging the client's acks=1 writes, which the leader
# elected behind it never had (a loss every run, whatever the machine's load); kill: the stale-HW restarts
faults = ["kill", "partition-leader"]
interval = 2.0
[checker]
engine = "reference"
"""


def kafka_sends(run_dir) -> dict[str, int]:
    counts = {"ok": 0, "fail": 0, "info": 0}
    for line in runformat.iter_jsonl(run_dir / runformat.HISTORY):
        op = line.obj
        if op.get("f") == "send" and op["type"] != "invoke":
            counts[op["type"]] += 1
            if op["type"] == "ok":
                assert op["value"]["epoch"] == -1      # a Kafka client cannot tell an ack's leader epoch
    return counts


def check_common(run_dir, tmp_path, library="confluent") -> dict:
    test = load_json(run_dir / runformat.TEST_JSON)
    assert (test["config"]["client"]["kind"], test["config"]["client"]["library"]) == ("kafka", library)
    assert processes_mentioning(str(run_dir)) == []
    assert firewall_leftovers(test["run_id"]) == []
    return test


@pytest.mark.slow
@pytest.mark.root
def test_hw_mode_with_the_kafka_client_loses_acknowledged_writes(tmp_path):
    path = tmp_path / "hw.toml"
    path.write_text(HW_TEST)
    r = run_highwater("run", "--test-file", str(path), "--time-limit", "15", "--seed", "3",
                      "--results-dir", str(tmp_path), "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    assert "kafka client confluent" in r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert r.returncode == 1, r.stderr
    assert results["anomalies"]["lost-write"]["count"] > 0
    assert kafka_sends(run_dir)["ok"] > 300
    check_common(run_dir, tmp_path)


@pytest.mark.slow
@pytest.mark.root
def test_safe_configuration_with_the_kafka_client_is_valid(tmp_path):
    r = run_highwater("run", "--client", "kafka", "--time-limit", "15", "--nemesis", "kill,partition",
                      "--nemesis-interval", "3", "--truncation", "leader-epoch", "--acks", "all",
                      "--min-insync-replicas", "2", "--no-unclean-election", "--seed", "11",
                      "--checker", "reference", "--results-dir", str(tmp_path), "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    assert r.returncode == 0, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert results["valid"] is True
    assert kafka_sends(run_dir)["ok"] > 300
    final = load_json(run_dir / runformat.FINAL_JSON)
    assert [p["recovered"] for p in final["partitions"]] == [True, True, True]
    faults = {line.obj["value"]["fault"] for line in runformat.iter_jsonl(run_dir / runformat.HISTORY)
              if line.obj["process"] == "nemesis"}
    assert faults, "the nemesis injected no fault"
    check_common(run_dir, tmp_path)


@pytest.mark.slow
@pytest.mark.root
def test_idempotent_run_is_valid_and_a_duplicate_would_fail_it(tmp_path):
    """--idempotence under kills and partitions: librdkafka's idempotent producer retries within each
    send's deadline, the brokers drop the retries they already hold, and the run is valid with `duplicate`
    among the failing kinds; the replicas hold the producers' ids and sequences."""
    r = run_highwater("run", "--client", "kafka", "--idempotence", "--time-limit", "15", "--nemesis",
                      "kill,partition", "--nemesis-interval", "3", "--seed", "13", "--checker", "reference",
                      "--results-dir", str(tmp_path), "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    assert r.returncode == 0, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert results["valid"] is True and "duplicate" in failing_kinds(results)
    assert load_json(run_dir / runformat.TEST_JSON)["config"]["client"]["idempotence"] is True
    assert kafka_sends(run_dir)["ok"] > 300
    dumped = [json.loads(line) for f in sorted((run_dir / "replicas").glob("*/p*.jsonl"))
              for line in f.read_text().splitlines()[1:]]
    assert dumped and all(len(d["producer"]) == 3 and d["producer"][0] >= 1 << 40 for d in dumped)
    check_common(run_dir, tmp_path)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.nightly
def test_safe_configuration_with_kafka_python_is_valid(tmp_path):
    r = run_highwater("run", "--client", "kafka", "--kafka-library", "kafka-python", "--time-limit", "15",
                      "--nemesis", "kill,partition", "--nemesis-interval", "3", "--truncation", "leader-epoch",
                      "--acks", "all", "--min-insync-replicas", "2", "--seed", "12", "--checker", "reference",
                      "--results-dir", str(tmp_path), "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    assert r.returncode == 0, r.stderr
    assert kafka_sends(run_dir)["ok"] > 100
    check_common(run_dir, tmp_path, library="kafka-python")


@pytest.mark.slow
@pytest.mark.root
def test_mixed_clients_drive_both_protocols_and_the_safe_run_is_valid(tmp_path):
    """`--client mixed`: the odd-numbered producers and consumers are confluent-kafka, the rest and the
    final reads native; the history shows both (a Kafka acknowledgement has no epoch, a native one has),
    every final-read record carries its leader epoch, and the safe run is valid."""
    r = run_highwater("run", "--client", "mixed", "--time-limit", "15", "--nemesis", "kill,partition",
                      "--nemesis-interval", "3", "--seed", "5", "--checker", "reference",
                      "--results-dir", str(tmp_path), "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    assert r.returncode == 0, r.stderr
    assert "native and confluent clients" in r.stderr
    acks = {"native": 0, "kafka": 0}
    final_epochs = set()
    for line in runformat.iter_jsonl(run_dir / runformat.HISTORY):
        op = line.obj
        if op.get("f") == "send" and op["type"] == "ok":
            acks["kafka" if op["value"]["epoch"] == -1 else "native"] += 1
        if op.get("f") == "final-read" and op["type"] == "ok":
            final_epochs |= {rec[2] for rec in op["value"]["records"]}
    assert acks["native"] > 100 and acks["kafka"] > 100, acks
    assert final_epochs and min(final_epochs) >= 0, final_epochs
    test = load_json(run_dir / runformat.TEST_JSON)
    assert test["config"]["client"]["kind"] == "mixed"
    assert processes_mentioning(str(run_dir)) == [] and firewall_leftovers(test["run_id"]) == []
