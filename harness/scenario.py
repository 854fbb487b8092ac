"""Declarative scenario files: parse and validate a TOML scenario into a config and a list of steps.

A scenario pins down a fault sequence exactly (the seeds' cases, KIP-279, KAFKA-7128) instead of
drawing faults at random. Layout (docs/running.md, "Scenarios"):

    name = "seed-data-loss"
    description = "..."
    final_wait = 30
    [cluster] / [topic] / [broker] / [client] / [checker]   as in a test file (harness/config.py)
    [expect]
    hw = ["lost-write"]            # anomaly kinds the scenario must show in each truncation mode
    leader-epoch = []

    [[step]]
    do = "wait"                    # what to do; the other keys depend on it (STEP_FIELDS)
    leader = "n1"
    isr = ["n1", "n2"]
    timeout = 20

Actions: start, stop (SIGTERM, clean), kill (SIGKILL), restart, pause (SIGSTOP), resume (SIGCONT),
power-loss (SIGKILL of a broker running with broker.power_loss = true), partition (`drop` one-way
pairs, or `isolate` a node from `from` (default: every other broker)), heal, produce (`count` values
with `acks`, `expect`ing ok/fail/info/any), sleep (`seconds`), wait (until every given condition
holds: `leader`, `isr`, `hw` (partition HW at least), `fenced`, `alive`, and for one replica `node` with
`leo` / `node_hw` (exactly); `timeout` seconds).

Errors are one line naming the file, the step number (1-based), its line and the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import config as config_mod
from rundir.formats import ANOMALY_KINDS
from rundir.settings import Setting, SettingError, at_line, declare, did_you_mean, header_lines, line_of, read_toml
from rundir.exits import HighwaterError

NODE_ACTIONS = ("start", "stop", "kill", "restart", "pause", "resume", "power-loss")
ACTIONS = NODE_ACTIONS + ("partition", "heal", "produce", "sleep", "wait")
EXPECTS = ("ok", "fail", "info", "any")
WAIT_CONDITIONS = ("leader", "isr", "hw", "fenced", "alive", "node", "leo", "node_hw")

# action -> allowed fields (besides "do" and "note")
STEP_FIELDS: dict[str, tuple[str, ...]] = {
    **{a: ("node",) for a in NODE_ACTIONS},
    "partition": ("drop", "isolate", "from"),
    "heal": (),
    "produce": ("count", "acks", "partition", "expect", "timeout"),
    "sleep": ("seconds",),
    "wait": WAIT_CONDITIONS + ("partition", "timeout"),
}


# the numeric step fields, declared once (the node and list fields are checked against the cluster below)
NUMBERS = declare(
    Setting("count", int, 1, "produce: values to send", min=1, what="an integer >= 1"),
    Setting("partition", int, 0, "produce, wait: the topic partition", min=0, what="an integer >= 0"),
    Setting("timeout", float, 30.0, "produce, wait: seconds", above=0, what="a number above 0"),
    Setting("seconds", float, None, "sleep: seconds", above=0, what="a number above 0"),
    Setting("hw", int, None, "wait: the partition HW is at least this", min=0, what="an integer >= 0"),
    Setting("leo", int, None, "wait: the replica's log end offset is exactly this", min=0, what="an integer >= 0"),
    Setting("node_hw", int, None, "wait: the replica's HW is exactly this", min=0, what="an integer >= 0"),
)
# top-level keys besides the test-file sections
TOP_KEYS = ("name", "description", "final_wait", "seed", "results_dir", "expect", "step")


class ScenarioError(HighwaterError, ValueError):
    """A bad scenario file; the message is one line naming file, step, line and field."""


@dataclass
class Step:
    number: int                 # 1-based
    line: int | None
    do: str
    args: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.args.items()]
        return f"step {self.number} ({self.do}{': ' + ', '.join(parts) if parts else ''})"


@dataclass
class Scenario:
    path: Path
    name: str
    description: str
    config: config_mod.TestConfig
    steps: list[Step]
    expect: dict[str, list[str]]        # truncation mode -> anomaly kinds expected

    def brokers(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.config.cluster.nodes + 1)]


def load(path: Path | str, *, truncation: str | None = None) -> Scenario:
    path = Path(path)
    text, data = read_toml(path, ScenarioError, cannot_read="{path}: cannot read scenario ({reason})")

    cfg = config_mod.TestConfig()
    cfg.nemesis.faults = []
    cfg.workload.name = "producer"
    cfg.time_limit = 1.0
    name = path.stem
    description = ""
    expect: dict[str, list[str]] = {}
    raw_steps = data.pop("step", None)
    for key, value in data.items():
        if key == "description":
            if not isinstance(value, str):
                raise ScenarioError(f"{_where(path, text, '', key)}: key 'description' must be a string")
            description = value
        elif key == "expect":
            expect = _parse_expect(path, text, value)
        elif key in ("workload", "nemesis"):
            raise ScenarioError(f"{_where(path, text, key, '')}: a scenario has no [{key}] (its steps are the workload and the faults)")
        elif key in config_mod.SECTIONS:
            if not isinstance(value, dict):
                raise ScenarioError(f"{_where(path, text, '', key)}: key '{key}' must be a table [{key}]")
            for k, v in value.items():
                _set(cfg, path, text, f"{key}.{k}", v)
        elif key in ("name", "final_wait", "seed", "results_dir"):
            _set(cfg, path, text, key, value)
            if key == "name":
                name = cfg.name
        else:
            known = [*TOP_KEYS, *(k for k in config_mod.SECTIONS if k not in ("workload", "nemesis"))]
            raise ScenarioError(f"{_where(path, text, '', key)}: unknown key '{key}'{did_you_mean(key, known)}")
    if truncation is not None:
        _set(cfg, path, text, "broker.truncation", truncation)
    try:
        config_mod.check(cfg, source=str(path), text=text)
    except config_mod.ConfigError as exc:
        raise ScenarioError(str(exc)) from None

    if raw_steps is None:
        raise ScenarioError(f"{path}: no steps (add [[step]] tables)")
    if not isinstance(raw_steps, list):
        raise ScenarioError(f"{path}: 'step' must be an array of tables ([[step]])")
    lines = header_lines(text, "step")
    brokers = [f"n{i}" for i in range(1, cfg.cluster.nodes + 1)]
    steps = [_parse_step(path, i + 1, lines[i] if i < len(lines) else None, raw, cfg, brokers)
             for i, raw in enumerate(raw_steps)]
    if cfg.broker.power_loss is False and any(s.do == "power-loss" for s in steps):
        cfg.broker.power_loss = True       # the broker must run in the power-loss emulation
    return Scenario(path, name, description, cfg, steps, expect)


def _where(path: Path, text: str, section: str, key: str) -> str:
    return at_line(path, line_of(text, key, table=section))


def _set(cfg, path: Path, text: str, dotted: str, value: Any) -> None:
    try:
        config_mod.set_key(cfg, dotted, value)
    except KeyError:
        section, _, key = dotted.rpartition(".")
        raise ScenarioError(f"{_where(path, text, section, key)}: {config_mod.unknown_key(dotted)}") from None
    except ValueError as exc:
        section, _, key = dotted.rpartition(".")
        raise ScenarioError(f"{_where(path, text, section, key)}: key '{dotted}' {exc}") from None


def _parse_expect(path: Path, text: str, value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{_where(path, text, '', 'expect')}: key 'expect' must be a table [expect]")
    out = {}
    for mode, kinds in value.items():
        where = _where(path, text, "expect", mode)
        if mode not in config_mod.TRUNCATION_MODES:
            raise ScenarioError(f"{where}: unknown key 'expect.{mode}' (truncation modes: "
                                f"{', '.join(config_mod.TRUNCATION_MODES)})")
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise ScenarioError(f"{where}: key 'expect.{mode}' must be a list of anomaly kinds")
        for k in kinds:
            if k not in ANOMALY_KINDS:
                raise ScenarioError(f"{where}: key 'expect.{mode}' has unknown anomaly kind {k!r}")
        out[mode] = list(kinds)
    return out


def _parse_step(path: Path, number: int, line: int | None, raw: Any, cfg, brokers: list[str]) -> Step:
    at = f"{path}:{line}" if line else str(path)
    prefix = f"{at}: step {number}"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{prefix}: must be a table")
    do = raw.get("do")
    if do is None:
        raise ScenarioError(f"{prefix}: field 'do' is missing (one of {', '.join(ACTIONS)})")
    if do not in ACTIONS:
        raise ScenarioError(f"{prefix}: field 'do' must be one of {', '.join(ACTIONS)}, got {do!r}")
    allowed = STEP_FIELDS[do]
    note = raw.get("note", "")
    if not isinstance(note, str):
        raise ScenarioError(f"{prefix} ({do}): field 'note' must be a string")
    args: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("do", "note"):
            continue
        if key not in allowed:
            raise ScenarioError(f"{prefix} ({do}): unknown field '{key}' (allowed: {', '.join(allowed) or 'none'})"
                                f"{did_you_mean(key, allowed)}")
        args[key] = value
    all_nodes = ["c0"] + brokers

    def bad(field_name: str, why: str) -> ScenarioError:
        return ScenarioError(f"{prefix} ({do}): field '{field_name}' {why}")

    def need_node(key: str, value: Any, allowed_nodes: list[str]) -> str:
        if not isinstance(value, str) or value not in allowed_nodes:
            raise bad(key, f"must be one of {', '.join(allowed_nodes)}, got {value!r}")
        return value

    def need(key: str) -> Any:
        """args[key] checked against its declaration (NUMBERS); args keep the value as written."""
        try:
            return NUMBERS[key].value(args[key])
        except SettingError as exc:
            raise bad(key, exc.problem) from None

    if do in NODE_ACTIONS:
        if "node" not in args:
            raise bad("node", "is missing")
        need_node("node", args["node"], brokers if do == "power-loss" else all_nodes)
    elif do == "partition":
        if ("drop" in args) == ("isolate" in args):
            raise ScenarioError(f"{prefix} (partition): give exactly one of 'drop' or 'isolate'")
        if "drop" in args:
            pairs = args["drop"]
            if not isinstance(pairs, list) or not pairs:
                raise bad("drop", "must be a non-empty list of [from, to] node pairs")
            out = []
            for pair in pairs:
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise bad("drop", f"entries must be [from, to] pairs, got {pair!r}")
                a, b = (need_node("drop", n, all_nodes) for n in pair)
                if a == b:
                    raise bad("drop", f"a node cannot be cut from itself ({a!r})")
                out.append((a, b))
            args["drop"] = out
            if "from" in args:
                raise bad("from", "goes with 'isolate', not 'drop'")
        else:
            node = need_node("isolate", args["isolate"], all_nodes)
            others = args.get("from", [b for b in brokers if b != node])
            if not isinstance(others, list) or not others:
                raise bad("from", "must be a non-empty list of nodes")
            others = [need_node("from", n, all_nodes) for n in others]
            if node in others:
                raise bad("from", f"must not contain the isolated node {node!r}")
            args["drop"] = [p for o in others for p in ((node, o), (o, node))]
            args["from"] = others
    elif do == "produce":
        args.setdefault("count", NUMBERS["count"].default)
        need("count")
        args["acks"] = _acks(args.get("acks", cfg.client.acks), bad)
        args.setdefault("partition", NUMBERS["partition"].default)
        if need("partition") >= cfg.topic.partitions:
            raise bad("partition", f"must be below the topic's {cfg.topic.partitions} partitions")
        args.setdefault("expect", "ok")
        if args["expect"] not in EXPECTS:
            raise bad("expect", f"must be one of {', '.join(EXPECTS)}, got {args['expect']!r}")
        if "timeout" in args:
            need("timeout")
    elif do == "sleep":
        if "seconds" not in args:
            raise bad("seconds", "is missing")
        need("seconds")
    elif do == "wait":
        if not any(k in args for k in ("leader", "isr", "hw", "fenced", "alive", "leo", "node_hw")):
            raise ScenarioError(f"{prefix} (wait): give at least one condition "
                                f"(leader, isr, hw, fenced, alive, node with leo/node_hw)")
        args.setdefault("timeout", NUMBERS["timeout"].default)
        need("timeout")
        args.setdefault("partition", NUMBERS["partition"].default)
        if need("partition") >= cfg.topic.partitions:
            raise bad("partition", f"must be below the topic's {cfg.topic.partitions} partitions")
        if "leader" in args:
            need_node("leader", args["leader"], brokers + ["none"])
        if "isr" in args:
            if not isinstance(args["isr"], list) or not args["isr"]:
                raise bad("isr", "must be a non-empty list of brokers")
            for n in args["isr"]:
                need_node("isr", n, brokers)
        for key in ("fenced", "alive"):
            if key in args:
                need_node(key, args[key], brokers)
        if "hw" in args:
            need("hw")
        if ("leo" in args or "node_hw" in args) and "node" not in args:
            raise bad("node", "is needed with 'leo' / 'node_hw' (which replica)")
        if "node" in args:
            need_node("node", args["node"], brokers)
            if "leo" not in args and "node_hw" not in args:
                raise bad("node", "goes with 'leo' and/or 'node_hw'")
            for key in ("leo", "node_hw"):
                if key in args:
                    need(key)
    return Step(number, line, do, args, note)


def _acks(raw: Any, bad) -> int | str:
    try:
        return config_mod.parse_acks(raw)
    except ValueError as exc:
        raise bad("acks", str(exc)) from None
