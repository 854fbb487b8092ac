"""JSON decoding for the report's hot loops: orjson when installed, the standard library otherwise."""
from __future__ import annotations

import json

try:  # orjson is a declared dependency; the fallback keeps a bare interpreter working, only slower
    import orjson as _orjson

    loads = _orjson.loads
    DecodeError: type[Exception] = _orjson.JSONDecodeError

    def dumps_compact(obj) -> str:
        return _orjson.dumps(obj, option=_orjson.OPT_NON_STR_KEYS, default=str).decode()
except ImportError:  # pragma: no cover - exercised only without orjson
    loads = json.loads
    DecodeError = ValueError

    def dumps_compact(obj) -> str:
        return json.dumps(obj, separators=(",", ":"), default=str)
