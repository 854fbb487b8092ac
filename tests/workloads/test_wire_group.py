"""Unit tests for workloads/wire_group.py's consumer-protocol encoding (its requests are exercised on real
brokers by tests/harness/test_e2e_group_scenarios.py, and the encoding by kafka-python below)."""
from __future__ import annotations

import struct

from workloads import wire_group as W


def test_assignment_round_trips_and_ignores_other_topics():
    data = W.assignment("hw", [2, 0])
    assert W.assigned_partitions(data, "hw") == [0, 2]
    assert W.assigned_partitions(data, "other") == []
    assert W.assigned_partitions(b"", "hw") == []          # a member the leader gave nothing


def test_encoding_matches_kafka_python_consumer_protocol():
    """kafka-python's own codec for the classic consumer protocol reads what the wire member writes, and
    the wire member reads what kafka-python's leader would write."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
    sub = ConsumerProtocolSubscription.decode(W.subscription(["hw"]))
    assert (sub.version, sub.topics) == (0, ["hw"])
    got = ConsumerProtocolAssignment.decode(W.assignment("hw", [0, 1]))
    assert got.version == 0 and [(tp.topic, list(tp.partitions)) for tp in got.assigned_partitions] == [("hw", [0, 1])]
    tp = ConsumerProtocolAssignment.TopicPartition
    theirs = ConsumerProtocolAssignment(version=0, assigned_partitions=[tp(version=0, topic="hw", partitions=[1, 2])],
                                        user_data=b"").encode()
    assert W.assigned_partitions(theirs, "hw") == [1, 2]


def test_error_names_and_refusals():
    assert W.error_name(22) == "ILLEGAL_GENERATION" and W.error_name(9999) == "KAFKA_ERROR_9999"
    assert 25 in W.REFUSED and 15 not in W.REFUSED          # COORDINATOR_NOT_AVAILABLE: maybe written
    assert struct.unpack(">h", W.subscription([])[:2]) == (0,)
