"""Record codec: exact byte layout, round trips, and detection of corrupt or torn records."""
from __future__ import annotations

import struct
import zlib

import pytest

from broker.records import Record
from broker.storage.codec import (CorruptRecord, decode_records, encode_record, encode_records, parse_frame)


def test_exact_layout_of_one_record():
    r = Record(offset=5, epoch=2, value=b"17", key=b"k", timestamp=1_763_765_100_000)
    body = bytes([1]) + struct.pack(">Qiqii", 5, 2, 1_763_765_100_000, 1, 2) + b"k" + b"17"
    expected = struct.pack(">II", len(body) + 4, zlib.crc32(body)) + body
    assert encode_record(r) == expected
    assert len(expected) == 4 + 4 + 29 + 1 + 2


def test_null_key_is_length_minus_one():
    data = encode_record(Record(0, 0, b"v"))
    assert struct.unpack_from(">i", data, 8 + 1 + 8 + 4 + 8)[0] == -1
    assert parse_frame(data, 0).record == Record(0, 0, b"v", None, 0)


def test_round_trip_batch_and_positions():
    records = [Record(10, 1, b"1", None, 100), Record(11, 1, b"", b"", 101),
               Record(12, 3, b"x" * 70_000, b"key", -5), Record(13, -1, b"\x00\xff", None, 2**62)]
    data, positions = encode_records(records, start_position=1000)
    sizes = [len(encode_record(r)) for r in records]
    assert list(positions) == [1000, 1000 + sizes[0], 1000 + sum(sizes[:2]), 1000 + sum(sizes[:3])]
    assert len(data) == sum(sizes)
    assert decode_records(data) == records
    pos, parsed = 0, []
    while pos < len(data):
        frame = parse_frame(data, pos)
        assert frame.crc_ok is True
        parsed.append(frame.record)
        pos = frame.end
    assert parsed == records


def test_crc_mismatch_detected():
    data = bytearray(encode_record(Record(0, 1, b"12345")))
    data[-1] ^= 0x01                      # value b"12344"
    with pytest.raises(CorruptRecord) as exc:
        parse_frame(data, 0)
    assert exc.value.crc_mismatch is True
    assert str(exc.value) == "byte 0: CRC mismatch for offset 0"
    frame = parse_frame(data, 0, require_crc=False)
    assert (frame.crc_ok, frame.record.value) == (False, b"12344")


def test_crc_covers_header_fields():
    data = bytearray(encode_record(Record(7, 1, b"v")))
    data[8 + 1 + 7] ^= 0x02               # low byte of the offset: 7 -> 5
    assert parse_frame(data, 0, require_crc=False).crc_ok is False


@pytest.mark.parametrize("cut, reason", [
    (2, "torn length field (2 of 4 bytes)"),
    (20, "torn record: length 34 but only 16 bytes follow"),
    (37, "torn record: length 34 but only 33 bytes follow"),
])
def test_torn_record(cut, reason):
    data = encode_record(Record(0, 0, b"9"))
    assert len(data) == 38
    with pytest.raises(CorruptRecord) as exc:
        parse_frame(data[:cut], 0)
    assert exc.value.reason == reason
    assert exc.value.crc_mismatch is False


def test_unknown_version_and_bad_lengths():
    data = bytearray(encode_record(Record(0, 0, b"9")))
    data[8] = 3
    with pytest.raises(CorruptRecord, match=r"unknown format version 3 \(expected 1 or 2\)"):
        parse_frame(data, 0)
    with pytest.raises(CorruptRecord, match="impossible record length 0"):
        parse_frame(b"\x00" * 64, 0)
    data = bytearray(encode_record(Record(0, 0, b"9")))
    struct.pack_into(">i", data, 8 + 1 + 8 + 4 + 8 + 4, 5)   # value_len 5, record holds 1
    with pytest.raises(CorruptRecord, match="key/value lengths -1/5 do not match record length 34"):
        parse_frame(data, 0)


def test_out_of_range_field_is_value_error():
    with pytest.raises(ValueError, match="record 0: field out of range"):
        encode_record(Record(0, 2**31, b"v"))
    with pytest.raises(ValueError, match="value must be bytes, not str"):
        encode_record(Record(0, 0, "v"))
    with pytest.raises(ValueError, match="record 3: 67108867 bytes exceeds the 67108864-byte limit"):
        encode_record(Record(3, 0, bytes(64 * 1024 * 1024 - 30)))


# --- version 2: headers and null values (Kafka clients' records) -------------------------------------

def test_exact_layout_of_a_record_with_headers_and_a_null_value():
    r = Record(7, 3, None, b"k", 1_700_000_000_000, (("trace", b"ab"), ("gone", None)))
    headers = (struct.pack(">H", 5) + b"trace" + struct.pack(">i", 2) + b"ab"
               + struct.pack(">H", 4) + b"gone" + struct.pack(">i", -1))
    body = (bytes([2]) + struct.pack(">Qiqii", 7, 3, 1_700_000_000_000, 1, -1) + struct.pack(">qhi", -1, -1, -1)
            + b"k" + headers)
    assert encode_record(r) == struct.pack(">II", len(body) + 4, zlib.crc32(body)) + body
    assert parse_frame(encode_record(r), 0).record == r


def test_plain_records_keep_version_1_bytes_and_mix_with_version_2():
    plain = Record(0, 1, b"5", b"k", 9)
    assert encode_record(plain)[8] == 1                       # the old format, unchanged
    records = [plain, Record(1, 1, b"v", None, 10, (("h", b""),)), Record(2, 1, None, None, 11),
               Record(3, 1, b"idem", b"k", 12, (), 2**40 + 7, 3, 2**31 - 1),
               Record(4, 1, b"", b"", 12, (("a", None), ("\u00e9", b"\xff"))), Record(5, 2, b"6", None, 13)]
    data, _ = encode_records(records)
    assert [data[p + 8] for p in _positions(data)] == [1, 2, 2, 2, 2, 1]
    assert decode_records(data, first_offset=0) == records
    pos, parsed = 0, []
    while pos < len(data):
        frame = parse_frame(data, pos)
        parsed.append(frame.record)
        pos = frame.end
    assert parsed == records


def _positions(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        out.append(pos)
        pos += 4 + struct.unpack_from(">I", data, pos)[0]
    return out


def test_malformed_headers_under_a_good_crc_are_corrupt():
    """A version-2 body whose header runs past the record, CRC recomputed to match (a writer bug, not
    rot): every reader refuses it, naming the header."""
    def bad(offset: int) -> bytes:
        body = (bytes([2]) + struct.pack(">Qiqii", offset, 0, 0, -1, 1) + struct.pack(">qhi", -1, -1, -1) + b"v"
                + struct.pack(">H", 9) + b"ab")
        return struct.pack(">II", len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(CorruptRecord, match="a header runs past the record"):
        parse_frame(bad(0), 0)
    with pytest.raises(CorruptRecord, match="a header runs past the record") as exc:
        decode_records(encode_record(Record(0, 0, b"ok")) + bad(1))
    assert [r.offset for r in exc.value.good] == [0]


def test_version_2_lengths_are_checked():
    data = bytearray(encode_record(Record(0, 0, None, None, 0, (("h", b"x"),))))
    struct.pack_into(">i", data, 8 + 1 + 8 + 4 + 8 + 4, 500)    # value_len past the record
    with pytest.raises(CorruptRecord, match="key/value lengths -1/500 do not match record length"):
        parse_frame(data, 0)
