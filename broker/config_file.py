"""The shape checks every broker/ JSON config file (broker.json, controller.json) starts with: the
parsed value is an object, has no unknown key and every required key. Each file's loader raises its
own ConfigError class; the messages are the same one-liners for both, naming the file and the key.
"""
from __future__ import annotations

from typing import Any, Collection, Iterable


def check_keys(raw: Any, source: str, known: Collection[str], required: Iterable[str],
               error: type[Exception]) -> dict[str, Any]:
    """Return `raw` if it is a dict with only `known` keys and all `required` ones, else raise `error`."""
    if not isinstance(raw, dict):
        raise error(f"{source}: must be a JSON object, got {type(raw).__name__}")
    for key in raw:
        if key not in known:
            raise error(f"{source}: key {key!r}: unknown key (known: {', '.join(sorted(known))})")
    for key in required:
        if key not in raw:
            raise error(f"{source}: key {key!r}: missing (required)")
    return raw
