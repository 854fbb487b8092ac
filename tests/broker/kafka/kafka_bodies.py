"""Hypothesis strategies for Kafka body dicts, built from our schema table (broker/kafka/schema.py):
every field that exists in a version, with a value of its type (None where nullable)."""
from __future__ import annotations

from hypothesis import strategies as st

from broker.kafka.schema import Field, Message

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _scalar(type_: str):
    if type_ in _INTS:
        bits = _INTS[type_]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if type_ == "uint32":
        return st.integers(0, (1 << 32) - 1)
    if type_ == "bool":
        return st.booleans()
    if type_ == "string":
        return st.text(max_size=12)
    if type_ in ("bytes", "records"):
        return st.binary(max_size=40)
    if type_ == "uuid":
        return st.binary(min_size=16, max_size=16)
    raise AssertionError(f"no strategy for {type_}")


def field_strategy(f: Field, version: int):
    if f.fields:
        inner = struct_strategy(f.fields, version)
        s = st.lists(inner, max_size=3) if f.is_array else inner
    elif f.is_array:
        s = st.lists(_scalar(f.element), max_size=4)
    else:
        s = _scalar(f.type)
    if f.is_nullable(version):
        s = st.none() | s
    return s


def struct_strategy(fields: tuple[Field, ...], version: int):
    return st.fixed_dictionaries({f.key: field_strategy(f, version) for f in fields if f.exists(version)})


def body_strategy(msg: Message, version: int):
    return struct_strategy(msg.fields, version)
