"""Kafka frames <-> (header, body dict), driven by the schema table (`schema.py`).

Server side: `decode_request` (a frame without its length prefix -> `KafkaRequest`) and
`encode_response` (-> a whole frame with its length prefix). Client side, for tests and probes:
`encode_request` and `decode_response`. Body dicts use snake_case field names; see schema.py.

Each (api key, direction, version) is compiled once into closures; decoding is bounded by the bytes
present (no declared length is trusted before it is checked) and nesting by the schema. Trailing bytes
after a REQUEST body are ignored, as Kafka's brokers ignore them (their generated readers stop after the
last field): librdkafka 2.x sends a Metadata v9 "all topics" request with four bytes after its tagged-field
section. Trailing bytes after a RESPONSE body are an error (the client side is ours, for tests). Malformed bytes raise `KafkaCodecError`; a request for an api key
or version that is not advertised raises `UnsupportedRequest` after its header was read, so the
caller can still answer it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from . import primitives as P
from . import versions as V
from .primitives import KafkaCodecError
from .schema import REQUESTS, RESPONSES, Field, Message, in_range

__all__ = ["KafkaRequest", "KafkaCodecError", "UnsupportedRequest", "decode_request",
           "encode_response", "encode_request", "decode_response", "request_header_version",
           "response_header_version"]


class UnsupportedRequest(Exception):
    """A well-framed request for an api key or version the broker does not advertise."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int, message: str):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class KafkaRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict


# ---- compiling a schema into readers and writers ---------------------------------------------------

def _fail(e: KafkaCodecError, part: str):
    e.path = [part] + getattr(e, "path", [])
    raise e


def _path_text(parts: list[str]) -> str:
    out = ""
    for p in parts:
        out += p if p.startswith("[") or not out else "." + p
    return out


_FIXED = {
    "int8": (P.read_int8, P.write_int8, 1),
    "int16": (P.read_int16, P.write_int16, 2),
    "int32": (P.read_int32, P.write_int32, 4),
    "int64": (P.read_int64, P.write_int64, 8),
    "uint32": (P.read_uint32, P.write_uint32, 4),
    "bool": (P.read_bool, P.write_bool, 1),
    "uuid": (P.read_uuid, P.write_uuid, 16),
}

# (type, nullable, compact) -> (reader, writer, min size)
_VARLEN = {
    ("string", False, False): (P.read_string, P.write_string, 2),
    ("string", True, False): (P.read_nullable_string, P.write_nullable_string, 2),
    ("string", False, True): (P.read_compact_string, P.write_compact_string, 1),
    ("string", True, True): (P.read_compact_nullable_string, P.write_compact_nullable_string, 1),
    ("bytes", False, False): (P.read_bytes, P.write_bytes, 4),
    ("bytes", True, False): (P.read_nullable_bytes, P.write_nullable_bytes, 4),
    ("bytes", False, True): (P.read_compact_bytes, P.write_compact_bytes, 1),
    ("bytes", True, True): (P.read_compact_nullable_bytes, P.write_compact_nullable_bytes, 1),
}


def _scalar(type_: str, nullable: bool, compact: bool):
    if type_ in _FIXED:
        return _FIXED[type_]
    if type_ == "records":
        type_ = "bytes"
    return _VARLEN[(type_, nullable, compact)]


def _array(item_read, item_write, item_min: int, nullable: bool, compact: bool):
    read_len = P.read_compact_array_length if compact else P.read_array_length
    write_len = P.write_compact_array_length if compact else P.write_array_length

    def read(data: bytes, pos: int):
        n, pos = read_len(data, pos, item_min)
        if n is None:
            if nullable:
                return None, pos
            raise KafkaCodecError(f"array: null at {pos} where not nullable")
        out = []
        append = out.append
        i = 0
        try:
            for i in range(n):
                v, pos = item_read(data, pos)
                append(v)
        except KafkaCodecError as e:
            _fail(e, f"[{i}]")
        return out, pos

    def write(out: bytearray, items) -> None:
        if items is None:
            if not nullable:
                raise KafkaCodecError("array: None where not nullable")
            write_len(out, None)
            return
        write_len(out, len(items))
        for item in items:
            item_write(out, item)

    return read, write, (1 if compact else 4)


def _field(f: Field, version: int, msg_flexible: bool):
    compact = msg_flexible if f.flexible == "inherit" else in_range(f.flexible, version)
    nullable = f.is_nullable(version)
    if f.fields:
        sr, sw, smin = _struct(f.fields, version, msg_flexible)
        if f.is_array:
            return _array(sr, sw, smin, nullable, compact)
        return sr, sw, smin
    if f.is_array:
        ir, iw, imin = _scalar(f.element, False, compact)
        return _array(ir, iw, imin, nullable, compact)
    return _scalar(f.type, nullable, compact)


def _struct(fields: tuple[Field, ...], version: int, flexible: bool):
    """(reader, writer, min size) of a struct (or a whole body) in `version`."""
    plain: list[tuple[str, object]] = []
    plain_w: list[tuple[str, object, object]] = []
    tagged: dict[int, tuple[str, object]] = {}
    tagged_w: list[tuple[int, str, object, object]] = []
    tagged_defaults: list[tuple[str, object]] = []
    min_size = 1 if flexible else 0
    for f in fields:
        if not f.exists(version):
            continue
        r, w, m = _field(f, version, flexible)
        default = f.default_value(version)
        if flexible and f.is_tagged(version):
            tagged[f.tag] = (f.key, r)
            tagged_w.append((f.tag, f.key, w, default))
            tagged_defaults.append((f.key, default))
        else:
            plain.append((f.key, r))
            plain_w.append((f.key, w, default))
            min_size += m
    tagged_w.sort(key=lambda t: t[0])
    return (_struct_reader(tuple(plain), tagged, tagged_defaults, flexible),
            _struct_writer(tuple(plain_w), tagged_w, flexible), min_size)


def _struct_reader(plain_t: tuple, tagged: dict, tagged_defaults: list, flexible: bool):
    """A struct's reader: its `plain_t` (key, reader) fields in order, then, when `flexible`, its tagged
    section (`tagged`: tag -> (key, reader); a tagged field not present takes its default)."""
    def read(data: bytes, pos: int):
        d = {}
        key = ""
        try:
            for key, r in plain_t:
                d[key], pos = r(data, pos)
        except KafkaCodecError as e:
            _fail(e, key)
        if flexible:
            for key, default in tagged_defaults:
                d[key] = [] if type(default) is list else default
            section, pos = P.read_tagged_fields(data, pos)
            for tag, raw in section:
                known = tagged.get(tag)
                if known is None:
                    continue        # an unknown tag is skipped
                key, r = known
                try:
                    d[key], end = r(raw, 0)
                except KafkaCodecError as e:
                    _fail(e, key)
                if end != len(raw):
                    raise KafkaCodecError(f"tagged field {key} (tag {tag}): {len(raw) - end} bytes left over")
        return d, pos

    return read


def _struct_writer(plain_wt: tuple, tagged_w: list, flexible: bool):
    """A struct's writer: its `plain_wt` (key, writer, default) fields in order, then, when `flexible`, its
    tagged section: the `tagged_w` (tag, key, writer, default) fields whose value is not their default, in
    tag order."""
    def write(out: bytearray, d) -> None:
        if not isinstance(d, dict):
            raise KafkaCodecError(f"expected a dict, got {type(d).__name__}")
        key = ""
        try:
            for key, w, default in plain_wt:
                w(out, d.get(key, default))
            if flexible:
                present = []
                for tag, key, w, default in tagged_w:
                    v = d.get(key, default)
                    if v != default:
                        tmp = bytearray()
                        w(tmp, v)
                        present.append((tag, tmp))
                P.write_uvarint(out, len(present))
                for tag, tmp in present:
                    P.write_uvarint(out, tag)
                    P.write_uvarint(out, len(tmp))
                    out += tmp
        except KafkaCodecError as e:
            raise KafkaCodecError(f"{key}: {e}") from None
        except (struct.error, ValueError, TypeError, OverflowError) as e:
            raise KafkaCodecError(f"{key}: {e}") from None

    return write


@dataclass(frozen=True)
class _Codec:
    msg: Message
    version: int
    flexible: bool
    read: object
    write: object


@lru_cache(maxsize=None)
def _codec(api_key: int, kind: str, version: int) -> _Codec:
    table = REQUESTS if kind == "request" else RESPONSES
    msg = table.get(api_key)
    if msg is None:
        raise KeyError(f"no {kind} schema for api key {api_key}")
    if not msg.valid[0] <= version <= msg.valid[1]:
        raise KeyError(f"{msg.name}: version {version} not declared (declared {msg.valid[0]}-{msg.valid[1]})")
    flexible = msg.is_flexible(version)
    r, w, _ = _struct(msg.fields, version, flexible)
    return _Codec(msg, version, flexible, r, w)


def _decode_body(codec: _Codec, data: bytes, pos: int, *, allow_trailing: bool = False) -> dict:
    try:
        body, pos = codec.read(data, pos)
    except KafkaCodecError as e:
        path = _path_text(getattr(e, "path", []))
        reason = e.args[0] if e.args else "malformed"
        raise KafkaCodecError(f"{codec.msg.name} v{codec.version}: {path + ': ' if path else ''}{reason}") from None
    except (struct.error, IndexError, RecursionError) as e:  # defensive: readers check bounds themselves
        raise KafkaCodecError(f"{codec.msg.name} v{codec.version}: {e}") from None
    if pos != len(data) and not allow_trailing:
        raise KafkaCodecError(f"{codec.msg.name} v{codec.version}: {len(data) - pos} trailing bytes after the body")
    return body


def _encode_body(codec: _Codec, out: bytearray, body: dict) -> None:
    try:
        codec.write(out, body)
    except KafkaCodecError as e:
        raise KafkaCodecError(f"{codec.msg.name} v{codec.version}: {e}") from None


# ---- headers ------------------------------------------------------------------------------------------

_HDR = struct.Struct(">hhi")
_LEN = struct.Struct(">i")


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for a flexible request version, else 1."""
    msg = REQUESTS.get(api_key)
    return 2 if msg is not None and msg.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 (with a tagged-field section) for a flexible response version, except ApiVersions: always 0."""
    if api_key == V.API_VERSIONS:
        return 0
    msg = RESPONSES.get(api_key)
    return 1 if msg is not None and msg.is_flexible(api_version) else 0


# ---- server side ----------------------------------------------------------------------------------------

def decode_request(payload: bytes) -> KafkaRequest:
    """A request frame WITHOUT its 4-byte length prefix -> KafkaRequest (header v1, or v2 for a
    flexible version). UnsupportedRequest for an api key/version not in versions.SUPPORTED;
    KafkaCodecError for malformed bytes."""
    data = payload if type(payload) is bytes else bytes(payload)
    if len(data) < 10:
        raise KafkaCodecError(f"request header: {len(data)} bytes, needs at least 10")
    api_key, api_version, correlation_id = _HDR.unpack_from(data, 0)
    try:
        client_id, pos = P.read_nullable_string(data, 8)
    except KafkaCodecError as e:
        raise KafkaCodecError(f"request header: client_id: {e}") from None
    if api_key not in V.SUPPORTED or api_key not in REQUESTS:
        raise UnsupportedRequest(api_key, api_version, correlation_id, f"unsupported api key {api_key}")
    lo, hi = V.SUPPORTED[api_key]
    if not lo <= api_version <= hi:
        raise UnsupportedRequest(api_key, api_version, correlation_id,
                                 f"{V.NAMES.get(api_key, api_key)} v{api_version} unsupported (supported {lo}-{hi})")
    codec = _codec(api_key, "request", api_version)
    if codec.flexible:
        try:
            pos = P.skip_tagged_fields(data, pos)
        except KafkaCodecError as e:
            raise KafkaCodecError(f"request header: tagged fields: {e}") from None
    body = _decode_body(codec, data, pos, allow_trailing=True)
    return KafkaRequest(api_key, api_version, correlation_id, client_id, body)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict) -> bytes:
    """The whole response frame, 4-byte length prefix included."""
    codec = _codec(api_key, "response", api_version)
    out = bytearray(b"\0\0\0\0")
    out += _LEN.pack(correlation_id)
    if response_header_version(api_key, api_version) == 1:
        out.append(0)
    _encode_body(codec, out, body)
    _LEN.pack_into(out, 0, len(out) - 4)
    return bytes(out)


# ---- client side -------------------------------------------------------------------------------------------

def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: dict) -> bytes:
    """The whole request frame, 4-byte length prefix included."""
    codec = _codec(api_key, "request", api_version)
    out = bytearray(b"\0\0\0\0")
    out += _HDR.pack(api_key, api_version, correlation_id)
    P.write_nullable_string(out, client_id)
    if codec.flexible:
        out.append(0)
    _encode_body(codec, out, body)
    _LEN.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(api_key: int, api_version: int, payload: bytes) -> tuple[int, dict]:
    """A response frame WITHOUT its length prefix -> (correlation_id, body)."""
    data = payload if type(payload) is bytes else bytes(payload)
    codec = _codec(api_key, "response", api_version)
    correlation_id, pos = P.read_int32(data, 0)
    if response_header_version(api_key, api_version) == 1:
        try:
            pos = P.skip_tagged_fields(data, pos)
        except KafkaCodecError as e:
            raise KafkaCodecError(f"response header: tagged fields: {e}") from None
    return correlation_id, _decode_body(codec, data, pos)
