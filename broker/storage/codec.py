"""The binary record format of segment files: encoding, trusted decoding and verified frame parsing.

One record on disk (all integers big-endian):

    length     u32   bytes after this field (crc + body)
    crc        u32   zlib.crc32 (CRC-32/ISO-HDLC, as in zip/PNG) over the whole body
    body:
      magic    u8    format version: FORMAT_VERSION (1), or HEADERS_VERSION (2) for a record with
                     headers or a null value
      offset   u64
      epoch    i32   leader epoch of the leader that first appended the record
      timestamp i64  ms since the Unix epoch
      key_len  i32   -1 when the key is null
      value_len i32  -1 when the value is null (version 2 only)
      producer version 2 only: producer id i64, producer epoch i16, sequence i32 (all -1 for a record
               of no idempotent producer)
      key      key_len bytes
      value    value_len bytes
      headers  version 2 only: the rest of the body, each header as u16 key length, UTF-8 key,
               i32 value length (-1 null), value

A record without headers or a producer and with a value is written as version 1, byte for byte what it was before
version 2 existed, so plain records cost nothing more and older segments read as they always did.

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
HEADERS_VERSION = 2
_MAGIC = FORMAT_VERSION
_PRODUCER = struct.Struct(">qhi")        # version 2: producer id, producer epoch, sequence
_HEADER_KEY = struct.Struct(">H")
_HEADER_VALUE = struct.Struct(">i")

# length, crc, magic, offset, epoch, timestamp, key_len, value_len
HEADER = struct.Struct(">IIBQiqii")
_PREFIX = struct.Struct(">II")          # length, crc
_BODY_HEAD = struct.Struct(">BQiqii")   # magic .. value_len
_BODY_HEAD_V2 = struct.Struct(">BQiqiiqhi")  # magic .. value_len, then the producer's fields (version 2)
HEADER_SIZE = HEADER.size              # 37
_V2_DATA = HEADER_SIZE + _PRODUCER.size  # where a version-2 record's key (or value) starts
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
    body_head_v2 = _BODY_HEAD_V2.pack
    prefix = _PREFIX.pack
    crc32 = zlib.crc32
    pos = start_position
    for r in records:
        offset, epoch, value, key, timestamp, headers, producer_id, pepoch, seq = r   # a named tuple: unpacked at once
        try:
            if producer_id >= 0 and key is None and not headers and isinstance(value, (bytes, bytearray)):
                # an idempotent producer's plain record (the common version-2 case)
                body = body_head_v2(HEADERS_VERSION, offset, epoch, timestamp, -1, len(value), producer_id,
                                    pepoch, seq) + value
            elif headers or value is None or producer_id >= 0:
                body = _body_v2(r)
            elif not isinstance(value, (bytes, bytearray, memoryview)):
                raise ValueError(f"record {offset}: value must be bytes, not {type(value).__name__}")
            elif key is None:
                body = body_head(_MAGIC, offset, epoch, timestamp, -1, len(value)) + value
            else:
                body = body_head(_MAGIC, offset, epoch, timestamp, len(key), len(value)) + key + value
        except struct.error as exc:
            raise ValueError(f"record {offset}: field out of range ({exc})") from None
        if len(body) + 4 > MAX_RECORD_BYTES:
            raise ValueError(f"record {offset}: {len(body) + 4} bytes exceeds the {MAX_RECORD_BYTES}-byte limit")
        positions.append(pos)
        out += prefix(len(body) + 4, crc32(body))
        out += body
        pos += len(body) + PREFIX_SIZE
    return out, positions


def _body_v2(r: Record) -> bytes:
    """The body of a version-2 record (headers, a null value, or an idempotent producer's fields)."""
    key, value = r.key, r.value
    if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
        raise ValueError(f"record {r.offset}: value must be bytes or None, not {type(value).__name__}")
    parts = [_BODY_HEAD.pack(HEADERS_VERSION, r.offset, r.epoch, r.timestamp, -1 if key is None else len(key),
                             -1 if value is None else len(value)),
             _PRODUCER.pack(r.producer_id, r.producer_epoch, r.sequence)]
    if key is not None:
        parts.append(key)
    if value is not None:
        parts.append(value)
    for hkey, hval in r.headers:
        raw = hkey.encode("utf-8")
        parts += [_HEADER_KEY.pack(len(raw)), raw, _HEADER_VALUE.pack(-1 if hval is None else len(hval))]
        if hval is not None:
            parts.append(hval)
    return b"".join(parts)


def _headers(buf, p: int, end: int) -> tuple:
    """The headers of a version-2 record, buf[p:end]; raises ValueError when they do not parse."""
    out = []
    while p < end:
        if end - p < 2:
            raise ValueError("a header key length is cut off")
        (klen,) = _HEADER_KEY.unpack_from(buf, p)
        p += 2
        if end - p < klen + 4:
            raise ValueError("a header runs past the record")
        hkey = bytes(buf[p:p + klen]).decode("utf-8")
        p += klen
        (vlen,) = _HEADER_VALUE.unpack_from(buf, p)
        p += 4
        if vlen < -1 or end - p < vlen:
            raise ValueError(f"header value length {vlen}")
        out.append((hkey, None if vlen < 0 else bytes(buf[p:p + vlen])))
        p += max(vlen, 0)
    return tuple(out)


def _record_v2(buf, pos: int, end: int, head: tuple) -> Record:
    """The version-2 record framed at buf[pos:end], `head` its HEADER fields (as HEADER.unpack_from gives them)."""
    _length, _crc, _magic, offset, epoch, ts, klen, vlen = head
    pid, pepoch, seq = _PRODUCER.unpack_from(buf, pos + HEADER_SIZE)
    p = pos + HEADER_SIZE + _PRODUCER.size
    key = bytes(buf[p:p + klen]) if klen >= 0 else None
    p += max(klen, 0)
    value = bytes(buf[p:p + vlen]) if vlen >= 0 else None
    p += max(vlen, 0)
    return Record(offset, epoch, value, key, ts, _headers(buf, p, end) if p < end else (), pid, pepoch, seq)


def _record_v1(buf, pos: int, end: int, head: tuple) -> Record:
    """The version-1 record framed at buf[pos:end], `head` its HEADER fields."""
    _length, _crc, _magic, offset, epoch, ts, klen, _vlen = head
    p = pos + HEADER_SIZE
    key = bytes(buf[p:p + klen]) if klen >= 0 else None
    return Record(offset, epoch, bytes(buf[p + max(klen, 0):end]), key, ts)


def framing_ok(magic: int, klen: int, vlen: int, length: int) -> bool:
    """Whether a record header's version and key/value lengths fit its length field."""
    used = MIN_LENGTH + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
    if magic == FORMAT_VERSION:
        return klen >= -1 and vlen >= 0 and used == length
    return magic == HEADERS_VERSION and klen >= -1 and vlen >= -1 and used + _PRODUCER.size <= length


def decode_records(buf: bytes | bytearray | memoryview, first_offset: int | None = None) -> list[Record]:
    """Decode and verify back-to-back records. With `first_offset`, the i-th record must carry offset
    first_offset + i. Raises CorruptRecord (its `position` is the bad record's byte position in `buf`)
    on a CRC mismatch, an impossible or torn length, an unknown format version, inconsistent key/value
    lengths or an unexpected offset; the records before it are in the exception's `good` list."""
    out: list[Record] = []
    unpack = HEADER.unpack_from
    producer = _PRODUCER.unpack_from
    crc32 = zlib.crc32
    n = len(buf)
    pos = 0
    expect = first_offset
    try:
        while pos < n:
            head = unpack(buf, pos)
            length, crc, magic, offset, epoch, ts, klen, vlen = head
            end = pos + 4 + length
            # The CRC covers everything after itself, so a match vouches for the format version and the
            # key/value lengths as written; only the length field is outside it, and a wrong length
            # changes the bytes summed. The reason for a failure is worked out by `parse_frame`.
            if end > n or crc32(buf[pos + PREFIX_SIZE:end]) != crc or (expect is not None and offset != expect):
                raise _bad_record(buf, pos, expect, out)
            if expect is not None:
                expect += 1
            if magic != _MAGIC:     # version 2: headers, a null value or a producer (the CRC vouched for it)
                p = pos + _V2_DATA
                if klen == -1 and vlen >= 0 and p + vlen == end:    # an idempotent producer's plain record
                    pid, pepoch, seq = producer(buf, pos + HEADER_SIZE)
                    out.append(Record(offset, epoch, bytes(buf[p:end]), None, ts, (), pid, pepoch, seq))
                else:
                    try:
                        out.append(_record_v2(buf, pos, end, head))
                    except ValueError:
                        raise _bad_record(buf, pos, None, out) from None
                pos = end
                continue
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
    head = HEADER.unpack_from(buf, pos)
    _len, crc, magic, offset, epoch, ts, klen, vlen = head
    if magic not in (FORMAT_VERSION, HEADERS_VERSION):
        raise CorruptRecord(pos, f"unknown format version {magic} (expected {FORMAT_VERSION} or {HEADERS_VERSION})")
    if not framing_ok(magic, klen, vlen, length):
        raise CorruptRecord(pos, f"key/value lengths {klen}/{vlen} do not match record length {length}")
    end = pos + 4 + length
    crc_ok = zlib.crc32(memoryview(buf)[pos + PREFIX_SIZE:end]) == crc
    if not crc_ok and require_crc:
        raise CorruptRecord(pos, f"CRC mismatch for offset {offset}", crc_mismatch=True)
    if magic == FORMAT_VERSION:
        return Frame(_record_v1(buf, pos, end, head), pos, end, crc_ok)
    try:
        record = _record_v2(buf, pos, end, head)
    except ValueError as exc:
        raise CorruptRecord(pos, f"offset {offset}: {exc}", crc_mismatch=not crc_ok) from None
    return Frame(record, pos, end, crc_ok)
