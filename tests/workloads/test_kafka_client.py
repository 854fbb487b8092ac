"""The Kafka-client adapters' error classification (workloads/kafka_client.py), with the libraries' own
error objects, and their behaviour against an address where nothing listens (real clients, no broker).
The real-cluster counterparts are in test_kafka_client_real.py."""
from __future__ import annotations

import socket
import time

import pytest

from broker.client import ClientError
from workloads import kafka_client as kc

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka_errors = pytest.importorskip("kafka.errors")

# Kafka error code -> (name, definite): the table, stated again here so a change to it is deliberate
EXPECTED_KAFKA = {
    1: ("OFFSET_OUT_OF_RANGE", True), 2: ("CORRUPT_MESSAGE", True), 3: ("UNKNOWN_TOPIC_OR_PARTITION", True),
    4: ("INVALID_FETCH_SIZE", True), 5: ("LEADER_NOT_AVAILABLE", True), 6: ("NOT_LEADER_OR_FOLLOWER", False),
    7: ("REQUEST_TIMED_OUT", False), 8: ("BROKER_NOT_AVAILABLE", False), 9: ("REPLICA_NOT_AVAILABLE", True),
    10: ("MESSAGE_TOO_LARGE", True), 13: ("NETWORK_EXCEPTION", False), 17: ("INVALID_TOPIC_EXCEPTION", True),
    18: ("RECORD_LIST_TOO_LARGE", True), 19: ("NOT_ENOUGH_REPLICAS", True),
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", False), 21: ("INVALID_REQUIRED_ACKS", True),
    29: ("TOPIC_AUTHORIZATION_FAILED", True), 32: ("INVALID_TIMESTAMP", True), 35: ("UNSUPPORTED_VERSION", True),
    42: ("INVALID_REQUEST", True), 43: ("UNSUPPORTED_FOR_MESSAGE_FORMAT", True),
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False), 47: ("INVALID_PRODUCER_EPOCH", False), 56: ("KAFKA_STORAGE_ERROR", False),
    74: ("FENCED_LEADER_EPOCH", True), 75: ("UNKNOWN_LEADER_EPOCH", True), 87: ("INVALID_RECORD", True),
    -1: ("UNKNOWN_SERVER_ERROR", False),
    # the group coordinator's: refused before any write, but for the two a coordinator also answers
    # after the commit's append was made (a timeout, a leader change), which leave its outcome unknown
    12: ("OFFSET_METADATA_TOO_LARGE", True), 14: ("COORDINATOR_LOAD_IN_PROGRESS", True),
    15: ("COORDINATOR_NOT_AVAILABLE", False), 16: ("NOT_COORDINATOR", False), 22: ("ILLEGAL_GENERATION", True),
    23: ("INCONSISTENT_GROUP_PROTOCOL", True), 24: ("INVALID_GROUP_ID", True), 25: ("UNKNOWN_MEMBER_ID", True),
    26: ("INVALID_SESSION_TIMEOUT", True), 27: ("REBALANCE_IN_PROGRESS", True),
    28: ("INVALID_COMMIT_OFFSET_SIZE", True), 30: ("GROUP_AUTHORIZATION_FAILED", True),
    79: ("MEMBER_ID_REQUIRED", True), 82: ("FENCED_INSTANCE_ID", True),
}
EXPECTED_CONFLUENT_LOCAL = {
    "_MSG_TIMED_OUT": ("_MSG_TIMED_OUT", False), "_TIMED_OUT": ("_TIMED_OUT", False),
    "_TIMED_OUT_QUEUE": ("_TIMED_OUT_QUEUE", False), "_TRANSPORT": ("_TRANSPORT", False),
    "_ALL_BROKERS_DOWN": ("_ALL_BROKERS_DOWN", False), "_PURGE_INFLIGHT": ("_PURGE_INFLIGHT", False),
    "_DESTROY": ("_DESTROY", False), "_BAD_MSG": ("_BAD_MSG", False), "_FATAL": ("_FATAL", False),
    "_FAIL": ("_FAIL", False), "_RESOLVE": ("_RESOLVE", True),
    "_UNKNOWN_PARTITION": ("_UNKNOWN_PARTITION", True), "_UNKNOWN_TOPIC": ("_UNKNOWN_TOPIC", True),
    "_QUEUE_FULL": ("_QUEUE_FULL", True), "_PURGE_QUEUE": ("_PURGE_QUEUE", True),
    "_INVALID_ARG": ("_INVALID_ARG", True), "_STATE": ("_STATE", True),
    "_AUTO_OFFSET_RESET": ("OFFSET_OUT_OF_RANGE", True), "_LOG_TRUNCATION": ("OFFSET_OUT_OF_RANGE", True),
    # a group member's: nothing was sent, or the member is no longer in the group
    "_WAIT_COORD": ("_WAIT_COORD", True), "_NO_OFFSET": ("_NO_OFFSET", True),
    "_MAX_POLL_EXCEEDED": ("_MAX_POLL_EXCEEDED", True), "_ASSIGNMENT_LOST": ("_ASSIGNMENT_LOST", True),
}
# kafka-python exception class -> (code, definite)
EXPECTED_KAFKA_PYTHON = {
    "NotLeaderForPartitionError": ("NOT_LEADER_OR_FOLLOWER", False),
    "NotEnoughReplicasError": ("NOT_ENOUGH_REPLICAS", True),
    "NotEnoughReplicasAfterAppendError": ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", False),
    "UnknownTopicOrPartitionError": ("UNKNOWN_TOPIC_OR_PARTITION", True),
    "RequestTimedOutError": ("REQUEST_TIMED_OUT", False),
    "LeaderNotAvailableError": ("LEADER_NOT_AVAILABLE", True),
    "KafkaStorageError": ("KAFKA_STORAGE_ERROR", False),
    "NetworkExceptionError": ("NETWORK_EXCEPTION", False),
    "OffsetOutOfRangeError": ("OFFSET_OUT_OF_RANGE", True),
    "FencedLeaderEpochError": ("FENCED_LEADER_EPOCH", True),
    "UnknownLeaderEpochError": ("UNKNOWN_LEADER_EPOCH", True),
    "InvalidRecordError": ("INVALID_RECORD", True),
    "UnknownError": ("UNKNOWN_SERVER_ERROR", False),
    "KafkaTimeoutError": ("KafkaTimeoutError", False),
    "KafkaConnectionError": ("KafkaConnectionError", False),
    "NodeNotReadyError": ("NodeNotReadyError", True),
    "TooManyInFlightRequests": ("TooManyInFlightRequests", True),
    "MetadataEmptyBrokerList": ("MetadataEmptyBrokerList", True),
    "StaleMetadata": ("StaleMetadata", True),
    "CorrelationIdError": ("CorrelationIdError", False),
    "Cancelled": ("Cancelled", False),
    "KafkaProtocolError": ("KafkaProtocolError", False),
    "InvalidReceiveError": ("InvalidReceiveError", False),
    "IllegalStateError": ("IllegalStateError", True),
    "IllegalArgumentError": ("IllegalArgumentError", True),
    "KafkaConfigurationError": ("KafkaConfigurationError", True),
    "NoOffsetForPartitionError": ("OFFSET_OUT_OF_RANGE", True),
    "LogTruncationError": ("OFFSET_OUT_OF_RANGE", True),
}


def test_tables_are_the_documented_ones():
    assert {c: v for c, v in kc.KAFKA_ERRORS.items()} == EXPECTED_KAFKA
    assert set(kc.CONFLUENT_LOCAL_ERRORS) == set(EXPECTED_CONFLUENT_LOCAL)


@pytest.mark.parametrize("code", sorted(EXPECTED_KAFKA))
def test_every_kafka_code_through_librdkafka_error(code):
    """A librdkafka KafkaError carrying a broker code is classified by Kafka's table."""
    err = confluent_kafka.KafkaError(code)
    e = kc.classify_confluent(err, "ctx")
    assert isinstance(e, ClientError)
    assert (e.code, e.definite) == EXPECTED_KAFKA[code]
    assert e.message.startswith("ctx: ")


@pytest.mark.parametrize("name", sorted(EXPECTED_CONFLUENT_LOCAL))
def test_every_librdkafka_local_error(name):
    err = confluent_kafka.KafkaError(getattr(confluent_kafka.KafkaError, name))
    e = kc.classify_confluent(err)
    assert (e.code, e.definite) == EXPECTED_CONFLUENT_LOCAL[name]


def test_librdkafka_unlisted_local_error_is_unknown():
    e = kc.classify_confluent(confluent_kafka.KafkaError(confluent_kafka.KafkaError._NODE_UPDATE))
    assert (e.code, e.definite) == ("_NODE_UPDATE", False)


@pytest.mark.parametrize("cls", sorted(EXPECTED_KAFKA_PYTHON))
def test_every_kafka_python_exception(cls):
    exc = getattr(kafka_errors, cls)("boom")
    e = kc.classify_kafka_python(exc, "ctx")
    assert (e.code, e.definite) == EXPECTED_KAFKA_PYTHON[cls]
    assert "boom" in e.message


def test_kafka_python_unlisted_and_foreign_exceptions_are_unknown():
    assert (kc.classify_kafka_python(kafka_errors.QuotaViolationError("x")).definite) is False
    e = kc.classify_kafka_python(RuntimeError("x"))
    assert (e.code, e.definite) == ("RuntimeError", False)
    # an unknown broker code is unknown too, and named by its number
    assert (kc.classify_code(999).code, kc.classify_code(999).definite) == ("KAFKA_ERROR_999", False)


def test_factories_refuse_unknown_libraries_and_bad_acks():
    with pytest.raises(ValueError, match="unknown Kafka client library 'aiokafka'"):
        kc.make_producer("aiokafka", ["127.0.0.1:1"])
    with pytest.raises(ValueError, match="unknown Kafka client library"):
        kc.make_consumer("nope", ["127.0.0.1:1"])
    with pytest.raises(ValueError, match="acks must be 0, 1 or 'all'"):
        kc.make_producer("confluent", ["127.0.0.1:1"], acks=2)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_confluent_send_to_nothing_is_unknown_after_the_message_timeout():
    """Nothing listens: librdkafka keeps the message queued until message.timeout.ms, then reports
    _MSG_TIMED_OUT, which the adapter records as unknown (it cannot tell whether it was ever sent)."""
    p = kc.make_producer("confluent", [f"127.0.0.1:{_closed_port()}"], acks="all", timeout_s=0.3)
    try:
        t0 = time.monotonic()
        with pytest.raises(ClientError) as info:
            p.send("hw", 0, [b"1"])
        assert (info.value.code, info.value.definite) == ("_MSG_TIMED_OUT", False)
        assert 1.0 <= time.monotonic() - t0 < 5.0      # message.timeout.ms = 300 + 1000 ms
    finally:
        p.close()


def test_confluent_fetch_from_nothing_raises_a_classified_error():
    c = kc.make_consumer("confluent", [f"127.0.0.1:{_closed_port()}"], timeout_s=0.3)
    try:
        with pytest.raises(ClientError) as info:
            c.fetch("hw", 0, 0, max_records=10, max_wait_ms=50)
        assert info.value.definite is False          # a read that timed out: unknown
    finally:
        c.close()
