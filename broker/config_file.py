"""The broker's JSON config files (broker.json, controller.json): their one error, `ConfigError`, and the
shape checks both loaders start with (the parsed value is an object, has no unknown key and every
required key). The messages are one line naming the file and the key.
"""
from __future__ import annotations

from typing import Any, Collection, Iterable


from broker.errors import ConfigError
from broker.settings import did_you_mean

__all__ = ["ConfigError", "check_keys"]


def check_keys(raw: Any, source: str, known: Collection[str], required: Iterable[str],
               error: type[Exception] = ConfigError) -> dict[str, Any]:
    """Return `raw` if it is a dict with only `known` keys and all `required` ones, else raise `error`."""
    if not isinstance(raw, dict):
        raise error(f"{source}: must be a JSON object, got {type(raw).__name__}")
    for key in raw:
        if key not in known:
            raise error(f"{source}: key {key!r}: unknown key (known: {', '.join(sorted(known))})"
                        f"{did_you_mean(key, known)}")
    for key in required:
        if key not in raw:
            raise error(f"{source}: key {key!r}: missing (required)")
    return raw
