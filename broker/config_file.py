"""The broker's JSON config files (broker.json, controller.json): reading one, and checking its keys
against their declarations (broker/config_keys.py). Every problem is a `ConfigError` whose message is
one line naming the file and the key (or the line, for JSON that does not parse).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Collection, Iterable, Mapping

from broker.errors import ConfigError
from broker.settings import SettingError, did_you_mean

__all__ = ["ConfigError", "check_keys", "parse_keys", "read_json"]


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


def parse_keys(raw: Any, source: str, keys: Mapping[str, Any]) -> dict[str, Any]:
    """The values of a parsed config object, each checked by its key's declaration (`keys`: name ->
    config_keys.Key); defaults are left to the config class. A problem inside a list entry ("[0].name:
    ...", controller.json's topics) names the entry and its field in the key."""
    check_keys(raw, source, keys, [name for name, k in keys.items() if k.setting.required])
    values = {}
    for key, value in raw.items():
        try:
            values[key] = keys[key].setting.value(value)
        except SettingError as exc:
            where, problem = key, exc.problem
            if problem.startswith("["):
                path, _, problem = problem.partition(": ")
                where += path
            raise ConfigError(f"{source}: key {where!r}: {problem}") from None
    return values


def read_json(path: str | Path) -> Any:
    """The parsed JSON of a config file, or ConfigError naming the file (and the line)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
