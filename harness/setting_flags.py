"""Command-line flags made from declared settings (broker/settings.py `Setting`).

`flags(pairs)` is a click decorator adding one option per (flag, Setting): a boolean is `--x/--no-x`,
anything else `--x VALUE` taken as text; every flag defaults to None (not given), so the setting's own
validator converts and checks what was given, as it does a test file's value. The help is the setting's
doc and its default. `highwater run` takes its [broker] flags from here (broker/config_keys.py) and
`highwater explore` all of its options.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import click

from broker.settings import Setting


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def help_of(s: Setting) -> str:
    """The doc (else the choices) and the default."""
    text = s.doc or " | ".join(map(str, s.choices))
    return text if s.default is None else f"{text} [{_shown(s.default)}]"


def metavar_of(s: Setting) -> str:
    if s.metavar:
        return s.metavar
    if s.choices:
        return "|".join(map(str, s.choices))
    return {int: "INTEGER", float: "NUMBER"}.get(s.type, "TEXT")


def flags(pairs: Iterable[tuple[str, Setting]]) -> Callable[[Callable], Callable]:
    """A decorator adding an option for each (flag name without dashes, Setting), in the given order;
    the function receives it under the flag's name with underscores."""
    pairs = list(pairs)

    def decorate(fn: Callable) -> Callable:
        for flag, s in reversed(pairs):
            dest = flag.replace("-", "_")
            if s.type is bool:
                fn = click.option(f"--{flag}/--no-{flag}", dest, default=None, help=help_of(s))(fn)
            else:
                fn = click.option(f"--{flag}", dest, default=None, metavar=metavar_of(s), help=help_of(s))(fn)
        return fn
    return decorate
