"""Declared settings and the one validator every config file, test file and flag goes through.

A `Setting` says everything about one key once: its name, type, default, allowed values or range and a
one-line doc. `parse_table` turns a parsed JSON object or TOML table into typed values, and the two
stages it is made of, `Setting.convert` (the type) and `Setting.problem` (choices and range), serve
loaders that apply values one at a time (CLI flags, harness/config.py). Problems are raised as
`SettingError` carrying the key and the problem only ("must be an integer, got 'x'"); each loader puts
its own `file:line: ...` or `file: key 'k': ...` in front. Unknown keys get a "did you mean 'x'?" when one
known key is close.

It lives in the broker, the lowest layer, so that broker.json and controller.json (broker/config_keys.py)
are validated by the same code as the harness's files; rundir/settings.py adds the TOML helpers.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from broker.errors import ConfigError

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()


class SettingError(ConfigError):
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
    metavar: str = ""               # how a command line's help names its value, where the type does not say

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
