"""Declared settings and the one validator every config file and flag goes through.

A `Setting` says everything about one key once: its name, type, default, allowed values or range and a
one-line doc. `parse_table` turns a parsed TOML table (or JSON object) into typed values, and the two
stages it is made of, `Setting.convert` (the type) and `Setting.problem` (choices and range), serve
loaders that apply values one at a time (CLI flags, `harness/config.py`). Problems are raised as
`SettingError` carrying the key and the problem only ("must be an integer, got 'x'"); each loader puts
its own `file:line: ...` in front, so its one-line messages stay what they were. Unknown keys get a
"did you mean 'x'?" when one known key is close.

`read_toml` is the opening every TOML loader shares, and `line_of` / `header_lines` the one way to find
where a key or a table is written (for `file:line` in messages).

Users: `nemesis/schedule.py`, `harness/config.py`, `harness/suite_file.py`, `harness/scenario.py`,
`clusters/ssh.py`. The broker (`broker/config.py`, `broker/controller/config.py`) imports nothing above
it, so it keeps its own loading; the harness takes the broker's declared defaults from there.
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable
from rundir.exits import HighwaterError

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()


class SettingError(HighwaterError, ValueError):
    """One bad key: `key` names it, `problem` says what is wrong ("must be ..., got ..."); `kind` is
    "unknown", "missing" or "value"."""

    def __init__(self, key: str, problem: str, kind: str = "value"):
        super().__init__(problem)
        self.key, self.problem, self.kind = key, problem, kind


@dataclass(frozen=True)
class Setting:
    name: str
    type: type = object             # int, float, str, bool, list, dict, or object (anything)
    default: Any = None             # REQUIRED: the key must be given
    doc: str = ""
    choices: tuple = ()             # allowed values
    min: float | None = None        # inclusive lower bound
    above: float | None = None      # exclusive lower bound
    max: float | None = None        # inclusive upper bound
    floor: float | None = None      # numbers below it are refused already as a type problem
    finite: bool = False            # refuse inf
    what: str = ""                  # "a number of seconds > 0": the one message for any bad value
    parse: Callable[[Any], Any] | None = None  # own conversion; raises ValueError(problem)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    # -- stage 1: the type ---------------------------------------------------------------------
    def convert(self, raw: Any, *, text: bool = False) -> Any:
        """`raw` as this setting's type (a string too when `text`: a CLI flag). Raise SettingError."""
        try:
            if self.parse is not None:
                return self.parse(raw)
            return self._convert(raw, text)
        except ValueError as exc:
            raise SettingError(self.name, self._message(raw, str(exc))) from None

    def _convert(self, raw: Any, text: bool) -> Any:
        t = self.type
        if t is bool:
            if isinstance(raw, bool):
                return raw
            if text and isinstance(raw, str) and raw.lower() in ("true", "false", "yes", "no", "1", "0"):
                return raw.lower() in ("true", "yes", "1")
            raise ValueError(f"must be true or false, got {raw!r}")
        if t is int:
            if isinstance(raw, int) and not isinstance(raw, bool):
                v = raw
            elif text and isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
                v = int(raw)
            else:
                raise ValueError(f"must be an integer, got {raw!r}")
            if self.floor is not None and v < self.floor:
                raise ValueError(f"must be at least {self.floor:g}, got {v}")
            return v
        if t is float:
            if isinstance(raw, bool) or not (isinstance(raw, (int, float)) or (text and isinstance(raw, str))):
                raise ValueError(f"must be a number, got {raw!r}")
            try:
                v = float(raw)
            except ValueError:
                raise ValueError(f"must be a number, got {raw!r}") from None
            if math.isnan(v) or (self.floor is not None and v < self.floor):
                word = "non-negative" if self.floor == 0 else f"at least {self.floor:g}"
                raise ValueError(f"must be a {word} number, got {raw!r}")
            return v
        if t is str:
            if not isinstance(raw, str):
                raise ValueError(f"must be a string, got {raw!r}")
            return raw
        if t is list:
            if not isinstance(raw, list):
                raise ValueError(f"must be a list, got {raw!r}")
            return list(raw)
        if t is dict:
            if not isinstance(raw, dict):
                raise ValueError(f"must be a table, got {raw!r}")
            return dict(raw)
        return raw

    # -- stage 2: choices and range --------------------------------------------------------------
    def problem(self, value: Any, raw: Any = None) -> str | None:
        """What is wrong with a converted value (choices, range), or None. A `what` message shows `raw`,
        the value as written, when given."""
        shown = value if raw is None else raw
        if self.choices and value not in self.choices:
            return self._message(value, f"must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.finite and not math.isfinite(value):
                return self._message(shown, f"must be a finite number, got {value}")
            if self.min is not None and value < self.min:
                return self._message(shown, f"must be at least {self.min:g}, got {value}")
            if self.above is not None and value <= self.above:
                return self._message(shown, f"must be above {self.above:g}, got {value}")
            if self.max is not None and value > self.max:
                return self._message(shown, f"must be at most {self.max:g}, got {value}")
        return None

    def value(self, raw: Any, *, text: bool = False) -> Any:
        """Both stages: the typed value, or SettingError."""
        v = self.convert(raw, text=text)
        problem = self.problem(v, raw)
        if problem:
            raise SettingError(self.name, problem)
        return v

    def _message(self, raw: Any, message: str) -> str:
        return f"must be {self.what}, got {raw!r}" if self.what else message


def declare(*settings: Setting) -> dict[str, Setting]:
    """A schema: the settings by name, in declaration order."""
    return {s.name: s for s in settings}


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


def defaults(schema: dict[str, Setting]) -> dict[str, Any]:
    return {name: s.default for name, s in schema.items() if not s.required}


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when one known key is close to `key`, else ''. A dotted key
    ("broker.flsh") is compared with the keys of its own section; a key that starts one known name
    ("unclean" for "unclean_leader_election") suggests that name."""
    section, dot, name = key.rpartition(".")
    pool = {k.rpartition(".")[2]: k for k in known if k.rpartition(".")[0] == section} if dot else \
        {k: k for k in known}
    starts = [k for k in pool if len(name) >= 3 and k.startswith(name)]
    close = starts if len(starts) == 1 else difflib.get_close_matches(name, list(pool), n=1, cutoff=0.6)
    return f" (did you mean {pool[close[0]]!r}?)" if close else ""


def parse_table(table: dict[str, Any], schema: dict[str, Setting], *, text: bool = False,
                unknown: str = "unknown key (known: {known})") -> dict[str, Any]:
    """Validate a parsed table against a schema: unknown keys first (with did-you-mean), then missing
    required ones, then each value. Returns every declared setting, defaults filled in. Raises
    SettingError; for an unknown key its problem is `unknown` formatted with the key and the known
    names ({key}, {known})."""
    for key in table:
        if key not in schema:
            problem = unknown.format(key=key, known=", ".join(sorted(schema))) + did_you_mean(key, schema)
            raise SettingError(key, problem, "unknown")
    for name, s in schema.items():
        if s.required and name not in table:
            raise SettingError(name, "missing (required)", "missing")
    return {name: (s.value(table[name], text=text) if name in table else s.default)
            for name, s in schema.items()}


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
