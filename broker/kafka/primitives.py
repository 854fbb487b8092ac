"""Kafka wire primitives: fixed-width integers, (zigzag) varints, strings, bytes, arrays, UUIDs and
tagged-field sections, in their classic and compact (flexible-version) forms.

Readers take `(data: bytes, pos: int)` and return `(value, new_pos)`; they never read past
`len(data)` and never allocate more than the bytes actually present: a declared length larger than
what is left raises `KafkaCodecError`. Writers append to a `bytearray`.
"""
from __future__ import annotations

import struct

__all__ = [
    "KafkaCodecError",
    "read_int8", "read_int16", "read_int32", "read_int64", "read_uint32", "read_bool",
    "read_uvarint", "read_varint", "read_varlong", "read_uuid",
    "read_string", "read_nullable_string", "read_compact_string", "read_compact_nullable_string",
    "read_bytes", "read_nullable_bytes", "read_compact_bytes", "read_compact_nullable_bytes",
    "read_array_length", "read_compact_array_length", "read_tagged_fields", "skip_tagged_fields",
    "write_int8", "write_int16", "write_int32", "write_int64", "write_uint32", "write_bool",
    "write_uvarint", "write_varint", "write_varlong", "write_uuid",
    "write_string", "write_nullable_string", "write_compact_string", "write_compact_nullable_string",
    "write_bytes", "write_nullable_bytes", "write_compact_bytes", "write_compact_nullable_bytes",
    "write_array_length", "write_compact_array_length", "write_empty_tagged_fields",
    "zigzag_encode", "zigzag_decode", "uvarint_bytes", "varint_bytes",
]


class KafkaCodecError(ValueError):
    """Kafka bytes that cannot be decoded (truncated, a bad length or varint, trailing garbage, a record
    batch whose CRC or counts lie) or a value that cannot be encoded in its field. One line."""


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


# ---- fixed width -----------------------------------------------------------------------------------

def _fixed(st: struct.Struct, what: str):
    size = st.size
    unpack_from = st.unpack_from

    def read(data: bytes, pos: int):
        if pos + size > len(data):
            raise KafkaCodecError(f"{what}: needs {size} bytes at {pos}, only {len(data) - pos} left")
        return unpack_from(data, pos)[0], pos + size
    read.__name__ = f"read_{what}"
    return read


read_int8 = _fixed(_I8, "int8")
read_int16 = _fixed(_I16, "int16")
read_int32 = _fixed(_I32, "int32")
read_int64 = _fixed(_I64, "int64")
read_uint32 = _fixed(_U32, "uint32")


def read_bool(data: bytes, pos: int) -> tuple[bool, int]:
    if pos >= len(data):
        raise KafkaCodecError(f"bool: needs 1 byte at {pos}, none left")
    return data[pos] != 0, pos + 1


def write_int8(out: bytearray, v: int) -> None:
    out += _I8.pack(v)


def write_int16(out: bytearray, v: int) -> None:
    out += _I16.pack(v)


def write_int32(out: bytearray, v: int) -> None:
    out += _I32.pack(v)


def write_int64(out: bytearray, v: int) -> None:
    out += _I64.pack(v)


def write_uint32(out: bytearray, v: int) -> None:
    out += _U32.pack(v)


def write_bool(out: bytearray, v: bool) -> None:
    out.append(1 if v else 0)


# ---- varints ---------------------------------------------------------------------------------------

def read_uvarint(data: bytes, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most `max_bytes` bytes (5: 32-bit, 10: 64-bit)."""
    result = 0
    shift = 0
    end = len(data)
    for i in range(max_bytes):
        if pos >= end:
            raise KafkaCodecError(f"varint: truncated at {pos}")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if max_bytes == 5 and result > 0xFFFFFFFF:
                raise KafkaCodecError(f"varint: value does not fit 32 bits at {pos - i - 1}")
            if max_bytes == 10 and result > 0xFFFFFFFFFFFFFFFF:
                raise KafkaCodecError(f"varlong: value does not fit 64 bits at {pos - i - 1}")
            return result, pos
        shift += 7
    raise KafkaCodecError(f"varint: longer than {max_bytes} bytes at {pos - max_bytes}")


def zigzag_decode(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def zigzag_encode(v: int) -> int:
    return (v << 1) ^ (v >> 63) if v < 0 else v << 1


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Signed (zigzag) 32-bit varint."""
    n, pos = read_uvarint(data, pos, 5)
    return (n >> 1) ^ -(n & 1), pos


def read_varlong(data: bytes, pos: int) -> tuple[int, int]:
    """Signed (zigzag) 64-bit varint."""
    n, pos = read_uvarint(data, pos, 10)
    return (n >> 1) ^ -(n & 1), pos


def uvarint_bytes(n: int) -> bytes:
    if n < 0:
        raise ValueError(f"unsigned varint: negative value {n}")
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_bytes(v: int) -> bytes:
    """Zigzag varint/varlong bytes of a signed value."""
    return uvarint_bytes((v << 1) ^ (v >> 63) if v < 0 else v << 1)


def write_uvarint(out: bytearray, n: int) -> None:
    if 0 <= n < 0x80:
        out.append(n)
    else:
        out += uvarint_bytes(n)


def write_varint(out: bytearray, v: int) -> None:
    if not INT32_MIN <= v <= INT32_MAX:
        raise ValueError(f"varint: {v} does not fit 32 bits")
    out += varint_bytes(v)


def write_varlong(out: bytearray, v: int) -> None:
    if not INT64_MIN <= v <= INT64_MAX:
        raise ValueError(f"varlong: {v} does not fit 64 bits")
    out += varint_bytes(v)


# ---- strings and bytes -------------------------------------------------------------------------------

def _take(data: bytes, pos: int, n: int, what: str) -> tuple[bytes, int]:
    end = pos + n
    if end > len(data):
        raise KafkaCodecError(f"{what}: declared length {n} at {pos}, only {len(data) - pos} bytes left")
    return data[pos:end], end


def _utf8(raw: bytes, pos: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KafkaCodecError(f"string: invalid UTF-8 before {pos}") from None


def read_nullable_string(data: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = read_int16(data, pos)
    if n == -1:
        return None, pos
    if n < 0:
        raise KafkaCodecError(f"string: negative length {n} at {pos - 2}")
    raw, pos = _take(data, pos, n, "string")
    return _utf8(raw, pos), pos


def read_string(data: bytes, pos: int) -> tuple[str, int]:
    s, p = read_nullable_string(data, pos)
    if s is None:
        raise KafkaCodecError(f"string: null where not nullable at {pos}")
    return s, p


def read_compact_nullable_string(data: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(data, pos)
    if n == 0:
        return None, pos
    raw, pos = _take(data, pos, n - 1, "compact string")
    return _utf8(raw, pos), pos


def read_compact_string(data: bytes, pos: int) -> tuple[str, int]:
    s, p = read_compact_nullable_string(data, pos)
    if s is None:
        raise KafkaCodecError(f"compact string: null where not nullable at {pos}")
    return s, p


def read_nullable_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_int32(data, pos)
    if n == -1:
        return None, pos
    if n < 0:
        raise KafkaCodecError(f"bytes: negative length {n} at {pos - 4}")
    return _take(data, pos, n, "bytes")


def read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    b, p = read_nullable_bytes(data, pos)
    if b is None:
        raise KafkaCodecError(f"bytes: null where not nullable at {pos}")
    return b, p


def read_compact_nullable_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(data, pos)
    if n == 0:
        return None, pos
    return _take(data, pos, n - 1, "compact bytes")


def read_compact_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    b, p = read_compact_nullable_bytes(data, pos)
    if b is None:
        raise KafkaCodecError(f"compact bytes: null where not nullable at {pos}")
    return b, p


def read_uuid(data: bytes, pos: int) -> tuple[bytes, int]:
    return _take(data, pos, 16, "uuid")


def _enc(s: str, what: str) -> bytes:
    if not isinstance(s, str):
        raise TypeError(f"{what}: expected str, got {type(s).__name__}")
    return s.encode("utf-8")


def write_nullable_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\xff\xff"
        return
    raw = _enc(s, "string")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string: {len(raw)} bytes is longer than 32767")
    out += _I16.pack(len(raw))
    out += raw


def write_string(out: bytearray, s: str) -> None:
    if s is None:
        raise ValueError("string: None where not nullable")
    write_nullable_string(out, s)


def write_compact_nullable_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out.append(0)
        return
    raw = _enc(s, "compact string")
    write_uvarint(out, len(raw) + 1)
    out += raw


def write_compact_string(out: bytearray, s: str) -> None:
    if s is None:
        raise ValueError("compact string: None where not nullable")
    write_compact_nullable_string(out, s)


def _raw(b, what: str) -> bytes:
    if not isinstance(b, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what}: expected bytes, got {type(b).__name__}")
    return b


def write_nullable_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += b"\xff\xff\xff\xff"
        return
    b = _raw(b, "bytes")
    out += _I32.pack(len(b))
    out += b


def write_bytes(out: bytearray, b: bytes) -> None:
    if b is None:
        raise ValueError("bytes: None where not nullable")
    write_nullable_bytes(out, b)


def write_compact_nullable_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out.append(0)
        return
    b = _raw(b, "compact bytes")
    write_uvarint(out, len(b) + 1)
    out += b


def write_compact_bytes(out: bytearray, b: bytes) -> None:
    if b is None:
        raise ValueError("compact bytes: None where not nullable")
    write_compact_nullable_bytes(out, b)


def write_uuid(out: bytearray, u: bytes) -> None:
    if not isinstance(u, (bytes, bytearray)) or len(u) != 16:
        raise ValueError("uuid: expected 16 bytes")
    out += u


# ---- arrays ----------------------------------------------------------------------------------------

def read_array_length(data: bytes, pos: int, min_item: int = 1) -> tuple[int | None, int]:
    """Classic array length (int32, -1 = null). A count that cannot fit in the bytes left (each item
    takes at least `min_item` bytes, counted as 1 if smaller) is an error, before anything is built."""
    n, pos = read_int32(data, pos)
    if n == -1:
        return None, pos
    if n < 0:
        raise KafkaCodecError(f"array: negative length {n} at {pos - 4}")
    if n * max(min_item, 1) > len(data) - pos:
        raise KafkaCodecError(f"array: declared {n} items at {pos - 4}, only {len(data) - pos} bytes left")
    return n, pos


def read_compact_array_length(data: bytes, pos: int, min_item: int = 1) -> tuple[int | None, int]:
    start = pos
    n, pos = read_uvarint(data, pos)
    if n == 0:
        return None, pos
    n -= 1
    if n * max(min_item, 1) > len(data) - pos:
        raise KafkaCodecError(f"compact array: declared {n} items at {start}, only {len(data) - pos} bytes left")
    return n, pos


def write_array_length(out: bytearray, n: int | None) -> None:
    out += _I32.pack(-1 if n is None else n)


def write_compact_array_length(out: bytearray, n: int | None) -> None:
    write_uvarint(out, 0 if n is None else n + 1)


# ---- tagged fields -----------------------------------------------------------------------------------

def read_tagged_fields(data: bytes, pos: int) -> tuple[list[tuple[int, bytes]], int]:
    """A tagged-field section: [(tag, raw bytes)] in the order sent (tags strictly increasing)."""
    count, pos = read_uvarint(data, pos)
    if count > len(data) - pos:
        raise KafkaCodecError(f"tagged fields: declared {count} at {pos}, only {len(data) - pos} bytes left")
    out = []
    last = -1
    for _ in range(count):
        tag, pos = read_uvarint(data, pos)
        if tag <= last:
            raise KafkaCodecError(f"tagged fields: tag {tag} after tag {last} (not increasing)")
        last = tag
        size, pos = read_uvarint(data, pos)
        raw, pos = _take(data, pos, size, f"tagged field {tag}")
        out.append((tag, raw))
    return out, pos


def skip_tagged_fields(data: bytes, pos: int) -> int:
    return read_tagged_fields(data, pos)[1]


def write_empty_tagged_fields(out: bytearray) -> None:
    out.append(0)
