"""Helpers for the broker's config file tests (broker.json in test_node_config, controller.json in
test_controller_config): writing a config file and checking that a bad one fails with one line that
names the file and the key.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest


def write_config(tmp_path: Path, name: str, obj: Any) -> Path:
    """`tmp_path/name` holding `obj` as JSON, or `obj` itself when it is a string (for malformed JSON)."""
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def assert_one_line_error(load: Callable[[Path], Any], error: type[Exception], path: Path, message: str) -> None:
    """`load(path)` raises `error` whose message is one line starting with `<path>: <message>`."""
    with pytest.raises(error) as err:
        load(path)
    assert str(err.value).startswith(f"{path}: {message}")
    assert "\n" not in str(err.value)
