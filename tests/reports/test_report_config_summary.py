"""The configuration summary picks the settings that decide a run's outcome, whatever the config's shape."""
from __future__ import annotations

from reports.config_summary import flatten, show, summary

HARNESS_CONFIG = {  # the shape harness/config.py records in test.json
    "broker": {"flush": "never", "min_insync_replicas": 1, "power_loss": False, "truncation": "hw",
               "unclean_leader_election": False, "extra": {}},
    "client": {"acks": 1, "retries": 0},
    "cluster": {"backend": "local", "nodes": 3},
    "nemesis": {"faults": ["kill", "power-loss"], "interval": 3.0},
    "time_limit": 30.0,
    "topic": {"name": "hw", "partitions": 3, "replication_factor": 3},
    "workload": {"concurrency": 4, "name": "producer-consumer"},
}


def test_summary_of_the_harness_config_in_order_of_importance():
    assert summary(HARNESS_CONFIG, limit=8) == [
        ("truncation", "hw"), ("acks", "1"), ("min ISR", "1"), ("unclean", "false"), ("faults", "kill, power-loss"),
        ("flush", "never"), ("power loss", "false"), ("time limit", "30.0")]
    assert ("RF", "3") in summary(HARNESS_CONFIG, limit=12) and ("nodes", "3") in summary(HARNESS_CONFIG, limit=12)


def test_unknown_config_shape_falls_back_to_first_scalars():
    assert summary({"alpha": 1, "beta": {"gamma": "x", "list": [1]}, "delta": True}, limit=2) == [
        ("alpha", "1"), ("beta.gamma", "x")]
    assert summary({}) == [] and summary("not a dict") == []


def test_flatten_and_show():
    assert flatten({"a": {"b": 1, "c": {}}, "d": [1, 2]}) == [("a.b", 1), ("a.c", {}), ("d", [1, 2])]
    assert [show(v) for v in (None, True, 2.5, "s", list(range(9)), {"k": [1]})] == [
        "null", "true", "2.5", "s", "9 items", '{"k":[1]}']


def test_a_kafka_client_run_names_its_client_after_acks_and_a_native_one_does_not():
    kafka = {**HARNESS_CONFIG, "client": {"acks": "all", "kind": "kafka", "library": "kafka-python"}}
    assert summary(kafka, limit=4) == [("truncation", "hw"), ("acks", "all"), ("client", "kafka (kafka-python)"),
                                       ("min ISR", "1")]
    native = {**HARNESS_CONFIG, "client": {"acks": 1, "kind": "native", "library": "confluent"}}
    assert summary(native, limit=12) == summary(HARNESS_CONFIG, limit=12)
