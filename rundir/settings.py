"""Declaring settings in dataclasses, and reading TOML files with file:line in every message.

The validator itself (`Setting`, `SettingError`, `parse_table`, `did_you_mean`) is broker/settings.py,
re-exported here; the broker's config files and every file and flag of the harness go through it.
`setting(default, doc, rules)` declares one in a dataclass field and `schema_of` reads a dataclass's back.
`read_toml` is the opening every TOML loader shares, and `line_of` / `header_lines` the one way to find
where a key or a table is written (for `file:line` in messages).
"""
from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any, Callable

from broker.settings import REQUIRED, Setting, SettingError, declare, did_you_mean, parse_table

__all__ = ["REQUIRED", "Setting", "SettingError", "declare", "did_you_mean", "parse_table", "setting",
           "schema_of", "defaults", "read_toml", "header_lines", "line_of", "at_line"]


def setting(default: Any, doc: str = "", **rules: Any) -> Any:
    """A dataclass field that declares a setting: its default, one-line doc and rules (the keywords of
    `Setting`; `type` defaults to the default's type). `schema_of` reads them back."""
    meta = {"setting": (doc, rules)}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def schema_of(cls: type, prefix: str = "") -> dict[str, Setting]:
    """The settings a dataclass declares with `setting(...)`, named `prefix + field name`."""
    out = {}
    for f in dataclasses.fields(cls):
        if "setting" not in f.metadata:
            continue
        doc, rules = f.metadata["setting"]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        rules = {"type": object if default is None else type(default), **rules}
        out[prefix + f.name] = Setting(prefix + f.name, default=default, doc=doc, **rules)
    return out


def section_class(name: str, schema: dict[str, Setting]) -> type:
    """A dataclass named `name` with one `setting(...)` field per declared Setting (its default, doc and
    rules), for a section whose settings are declared by their owner (workloads/workload.py SETTINGS);
    `schema_of` reads the same settings back."""
    base = Setting("")
    fields = []
    for s in schema.values():
        rules = {f.name: getattr(s, f.name) for f in dataclasses.fields(Setting)
                 if f.name not in ("name", "default", "doc") and getattr(s, f.name) != getattr(base, f.name)}
        fields.append((s.name, s.type, setting(s.default, s.doc, **rules)))
    return dataclasses.make_dataclass(name, fields)


def defaults(schema: dict[str, Setting]) -> dict[str, Any]:
    return {name: s.default for name, s in schema.items() if not s.required}


# --- TOML files -------------------------------------------------------------------------------------

def read_toml(path: Path, error: Callable[[str], Exception], *,
              cannot_read: str = "{path}: cannot read ({reason})",
              not_toml: str = "{path}: not valid TOML ({reason})") -> tuple[str, dict[str, Any]]:
    """The text and the parsed document of a TOML file, or `error(message)` raised with one of the two
    message templates ({path}, {reason})."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise error(cannot_read.format(path=path, reason=exc.strerror or exc)) from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(not_toml.format(path=path, reason=exc)) from None


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?")


def header_lines(text: str, table: str) -> list[int]:
    """1-based lines of every `[[table]]` header (or `[table]`), in order."""
    out = []
    for no, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m and re.sub(r"[\"'\s]", "", m.group(2)) == table:
            out.append(no)
    return out


def line_of(text: str | None, key: str = "", *, table: str = "", entry: int | None = None) -> int | None:
    """Best-effort 1-based line of `key` written in `[table]` (top level when table is ""), in the
    `entry`-th `[[table]]` (1-based) or a sub-table of it ("test.matrix"), or of the table's header
    itself when key is "". None when it cannot be found."""
    if not text:
        return None
    base = table.partition(".")[0]
    count, in_target = 0, table == ""
    for no, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m:
            name = re.sub(r"[\"'\s]", "", m.group(2))
            if m.group(1) == "[[" and name == base:
                count += 1
            in_target = name == table and (entry is None or count == entry)
            if in_target and not key:
                return no
            continue
        if in_target and key and re.match(rf'^\s*["\']?{re.escape(key)}["\']?\s*=', line):
            return no
    return None


def at_line(path: Path | str, line: int | None) -> str:
    """`path:line`, or just the path when the line is unknown."""
    return f"{path}:{line}" if line else str(path)
