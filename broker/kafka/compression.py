"""Decompressing the records of a compressed Kafka RecordBatch: gzip (1), snappy (2), lz4 (3), zstd (4).

The codecs are cramjam's (PyPI `cramjam`: one package with all four, Rust implementations), loaded when
first needed. A node without it (a Docker or SSH node's Debian python3) refuses compressed batches as
UNSUPPORTED_COMPRESSION_TYPE (76), saying so, instead of failing. Every failure is a CompressionError
whose `reason` says which Kafka error answers it.

What each producer writes, and so what is read:
- gzip: a gzip member (RFC 1952), as Java's GZIPOutputStream, librdkafka and kafka-python write it;
- snappy: either one raw snappy block (librdkafka) or the xerial framing that snappy-java's stream
  writes (Java clients, kafka-python): the 8-byte magic `\\x82SNAPPY\\x00`, two int32 versions, then blocks
  of int32 length + raw snappy block;
- lz4: the LZ4 frame format (KIP-57: magic v2 batches always use it);
- zstd: one or more zstd frames.

Decompression is bounded: the output goes into a buffer that grows by steps up to MAX_DECOMPRESSED bytes,
so a small batch that would expand past it (a compression bomb) is refused as too large without ever
holding more than the limit.
"""
from __future__ import annotations

import struct

from .primitives import KafkaCodecError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
MAX_DECOMPRESSED = 64 * 1024 * 1024      # the record bytes one batch may expand to
_FIRST_GUESS = 64 * 1024                 # the first buffer: enough for most batches
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEAD = 16                        # magic, version, compatible version
_INT32 = struct.Struct(">i")


MISSING, TOO_LARGE, MALFORMED = "missing", "too-large", "malformed"


class CompressionError(KafkaCodecError):
    """A compressed batch that cannot be read: `reason` MISSING (this node has no codecs: Kafka's
    UNSUPPORTED_COMPRESSION_TYPE), TOO_LARGE (its records would pass MAX_DECOMPRESSED bytes:
    MESSAGE_TOO_LARGE) or MALFORMED (the bytes do not decompress, or no such codec: CORRUPT_MESSAGE)."""

    def __init__(self, codec: int, reason: str, message: str):
        self.codec = codec
        self.reason = reason
        super().__init__(message)


_cramjam = None


def _codecs():
    """cramjam, or None where it is not installed."""
    global _cramjam
    if _cramjam is None:
        try:
            import cramjam
        except ImportError:
            return None
        _cramjam = cramjam
    return _cramjam


def decompress(codec: int, data: bytes | memoryview, limit: int | None = None) -> bytes:
    """The record bytes of a batch compressed with `codec`, at most `limit` (default MAX_DECOMPRESSED).
    Raises CompressionError."""
    limit = MAX_DECOMPRESSED if limit is None else limit
    if codec not in NAMES:
        raise CompressionError(codec, MALFORMED, f"codec {codec} is not a Kafka compression type")
    cj = _codecs()
    if cj is None:
        raise CompressionError(codec, MISSING, f"{NAMES[codec]}: this broker's Python has no cramjam "
                               "(pip install cramjam) for compressed batches")
    try:
        if codec == SNAPPY and bytes(data[:8]) == XERIAL_MAGIC:
            return _xerial(cj, data, limit)
        into = {GZIP: cj.gzip.decompress_into, SNAPPY: cj.snappy.decompress_raw_into,
                LZ4: cj.lz4.decompress_into, ZSTD: cj.zstd.decompress_into}[codec]
        return _bounded(into, data, limit, NAMES[codec])
    except CompressionError as failed:     # raised below without the codec
        raise CompressionError(codec, failed.reason, str(failed)) from None


def _bounded(into, data, limit: int, name: str) -> bytes:
    """Decompress with `into(data, buffer)` into buffers of growing size, at most `limit` bytes."""
    size = min(limit, max(_FIRST_GUESS, 8 * len(data)))
    while True:
        buf = bytearray(size + 1)       # one byte of room: a full buffer means the output may go on
        try:
            n = into(bytes(data), buf)
        except Exception as exc:  # noqa: BLE001 - cramjam's errors carry no kind; tell them apart by size
            if "whole buffer" in str(exc) or "smaller than required" in str(exc):
                if size >= limit:
                    raise CompressionError(-1, TOO_LARGE, f"{name} records decompress to more than {limit} bytes") from None
                size = min(limit, size * 4)
                continue
            raise CompressionError(-1, MALFORMED, f"{name}: {exc}") from None
        if n > size:
            if size >= limit:
                raise CompressionError(-1, TOO_LARGE, f"{name} records decompress to more than {limit} bytes")
            size = min(limit, size * 4)
            continue
        return bytes(buf[:n])


def _xerial(cj, data, limit: int) -> bytes:
    """snappy-java's stream framing: a 16-byte head, then int32-length-prefixed raw snappy blocks."""
    view = memoryview(bytes(data))
    if len(view) < _XERIAL_HEAD:
        raise CompressionError(-1, MALFORMED, "snappy: xerial head cut short")
    out = bytearray()
    pos = _XERIAL_HEAD
    while pos < len(view):
        if len(view) - pos < 4:
            raise CompressionError(-1, MALFORMED, f"snappy: xerial block length cut short at byte {pos}")
        (n,) = _INT32.unpack_from(view, pos)
        pos += 4
        if n < 0 or n > len(view) - pos:
            raise CompressionError(-1, MALFORMED, f"snappy: xerial block of {n} bytes at byte {pos - 4} runs past the batch")
        try:
            out += _bounded(cj.snappy.decompress_raw_into, view[pos:pos + n], limit - len(out), "snappy")
        except CompressionError as failed:
            if failed.reason != TOO_LARGE:
                raise
            raise CompressionError(-1, TOO_LARGE, f"snappy records decompress to more than {limit} bytes") from None
        pos += n
    return bytes(out)
