"""Kafka RecordBatch (magic v2) encoding and decoding, with its CRC-32C.

Batch layout (big-endian): baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
magic int8 (= 2), crc uint32 (CRC-32C of every byte from attributes to the batch end),
attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64, producerId int64,
producerEpoch int16, baseSequence int32, record count int32, then the records. A record: length
varint, attributes int8, timestampDelta varlong, offsetDelta varint, key (varint length, -1 null),
value (likewise), header count varint, headers (key: varint length + UTF-8, value: varint length,
-1 null). A compressed batch (attributes bits 0-2: gzip 1, snappy 2, lz4 3, zstd 4) holds the same
records compressed as one block after the header; `decode_batches` decompresses them (compression.py),
raising `compression.CompressionError` (a KafkaCodecError) when it cannot, its `reason` saying why.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from . import compression
from .primitives import uvarint_bytes
from broker.kafka.primitives import KafkaCodecError

try:                                    # the C implementation (PyPI `crc32c`, Debian python3-crc32c)
    from crc32c import crc32c as _crc32c_impl
except ImportError:                     # a node without it (a Docker or SSH node's Debian python3): correct,
    _crc32c_impl = None                 # about a thousand times slower; only the Kafka listener uses it

__all__ = ["crc32c", "Record", "RecordBatch", "KafkaCodecError", "CompressionError", "decode_batches",
           "encode_batch", "NO_PRODUCER", "BATCH_OVERHEAD", "MAGIC"]

CompressionError = compression.CompressionError

MAGIC = 2
BATCH_OVERHEAD = 61          # header bytes before the first record
_LOG_OVERHEAD = 12           # baseOffset + batchLength
_MIN_BATCH_LENGTH = BATCH_OVERHEAD - _LOG_OVERHEAD   # 49: batchLength of an empty batch
_HEAD = struct.Struct(">qiibIhiqqqhii")   # the 61-byte header
_AFTER_CRC = struct.Struct(">hiqqqhii")   # attributes .. record count (40 bytes)

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1     # the reflected Castagnoli polynomial
        table.append(c)
    return table


def crc32c_pure(data) -> int:
    """CRC-32C of `data` in pure Python, for nodes without the C module (byte-at-a-time table lookup)."""
    table = _crc32c_table_cached
    c = 0xFFFFFFFF
    for b in bytes(data):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


_crc32c_table_cached = _crc32c_table()
_crc32c = _crc32c_impl if _crc32c_impl is not None else crc32c_pure


def crc32c(data) -> int:
    """CRC-32C (Castagnoli) of `data`."""
    return _crc32c(data)


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)   # [(key: str, value: bytes | None)]


@dataclass
class RecordBatch:
    base_offset: int
    partition_leader_epoch: int
    magic: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]
    crc: int = 0
    size: int = 0              # bytes on the wire, baseOffset to the end

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def _uvarint_slow(data: bytes, pos: int, end: int, max_bytes: int, where: str) -> tuple[int, int]:
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise KafkaCodecError(f"{where}: varint runs past the record end")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise KafkaCodecError(f"{where}: varint longer than {max_bytes} bytes")


def _decode_records(data: bytes, pos: int, end: int, head: tuple, where: str) -> list[Record]:
    """The per-record loop over data[pos:end], `head` the batch's header fields (as _HEAD unpacks them:
    its base offset, base timestamp and record count): varints inlined for their common one- and
    two-byte forms; each record's key, value and headers are `_record_body`'s."""
    base_offset, base_ts, count = head[0], head[7], head[12]
    records = []
    append_rec = records.append
    for i in range(count):
        # record length (zigzag varint)
        if pos >= end:
            raise KafkaCodecError(f"{where}: record {i}: {count} records declared, bytes end after {i}")
        b = data[pos]
        if b < 0x80:
            n = b
            pos += 1
        elif pos + 1 < end and data[pos + 1] < 0x80:
            n = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            n, pos = _uvarint_slow(data, pos, end, 5, where)
        length = (n >> 1) ^ -(n & 1)
        if length < 6 or pos + length > end:
            raise KafkaCodecError(f"{where}: record {i}: bad length {length} ({end - pos} bytes left)")
        rend = pos + length
        # attributes int8 (unused), timestamp delta (varlong), offset delta (varint)
        pos += 1
        b = data[pos]
        if b < 0x80:
            n = b
            pos += 1
        elif pos + 1 < rend and data[pos + 1] < 0x80:
            n = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            n, pos = _uvarint_slow(data, pos, rend, 10, where)
        ts_delta = (n >> 1) ^ -(n & 1)
        if pos >= rend:
            raise KafkaCodecError(f"{where}: record {i}: truncated before its offset delta")
        b = data[pos]
        if b < 0x80:
            n = b
            pos += 1
        elif pos + 1 < rend and data[pos + 1] < 0x80:
            n = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            n, pos = _uvarint_slow(data, pos, rend, 5, where)
        off_delta = (n >> 1) ^ -(n & 1)
        key, value, headers = _record_body(data, pos, rend, where, i)
        append_rec(Record(base_offset + off_delta, base_ts + ts_delta, key, value, headers))
        pos = rend
    if pos != end:
        raise KafkaCodecError(f"{where}: {end - pos} bytes after the {count} declared records")
    return records


def _record_body(data: bytes, pos: int, rend: int, where: str, i: int) -> tuple:
    """(key, value, headers) of record `i`, data[pos:rend] from its key length on."""
    # key
    if pos >= rend:
        raise KafkaCodecError(f"{where}: record {i}: truncated before its key")
    b = data[pos]
    if b < 0x80:
        n = b
        pos += 1
    elif pos + 1 < rend and data[pos + 1] < 0x80:
        n = (b & 0x7F) | (data[pos + 1] << 7)
        pos += 2
    else:
        n, pos = _uvarint_slow(data, pos, rend, 5, where)
    klen = (n >> 1) ^ -(n & 1)
    if klen < 0:
        if klen != -1:
            raise KafkaCodecError(f"{where}: record {i}: key length {klen}")
        key = None
    else:
        if pos + klen > rend:
            raise KafkaCodecError(f"{where}: record {i}: key length {klen} runs past the record")
        key = data[pos:pos + klen]
        pos += klen
    # value
    if pos >= rend:
        raise KafkaCodecError(f"{where}: record {i}: truncated before its value")
    b = data[pos]
    if b < 0x80:
        n = b
        pos += 1
    elif pos + 1 < rend and data[pos + 1] < 0x80:
        n = (b & 0x7F) | (data[pos + 1] << 7)
        pos += 2
    else:
        n, pos = _uvarint_slow(data, pos, rend, 5, where)
    vlen = (n >> 1) ^ -(n & 1)
    if vlen < 0:
        if vlen != -1:
            raise KafkaCodecError(f"{where}: record {i}: value length {vlen}")
        value = None
    else:
        if pos + vlen > rend:
            raise KafkaCodecError(f"{where}: record {i}: value length {vlen} runs past the record")
        value = data[pos:pos + vlen]
        pos += vlen
    # headers
    if pos >= rend:
        raise KafkaCodecError(f"{where}: record {i}: truncated before its header count")
    if data[pos] != 0:
        return key, value, _decode_headers(data, pos, rend, where, i)
    if pos + 1 != rend:
        raise KafkaCodecError(f"{where}: record {i}: {rend - pos - 1} bytes left over inside the record")
    return key, value, []


def _zz(data: bytes, pos: int, end: int, where: str, max_bytes: int = 5) -> tuple[int, int]:
    n, pos = _uvarint_slow(data, pos, end, max_bytes, where)
    return (n >> 1) ^ -(n & 1), pos


def _decode_headers(data: bytes, pos: int, rend: int, where: str, i: int) -> list:
    count, pos = _zz(data, pos, rend, where)
    if count < 0 or count > rend - pos:
        raise KafkaCodecError(f"{where}: record {i}: header count {count}")
    headers = []
    for _ in range(count):
        klen, pos = _zz(data, pos, rend, where)
        if klen < 0 or pos + klen > rend:
            raise KafkaCodecError(f"{where}: record {i}: header key length {klen}")
        try:
            hkey = data[pos:pos + klen].decode("utf-8")
        except UnicodeDecodeError:
            raise KafkaCodecError(f"{where}: record {i}: header key is not UTF-8") from None
        pos += klen
        vlen, pos = _zz(data, pos, rend, where)
        if vlen < -1 or pos + vlen > rend:
            raise KafkaCodecError(f"{where}: record {i}: header value length {vlen}")
        if vlen == -1:
            hval = None
        else:
            hval = data[pos:pos + vlen]
            pos += vlen
        headers.append((hkey, hval))
    if pos != rend:
        raise KafkaCodecError(f"{where}: record {i}: {rend - pos} bytes left over inside the record")
    return headers


def decode_batches(data: bytes, allow_partial_tail: bool = False) -> list[RecordBatch]:
    """Every RecordBatch in `data`, CRCs verified. A partial batch at the end is an error unless
    `allow_partial_tail` (a fetch response may end in one), which drops it."""
    if type(data) is not bytes:
        data = bytes(data)
    batches = []
    pos = 0
    total = len(data)
    while pos < total:
        where = f"batch at byte {pos}"
        if total - pos < BATCH_OVERHEAD:
            if allow_partial_tail:
                break
            raise KafkaCodecError(f"{where}: {total - pos} bytes, a batch header needs {BATCH_OVERHEAD}")
        head = _HEAD.unpack_from(data, pos)
        (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts,
         producer_id, producer_epoch, base_seq, count) = head
        if batch_length < _MIN_BATCH_LENGTH:
            raise KafkaCodecError(f"{where}: batch length {batch_length} is less than {_MIN_BATCH_LENGTH}")
        end = pos + _LOG_OVERHEAD + batch_length
        if end > total:
            if allow_partial_tail:
                break
            raise KafkaCodecError(f"{where}: batch length {batch_length} runs {end - total} bytes past the data")
        if magic != MAGIC:
            raise KafkaCodecError(f"{where}: magic {magic}, only magic 2 (RecordBatch v2) is supported")
        actual = _crc32c(memoryview(data)[pos + 21:end])
        if actual != crc:
            raise KafkaCodecError(f"{where}: CRC-32C mismatch (stored {crc:#010x}, computed {actual:#010x})")
        # the codec before the record count: a compressed batch holds more records than its bytes could
        # uncompressed, so the count is checked against the decompressed bytes
        codec = attributes & COMPRESSION_MASK
        if codec:
            try:
                inner = compression.decompress(codec, memoryview(data)[pos + BATCH_OVERHEAD:end])
            except CompressionError as exc:
                raise CompressionError(codec, exc.reason, f"{where}: {exc}") from None
            body, body_start, body_end = inner, 0, len(inner)
        else:
            body, body_start, body_end = data, pos + BATCH_OVERHEAD, end
        if count < 0 or count > (body_end - body_start) // 7:
            raise KafkaCodecError(f"{where}: record count {count} cannot fit in {body_end - body_start} bytes")
        records = _decode_records(body, body_start, body_end, head, where)
        if attributes & TIMESTAMP_TYPE_MASK:      # LogAppendTime: every record carries the batch's time
            for r in records:
                r.timestamp = max_ts
        if records and records[-1].offset - base_offset != last_delta:
            raise KafkaCodecError(f"{where}: last offset delta {last_delta}, last record has "
                              f"{records[-1].offset - base_offset}")
        batches.append(RecordBatch(base_offset, leader_epoch, magic, attributes, last_delta, base_ts, max_ts,
                                   producer_id, producer_epoch, base_seq, records, crc, end - pos))
        pos = end
    return batches


_SMALL_ZIGZAG = [bytes((v << 1,)) for v in range(64)]


def _zigzag_bytes(v: int) -> bytes:
    if 0 <= v < 64:
        return _SMALL_ZIGZAG[v]
    return uvarint_bytes((v << 1) ^ (v >> 63) if v < 0 else v << 1)


_NULL = b"\x01"   # zigzag(-1)


def _headers_bytes(headers) -> bytes:
    zz = _zigzag_bytes
    out = [zz(len(headers))]
    for hkey, hval in headers:
        raw = hkey.encode("utf-8")
        out += [zz(len(raw)), raw, _NULL if hval is None else zz(len(hval)) + hval]
    return b"".join(out)


NO_PRODUCER = (-1, -1, -1)


def encode_batch(base_offset: int, leader_epoch: int, records: list[tuple],
                 *, producer: tuple[int, int, int] = NO_PRODUCER, attributes: int = 0) -> bytes:
    """One uncompressed RecordBatch v2 of `records` [(timestamp_ms, key, value)] or [(timestamp_ms, key,
    value, headers)] (headers: [(str, bytes | None)]) at offsets base_offset + i, CRC-32C filled in.
    `producer`: (producer id, producer epoch, base sequence) of an idempotent producer's batch (KIP-98),
    NO_PRODUCER's -1s otherwise. With the LogAppendTime attribute, maxTimestamp is the records' latest
    timestamp, which consumers then give every record of the batch."""
    if not records:
        raise ValueError("encode_batch: no records")
    if attributes & COMPRESSION_MASK:
        raise ValueError("encode_batch: compression is not supported")
    producer_id, producer_epoch, base_sequence = producer
    base_ts = records[0][0]
    max_ts = base_ts
    zz = _zigzag_bytes
    parts = []
    append = parts.append
    for i, r in enumerate(records):
        if len(r) == 3:
            ts, key, value = r
            tail = b"\x00"
        else:
            ts, key, value, headers = r
            tail = _headers_bytes(headers) if headers else b"\x00"
        if ts > max_ts:
            max_ts = ts
        # attributes, timestamp delta, offset delta, key, value, headers
        rec = (b"\x00" + zz(ts - base_ts) + zz(i) + (_NULL if key is None else zz(len(key)) + key)
               + (_NULL if value is None else zz(len(value)) + value) + tail)
        append(zz(len(rec)))
        append(rec)
    body = b"".join(parts)
    after_crc = _AFTER_CRC.pack(attributes, len(records) - 1, base_ts, max_ts, producer_id, producer_epoch,
                                base_sequence, len(records)) + body
    crc = _crc32c(after_crc)
    head = struct.pack(">qiibI", base_offset, len(after_crc) + 9, leader_epoch, MAGIC, crc)
    return head + after_crc
