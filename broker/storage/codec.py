"""The binary record format of segment files: encoding, trusted decoding and verified frame parsing.

One record on disk (all integers big-endian):

    length     u32   bytes after this field (crc + body)
    crc        u32   zlib.crc32 (CRC-32/ISO-HDLC, as in zip/PNG) over the whole body
    body:
      magic    u8    format version, FORMAT_VERSION (1)
      offset   u64
      epoch    i32   leader epoch of the leader that first appended the record
      timestamp i64  ms since the Unix epoch
      key_len  i32   -1 when the key is null
      value_len i32
      key      key_len bytes
      value    value_len bytes

A segment file is nothing but records back to back. `encode_records` builds one buffer for a whole
batch so an append of N records is one write; `decode_records` reads back a run of records and verifies
each (its CRC, its framing and that offsets follow on from the first expected one): it is the live read
path, serving consumers and followers, so a byte that rotted on disk after it was written is caught
there and never served or replicated. `parse_frame` verifies one record at a time and is what recovery
and the offline dump use.
"""
from __future__ import annotations

import struct
import zlib
from array import array
from dataclasses import dataclass
from typing import Sequence

from broker.records import Record

FORMAT_VERSION = 1
_MAGIC = FORMAT_VERSION

# length, crc, magic, offset, epoch, timestamp, key_len, value_len
HEADER = struct.Struct(">IIBQiqii")
_PREFIX = struct.Struct(">II")          # length, crc
_BODY_HEAD = struct.Struct(">BQiqii")   # magic .. value_len
HEADER_SIZE = HEADER.size              # 37
PREFIX_SIZE = _PREFIX.size              # 8
MIN_LENGTH = HEADER_SIZE - 4            # smallest legal value of the length field
MAX_RECORD_BYTES = 64 * 1024 * 1024     # a larger length field is treated as corruption


class CorruptRecord(ValueError):
    """Bytes at `position` are not a valid record; `reason` says why."""

    def __init__(self, position: int, reason: str, *, crc_mismatch: bool = False):
        self.position = position
        self.good: list[Record] = []     # decode_records: the verified records before the bad one
        self.reason = reason
        self.crc_mismatch = crc_mismatch
        super().__init__(f"byte {position}: {reason}")


def encode_record(record: Record) -> bytes:
    """The on-disk bytes of one record."""
    buf, _ = encode_records([record])
    return bytes(buf)


def encode_records(records: Sequence[Record], start_position: int = 0) -> tuple[bytearray, array]:
    """Encode a batch into one buffer; also return each record's byte position (start_position + ...)."""
    out = bytearray()
    positions = array("Q")
    body_head = _BODY_HEAD.pack
    prefix = _PREFIX.pack
    crc32 = zlib.crc32
    pos = start_position
    for r in records:
        key = r.key
        value = r.value
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ValueError(f"record {r.offset}: value must be bytes, not {type(value).__name__}")
        try:
            if key is None:
                head = body_head(_MAGIC, r.offset, r.epoch, r.timestamp, -1, len(value))
                body = head + value
            else:
                head = body_head(_MAGIC, r.offset, r.epoch, r.timestamp, len(key), len(value))
                body = head + key + value
        except struct.error as exc:
            raise ValueError(f"record {r.offset}: field out of range ({exc})") from None
        if len(body) + 4 > MAX_RECORD_BYTES:
            raise ValueError(f"record {r.offset}: {len(body) + 4} bytes exceeds the {MAX_RECORD_BYTES}-byte limit")
        positions.append(pos)
        out += prefix(len(body) + 4, crc32(body))
        out += body
        pos += len(body) + PREFIX_SIZE
    return out, positions


def decode_records(buf: bytes | bytearray | memoryview, first_offset: int | None = None) -> list[Record]:
    """Decode and verify back-to-back records. With `first_offset`, the i-th record must carry offset
    first_offset + i. Raises CorruptRecord (its `position` is the bad record's byte position in `buf`)
    on a CRC mismatch, an impossible or torn length, an unknown format version, inconsistent key/value
    lengths or an unexpected offset; the records before it are in the exception's `good` list."""
    out: list[Record] = []
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    n = len(buf)
    pos = 0
    expect = first_offset
    try:
        while pos < n:
            length, crc, _magic, offset, epoch, ts, klen, vlen = unpack(buf, pos)
            end = pos + 4 + length
            # The CRC covers everything after itself, so a match vouches for the format version and the
            # key/value lengths as written; only the length field is outside it, and a wrong length
            # changes the bytes summed. The reason for a failure is worked out by `parse_frame`.
            if end > n or crc32(buf[pos + PREFIX_SIZE:end]) != crc or (expect is not None and offset != expect):
                raise _bad_record(buf, pos, expect, out)
            if expect is not None:
                expect += 1
            p = pos + HEADER_SIZE
            if klen >= 0:
                key = bytes(buf[p:p + klen])
                p += klen
            else:
                key = None
            out.append(Record(offset, epoch, bytes(buf[p:end]), key, ts))
            pos = end
    except struct.error:
        raise _bad_record(buf, pos, expect, out) from None
    return out


def _bad_record(buf, pos: int, expect: int | None, good: list[Record]) -> CorruptRecord:
    """The CorruptRecord for the record at `pos`, with the verified records before it in `good`."""
    try:
        frame = parse_frame(buf, pos)
    except CorruptRecord as exc:
        exc.good = good
        return exc
    return _corrupt(pos, f"offset {frame.record.offset} where {expect} was expected", good)


def _corrupt(pos: int, reason: str, good: list[Record], *, crc_mismatch: bool = False) -> CorruptRecord:
    exc = CorruptRecord(pos, reason, crc_mismatch=crc_mismatch)
    exc.good = good
    return exc


@dataclass(frozen=True, slots=True)
class Frame:
    """One parsed record and where it lies: `end` is the byte after it."""

    record: Record
    position: int
    end: int
    crc_ok: bool


def parse_frame(buf: bytes | bytearray | memoryview, pos: int, *, require_crc: bool = True) -> Frame:
    """Parse and verify the record at `pos`.

    Raises CorruptRecord when the bytes cannot be a record (torn length, bad magic, inconsistent
    lengths) and, if `require_crc`, when the CRC does not match. With `require_crc=False` a record whose
    framing is sound but whose CRC is wrong is returned with crc_ok=False (used by the offline dump).
    """
    remaining = len(buf) - pos
    if remaining < 4:
        raise CorruptRecord(pos, f"torn length field ({remaining} of 4 bytes)")
    (length,) = struct.unpack_from(">I", buf, pos)
    if length < MIN_LENGTH or length > MAX_RECORD_BYTES:
        raise CorruptRecord(pos, f"impossible record length {length}")
    if length + 4 > remaining:
        raise CorruptRecord(pos, f"torn record: length {length} but only {remaining - 4} bytes follow")
    _len, crc, magic, offset, epoch, ts, klen, vlen = HEADER.unpack_from(buf, pos)
    if magic != _MAGIC:
        raise CorruptRecord(pos, f"unknown format version {magic} (expected {_MAGIC})")
    key_bytes = max(klen, 0)
    if klen < -1 or vlen < 0 or HEADER_SIZE - 4 + key_bytes + vlen != length:
        raise CorruptRecord(pos, f"key/value lengths {klen}/{vlen} do not match record length {length}")
    end = pos + 4 + length
    crc_ok = zlib.crc32(memoryview(buf)[pos + PREFIX_SIZE:end]) == crc
    if not crc_ok and require_crc:
        raise CorruptRecord(pos, f"CRC mismatch for offset {offset}", crc_mismatch=True)
    p = pos + HEADER_SIZE
    key = bytes(buf[p:p + klen]) if klen >= 0 else None
    value = bytes(buf[p + key_bytes:end])
    return Frame(Record(offset, epoch, value, key, ts), pos, end, crc_ok)
