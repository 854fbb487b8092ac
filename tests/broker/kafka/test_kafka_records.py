"""RecordBatch v2 (broker/kafka/records.py): CRC-32C checked against an independent bitwise
implementation, byte-for-byte agreement with kafka-python's own record batch code in both directions,
and hostile input (truncation at every byte, bit flips, random bytes, huge lengths) giving KafkaCodecError
and nothing else."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.kafka import compression
from broker.kafka import records as R
from broker.kafka.records import BATCH_OVERHEAD
from broker.kafka.records import CompressionError, KafkaCodecError, decode_batches, encode_batch


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C straight from its definition (reflected polynomial 0x82F63B78)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c_known_answers():
    assert crc32c_bitwise(b"123456789") == 0xE3069283   # the standard check value
    assert R.crc32c(b"123456789") == 0xE3069283
    assert R.crc32c(b"") == 0
    assert R.crc32c(bytes(32)) == crc32c_bitwise(bytes(32)) == 0x8A9136AA


def test_encode_batch_layout_and_crc():
    raw = encode_batch(100, 7, [(1000, None, b"a"), (1005, b"k", b"bc")], producer=(5, 1, 3))
    (base_offset, length, epoch, magic, crc, attrs, last_delta, base_ts, max_ts, pid, pepoch, seq,
     count) = struct.unpack_from(">qiibIhiqqqhii", raw)
    assert (base_offset, length, epoch, magic, attrs, last_delta, base_ts, max_ts, pid, pepoch, seq, count) == \
        (100, len(raw) - 12, 7, 2, 0, 1, 1000, 1005, 5, 1, 3, 2)
    assert crc == crc32c_bitwise(raw[21:])
    # the records, by hand: length, attrs, ts delta, offset delta, key, value, header count
    assert raw[61:].hex() == ("0e" "00" "00" "00" "01" "0261" "00") + ("12" "00" "0a" "02" "026b" "046263" "00")


def test_decode_batches_round_trip_and_offsets():
    a = encode_batch(0, 1, [(10, None, b"x"), (9, None, None)])
    b = encode_batch(2, 2, [(20 + i, None, bytes(300)) for i in range(200)])
    batches = decode_batches(a + b)
    assert [bt.base_offset for bt in batches] == [0, 2]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batches[0].records] == [(0, 10, None, b"x"),
                                                                                      (1, 9, None, None)]
    assert batches[0].max_timestamp == 10 and batches[0].last_offset == 1
    assert batches[1].records[-1].offset == 201 and batches[1].last_offset == 201
    assert batches[1].size == len(b) and batches[1].partition_leader_epoch == 2
    assert not batches[0].is_transactional and not batches[0].is_control and batches[0].compression == 0


def _kafka_python_batch(records, producer_id=-1, producer_epoch=-1, base_sequence=-1):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=producer_id,
                                        producer_epoch=producer_epoch, base_sequence=base_sequence,
                                        batch_size=1 << 24)
    for i, (ts, key, value) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


records_st = st.lists(st.tuples(st.integers(0, 1 << 45), st.none() | st.binary(max_size=30),
                                st.none() | st.binary(max_size=200)), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(records_st, st.integers(-1, 1 << 40), st.integers(-1, 30000), st.integers(-1, 1 << 30))
def test_kafka_python_agrees_both_ways(records, producer_id, producer_epoch, base_sequence):
    ours = encode_batch(0, 0, records, producer=(producer_id, producer_epoch, base_sequence))
    theirs = _kafka_python_batch(records, producer_id, producer_epoch, base_sequence)
    assert ours == theirs
    # kafka-python reads ours
    kb = DefaultRecordBatch(ours)
    assert kb.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in kb] == \
        [(i, ts, k, v) for i, (ts, k, v) in enumerate(records)]
    # we read theirs
    [batch] = decode_batches(theirs)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch.records] == \
        [(i, ts, k, v) for i, (ts, k, v) in enumerate(records)]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == \
        (producer_id, producer_epoch, base_sequence)


def test_headers_from_kafka_python():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=5, key=b"k", value=b"v", headers=[("h1", b"x"), ("h2", None)])
    [batch] = decode_batches(bytes(builder.build()))
    assert batch.records[0].headers == [("h1", b"x"), ("h2", None)]


KNOWN = [(1_700_000_000_000 + i, None if i % 3 == 0 else f"key-{i}".encode(),
          None if i == 5 else f"value {i} ".encode() * (i + 1), [("n", str(i).encode())] if i % 2 else [])
         for i in range(40)]


def _compressed_by_kafka_python(codec: int, records=KNOWN) -> bytes:
    """A batch built and compressed by kafka-python (an independent implementation; its snappy is the
    xerial framing Java clients write)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 26)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy-xerial", "lz4", "zstd"])
def test_compressed_batches_of_another_implementation_decode_exactly(codec):
    raw = _compressed_by_kafka_python(codec)
    [batch] = decode_batches(raw)
    assert batch.compression == codec and batch.size == len(raw)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(KNOWN)]
    assert len(raw) < len(encode_batch(0, -1, [tuple(r) for r in KNOWN])) / 2    # it really is compressed


def _recompressed(raw: bytes, codec: int, records: bytes) -> bytes:
    """`raw` (one uncompressed batch) with its records replaced by `records` and its codec set."""
    after = struct.pack(">h", codec) + raw[23:BATCH_OVERHEAD] + records
    head = raw[:8] + struct.pack(">i", len(after) + 9) + raw[12:17]
    return head + struct.pack(">I", R.crc32c(after)) + after


def test_raw_snappy_as_librdkafka_writes_it():
    import cramjam
    plain = encode_batch(0, -1, [tuple(r) for r in KNOWN])
    raw = _recompressed(plain, 2, bytes(cramjam.snappy.compress_raw(plain[BATCH_OVERHEAD:])))
    assert [(r.key, r.value, r.headers) for r in decode_batches(raw)[0].records] == [
        (k, v, h) for _ts, k, v, h in KNOWN]


def test_a_compression_bomb_is_refused_within_the_limit(monkeypatch):
    """Records that would decompress past MAX_DECOMPRESSED are refused as too large, whatever the codec,
    without being decompressed whole."""
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED", 1 << 20)
    big = [(1, None, bytes(2 << 20), [])]
    for codec in (1, 2, 3, 4):
        raw = _compressed_by_kafka_python(codec, big)
        assert len(raw) < 200_000
        with pytest.raises(CompressionError, match="decompress to more than 1048576 bytes") as info:
            decode_batches(raw)
        assert (info.value.codec, info.value.reason) == (codec, compression.TOO_LARGE)
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED", 3 << 20)
    assert len(decode_batches(_compressed_by_kafka_python(4, big))[0].records[0].value) == 2 << 20


def test_garbage_compressed_bytes_are_a_codec_error():
    plain = encode_batch(0, -1, [(1, None, b"v")])
    for codec in (1, 2, 3, 4):
        with pytest.raises(CompressionError, match=f"batch at byte 0: {compression.NAMES[codec]}") as info:
            decode_batches(_recompressed(plain, codec, b"\x00\x01not compressed at all"))
        assert info.value.reason == compression.MALFORMED
    with pytest.raises(KafkaCodecError, match="not a Kafka compression type"):
        decode_batches(_recompressed(plain, 5, b"x"))


def test_a_node_without_the_codecs_refuses_compressed_batches(monkeypatch):
    """A Debian python3 without cramjam (a Docker or SSH node): compressed batches are refused (MISSING: 76),
    saying what is missing; uncompressed ones are unaffected."""
    monkeypatch.setattr(compression, "_codecs", lambda: None)
    with pytest.raises(CompressionError, match="lz4: this broker's Python has no cramjam") as info:
        decode_batches(_compressed_by_kafka_python(3))
    assert (info.value.codec, info.value.reason) == (3, compression.MISSING)
    assert len(decode_batches(_compressed_by_kafka_python(0))[0].records) == len(KNOWN)


def test_errors():
    raw = encode_batch(0, 0, [(1, None, b"abc"), (2, None, b"def")])
    with pytest.raises(KafkaCodecError, match="CRC-32C mismatch"):
        decode_batches(raw[:-1] + b"X")
    bad_magic = raw[:16] + b"\x01" + raw[17:]
    with pytest.raises(KafkaCodecError, match="magic 1"):
        decode_batches(bad_magic)
    with pytest.raises(KafkaCodecError, match="batch length 10"):
        decode_batches(raw[:8] + struct.pack(">i", 10) + raw[12:])
    with pytest.raises(KafkaCodecError, match="runs .* past"):
        decode_batches(raw[:8] + struct.pack(">i", 0x7FFFFFFF) + raw[12:])


def _with_count(raw: bytes, count: int) -> bytes:
    """The batch with its record count replaced and its CRC recomputed (a well-formed lie)."""
    b = bytearray(raw)
    struct.pack_into(">i", b, 57, count)
    struct.pack_into(">I", b, 17, R.crc32c(bytes(b[21:])))
    return bytes(b)


def test_record_count_mismatch():
    raw = encode_batch(0, 0, [(1, None, b"abcdefghij"), (2, None, b"klmnopqrst")])
    with pytest.raises(KafkaCodecError, match="bytes after the 1 declared records"):
        decode_batches(_with_count(raw, 1))
    with pytest.raises(KafkaCodecError, match="3 records declared"):
        decode_batches(_with_count(raw, 3))
    with pytest.raises(KafkaCodecError, match="cannot fit"):
        decode_batches(_with_count(raw, 0x7FFFFFFF))
    with pytest.raises(KafkaCodecError, match="cannot fit"):
        decode_batches(_with_count(raw, -5))


def test_partial_tail():
    a = encode_batch(0, 0, [(1, None, b"abc")])
    b = encode_batch(1, 0, [(2, None, b"def" * 20)])
    for cut in range(1, len(b)):
        with pytest.raises(KafkaCodecError):
            decode_batches(a + b[:cut])
        assert [bt.base_offset for bt in decode_batches(a + b[:cut], allow_partial_tail=True)] == [0]
    assert decode_batches(b"") == []


def test_truncated_at_every_byte_boundary():
    raw = encode_batch(0, 0, [(1, None, b"abc"), (200, None, bytes(150)), (3, None, None)])
    assert decode_batches(raw[:0]) == []
    for cut in range(1, len(raw)):
        with pytest.raises(KafkaCodecError):
            decode_batches(raw[:cut])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(data):
    try:
        decode_batches(data)
        decode_batches(data, allow_partial_tail=True)
    except KafkaCodecError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_corrupted_records_with_valid_crc(data):
    """Garbage inside the records section under a correct CRC: only KafkaCodecError (or a decode)."""
    raw = bytearray(encode_batch(0, 0, [(1, None, b"abc"), (1000, b"k", bytes(70)), (3, None, None)]))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(61, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    struct.pack_into(">I", raw, 17, R.crc32c(bytes(raw[21:])))
    try:
        decode_batches(bytes(raw))
    except KafkaCodecError:
        pass


def test_encode_batch_refuses_nothing_and_compression():
    with pytest.raises(ValueError):
        encode_batch(0, 0, [])
    with pytest.raises(ValueError):
        encode_batch(0, 0, [(1, None, b"x")], attributes=2)


def test_log_append_time_batches_give_every_record_the_batch_time():
    raw = encode_batch(0, 0, [(5, None, b"a"), (7, None, b"b")], attributes=R.TIMESTAMP_TYPE_MASK)
    b = bytearray(raw)
    struct.pack_into(">q", b, 35, 99)                 # maxTimestamp, as a broker sets it
    struct.pack_into(">I", b, 17, R.crc32c(bytes(b[21:])))
    [batch] = decode_batches(bytes(b))
    assert batch.log_append_time and [r.timestamp for r in batch.records] == [99, 99]
    kb = DefaultRecordBatch(bytes(b))
    assert [r.timestamp for r in kb] == [99, 99]      # kafka-python reads it the same way
