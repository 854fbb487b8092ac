"""Kafka wire primitives (broker/kafka/primitives.py): known-answer varint and zigzag tables, string and
bytes forms, tagged-field sections, and bounds on hostile lengths."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from broker.kafka import primitives as P
from broker.kafka.primitives import KafkaCodecError

UVARINTS = [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16383, "ff7f"), (16384, "808001"),
    (2097151, "ffff7f"), (2097152, "80808001"), (0xFFFFFFFF, "ffffffff0f"),
]

# value -> zigzag -> varint bytes
ZIGZAG = [
    (0, 0, "00"), (-1, 1, "01"), (1, 2, "02"), (-2, 3, "03"), (2, 4, "04"), (63, 126, "7e"), (-64, 127, "7f"),
    (64, 128, "8001"), (2147483647, 4294967294, "feffffff0f"), (-2147483648, 4294967295, "ffffffff0f"),
]


@pytest.mark.parametrize("value,hexed", UVARINTS)
def test_unsigned_varint_table(value, hexed):
    assert P.uvarint_bytes(value).hex() == hexed
    out = bytearray()
    P.write_uvarint(out, value)
    assert out.hex() == hexed
    assert P.read_uvarint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)


@pytest.mark.parametrize("value,zz,hexed", ZIGZAG)
def test_zigzag_table(value, zz, hexed):
    assert P.zigzag_encode(value) == zz
    assert P.zigzag_decode(zz) == value
    assert P.varint_bytes(value).hex() == hexed
    assert P.read_varint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)


def test_varlong_extremes():
    for v, hexed in [((1 << 63) - 1, "feffffffffffffffff01"), (-(1 << 63), "ffffffffffffffffff01")]:
        assert P.varint_bytes(v).hex() == hexed
        assert P.read_varlong(bytes.fromhex(hexed), 0) == (v, 10)


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_round_trip(v):
    out = bytearray()
    P.write_varlong(out, v)
    assert P.read_varlong(bytes(out), 0) == (v, len(out))


@pytest.mark.parametrize("hexed", ["80", "ffff", "8080808080", "ffffffff10", "ffffffffff01"])
def test_bad_varints(hexed):
    with pytest.raises(KafkaCodecError):
        P.read_uvarint(bytes.fromhex(hexed), 0)


def test_string_forms_known_bytes():
    cases = [
        (P.write_string, "abc", "0003616263"),
        (P.write_nullable_string, None, "ffff"),
        (P.write_compact_string, "abc", "04616263"),
        (P.write_compact_nullable_string, None, "00"),
        (P.write_compact_string, "", "01"),
        (P.write_bytes, b"\x01\x02", "000000020102"),
        (P.write_nullable_bytes, None, "ffffffff"),
        (P.write_compact_bytes, b"\x01\x02", "030102"),
        (P.write_compact_nullable_bytes, None, "00"),
        (P.write_array_length, 3, "00000003"),
        (P.write_array_length, None, "ffffffff"),
        (P.write_compact_array_length, 3, "04"),
        (P.write_compact_array_length, None, "00"),
    ]
    for write, value, hexed in cases:
        out = bytearray()
        write(out, value)
        assert out.hex() == hexed, (write.__name__, value)


def test_string_reads():
    assert P.read_string(bytes.fromhex("0003616263"), 0) == ("abc", 5)
    assert P.read_nullable_string(bytes.fromhex("ffff"), 0) == (None, 2)
    assert P.read_compact_string(bytes.fromhex("04616263"), 0) == ("abc", 4)
    assert P.read_compact_nullable_bytes(bytes.fromhex("00"), 0) == (None, 1)
    with pytest.raises(KafkaCodecError, match="null where not nullable"):
        P.read_string(bytes.fromhex("ffff"), 0)
    with pytest.raises(KafkaCodecError, match="negative length"):
        P.read_nullable_string(bytes.fromhex("fffe"), 0)
    with pytest.raises(KafkaCodecError, match="UTF-8"):
        P.read_string(bytes.fromhex("0001ff"), 0)


def test_huge_declared_lengths_are_refused_before_allocation():
    with pytest.raises(KafkaCodecError, match="declared length 2147483647"):
        P.read_bytes(bytes.fromhex("7fffffff00"), 0)
    with pytest.raises(KafkaCodecError, match="declared length 32767"):
        P.read_string(bytes.fromhex("7fff41"), 0)
    with pytest.raises(KafkaCodecError, match="declared 2147483647 items"):
        P.read_array_length(bytes.fromhex("7fffffff0000"), 0)
    with pytest.raises(KafkaCodecError, match="declared 4294967294 items"):
        P.read_compact_array_length(bytes.fromhex("ffffffff0f00"), 0)
    with pytest.raises(KafkaCodecError, match="declared length 4294967294"):
        P.read_compact_bytes(bytes.fromhex("ffffffff0f00"), 0)
    # 3 items of at least 4 bytes each cannot fit in 8 bytes
    with pytest.raises(KafkaCodecError):
        P.read_array_length(bytes.fromhex("00000003") + bytes(8), 0, min_item=4)
    assert P.read_array_length(bytes.fromhex("00000002") + bytes(8), 0, min_item=4) == (2, 4)


def test_tagged_fields():
    raw = bytes.fromhex("02" "00" "02" "abcd" "05" "00")
    assert P.read_tagged_fields(raw, 0) == ([(0, b"\xab\xcd"), (5, b"")], len(raw))
    assert P.skip_tagged_fields(raw + b"zz", 0) == len(raw)
    with pytest.raises(KafkaCodecError, match="not increasing"):
        P.read_tagged_fields(bytes.fromhex("02" "05" "00" "01" "00"), 0)
    with pytest.raises(KafkaCodecError, match="declared length 100"):
        P.read_tagged_fields(bytes.fromhex("01" "00" "64" "00"), 0)
    with pytest.raises(KafkaCodecError):
        P.read_tagged_fields(bytes.fromhex("7f"), 0)
    out = bytearray()
    P.write_empty_tagged_fields(out)
    assert out == b"\x00"


@pytest.mark.parametrize("reader,hexed", [
    (P.read_int8, ""), (P.read_int16, "00"), (P.read_int32, "000000"), (P.read_int64, "00" * 7),
    (P.read_bool, ""), (P.read_uuid, "00" * 15),
])
def test_fixed_width_truncated(reader, hexed):
    with pytest.raises(KafkaCodecError):
        reader(bytes.fromhex(hexed), 0)


def test_fixed_width_known_bytes():
    assert P.read_int16(bytes.fromhex("fffe"), 0) == (-2, 2)
    assert P.read_int32(bytes.fromhex("80000000"), 0) == (-(1 << 31), 4)
    assert P.read_int64(bytes.fromhex("0000000100000000"), 0) == (1 << 32, 8)
    assert P.read_uint32(bytes.fromhex("ffffffff"), 0) == ((1 << 32) - 1, 4)
