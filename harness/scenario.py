"""Declarative scenario files: parse and validate a TOML scenario into a config and a list of steps.

A scenario pins down a fault sequence exactly (the seeds' cases, KIP-279, KAFKA-7128, KAFKA-7415)
instead of drawing faults at random. Layout (docs/running.md, "Scenarios"):

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

Every step may have `note` (free text) and `mode` ("hw", "leader-epoch" or a list of them): a step with
`mode` plays only in those truncation modes and is recorded as skipped in the others.

Steps (`do`) and their fields:
- start, restart, stop (SIGTERM, clean), kill (SIGKILL), pause (SIGSTOP), resume (SIGCONT): `node`.
- power-loss: `node` (a broker): SIGKILL of a broker running with broker.power_loss = true (set
  automatically when a scenario has this step).
- partition: `drop` (one-way [from, to] pairs) or `isolate` a node from `from` (default: every other
  broker), both ways.
- heal: no field removes every drop; `drop` or `isolate`/`from` (as for partition) remove only those
  one-way drops (a partial heal).
- degrade: pairs as partition (`drop` or `isolate`/`from`), `delay_ms` (required), `jitter_ms` (0),
  `loss_pct` (0-100, 0): tc netem on those one-way links. restore: optional pairs; none restores all.
- corrupt: `node` (a broker that is down at that point: killed, stopped or power-lost), `how` (one of
  STORAGE_FAULTS), `partition` (optional), `seed` (0).
- flush: `node` (a broker), `partition` (optional; default every partition): fsync its logs now.
- elect: `node` (optional: the replica to make leader), `unclean` (false), `partition` (0).
- produce: `count` values with `acks`, `partition`, `expect`ing ok/fail/info/any, `timeout` (the client's,
  which is also how long the broker may hold an acks=all write), `wait` (true). With `wait = false` the
  sends start in the background (each send's invoke is recorded at once, its ok/fail/info when the answer
  comes) and the step returns at once; `expect` is then checked when they are awaited. `client`: `native`
  (no retries), `kafka`, the [client] section's library with its retries and idempotence (the default
  when client.kind is kafka), or `wire`: one idempotent producer for the whole scenario that speaks the
  Kafka protocol itself and keeps its batches (workloads/kafka_wire.py; acks=all, `wait` true).
- resend: `step` (an earlier produce step with client = "wire"), `timeout` (30): send that step's batches
  again, unchanged (the same producer id, epoch and sequences), to the partition's leader now: the retry a
  producer makes when it never saw an answer. Not a new send in the history: the broker should answer it
  with the first offsets, and if it appends it again the checker finds a `duplicate`.
- await: `timeout` (30): wait for every produce started with `wait = false` and check their `expect`.
  The end of the steps (before the final phase) awaits whatever is still under way.
- sleep: `seconds`.
- wait: until every given condition holds: `leader`, `isr`, `hw` (partition HW at least), `fenced`,
  `alive`, and for one replica `node` with `leo` / `node_hw` (exactly); `partition`, `timeout` seconds;
  `topic`: the test topic (default) or the groups' "__consumer_offsets" (elect takes it too).
- Consumer-group steps (a group member named by the scenario, e.g. `member = "a"`, speaking the Kafka
  protocol itself: workloads/wire_group.py), each written to the history as the group workload's
  operations (docs/formats.md "Group operations"):
  - join: `member`, `group` ("g"), `session_timeout_ms` (6000), `timeout`, `expect`: JoinGroup and
    SyncGroup (again, for a member that joined before), then a `group-assign` with what OffsetFetch
    answers for its partitions, and an `assign` of each at that offset (none committed: 0); the member
    heartbeats from then on.
  - poll: `member`, `count` (1000): read up to `count` records of each of its partitions from its
    position (the native consumer), each answer a `poll` of the group.
  - commit: `member`, `offset`, `partition` (default: every partition the member was assigned),
    `timeout`, `expect`, `wait` (true; false: in the background, joined by an await step or the end of
    the steps): an OffsetCommit with the member's id and generation, as they were at its last join.
  - committed: `group` ("g"), `timeout`, `expect`: an OffsetFetch of every partition from outside the
    group. The group kinds' final committed offsets are the last one's (put one after the faults heal).
  - freeze: `member`: it stops heartbeating but keeps its id and generation (a zombie once the
    coordinator expires it); leave: `member`: LeaveGroup.
- assert: on `node`'s event log, `event` (a name from EVENT_NAMES), `match` (a table: every given field
  equal), `count` (exact number of matching events, 0 = none; default at least one), `since` (a step
  number: only events logged after that step started); or on a broker's epoch cache, `epochs` (a list of
  [epoch, start offset]) for `partition` (0). Polls until it holds or `timeout` (5 s) passes.

Errors are one line naming the file, the step number (1-based), its line and the field.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusters.storage_faults import STORAGE_FAULTS      # the kinds of a corrupt step (Corruptible)
from broker.config_keys import TRUNCATION_MODES
from broker.eventlog import EVENT_FIELDS, EVENT_NAMES as broker_event_names
from harness import config as config_mod
from rundir.formats import ANOMALY_KINDS
from rundir.settings import Setting, SettingError, at_line, declare, did_you_mean, header_lines, line_of, read_toml
from broker.errors import ConfigError
from nemesis.faults import VERBS, brings_node_up, takes_node_down, verb_kind
from nemesis.step import Step

GROUP_ACTIONS = ("join", "poll", "commit", "committed", "freeze", "leave")
OFFSETS_TOPIC = "__consumer_offsets"       # broker/groups/offsets.py (not imported: the harness's own name)
NODE_ACTIONS = ("start", "stop", "kill", "restart", "pause", "resume", "power-loss")
ACTIONS = NODE_ACTIONS + ("partition", "heal", "degrade", "restore", "corrupt", "flush", "elect", "produce",
                          "resend", "await", "sleep", "wait", "assert") + GROUP_ACTIONS
EXPECTS = ("ok", "fail", "info", "any")
PRODUCE_CLIENTS = ("native", "kafka", "wire")
WAIT_CONDITIONS = ("leader", "isr", "hw", "fenced", "alive", "node", "leo", "node_hw")
PAIRS = ("drop", "isolate", "from")
# the events an assert step may name: what the brokers and the controller write to their event logs
# (docs/formats.md "Node event logs"); a name outside it is a typo, which would make `count = 0` pass
EVENT_NAMES = tuple(sorted(broker_event_names))

# action -> allowed fields (besides "do", "note" and "mode")
STEP_FIELDS: dict[str, tuple[str, ...]] = {
    **{a: ("node",) for a in NODE_ACTIONS},
    "partition": PAIRS,
    "heal": PAIRS,
    "degrade": PAIRS + ("delay_ms", "jitter_ms", "loss_pct"),
    "restore": PAIRS,
    "corrupt": ("node", "how", "partition", "seed"),
    "flush": ("node", "partition"),
    "elect": ("node", "unclean", "partition", "topic"),
    "produce": ("count", "acks", "partition", "expect", "timeout", "wait", "client"),
    "resend": ("step", "timeout"),
    "await": ("timeout",),
    "sleep": ("seconds",),
    "wait": WAIT_CONDITIONS + ("partition", "timeout", "topic"),
    "assert": ("node", "event", "match", "count", "since", "epochs", "partition", "timeout"),
    "join": ("member", "group", "session_timeout_ms", "timeout", "expect"),
    "poll": ("member", "count"),
    "commit": ("member", "offset", "partition", "timeout", "expect", "wait"),
    "committed": ("group", "timeout", "expect"),
    "freeze": ("member",),
    "leave": ("member",),
}


# the numeric step fields, declared once (the node and list fields are checked against the cluster below)
NUMBERS = declare(
    Setting("count", int, 1, "produce: values to send", min=1, what="an integer >= 1"),
    Setting("partition", int, 0, "produce, wait: the topic partition", min=0, what="an integer >= 0"),
    Setting("timeout", float, 30.0, "produce, await, wait: seconds", above=0, what="a number above 0"),
    Setting("seconds", float, None, "sleep: seconds", above=0, what="a number above 0"),
    Setting("hw", int, None, "wait: the partition HW is at least this", min=0, what="an integer >= 0"),
    Setting("leo", int, None, "wait: the replica's log end offset is exactly this", min=0, what="an integer >= 0"),
    Setting("node_hw", int, None, "wait: the replica's HW is exactly this", min=0, what="an integer >= 0"),
    Setting("seed", int, 0, "corrupt: which byte or record the fault picks", min=0, what="an integer >= 0"),
    Setting("delay_ms", float, None, "degrade: added one-way delay", min=0, finite=True,
            what="a number of milliseconds >= 0"),
    Setting("jitter_ms", float, 0.0, "degrade: delay variation", min=0, finite=True,
            what="a number of milliseconds >= 0"),
    Setting("loss_pct", float, 0.0, "degrade: packets lost", min=0, max=100, what="a percentage from 0 to 100"),
    Setting("offset", int, None, "commit: the offset committed", min=0, what="an integer >= 0"),
    Setting("session_timeout_ms", int, 6000, "join: the member's session timeout", min=1,
            what="a number of milliseconds >= 1"),
)
# where an action's field means something else than in NUMBERS
ACTION_NUMBERS = {
    "assert": declare(
        Setting("count", int, None, "assert: exactly this many matching events", min=0, what="an integer >= 0"),
        Setting("since", int, None, "assert: events logged after that step started", min=1,
                what="a step number >= 1"),
        Setting("timeout", float, 5.0, "assert: seconds to poll", above=0, what="a number above 0"),
    ),
    "resend": declare(
        Setting("step", int, None, "resend: the produce step whose batches to send again", min=1,
                what="a step number >= 1"),
    ),
}
# top-level keys besides the test-file sections
TOP_KEYS = ("name", "description", "final_wait", "seed", "results_dir", "expect", "step")


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
    text, data = read_toml(path, ConfigError, cannot_read="{path}: cannot read scenario ({reason})")

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
                raise ConfigError(f"{_where(path, text, '', key)}: key 'description' must be a string")
            description = value
        elif key == "expect":
            expect = _parse_expect(path, text, value)
        elif key in ("workload", "nemesis"):
            raise ConfigError(f"{_where(path, text, key, '')}: a scenario has no [{key}] (its steps are the workload and the faults)")
        elif key in config_mod.SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{_where(path, text, '', key)}: key '{key}' must be a table [{key}]")
            for k, v in value.items():
                _set(cfg, path, text, f"{key}.{k}", v)
        elif key in ("name", "final_wait", "seed", "results_dir"):
            _set(cfg, path, text, key, value)
            if key == "name":
                name = cfg.name
        else:
            known = [*TOP_KEYS, *(k for k in config_mod.SECTIONS if k not in ("workload", "nemesis"))]
            raise ConfigError(f"{_where(path, text, '', key)}: unknown key '{key}'{did_you_mean(key, known)}")
    if truncation is not None:
        _set(cfg, path, text, "broker.truncation", truncation)
    try:
        config_mod.check(cfg, source=str(path), text=text)
    except config_mod.ConfigError as exc:
        raise ConfigError(str(exc)) from None

    if raw_steps is None:
        raise ConfigError(f"{path}: no steps (add [[step]] tables)")
    if not isinstance(raw_steps, list):
        raise ConfigError(f"{path}: 'step' must be an array of tables ([[step]])")
    lines = header_lines(text, "step")
    brokers = [f"n{i}" for i in range(1, cfg.cluster.nodes + 1)]
    steps = [_parse_step(path, i + 1, lines[i] if i < len(lines) else None, raw, cfg, brokers)
             for i, raw in enumerate(raw_steps)]
    _check_sequence(path, steps, cfg.broker.truncation)
    if cfg.broker.power_loss is False and any(verb_kind(s.do) and verb_kind(s.do).cuts_power for s in steps):
        cfg.broker.power_loss = True       # the broker must run in the power-loss emulation
    return Scenario(path, name, description, cfg, steps, expect)


def _where(path: Path, text: str, section: str, key: str) -> str:
    return at_line(path, line_of(text, key, table=section))


def _set(cfg, path: Path, text: str, dotted: str, value: Any) -> None:
    try:
        config_mod.set_key(cfg, dotted, value)
    except KeyError:
        section, _, key = dotted.rpartition(".")
        raise ConfigError(f"{_where(path, text, section, key)}: {config_mod.unknown_key(dotted)}") from None
    except ValueError as exc:
        section, _, key = dotted.rpartition(".")
        raise ConfigError(f"{_where(path, text, section, key)}: key '{dotted}' {exc}") from None


def _parse_expect(path: Path, text: str, value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{_where(path, text, '', 'expect')}: key 'expect' must be a table [expect]")
    out = {}
    for mode, kinds in value.items():
        where = _where(path, text, "expect", mode)
        if mode not in TRUNCATION_MODES:
            raise ConfigError(f"{where}: unknown key 'expect.{mode}' (truncation modes: "
                                f"{', '.join(TRUNCATION_MODES)})")
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise ConfigError(f"{where}: key 'expect.{mode}' must be a list of anomaly kinds")
        for k in kinds:
            if k not in ANOMALY_KINDS:
                raise ConfigError(f"{where}: key 'expect.{mode}' has unknown anomaly kind {k!r}")
        out[mode] = list(kinds)
    return out


def _parse_step(path: Path, number: int, line: int | None, raw: Any, cfg, brokers: list[str]) -> Step:
    at = f"{path}:{line}" if line else str(path)
    prefix = f"{at}: step {number}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix}: must be a table")
    do = raw.get("do")
    if do is None:
        raise ConfigError(f"{prefix}: field 'do' is missing (one of {', '.join(ACTIONS)})")
    if do not in ACTIONS:
        raise ConfigError(f"{prefix}: field 'do' must be one of {', '.join(ACTIONS)}, got {do!r}"
                          f"{did_you_mean(str(do), ACTIONS)}")
    allowed = STEP_FIELDS[do]
    note = raw.get("note", "")
    if not isinstance(note, str):
        raise ConfigError(f"{prefix} ({do}): field 'note' must be a string")
    modes = _modes(raw["mode"], lambda why: ConfigError(f"{prefix} ({do}): field 'mode' {why}")) \
        if "mode" in raw else None
    args: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("do", "note", "mode"):
            continue
        if key not in allowed:
            raise ConfigError(f"{prefix} ({do}): unknown field '{key}' (allowed: {', '.join(allowed) or 'none'})"
                                f"{did_you_mean(key, allowed)}")
        args[key] = value
    PARSERS[do](_Fields(prefix, number, do, args, cfg, brokers))
    return Step(do, args, number=number, line=line, note=note, modes=modes)


class _Fields:
    """One step's fields while its action's parser checks them (and fills in their defaults), with the
    messages every parser shares: `file:line: step N (do): field 'x' ...`."""

    def __init__(self, prefix: str, number: int, do: str, args: dict[str, Any], cfg, brokers: list[str]):
        self.prefix, self.number, self.do, self.args, self.cfg = prefix, number, do, args, cfg
        self.brokers, self.all_nodes = brokers, ["c0"] + brokers

    def bad(self, field_name: str, why: str) -> ConfigError:
        return ConfigError(f"{self.prefix} ({self.do}): field '{field_name}' {why}")

    def whole(self, why: str) -> ConfigError:
        """A message about the step rather than one field."""
        return ConfigError(f"{self.prefix} ({self.do}): {why}")

    def required(self, *keys: str) -> None:
        for key in keys:
            if key not in self.args:
                raise self.bad(key, "is missing")

    def node(self, key: str, value: Any, allowed_nodes: list[str]) -> str:
        if not isinstance(value, str) or value not in allowed_nodes:
            raise self.bad(key, f"must be one of {', '.join(allowed_nodes)}, got {value!r}")
        return value

    def need(self, key: str) -> Any:
        """args[key] checked against its declaration (ACTION_NUMBERS, NUMBERS); args keep the value as written."""
        setting = ACTION_NUMBERS.get(self.do, {}).get(key) or NUMBERS[key]
        try:
            return setting.value(self.args[key])
        except SettingError as exc:
            raise self.bad(key, exc.problem) from None

    def default(self, key: str) -> Any:
        """args[key], given or its default (NUMBERS'), checked."""
        self.args.setdefault(key, NUMBERS[key].default)
        return self.need(key)

    def partition(self, default: int | None = NUMBERS["partition"].default) -> None:
        if default is not None:
            self.args.setdefault("partition", default)
        if self.args.get("topic", self.cfg.topic.name) == OFFSETS_TOPIC:
            have, what = self.cfg.broker.offsets_topic_partitions, f"{OFFSETS_TOPIC}'s"
        else:
            have, what = self.cfg.topic.partitions, "the topic's"
        if "partition" in self.args and self.need("partition") >= have:
            raise self.bad("partition", f"must be below {what} {have} partitions")

    def topic(self) -> None:
        """`topic`: the test topic or the groups' offsets topic (default: the test topic)."""
        t = self.args.get("topic")
        if t is not None and t not in (self.cfg.topic.name, OFFSETS_TOPIC):
            raise self.bad("topic", f"must be the test topic {self.cfg.topic.name!r} or {OFFSETS_TOPIC!r}, "
                                    f"got {t!r}")

    def name(self, key: str, default: str | None = None) -> str:
        """A non-empty string field (a member's or a group's name)."""
        if default is not None:
            self.args.setdefault(key, default)
        if key not in self.args:
            raise self.bad(key, "is missing")
        value = self.args[key]
        if not isinstance(value, str) or not value.strip():
            raise self.bad(key, f"must be a non-empty string, got {value!r}")
        return value

    def expect(self) -> None:
        self.args.setdefault("expect", "ok")
        if self.args["expect"] not in EXPECTS:
            raise self.bad("expect", f"must be one of {', '.join(EXPECTS)}, got {self.args['expect']!r}")

    def boolean(self, key: str) -> None:
        if key in self.args and not isinstance(self.args[key], bool):
            raise self.bad(key, f"must be true or false, got {self.args[key]!r}")


def _node_step(s: _Fields) -> None:
    """start, stop, kill, restart, pause, resume, power-loss (a broker only)."""
    s.required("node")
    kind = verb_kind(s.do)
    s.node("node", s.args["node"], s.brokers if kind is not None and kind.brokers_only else s.all_nodes)


def _pairs_step(s: _Fields) -> None:
    """partition, heal, degrade, restore: `drop` pairs, or `isolate` a node `from` others."""
    a = s.args
    if "drop" in a and "isolate" in a:
        raise s.whole("give exactly one of 'drop' or 'isolate'")
    opens = VERBS[s.do].plays == "opens"      # partition, degrade: pairs required; heal, restore: optional
    if opens and "drop" not in a and "isolate" not in a:
        raise s.whole("give exactly one of 'drop' or 'isolate'")
    if "from" in a and "isolate" not in a:
        raise s.bad("from", "goes with 'isolate', not 'drop'" if "drop" in a else "goes with 'isolate'")
    if "drop" in a:
        pairs = a["drop"]
        if not isinstance(pairs, list) or not pairs:
            raise s.bad("drop", "must be a non-empty list of [from, to] node pairs")
        out = []
        for pair in pairs:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise s.bad("drop", f"entries must be [from, to] pairs, got {pair!r}")
            x, y = (s.node("drop", n, s.all_nodes) for n in pair)
            if x == y:
                raise s.bad("drop", f"a node cannot be cut from itself ({x!r})")
            out.append((x, y))
        a["drop"] = out
    elif "isolate" in a:
        node = s.node("isolate", a["isolate"], s.all_nodes)
        others = a.get("from", [b for b in s.brokers if b != node])
        if not isinstance(others, list) or not others:
            raise s.bad("from", "must be a non-empty list of nodes")
        others = [s.node("from", n, s.all_nodes) for n in others]
        if node in others:
            raise s.bad("from", f"must not contain the isolated node {node!r}")
        a["drop"] = [p for o in others for p in ((node, o), (o, node))]
        a["from"] = others
    if opens and verb_kind(s.do).params:      # a degrade's settings: the delay required, the rest 0
        first, *rest = verb_kind(s.do).params
        s.required(first)
        s.need(first)
        for key in rest:
            s.default(key)


def _corrupt_step(s: _Fields) -> None:
    s.required("node", "how")
    s.node("node", s.args["node"], s.brokers)
    how = s.args["how"]
    if how not in STORAGE_FAULTS:
        raise s.bad("how", f"must be one of {', '.join(STORAGE_FAULTS)}, got {how!r}"
                           f"{did_you_mean(str(how), STORAGE_FAULTS)}")
    s.partition(None)
    s.default("seed")


def _flush_step(s: _Fields) -> None:
    s.required("node")
    s.node("node", s.args["node"], s.brokers)
    s.partition(None)


def _elect_step(s: _Fields) -> None:
    s.topic()
    if "node" in s.args:
        s.node("node", s.args["node"], s.brokers)
    s.args.setdefault("unclean", False)
    s.boolean("unclean")
    s.partition()


def _produce_step(s: _Fields) -> None:
    a = s.args
    s.default("count")
    a["acks"] = _acks(a.get("acks", s.cfg.client.acks), s.bad)
    s.partition()
    s.expect()
    if "timeout" in a:
        s.need("timeout")
    s.boolean("wait")           # absent: true (the step waits)
    # the native client, or the [client] section's Kafka library (with its idempotence); absent: kafka
    # when the scenario's client.kind is kafka
    a.setdefault("client", "kafka" if s.cfg.client.kind == "kafka" else "native")
    if a["client"] not in PRODUCE_CLIENTS:
        raise s.bad("client", f"must be one of {', '.join(PRODUCE_CLIENTS)}, got {a['client']!r}")
    if a["client"] == "wire":
        if a["acks"] not in (-1, "all"):
            raise s.bad("acks", f"must be \"all\" with client = \"wire\" (an idempotent producer), "
                                f"got {a['acks']!r}")
        if a.get("wait") is False:
            raise s.bad("wait", "must be true with client = \"wire\" (its sends go one at a time)")


def _resend_step(s: _Fields) -> None:
    if "step" not in s.args:
        raise s.bad("step", "is missing (the produce step with client = \"wire\" to send again)")
    s.need("step")
    s.default("timeout")


def _await_step(s: _Fields) -> None:
    s.default("timeout")


def _sleep_step(s: _Fields) -> None:
    s.required("seconds")
    s.need("seconds")


def _wait_step(s: _Fields) -> None:
    a = s.args
    if not any(k in a for k in ("leader", "isr", "hw", "fenced", "alive", "leo", "node_hw")):
        raise s.whole("give at least one condition (leader, isr, hw, fenced, alive, node with leo/node_hw)")
    s.default("timeout")
    s.topic()
    s.partition()
    if "leader" in a:
        s.node("leader", a["leader"], s.brokers + ["none"])
    if "isr" in a:
        if not isinstance(a["isr"], list) or not a["isr"]:
            raise s.bad("isr", "must be a non-empty list of brokers")
        for n in a["isr"]:
            s.node("isr", n, s.brokers)
    for key in ("fenced", "alive"):
        if key in a:
            s.node(key, a[key], s.brokers)
    if "hw" in a:
        s.need("hw")
    if ("leo" in a or "node_hw" in a) and "node" not in a:
        raise s.bad("node", "is needed with 'leo' / 'node_hw' (which replica)")
    if "node" in a:
        s.node("node", a["node"], s.brokers)
        if "leo" not in a and "node_hw" not in a:
            raise s.bad("node", "goes with 'leo' and/or 'node_hw'")
        for key in ("leo", "node_hw"):
            if key in a:
                s.need(key)


def _assert_step(s: _Fields) -> None:
    """An assert step: on a node's event log (`event`, `match`, `count`, `since`) or on a broker's epoch
    cache (`epochs`, `partition`); `timeout` for both."""
    a = s.args
    s.required("node")
    if ("event" in a) == ("epochs" in a):
        raise s.bad("event", "or 'epochs': give exactly one (what to assert on)")
    a.setdefault("timeout", ACTION_NUMBERS["assert"]["timeout"].default)
    s.need("timeout")
    if "event" in a:
        _assert_event(s)
        return
    s.node("node", a["node"], s.brokers)
    for key in ("match", "count", "since"):
        if key in a:
            raise s.bad(key, "goes with 'event', not 'epochs'")
    epochs = a["epochs"]
    ok = isinstance(epochs, list) and all(
        isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                    for x in e) for e in epochs)
    if not ok:
        raise s.bad("epochs", f"must be a list of [epoch, start offset] pairs of integers >= 0, got {epochs!r}")
    a["epochs"] = [list(e) for e in epochs]
    s.partition()


def _assert_event(s: _Fields) -> None:
    a = s.args
    s.node("node", a["node"], s.all_nodes)
    if "partition" in a:
        raise s.bad("partition", "goes with 'epochs' (for events, put it in 'match')")
    event = a["event"]
    if not isinstance(event, str) or event not in EVENT_NAMES:
        raise s.bad("event", f"must be an event name (docs/formats.md), got {event!r}"
                             f"{did_you_mean(str(event), EVENT_NAMES)}")
    match = a.setdefault("match", {})
    if not isinstance(match, dict):
        raise s.bad("match", f"must be a table of event fields, e.g. {{to = 2, why = \"hw\"}}, got {match!r}")
    for key in ("ts", "node", "event"):
        if key in match:
            raise s.bad("match", f"must not name {key!r} (it is given by the step)")
    known = sorted(EVENT_FIELDS.get(event, ()))
    for key in match:
        if key not in known:     # a misspelt field would match nothing: `count = 0` would pass vacuously
            raise s.bad("match", f"names {key!r}, which a {event!r} event does not have (fields: "
                                 f"{', '.join(known)}){did_you_mean(str(key), known)}")
    if "count" in a:
        s.need("count")
    if "since" in a and s.need("since") > s.number:
        raise s.bad("since", f"must name this step ({s.number}) or an earlier one, got {a['since']}")


def _join_step(s: _Fields) -> None:
    s.name("member")
    s.name("group", "g")
    s.default("session_timeout_ms")
    s.default("timeout")
    s.expect()


def _poll_step(s: _Fields) -> None:
    s.name("member")
    s.args.setdefault("count", 1000)
    s.need("count")


def _commit_step(s: _Fields) -> None:
    s.name("member")
    s.required("offset")
    s.need("offset")
    s.partition(None)
    s.default("timeout")
    s.expect()
    s.boolean("wait")


def _committed_step(s: _Fields) -> None:
    s.name("group", "g")
    s.default("timeout")
    s.expect()


def _member_step(s: _Fields) -> None:
    s.name("member")


# action -> the parser of its fields (each checks them and fills in their defaults)
PARSERS: dict[str, Any] = {
    **{a: _node_step for a in NODE_ACTIONS},
    **{a: _pairs_step for a in ("partition", "heal", "degrade", "restore")},
    "corrupt": _corrupt_step, "flush": _flush_step, "elect": _elect_step, "produce": _produce_step,
    "resend": _resend_step, "await": _await_step, "sleep": _sleep_step, "wait": _wait_step,
    "assert": _assert_step, "join": _join_step, "poll": _poll_step, "commit": _commit_step, "committed": _committed_step,
    "freeze": _member_step, "leave": _member_step,
}


def _modes(raw: Any, bad) -> tuple[str, ...]:
    """A step's `mode`: one truncation mode or a non-empty list of them."""
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not values or not all(isinstance(m, str) for m in values):
        raise bad(f"must be a truncation mode ({', '.join(TRUNCATION_MODES)}) or a list of them, "
                  f"got {raw!r}")
    for m in values:
        if m not in TRUNCATION_MODES:
            raise bad(f"must be one of {', '.join(TRUNCATION_MODES)}, got {m!r}"
                      f"{did_you_mean(m, TRUNCATION_MODES)}")
    return tuple(dict.fromkeys(values))


def _check_sequence(path: Path, steps: list[Step], mode: str) -> None:
    """What depends on the steps before: a corrupt step's node is down (killed, stopped or power-lost and
    not started again) at that point, counting only the steps that play in `mode`; an await step comes
    after a produce with `wait = false` (in the file, whatever their modes); a resend step names an earlier
    produce step with client = "wire"."""
    down: set[str] = set()
    background = False
    joined: set[str] = set()
    for s in steps:
        if s.do in ("poll", "commit", "freeze", "leave") and s.args["member"] not in joined:
            raise ConfigError(f"{s.where(path)}: field 'member' must name a member joined by an earlier join "
                              f"step, got {s.args['member']!r}")
        if s.do == "join":
            joined.add(s.args["member"])
        if s.do == "commit" and s.args.get("wait") is False:
            background = True
        if s.do == "resend":
            target = steps[s.args["step"] - 1] if s.args["step"] < s.number else None
            if target is None or target.do != "produce" or target.args.get("client") != "wire":
                raise ConfigError(f"{s.where(path)}: field 'step' must name an earlier produce step with "
                                  f"client = \"wire\", got {s.args['step']}")
        if s.do == "produce" and s.args.get("wait") is False:
            background = True
        elif s.do == "await" and not background:
            raise ConfigError(f"{s.where(path)}: field 'do' = \"await\" needs an earlier produce or commit step "
                                f"with wait = false (nothing to await)")
        if not s.plays_in(mode):
            continue
        node = s.args.get("node")
        if takes_node_down(s.do):
            down.add(node)
        elif brings_node_up(s.do):
            down.discard(node)
        elif s.do in VERBS and VERBS[s.do].plays == "instant" and node not in down:
            raise ConfigError(f"{s.where(path)}: field 'node' must name a broker that is down at this point "
                                f"(kill, stop or power-loss it first; in {mode} mode {node} is running)")


def _acks(raw: Any, bad) -> int | str:
    try:
        return config_mod.parse_acks(raw)
    except ValueError as exc:
        raise bad("acks", str(exc)) from None
