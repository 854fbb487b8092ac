"""Kafka request/response codec (broker/kafka/messages.py): round trips of every api key and version
of the schema table, known-answer frames computed by hand, header versions, and hostile input
(truncation at every byte, random bytes, huge declared lengths, trailing bytes), which must give
KafkaCodecError and nothing else."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from broker.kafka import messages as m
from broker.kafka import versions as V
from broker.kafka.messages import KafkaCodecError, UnsupportedRequest
from broker.kafka.records import encode_batch
from broker.kafka.schema import REQUESTS, RESPONSES
from kafka_bodies import body_strategy

ADVERTISED = [(k, v) for k, (lo, hi) in sorted(V.SUPPORTED.items()) for v in range(lo, hi + 1)]
ALL_DECLARED = ADVERTISED + [(k, v) for k, (lo, hi) in sorted(V.SCHEMA_ONLY.items()) for v in range(lo, hi + 1)]
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ids(cases):
    return [f"{V.NAMES[k]}-v{v}" for k, v in cases]


def test_schema_covers_exactly_the_advertised_and_declared_versions():
    for table in (REQUESTS, RESPONSES):
        for k, rng in {**V.SUPPORTED, **V.SCHEMA_ONLY}.items():
            assert table[k].valid == rng, table[k].name
        assert set(table) == set(V.SUPPORTED) | set(V.SCHEMA_ONLY)


@pytest.mark.parametrize("api_key,version", ADVERTISED, ids=_ids(ADVERTISED))
def test_request_round_trip(api_key, version):
    @SETTINGS
    @given(body=body_strategy(REQUESTS[api_key], version), corr=st.integers(-(1 << 31), (1 << 31) - 1),
           client_id=st.none() | st.text(max_size=10))
    def check(body, corr, client_id):
        frame = m.encode_request(api_key, version, corr, client_id, body)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        req = m.decode_request(frame[4:])
        assert req == m.KafkaRequest(api_key, version, corr, client_id, body)
        # encoding what was decoded gives the same bytes
        assert m.encode_request(api_key, version, corr, client_id, req.body) == frame
    check()


@pytest.mark.parametrize("api_key,version", ALL_DECLARED, ids=_ids(ALL_DECLARED))
def test_response_round_trip(api_key, version):
    @SETTINGS
    @given(body=body_strategy(RESPONSES[api_key], version), corr=st.integers(-(1 << 31), (1 << 31) - 1))
    def check(body, corr):
        frame = m.encode_response(api_key, version, corr, body)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        assert m.decode_response(api_key, version, frame[4:]) == (corr, body)
    check()


@pytest.mark.parametrize("api_key,version", [(k, v) for k, (lo, hi) in V.SCHEMA_ONLY.items()
                                             for v in range(lo, hi + 1)])
def test_schema_only_requests_encode_but_are_not_accepted(api_key, version):
    frame = m.encode_request(api_key, version, 5, "c", {})
    with pytest.raises(UnsupportedRequest) as info:
        m.decode_request(frame[4:])
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (api_key, version, 5)


# ---- known answers, computed by hand from the protocol description ---------------------------------------

def test_api_versions_v0_request_bytes():
    frame = m.encode_request(V.API_VERSIONS, 0, 1, "abc", {})
    # length 13 | api key 18 | version 0 | correlation 1 | client id "abc"
    assert frame.hex() == "0000000d" "0012" "0000" "00000001" "0003616263"
    assert m.decode_request(frame[4:]) == m.KafkaRequest(18, 0, 1, "abc", {})


def test_api_versions_v3_request_bytes():
    frame = m.encode_request(V.API_VERSIONS, 3, 7, "cli", {"client_software_name": "x",
                                                         "client_software_version": "1.0"})
    # header v2: key, version, correlation, classic client id, empty tags | body: compact strings, empty tags
    assert frame.hex() == ("00000015" "0012" "0003" "00000007" "0003636c69" "00"
                           "0278" "04312e30" "00")
    assert m.decode_request(frame[4:]).body == {"client_software_name": "x", "client_software_version": "1.0"}


def test_api_versions_v0_response_bytes_and_header_v0_at_v3():
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    frame = m.encode_response(V.API_VERSIONS, 0, 9, body)
    assert frame.hex() == "00000010" "00000009" "0023" "00000001" "0012" "0000" "0003"
    # v3: response header v0 (no tag section) even though the body is flexible
    frame3 = m.encode_response(V.API_VERSIONS, 3, 9, {**body, "throttle_time_ms": 0})
    assert frame3.hex() == ("00000013" "00000009" "0023" "02" "0012" "0000" "0003" "00" "00000000" "00")
    assert m.decode_response(V.API_VERSIONS, 3, frame3[4:])[1]["api_keys"] == body["api_keys"]


def test_api_versions_v3_tagged_fields_bytes():
    body = {"api_keys": [], "finalized_features_epoch": 2, "zk_migration_ready": True}
    frame = m.encode_response(V.API_VERSIONS, 3, 1, body)
    # error 0 | compact empty array | throttle 0 | 2 tags: tag 1 len 8 int64 2, tag 3 len 1 true
    assert frame[4:].hex() == ("00000001" "0000" "01" "00000000" "02" "0108" "0000000000000002" "0301" "01")
    decoded = m.decode_response(V.API_VERSIONS, 3, frame[4:])[1]
    assert decoded["finalized_features_epoch"] == 2 and decoded["zk_migration_ready"] is True
    assert decoded["supported_features"] == [] and decoded["finalized_features"] == []


def test_unknown_tags_are_skipped():
    good = m.encode_response(V.API_VERSIONS, 3, 1, {})[4:]
    assert good.endswith(b"\x00")
    with_unknown = good[:-1] + bytes.fromhex("01" "1f" "03" "aabbcc")   # tag 31, 3 bytes
    assert m.decode_response(V.API_VERSIONS, 3, with_unknown) == m.decode_response(V.API_VERSIONS, 3, good)


def test_metadata_v1_all_topics_request_bytes():
    frame = m.encode_request(V.METADATA, 1, 2, None, {"topics": None})
    assert frame.hex() == "0000000e" "0003" "0001" "00000002" "ffff" "ffffffff"
    assert m.decode_request(frame[4:]) == m.KafkaRequest(3, 1, 2, None, {"topics": None})


def test_metadata_v9_flexible_request_bytes():
    # header v2 (classic client id, then an empty tag section), compact arrays and strings, a tag
    # section after every struct
    body = {"topics": [{"name": "t"}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    frame = m.encode_request(V.METADATA, 9, 7, "c", body)
    assert frame.hex() == "00000014" "0003" "0009" "00000007" "000163" "00" "02" "0274" "00" "00" "00" "00" "00"
    assert m.decode_request(frame[4:]) == m.KafkaRequest(3, 9, 7, "c", body)
    # all topics: a null compact array
    assert m.decode_request(m.encode_request(V.METADATA, 9, 8, None, {"topics": None})[4:]).body["topics"] is None


def test_metadata_v9_flexible_response_bytes():
    body = {"throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
            "cluster_id": "c", "controller_id": 1, "topics": [{"error_code": 0, "name": "t", "is_internal": False,
            "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 3,
                            "replica_nodes": [1, 2], "isr_nodes": [1], "offline_replicas": []}],
            "topic_authorized_operations": -2 ** 31}], "cluster_authorized_operations": -2 ** 31}
    frame = m.encode_response(V.METADATA, 9, 7, body)
    assert frame[4:].hex() == (
        "00000007" "00"                                          # correlation id, header v1 tag section
        "00000000"                                               # throttle_time_ms
        "02" "00000001" "0268" "00002384" "00" "00"              # brokers: [1 h:9092 rack null]
        "0263" "00000001"                                        # cluster_id, controller_id
        "02" "0000" "0274" "00"                                  # topics: [error 0, "t", not internal
        "02" "0000" "00000000" "00000001" "00000003"             #   partitions: [error, index, leader, epoch 3,
        "03" "00000001" "00000002" "02" "00000001" "01" "00"     #   replicas [1 2], isr [1], offline []]
        "80000000" "00"                                          #   topic authorized operations]
        "80000000" "00")                                         # cluster authorized operations (v8-10), tags
    assert m.decode_response(V.METADATA, 9, frame[4:]) == (7, body)


def test_produce_v3_request_bytes():
    batch = encode_batch(0, 0, [(1000, None, b"x")])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1500,
            "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": batch}]}]}
    frame = m.encode_request(V.PRODUCE, 3, 4, "p", body)
    expected = ("0000" "0003" "00000004" "000170"            # header: Produce v3, corr 4, client "p"
                "ffff" "ffff" "000005dc"                     # null transactional id, acks -1, timeout 1500
                "00000001" "000174" "00000001" "00000002"    # 1 topic "t", 1 partition, index 2
                + "%08x" % len(batch) + batch.hex())
    assert frame[4:].hex() == expected
    assert m.decode_request(frame[4:]).body == body


def test_produce_v8_response_defaults():
    frame = m.encode_response(V.PRODUCE, 8, 3, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 42}]}]})
    body = m.decode_response(V.PRODUCE, 8, frame[4:])[1]
    p = body["responses"][0]["partition_responses"][0]
    assert p == {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1, "log_start_offset": -1,
                 "record_errors": [], "error_message": None}
    assert body["throttle_time_ms"] == 0


def test_fields_absent_in_a_version_are_absent_on_decode_and_ignored_on_encode():
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "topics": [], "rack_id": "r1",
            "session_id": 9}
    frame = m.encode_request(V.FETCH, 4, 1, "c", body)
    decoded = m.decode_request(frame[4:]).body
    assert "rack_id" not in decoded and "session_id" not in decoded
    assert decoded == {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 0x7FFFFFFF,
                       "isolation_level": 0, "topics": []}
    assert m.decode_request(m.encode_request(V.FETCH, 11, 1, "c", body)[4:]).body["rack_id"] == "r1"


def test_header_versions():
    assert m.request_header_version(V.API_VERSIONS, 3) == 2
    assert m.request_header_version(V.API_VERSIONS, 2) == 1
    assert m.request_header_version(V.FETCH, 11) == 1
    assert m.response_header_version(V.API_VERSIONS, 3) == 0
    assert m.response_header_version(V.INIT_PRODUCER_ID, 2) == 1
    assert m.response_header_version(V.METADATA, 8) == 0
    assert m.request_header_version(V.METADATA, 9) == 2
    assert m.response_header_version(V.METADATA, 9) == 1
    # a flexible response carries a tag section after the correlation id
    frame = m.encode_response(V.INIT_PRODUCER_ID, 2, 6, {"producer_id": 1, "producer_epoch": 0})
    assert frame[4:].hex() == "00000006" "00" "00000000" "0000" "0000000000000001" "0000" "00"


def test_encode_errors_name_the_field():
    with pytest.raises(KafkaCodecError, match="acks"):
        m.encode_request(V.PRODUCE, 3, 1, None, {"acks": 1 << 20})
    with pytest.raises(KafkaCodecError, match=r"topic_data.*name"):
        m.encode_request(V.PRODUCE, 3, 1, None, {"topic_data": [{"name": None}]})
    with pytest.raises(KeyError):
        m.encode_request(V.PRODUCE, 2, 1, None, {})


# ---- unsupported and hostile input --------------------------------------------------------------------------

def test_unsupported_api_key_and_version_keep_the_header():
    with pytest.raises(UnsupportedRequest) as info:
        m.decode_request(struct.pack(">hhih", 42, 0, 77, -1))
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (42, 0, 77)
    # ApiVersions v4 (flexible, newer than advertised): the caller still learns the correlation id
    with pytest.raises(UnsupportedRequest) as info:
        m.decode_request(struct.pack(">hhih", 18, 4, 78, 1) + b"c" + b"\x00\x01\x01\x00")
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (18, 4, 78)
    with pytest.raises(UnsupportedRequest):
        m.decode_request(struct.pack(">hhih", V.PRODUCE, 2, 1, -1))


def _sample_frames():
    batch = encode_batch(0, 0, [(1000 + i, None, b"v%d" % i) for i in range(3)])
    return [
        m.encode_request(V.PRODUCE, 8, 4, "p", {"acks": 1, "timeout_ms": 100, "topic_data": [
            {"name": "topic", "partition_data": [{"index": 0, "records": batch}, {"index": 1, "records": None}]}]}),
        m.encode_request(V.FETCH, 11, 5, "f", {"max_wait_ms": 1, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "fetch_offset": 7, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [{"topic": "u", "partitions": [1, 2]}], "rack_id": "r"}),
        m.encode_request(V.API_VERSIONS, 3, 6, "a", {"client_software_name": "n", "client_software_version": "v"}),
        m.encode_request(V.METADATA, 8, 7, "m", {"topics": [{"name": "a"}, {"name": "b"}]}),
        m.encode_request(V.CREATE_TOPICS, 4, 8, "c", {"topics": [{"name": "x", "num_partitions": 3,
            "replication_factor": 3, "assignments": [], "configs": [{"name": "k", "value": None}]}]}),
    ]


def test_truncated_at_every_byte_boundary():
    for frame in _sample_frames():
        payload = frame[4:]
        assert m.decode_request(payload)
        for cut in range(len(payload)):
            with pytest.raises(KafkaCodecError):
                m.decode_request(payload[:cut])


def test_truncated_responses_at_every_byte_boundary():
    body = {"throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
            "cluster_id": "c", "controller_id": 1, "topics": [{"error_code": 0, "name": "t", "partitions": [
                {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 3, "replica_nodes": [1, 2],
                 "isr_nodes": [1], "offline_replicas": []}]}]}
    for api_key, version, b in [(V.METADATA, 8, body), (V.API_VERSIONS, 3, {"api_keys": [
            {"api_key": 0, "min_version": 3, "max_version": 8}], "finalized_features_epoch": 1})]:
        payload = m.encode_response(api_key, version, 1, b)[4:]
        m.decode_response(api_key, version, payload)
        for cut in range(len(payload)):
            with pytest.raises(KafkaCodecError):
                m.decode_response(api_key, version, payload[:cut])


def test_trailing_bytes_after_a_request_are_ignored_as_kafka_does():
    for frame in _sample_frames():
        want = m.decode_request(frame[4:])
        assert m.decode_request(frame[4:] + b"\x01\x00\x00\x00") == want


def test_librdkafkas_metadata_v9_all_topics_request_decodes():
    # the bytes librdkafka 2.16 sent for AdminClient.list_topics(): topics null, three false flags, a tagged
    # section, and bytes after it
    frame = bytes.fromhex("0003000900000003000772646b61666b61000000000001000000")
    r = m.decode_request(frame)
    assert (r.api_key, r.api_version, r.correlation_id, r.client_id) == (3, 9, 3, "rdkafka")
    assert r.body["topics"] is None and r.body["allow_auto_topic_creation"] is False


def test_trailing_bytes_after_a_response_are_an_error():
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    payload = m.encode_response(V.API_VERSIONS, 0, 1, body)[4:]
    with pytest.raises(KafkaCodecError, match="trailing"):
        m.decode_response(V.API_VERSIONS, 0, payload + b"\x00")


def test_huge_declared_lengths():
    head = struct.pack(">hhih", V.METADATA, 1, 1, -1)
    with pytest.raises(KafkaCodecError, match="declared 2147483647 items"):
        m.decode_request(head + struct.pack(">i", 0x7FFFFFFF))
    with pytest.raises(KafkaCodecError, match="negative length"):
        m.decode_request(head + struct.pack(">i", -2))
    produce = struct.pack(">hhih", V.PRODUCE, 3, 1, -1) + struct.pack(">hhi", -1, 1, 100)
    with pytest.raises(KafkaCodecError, match="records.*declared length 2147483647"):
        m.decode_request(produce + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iii", 1, 0, 0x7FFFFFFF))
    with pytest.raises(KafkaCodecError, match="client_id"):
        m.decode_request(struct.pack(">hhih", V.METADATA, 1, 1, 30000) + b"x")
    # ApiVersions v3 compact string whose length is a 5-byte varint near 2**32
    with pytest.raises(KafkaCodecError):
        m.decode_request(struct.pack(">hhih", 18, 3, 1, -1) + b"\x00" + bytes.fromhex("feffffff0f"))


def test_error_message_names_the_path():
    frame = _sample_frames()[0][4:]
    with pytest.raises(KafkaCodecError) as info:
        m.decode_request(frame[:-5])
    assert str(info.value).startswith("ProduceRequest v8: topic_data[0].partition_data[1]") or \
        str(info.value).startswith("ProduceRequest v8: topic_data[0].partition_data[0]"), str(info.value)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_give_decode_errors_only(data):
    try:
        m.decode_request(data)
    except (KafkaCodecError, UnsupportedRequest):
        pass


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(5)), st.data())
def test_mutated_frames_give_decode_errors_only(i, data):
    payload = bytearray(_FRAMES[i][4:])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] = data.draw(st.integers(0, 255))
    try:
        m.decode_request(bytes(payload))
    except (KafkaCodecError, UnsupportedRequest):
        pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ALL_DECLARED), st.binary(max_size=120))
def test_random_response_bytes_give_decode_errors_only(case, data):
    try:
        m.decode_response(case[0], case[1], data)
    except KafkaCodecError:
        pass


_FRAMES = _sample_frames()


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(ADVERTISED), st.binary(max_size=120))
def test_random_bodies_under_a_valid_header_give_decode_errors_only(case, body):
    api_key, version = case
    head = struct.pack(">hhih", api_key, version, 1, 1) + b"c"
    if m.request_header_version(api_key, version) == 2:
        head += b"\x00"
    try:
        req = m.decode_request(head + body)
    except KafkaCodecError:
        return
    # whatever decoded re-encodes (canonically: a bool byte 2 comes back as 1) to the same body
    assert m.decode_request(m.encode_request(api_key, version, 1, "c", req.body)[4:]) == req


def test_produce_header_decode_is_cheap():
    """A Produce of one batch of 1,000 small records: the request decode only slices the batch out."""
    import time
    batch = encode_batch(0, 0, [(1_700_000_000_000 + i, None, b"value-%06d" % i) for i in range(1000)])
    payload = m.encode_request(V.PRODUCE, 8, 1, "p", {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})[4:]
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        req = m.decode_request(payload)
    per_call = (time.perf_counter() - start) / n
    assert req.body["topic_data"][0]["partition_data"][0]["records"] == batch
    assert per_call < 0.001, f"{per_call * 1e6:.0f} us per Produce request decode"
