"""Suite files: parse and validate a TOML suite and expand its matrix into named configurations.

A suite is a list of tests, each a set of test settings, an optional matrix of alternatives (expanded
into one configuration per combination) and an expectation: `safe = true` (every repeat must be valid)
or `finds = ["lost-write", ...]` (at least one repeat must show every listed anomaly kind). Layout
(docs/suites.md):

    name = "nightly"                # default: the file's stem
    description = "..."
    repeats = 1                     # runs per configuration (a test may say otherwise; --repeat wins)

    [defaults]                      # settings every test starts from
    time_limit = 60
    checker = "spark"

    [[test]]
    name = "leader-epoch-safe"
    truncation = "leader-epoch"     # a setting: a `highwater run` flag name (underscores) or a dotted
    acks = "all"                    # key of a test file ("workload.rate", "broker.power_loss", ...)
    safe = true
    [test.matrix]
    nemesis = ["kill", "pause", "partition"]    # one configuration per value: leader-epoch-safe-kill, ...

An entry with `explore = {...}` is a seeded search in simulation instead (harness/exploration.py options,
`expect = "found" | "none"`, optionally `invariant = "no-acked-loss"`); it takes no run settings, matrix
or [defaults] and expands to one configuration in the `explore` column.

Settings are applied on top of harness/config.py's defaults in the order defaults, test, matrix values,
and validated there, so a suite accepts exactly what `highwater run` accepts. Every error is one line
naming the file (and line when it can be found), the table or entry and the key.
"""
from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import config as config_mod
from harness.config import TestConfig
from rundir import kinds
from rundir.formats import ANOMALY_KINDS
from rundir.settings import Setting, SettingError, at_line, declare, did_you_mean, line_of, parse_table, read_toml
from harness import scenario as scenario_mod
from broker.errors import ConfigError
from workloads.workload import KINDS as WORKLOADS

# short setting names: the flags of `highwater run` that make sense per configuration
SHORT_KEYS = {k: v for k, v in config_mod.FLAG_KEYS.items() if k not in ("results_dir", "test_name")}
ENTRY_KEYS = ("name", "description", "safe", "finds", "repeats", "matrix", "scenario")
# the keys of an explore entry ([[test]] with `explore = {...}`); its options are harness/exploration.py's
EXPLORE_ENTRY_KEYS = ("name", "description", "repeats", "explore", "expect", "invariant")
EXPLORE_EXPECT = ("found", "none")
EXPLORE_COLUMN = "explore"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _name(raw: Any) -> str:
    if not isinstance(raw, str) or not NAME_RE.fullmatch(raw):
        raise ValueError(f"must be letters, digits, '.', '_' or '-', got {raw!r}")
    return raw


NAME = Setting("name", str, None, "letters, digits, '.', '_' or '-'", parse=_name)
DESCRIPTION = Setting("description", str, "", "shown on the suite page")
REPEATS = Setting("repeats", int, 1, "runs per configuration", min=1, what="an integer of at least 1")
# the top level of a suite file; a [[test]] entry has NAME, DESCRIPTION and REPEATS too, plus its
# expectation, matrix, scenario and settings
TOP = declare(
    Setting("name", str, None, "the suite's name (default: the file's stem)", parse=_name),
    DESCRIPTION,
    REPEATS,
    Setting("defaults", dict, {}, "settings every test starts from"),
    Setting("test", object, None, "the [[test]] entries"),
)
TOP_KEYS = tuple(TOP)


@dataclass(frozen=True)
class Expectation:
    safe: bool = False
    finds: tuple[str, ...] = ()
    explore: str | None = None          # an explore entry's: "found" or "none"
    invariant: str | None = None        # with explore "found": the invariant that must be violated

    def describe(self) -> str:
        if self.explore == "none":
            return "explore finds nothing"
        if self.explore == "found":
            return f"explore finds {self.invariant or 'a violation'}"
        return "safe" if self.safe else "finds " + ", ".join(self.finds)

    def to_json(self) -> dict[str, Any]:
        # explore expectations also carry the safe / finds shape, so readers of suite.json that know only
        # those (harness/junit.py) still say something true
        if self.explore == "none":
            return {"explore": "none", "safe": True}
        if self.explore == "found":
            return {"explore": "found", "invariant": self.invariant,
                    "finds": [self.invariant or "an invariant violation"]}
        return {"safe": True} if self.safe else {"finds": list(self.finds)}


@dataclass
class SuiteConfig:
    """One expanded configuration of a suite: what to run, how often, and what must come out."""
    name: str                       # unique in the suite; also the test name of its runs
    test: str                       # the [[test]] entry it comes from
    row: str                        # safety-matrix row: the test plus its non-nemesis matrix values
    column: str                     # safety-matrix column: the fault set ("kill+power-loss", "none", ...)
    settings: dict[str, Any]        # the settings as written (defaults, test, matrix), for display
    cfg: TestConfig                 # validated; results_dir and name are set by the suite runner
    expect: Expectation
    repeats: int
    description: str = ""
    where: str = ""                 # file:line of the [[test]] entry
    scenario: Path | None = None    # replay this scenario file (harness/scenario.py) instead of a random run
    explore: Any = None             # harness/exploration.py ExploreOptions: explore in simulation instead


@dataclass
class Suite:
    name: str
    path: Path
    description: str
    configs: list[SuiteConfig] = field(default_factory=list)


# --- values --------------------------------------------------------------------------------------

def setting_path(key: str) -> str | None:
    """The dotted TestConfig key a setting name stands for, or None when there is no such setting."""
    if key in SHORT_KEYS:
        return SHORT_KEYS[key]
    if "." in key:
        section, _, name = key.partition(".")
        if section in config_mod.SECTIONS and key in config_mod.SCHEMA:
            return key
    return None


def slug(key: str, value: Any) -> str:
    """A value as part of a configuration name."""
    if isinstance(value, bool):
        word = key.rsplit(".", 1)[-1].replace("_", "-")
        return word if value else f"no-{word}"
    if isinstance(value, list):
        return "_".join(slug(key, v) for v in value) or "none"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", str(value)).strip("_")
    if key in ("acks", "client.acks") and text:
        text = f"acks{text}"
    elif key in ("min_insync_replicas", "broker.min_insync_replicas"):
        text = f"isr{text}"
    return text or "x"


def fault_label(cfg: TestConfig) -> str:
    if cfg.nemesis.schedule_file:
        return "schedule:" + Path(cfg.nemesis.schedule_file).stem
    return "+".join(cfg.nemesis.faults) if cfg.nemesis.faults else "none"


class _Ctx:
    """Where we are in the file, to build error messages."""

    def __init__(self, path: Path, text: str):
        self.path, self.text = path, text

    def error(self, what: str, key: str, problem: str, *, table: str = "", entry: int | None = None) -> ConfigError:
        line = None
        if key:
            line = line_of(self.text, key, table=table, entry=entry)
            if line is None and "." in key:  # written in a sub-table: [defaults.workload] rate = ...
                section, _, name = key.partition(".")
                line = line_of(self.text, name, table=f"{table}.{section}" if table else section, entry=entry)
        if line is None and (table or entry is not None):
            line = line_of(self.text, "", table=table, entry=entry)
        where = at_line(self.path, line)
        keypart = f": key '{key}'" if key else ""
        return ConfigError(f"{where}: {what}{keypart} {problem}")


def _apply(cfg: TestConfig, key: str, value: Any, base_dir: Path) -> None:
    """Apply one setting; raise ValueError (bad value) or KeyError (unknown setting)."""
    dotted = setting_path(key)
    if dotted is None:
        raise KeyError(key)
    if dotted == "nemesis.schedule_file" and isinstance(value, str) and value:
        p = Path(value)
        value = str(p if p.is_absolute() else (base_dir / p))
    config_mod.set_key(cfg, dotted, value)


def _not_a_setting(key: str) -> str:
    return (f"is not a setting (known: {', '.join(sorted(SHORT_KEYS))} or a dotted test-file key such as "
            f"workload.rate){did_you_mean(key, [*SHORT_KEYS, *config_mod.SCHEMA])}")


def _check_settings(ctx: _Ctx, settings: dict[str, Any], what: str, table: str, entry: int | None,
                    base_dir: Path) -> None:
    """Try every setting on a scratch config so a bad one is reported where it is written."""
    for key, value in settings.items():
        scratch = TestConfig()
        try:
            _apply(scratch, key, value, base_dir)
        except KeyError:
            raise ctx.error(what, key, _not_a_setting(key), table=table, entry=entry) from None
        except ValueError as exc:
            raise ctx.error(what, key, str(exc), table=table, entry=entry) from None


def _entry_value(ctx: _Ctx, s: Setting, raw: Any, what: str, entry: int) -> Any:
    try:
        return s.value(raw)
    except SettingError as exc:
        raise ctx.error(what, s.name, exc.problem, table="test", entry=entry) from None


def _expectation(ctx: _Ctx, raw: dict[str, Any], what: str, entry: int) -> Expectation:
    safe, finds = raw.get("safe"), raw.get("finds")
    if safe is None and finds is None:
        raise ctx.error(what, "", "has no expectation: give safe = true or finds = [\"lost-write\", ...]",
                        table="test", entry=entry)
    if safe is not None and finds is not None:
        raise ctx.error(what, "finds", "cannot be combined with safe (a test is either safe or finds anomalies)",
                        table="test", entry=entry)
    if safe is not None:
        if safe is not True:
            raise ctx.error(what, "safe", f"must be true (use finds = [...] for a test that must show "
                                          f"anomalies), got {safe!r}", table="test", entry=entry)
        return Expectation(safe=True)
    if not isinstance(finds, list) or not finds or not all(isinstance(k, str) for k in finds):
        raise ctx.error(what, "finds", f"must be a non-empty list of anomaly kinds, got {finds!r}",
                        table="test", entry=entry)
    for k in finds:
        if k not in ANOMALY_KINDS:
            raise ctx.error(what, "finds", f"names unknown anomaly kind {k!r} (known: {', '.join(ANOMALY_KINDS)})",
                            table="test", entry=entry)
    return Expectation(finds=tuple(dict.fromkeys(finds)))


# --- loading -------------------------------------------------------------------------------------

def load_suite(path: Path | str) -> Suite:
    """Read, validate and expand a suite file. Raise ConfigError (one line) on any problem."""
    path = Path(path)
    text, doc = read_toml(path, ConfigError, cannot_read="{path}: cannot read suite file ({reason})")
    return parse_suite(doc, path=path, text=text)


def parse_suite(doc: dict[str, Any], *, path: Path, text: str = "") -> Suite:
    ctx = _Ctx(path, text)
    base_dir = path.parent
    try:
        top = parse_table(doc, TOP, unknown=f"is unknown (known: {', '.join(TOP_KEYS)})")
    except SettingError as exc:
        problem = "must be a table [defaults]" if exc.key == "defaults" else exc.problem
        raise ctx.error("top level", exc.key, problem) from None
    name = top["name"] or path.stem
    description, suite_repeats = top["description"], top["repeats"]
    defaults = _flatten(top["defaults"])
    _check_settings(ctx, defaults, "[defaults]", "defaults", None, base_dir)
    tests = top["test"]
    if not isinstance(tests, list) or not tests or not all(isinstance(t, dict) for t in tests):
        raise ctx.error("top level", "test", "must be one or more [[test]] tables")

    suite = Suite(name=name, path=path, description=description)
    inherited = _Inherited(defaults, suite_repeats, base_dir)
    seen: dict[str, str] = {}
    entry_names: set[str] = set()
    for i, raw in enumerate(tests, start=1):
        for cfg in _expand_entry(ctx, raw, i, inherited, entry_names):
            if cfg.name in seen:
                raise ctx.error(f"[[test]] #{i}", "name",
                                f"expands to configuration {cfg.name!r}, already made by {seen[cfg.name]}",
                                table="test", entry=i)
            seen[cfg.name] = f"[[test]] {cfg.test!r}"
            suite.configs.append(cfg)
    return suite


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """[defaults] may use sub-tables ([defaults.workload] rate = 50): flatten them to dotted keys."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k in config_mod.SECTIONS and not prefix:
            out.update(_flatten(v, prefix=f"{k}."))
        else:
            out[key] = v
    return out


@dataclass(frozen=True)
class _Inherited:
    """What the top level of the file gives every [[test]] entry: the [defaults] settings (flattened),
    the suite's repeats, and the directory relative paths in settings are resolved against (the file's)."""
    defaults: dict[str, Any]
    repeats: int
    base_dir: Path


@dataclass(frozen=True)
class _Entry:
    """A run or scenario [[test]] entry (the `i`-th, `what` in messages), read and checked, before its
    matrix is expanded."""
    label: str
    i: int
    what: str
    description: str
    expect: Expectation
    repeats: int
    scenario: Path | None
    settings: dict[str, Any]          # its own settings (flattened), without the entry keys
    where: str                        # file:line of the entry


def _expand_entry(ctx: _Ctx, raw: dict[str, Any], i: int, inherited: _Inherited,
                  entry_names: set[str]) -> list[SuiteConfig]:
    """The configurations of the `i`-th [[test]] entry: an explore entry's one, or one per combination of
    the matrix. `entry_names` holds the names of the entries before it (this one's is added)."""
    label = raw.get("name")
    what = f"[[test]] #{i}" + (f" {label!r}" if isinstance(label, str) else "")
    _claim_name(ctx, raw, i, what, entry_names)
    if "explore" in raw:
        return [_explore_entry(ctx, raw, i, what, inherited.repeats)]
    entry = _run_entry(ctx, raw, i, what, inherited)
    axes = _matrix_axes(ctx, raw, entry, inherited.base_dir)
    return [_configuration(ctx, entry, inherited, dict(zip((k for k, _v in axes), combo)))
            for combo in (itertools.product(*(values for _k, values in axes)) if axes else [()])]


def _claim_name(ctx: _Ctx, raw: dict[str, Any], i: int, what: str, entry_names: set[str]) -> None:
    """The entry has a valid name that no earlier entry has; add it to `entry_names`."""
    if "name" not in raw:
        raise ctx.error(what, "", "has no name", table="test", entry=i)
    label = raw["name"]
    _entry_value(ctx, NAME, label, what, i)
    if label in entry_names:
        raise ctx.error(what, "name", "is used by an earlier [[test]]", table="test", entry=i)
    entry_names.add(label)


def _run_entry(ctx: _Ctx, raw: dict[str, Any], i: int, what: str, inherited: _Inherited) -> _Entry:
    """A run or scenario entry's own values (not its matrix), each checked where it is written."""
    for key in ("expect", "invariant"):
        if key in raw:
            raise ctx.error(what, key, "belongs to explore entries (explore = {...}); a run or scenario entry "
                                       "says safe = true or finds = [...]", table="test", entry=i)
    description = _entry_value(ctx, DESCRIPTION, raw.get("description", ""), what, i)
    expect = _expectation(ctx, raw, what, i)
    repeats = _entry_value(ctx, REPEATS, raw.get("repeats", inherited.repeats), what, i)
    scenario = _scenario_path(ctx, raw, what, i, inherited.base_dir)
    settings = _flatten({k: v for k, v in raw.items() if k not in ENTRY_KEYS})
    _check_settings(ctx, settings, what, "test", i, inherited.base_dir)
    return _Entry(label=raw["name"], i=i, what=what, description=description, expect=expect, repeats=repeats,
                  scenario=scenario, settings=settings,
                  where=at_line(ctx.path, line_of(ctx.text, table="test", entry=i)))


def _matrix_axes(ctx: _Ctx, raw: dict[str, Any], entry: _Entry, base_dir: Path) -> list[tuple[str, list[Any]]]:
    """[test.matrix]: (setting, alternatives) in the order written, every alternative tried on a scratch
    config so that a bad one is reported where it is written."""
    what, i = entry.what, entry.i
    matrix = raw.get("matrix", {})
    if not isinstance(matrix, dict):
        raise ctx.error(what, "matrix", "must be a table [test.matrix] of setting = [values]", table="test", entry=i)
    axes: list[tuple[str, list[Any]]] = []
    for key, values in matrix.items():
        mwhat = f"{what} [test.matrix]"
        if not isinstance(values, list) or not values:
            raise ctx.error(mwhat, key, f"must be a non-empty list of alternatives, got {values!r}",
                            table="test.matrix", entry=i)
        if key in entry.settings:
            raise ctx.error(mwhat, key, "is also set in the test itself", table="test.matrix", entry=i)
        for v in values:
            try:
                _apply(TestConfig(), key, v, base_dir)
            except KeyError:
                raise ctx.error(mwhat, key, _not_a_setting(key), table="test.matrix", entry=i) from None
            except ValueError as exc:
                raise ctx.error(mwhat, key, f"value {v!r}: {exc}", table="test.matrix", entry=i) from None
        axes.append((key, values))
    return axes


def _configuration(ctx: _Ctx, entry: _Entry, inherited: _Inherited, chosen: dict[str, Any]) -> SuiteConfig:
    """The entry's configuration for one combination `chosen` of its matrix (setting -> value): the
    defaults, then the entry's settings, then the combination; validated, named after the combination."""
    all_settings = {**inherited.defaults, **entry.settings, **chosen}
    cfg = TestConfig()
    for key, value in all_settings.items():
        _apply(cfg, key, value, inherited.base_dir)
    parts = [slug(k, v) for k, v in chosen.items()]
    name = "-".join([entry.label, *parts])
    cfg.name = name
    problems = config_mod.validate(cfg)
    if problems:
        key, problem = problems[0]
        shown = _short_name(key)
        table, where_entry = ("test.matrix", entry.i) if shown in chosen else ("test", entry.i)
        if shown not in chosen and shown not in entry.settings and shown in inherited.defaults:
            table, where_entry = "defaults", None
        raise ctx.error(f"{entry.what} (configuration {name!r})", shown, problem, table=table, entry=where_entry)
    _check_finds_can_show(ctx, entry, cfg, name)
    row_parts = [slug(k, v) for k, v in chosen.items() if setting_path(k) != "nemesis.faults"]
    column = f"scenario:{entry.scenario.stem}" if entry.scenario else fault_label(cfg)
    return SuiteConfig(
        name=name, test=entry.label, row="-".join([entry.label, *row_parts]), column=column,
        settings=copy.deepcopy(all_settings), cfg=cfg, expect=entry.expect, repeats=entry.repeats,
        description=entry.description, where=entry.where, scenario=entry.scenario)


def _check_finds_can_show(ctx: _Ctx, entry: _Entry, cfg: TestConfig, name: str) -> None:
    """`finds` may not name a kind that reads what this configuration's operations never record (a kind's
    `needs`, rundir/kinds.py): key-reorder without the keyed workload could only ever end `failed`. A
    scenario's own sends carry no such field; its group steps record what the group workload does."""
    fields = WORKLOADS[cfg.workload.name].fields
    if entry.scenario:
        steps = scenario_mod.load(entry.scenario).steps
        fields = WORKLOADS["group"].fields if any(s.do in scenario_mod.GROUP_ACTIONS for s in steps) else ()
    for k in entry.expect.finds or ():
        needs = kinds.BY_NAME[k].needs
        if needs is not None and needs.column not in fields:
            runs = "its scenario" if entry.scenario else f"workload {cfg.workload.name!r}"
            able = ", ".join(n for n, w in WORKLOADS.items() if needs.column in w.fields)
            raise ctx.error(f"{entry.what} (configuration {name!r})", "finds",
                            f"names {k}, which {runs} cannot show ({needs.missing}; workloads that can: {able})",
                            table="test", entry=entry.i)


def _scenario_path(ctx: _Ctx, raw: dict[str, Any], what: str, i: int, base_dir: Path) -> Path | None:
    """`scenario = "../scenarios/x.toml"` (relative to the suite file): the file must load as a scenario.
    Its own settings apply; the entry's `truncation` (and checker) override them when given."""
    if "scenario" not in raw:
        return None
    value = raw["scenario"]
    if not isinstance(value, str) or not value:
        raise ctx.error(what, "scenario", f"must be a path to a scenario file, got {value!r}", table="test", entry=i)
    path = Path(value) if Path(value).is_absolute() else base_dir / value
    try:
        scenario_mod.load(path)
    except scenario_mod.ConfigError as exc:
        raise ctx.error(what, "scenario", f"does not load: {exc}", table="test", entry=i) from None
    return path


def _short_name(dotted: str) -> str:
    for short, target in SHORT_KEYS.items():
        if target == dotted:
            return short
    return dotted


# --- explore entries -----------------------------------------------------------------------------

def _explore_entry(ctx: _Ctx, raw: dict[str, Any], i: int, what: str, suite_repeats: int) -> SuiteConfig:
    """`explore = {...}` (or a [test.explore] table): a seeded search in simulation
    (harness/exploration.py) with `expect = "found" | "none"` and, with found, an optional
    `invariant`. Suite [defaults] do not apply: they are settings of real runs."""
    from simulator.invariants import INVARIANTS
    from harness.exploration import parse_options

    for key in raw:
        if key not in EXPLORE_ENTRY_KEYS:
            hint = (" (put it inside explore = {...})" if key.replace("-", "_") in _explore_option_names()
                    else f" (known: {', '.join(EXPLORE_ENTRY_KEYS)})")
            raise ctx.error(what, key, f"is not a key of an explore entry{hint}", table="test", entry=i)
    table = raw["explore"]
    if not isinstance(table, dict):
        raise ctx.error(what, "explore", f"must be a table of explore options, got {table!r}", table="test", entry=i)
    try:
        opts = parse_options(table)
    except SettingError as exc:
        line = (line_of(ctx.text, exc.key, table="test.explore", entry=i)
                or line_of(ctx.text, "explore", table="test", entry=i)
                or line_of(ctx.text, "", table="test.explore", entry=i))
        raise ConfigError(f"{at_line(ctx.path, line)}: {what}: key 'explore.{exc.key}' {exc.problem}") from None
    description = _entry_value(ctx, DESCRIPTION, raw.get("description", ""), what, i)
    repeats = _entry_value(ctx, REPEATS, raw.get("repeats", suite_repeats), what, i)
    expect = raw.get("expect")
    if expect is None:
        raise ctx.error(what, "", 'has no expectation: give expect = "found" or expect = "none"',
                        table="test", entry=i)
    if expect not in EXPLORE_EXPECT:
        raise ctx.error(what, "expect", f'must be "found" or "none", got {expect!r}', table="test", entry=i)
    invariant = raw.get("invariant")
    if invariant is not None:
        if expect != "found":
            raise ctx.error(what, "invariant", 'goes with expect = "found" only', table="test", entry=i)
        if invariant not in INVARIANTS:
            raise ctx.error(what, "invariant", f"names unknown invariant {invariant!r} "
                                               f"(known: {', '.join(INVARIANTS)})", table="test", entry=i)
    cfg = TestConfig()
    cfg.name = raw["name"]
    cfg.time_limit = float(opts.budget_s or 0.0)
    cfg.seed = opts.seed
    settings = {"explore." + k: v for k, v in table.items()}
    return SuiteConfig(
        name=raw["name"], test=raw["name"], row=raw["name"], column=EXPLORE_COLUMN, settings=settings, cfg=cfg,
        expect=Expectation(explore=expect, invariant=invariant), repeats=repeats, description=description,
        where=at_line(ctx.path, line_of(ctx.text, table="test", entry=i)), explore=opts)


def _explore_option_names() -> set[str]:
    from harness.exploration import OPTIONS
    return set(OPTIONS)
