"""How workload values travel: decimal integers as bytes, and back (anything else stays a string)."""
from __future__ import annotations


def encode_value(v: int) -> bytes:
    return str(int(v)).encode()


def decode_value(raw: bytes | str) -> int | str:
    text = raw.decode(errors="replace") if isinstance(raw, (bytes, bytearray, memoryview)) else str(raw)
    try:
        return int(text)
    except ValueError:
        return text
