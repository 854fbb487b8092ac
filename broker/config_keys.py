"""Every broker and controller setting, declared once.

Each `Key` is one `Setting` (name, type, default, rules and a one-line doc: broker/settings.py) and the
places it reaches. Everything else is derived from this list:

- broker.json (`BrokerConfig`, broker/config.py) and controller.json (`ControllerConfig`,
  broker/controller/config.py): the keys whose `files` name them;
- the replication state machine's `ReplicationConfig` (broker/replication/config.py): `replication`;
- the simulator's `SimSettings` (simulator/world.py): `sim`;
- the protocol rules' `RuleSettings` (broker/rules/catalogue.py), with a test run's defaults: `rules`;
- a test file's `[broker]` section and its flags (harness/config.py), the flags of `highwater run` and
  `highwater explore` and the options of a suite's explore entries (harness/exploration.py): `test`,
  `flag` and `sim`;
- the tables of docs/architecture.md ("controller.json", "broker.json"), which a test compares.

So a new setting is one `Key` here plus the code that uses it. Values have one spelling each: acks is
0, 1 or "all" (`parse_acks`; -1 is only the wire's), truncation one of `TRUNCATION_MODES`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Literal

from broker.controller.messages import TopicSpec
from broker.limits import topic_name_problem
from broker.settings import REQUIRED, Setting, SettingError
from broker.topic_configs import checked_configs

# "hw": pre-0.11 Kafka, truncate to the high watermark on becoming a follower.
# "leader-epoch": KIP-101 with KIP-279's iterative OffsetsForLeaderEpoch exchange (Kafka >= 2.0).
TRUNCATION_MODES = ("hw", "leader-epoch")
# "kip-101": KIP-101's single-round exchange without KIP-279; a demonstration mode the replication state
# machine and the simulator accept (it still diverges after alternating unclean elections), not a file.
DEMO_TRUNCATION_MODES = ("kip-101",)
FLUSH_POLICIES = ("always", "interval", "never")
ACKS = (0, 1, "all")


def parse_acks(raw: Any) -> int | str:
    """acks as every setting spells it: 0, 1 or "all" (from -1, "-1", "all", "ALL", 0, "0", 1, "1")."""
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in ("all", "-1"):
            return "all"
        if word in ("0", "1"):
            return int(word)
    elif isinstance(raw, int) and not isinstance(raw, bool):
        if raw == -1:
            return "all"
        if raw in (0, 1):
            return raw
    raise ValueError(f"must be 0, 1 or \"all\", got {raw!r}")


def wire_acks(acks: int | str) -> int:
    """The acks a produce request carries: -1 for "all"."""
    return -1 if parse_acks(acks) == "all" else int(acks)


def _nonempty(raw: Any) -> str:
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"must be a non-empty string, got {raw!r}")
    return raw


def _topics(raw: Any) -> tuple[TopicSpec, ...]:
    """controller.json's topics: a list of {name, partitions, replication_factor[, configs]}."""
    if not isinstance(raw, (list, tuple)):
        raise ValueError(f"must be a list, got {raw!r:.60}")
    out = []
    for i, t in enumerate(raw):
        if isinstance(t, TopicSpec):
            out.append(t)
            continue
        where = f"[{i}]"
        if not isinstance(t, dict):
            raise ValueError(f"{where}: must be an object with name, partitions, replication_factor[, configs]")
        extra = set(t) - {"name", "partitions", "replication_factor", "configs"}
        if extra:
            raise ValueError(f"{where}.{sorted(extra)[0]}: unknown key")
        if not isinstance(t.get("name"), str) or not t["name"]:
            raise ValueError(f"{where}.name: must be a non-empty string")
        if topic_name_problem(t["name"]) is not None:
            raise ValueError(f"{where}.name: {topic_name_problem(t['name'])}")
        for key in ("partitions", "replication_factor"):
            v = t.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{where}.{key}: must be a positive integer, got {v!r}")
        try:
            configs = checked_configs(t.get("configs", {}))
        except ValueError as exc:
            raise ValueError(f"{where}.configs: {exc}") from None
        out.append(TopicSpec(t["name"], t["partitions"], t["replication_factor"], tuple(sorted(configs.items()))))
    return tuple(out)


@dataclass(frozen=True)
class Key:
    """One setting and where it goes (module docstring)."""
    setting: Setting
    files: tuple[str, ...] = ()        # "broker" (broker.json), "controller" (controller.json)
    replication: str | None = None     # its ReplicationConfig field
    test: str | None = None            # its key in a test file's [broker] section
    test_default: Any = None           # a test run's default, where it differs from the broker's (why: below)
    flag: str | None = None            # its flag (without --) for `highwater run`, and `explore` with `sim`
    sim: bool | tuple = False          # the simulator models it (a tuple: the choices it models)
    demo_choices: tuple = ()           # more choices the state machine and simulator take (not files)
    rules: bool = False                # the protocol rules (broker/rules) depend on it: a RuleSettings field

    @property
    def name(self) -> str:
        return self.setting.name

    @property
    def default(self) -> Any:
        return self.setting.default

    @property
    def run_default(self) -> Any:
        return self.setting.default if self.test_default is None else self.test_default

    @property
    def sim_name(self) -> str:
        """Its name in SimSettings: the test file's name when it has one."""
        return self.test or self.name

    @property
    def option(self) -> str | None:
        """Its name as an explore option (a suite file's explore table): the flag's, with underscores."""
        return self.flag.replace("-", "_") if self.flag else None

    def checks(self) -> dict[str, Any]:
        """The Setting's checks, as keywords (for a Setting of another name or default)."""
        s = self.setting
        return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)
                if f.name not in ("name", "type", "default", "doc") and getattr(s, f.name) != f.default}

    def with_choices(self, choices: Iterable) -> Setting:
        return dataclasses.replace(self.setting, choices=tuple(choices))


def _k(name: str, type_: type, default: Any, doc: str, **kw: Any) -> Key:
    rules = {k: kw.pop(k) for k in ("choices", "min", "max", "parse") if k in kw}
    return Key(Setting(name, type_, default, doc, **rules), **kw)


BOTH = ("broker", "controller")

# A test run defaults to min.insync.replicas 2: acks=all then needs two live ISR members, the setting the
# seeds' safe runs use (a broker started by hand, `python -m broker node`, uses 1).
RUN_MIN_INSYNC_REPLICAS = 2
# A test run's followers fetch at most 32 records at a time (a broker's own default is 1000). The harness
# writes a few hundred records a second, so with 1000 a follower back from a few seconds down catches up
# in one fetch; in production a follower's backlog is many times replica.fetch.max.bytes and catching up
# takes many fetches, each leaving it behind the leader's HW. A smaller limit brings that state, and the
# code paths that act in it, into every run.
RUN_REPLICA_FETCH_MAX_RECORDS = 32

KEYS: tuple[Key, ...] = (
    # where a process listens and keeps its files
    _k("node_id", int, REQUIRED, "int, broker N is node \"nN\"", min=1, files=("broker",)),
    _k("host", str, REQUIRED, "where to listen", parse=_nonempty, files=BOTH),
    _k("port", int, REQUIRED, "where to listen (0: any free port; READY shows it)", min=0, max=65535,
       files=BOTH),
    _k("controller_host", str, REQUIRED, "the controller's host", parse=_nonempty, files=("broker",)),
    _k("controller_port", int, REQUIRED, "the controller's port", min=1, max=65535, files=("broker",)),
    _k("data_dir", str, REQUIRED, "durable state (fsynced)", parse=_nonempty, files=BOTH),
    _k("log_file", str, REQUIRED, "the event log's path", parse=_nonempty, files=BOTH),
    # replication and safety
    _k("truncation", str, "leader-epoch", "follower truncation rule: \"hw\" (pre-0.11) or \"leader-epoch\" "
       "(KIP-101/279)", choices=TRUNCATION_MODES, files=("broker",), replication="truncation",
       test="truncation", flag="truncation", sim=True, demo_choices=DEMO_TRUNCATION_MODES, rules=True),
    _k("min_insync_replicas", int, 1, "ISR members an acks=all write needs; on the controller, the ISR size "
       "under which replicas leaving the ISR join the ELR (the harness sets both)", min=1, files=BOTH,
       replication="min_insync_replicas", test="min_insync_replicas", test_default=RUN_MIN_INSYNC_REPLICAS,
       flag="min-insync-replicas", sim=True, rules=True),
    _k("unclean_leader_election", bool, False, "elect outside the ISR when it has no live member",
       files=("controller",), test="unclean_leader_election", flag="unclean-election", sim=True, rules=True),
    _k("flush", str, "always", "fsync policy: \"always\" (per append), \"interval\" or \"never\"",
       choices=FLUSH_POLICIES, files=("broker",), test="flush", flag="flush", sim=("always", "never"), rules=True),
    _k("flush_interval_ms", int, 1000, "fsync interval with flush = \"interval\"", min=1, files=("broker",),
       test="flush_interval_ms"),
    _k("power_loss", bool, False, "unflushed appends live only in memory, so SIGKILL loses them",
       files=("broker",), test="power_loss", flag="power-loss"),
    _k("fetch_fencing", bool, True, "KIP-320: a leader refuses follower fetches and OffsetsForLeaderEpoch "
       "requests from another leader epoch; false is a pre-2.1 broker", files=("broker",),
       replication="fetch_fencing", test="fetch_fencing", flag="fetch-fencing", sim=True, rules=True),
    _k("eligible_leader_replicas", bool, False, "KIP-966: on the broker the strict min-ISR HW rule, on the "
       "controller eligible leader replicas and unclean-shutdown handling", files=BOTH,
       replication="strict_min_isr_hw", test="eligible_leader_replicas", flag="eligible-leader-replicas",
       sim=True, rules=True),
    _k("isr_join_requires_epoch_start", bool, True, "KAFKA-7128: a follower joins the ISR only once its LEO "
       "reached the start of the leader's epoch; false restores the bug, for the scenario tests",
       replication="isr_join_requires_epoch_start", sim=True, rules=True),
    _k("producer_state_rebuilt_after_truncation", bool, True, "after a truncation a replica keeps the idempotent "
       "producers' state of the records that remain (rebuilding it from the log where needed); false plants "
       "the effect of KAFKA-5435 (a truncated, restarted 0.11.0 broker believed no producer data was left in "
       "its log): the state is emptied, so a producer's retry of a batch still in the log is appended again",
       files=("broker",), replication="producer_state_rebuilt_after_truncation",
       test="producer_state_rebuilt_after_truncation"),
    # timing
    _k("broker_session_timeout_ms", int, 3000, "a broker not heartbeating this long is fenced", min=100,
       files=("controller",), test="session_timeout_ms", sim=True),
    _k("replica_lag_time_max_ms", int, 2000, "a follower this far behind leaves the ISR", min=1,
       files=("broker",), replication="replica_lag_time_max_ms", test="replica_lag_time_max_ms", sim=True),
    _k("replica_fetch_wait_max_ms", int, 200, "a follower fetch's long-poll", min=0, files=("broker",),
       test="replica_fetch_wait_max_ms"),
    _k("replica_fetch_max_records", int, 1000, "records per follower fetch", min=1, files=("broker",),
       replication="replica_fetch_max_records", test="replica_fetch_max_records",
       test_default=RUN_REPLICA_FETCH_MAX_RECORDS, sim=True),
    _k("hw_checkpoint_interval_ms", int, 500, "HW checkpoint period", min=1, files=("broker",),
       test="hw_checkpoint_interval_ms"),
    _k("heartbeat_interval_ms", int, 500, "heartbeats to the controller", min=1, files=("broker",)),
    _k("segment_records", int, 100000, "records per segment file", min=1, files=("broker",),
       test="segment_records", flag="segment-records"),
    # topics as Kafka clients expect them (Kafka's own defaults)
    _k("auto_create_topics_enable", bool, True, "a Metadata request naming an unknown topic creates it, unless "
       "the request says allow_auto_topic_creation = false (Kafka's auto.create.topics.enable)",
       files=("broker",), test="auto_create_topics"),
    _k("num_partitions", int, 1, "partitions of an automatically created topic (Kafka's num.partitions)",
       min=1, files=("broker",)),
    _k("default_replication_factor", int, 1, "replication factor of an automatically created topic (Kafka's "
       "default.replication.factor)", min=1, files=("broker",)),
    _k("log_message_timestamp_type", str, "CreateTime", "what a record's timestamp is: \"CreateTime\", the "
       "producer's, or \"LogAppendTime\", the leader's clock when it appends (Kafka's "
       "log.message.timestamp.type)", choices=("CreateTime", "LogAppendTime"), files=("broker",)),
    # consumer groups (broker/server/coordinator.py): Kafka's names and defaults, except where noted
    _k("offsets_topic_num_partitions", int, 3, "partitions of __consumer_offsets, created on the first "
       "FindCoordinator (Kafka's offsets.topic.num.partitions is 50; each partition here is a replica with "
       "its own files and fetcher)", min=1, max=1000, files=("broker",), test="offsets_topic_partitions"),
    _k("offsets_topic_replication_factor", int, 3, "replication factor of __consumer_offsets (a test run sets "
       "its topic's); FindCoordinator answers COORDINATOR_NOT_AVAILABLE while fewer brokers are alive",
       min=1, files=("broker",)),
    _k("offsets_commit_timeout_ms", int, 5000, "an OffsetCommit waits this long for the offsets partition's HW "
       "to pass it, then answers COORDINATOR_NOT_AVAILABLE (outcome unknown)", min=1, files=("broker",),
       test="offsets_commit_timeout_ms"),
    _k("group_min_session_timeout_ms", int, 1000, "the shortest session timeout a member may ask for (Kafka's "
       "group.min.session.timeout.ms is 6000; a test member's session may be shorter)", min=1,
       files=("broker",)),
    _k("group_max_session_timeout_ms", int, 1800000, "the longest session timeout a member may ask for", min=1,
       files=("broker",)),
    _k("group_initial_rebalance_delay_ms", int, 0, "an empty group's first rebalance waits this long for more "
       "members (Kafka's group.initial.rebalance.delay.ms is 3000)", min=0, files=("broker",)),
    _k("group_load_min_ms", int, 0, "a coordinator taking over an offsets partition serves its groups no sooner "
       "than this after it began to load it (COORDINATOR_LOAD_IN_PROGRESS meanwhile): Kafka's load reads the "
       "whole partition and takes seconds on a busy cluster, ours reads a small log at once, so this stands in "
       "for the time a real load takes", min=0, max=600000, files=("broker",), test="group_load_min_ms"),
    _k("group_commit_checks_generation", bool, True, "an OffsetCommit from a member of an older generation (or "
       "no longer a member) is refused ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID; false plants the bug of a "
       "coordinator that takes a zombie's commits", files=("broker",), test="group_commit_checks_generation"),
    _k("group_offset_fetch_waits_for_load", bool, True, "OffsetFetch answers COORDINATOR_LOAD_IN_PROGRESS until "
       "the coordinator has loaded the group's offsets partition; false plants the bug of answering from what "
       "is loaded so far (no committed offset)", files=("broker",), test="group_offset_fetch_waits_for_load"),
    _k("group_coordinator_resigns_when_following", bool, True, "a broker whose offsets partition became a "
       "follower gives its groups up (NOT_COORDINATOR); false plants KAFKA-20634: it goes on answering, and "
       "acknowledges a commit it appended as the leader once its follower's HW passes the commit's offset, "
       "after truncation refilled that offset from the new leader", files=("broker",),
       test="group_coordinator_resigns_when_following"),
    # the controller's own
    _k("topics", object, (), "`[{\"name\": \"hw\", \"partitions\": 3, \"replication_factor\": 3}]`, created at "
       "start-up (idempotent); a topic may add `\"configs\": {\"message.timestamp.type\": \"LogAppendTime\"}` "
       "(broker/topic_configs.py)", parse=_topics, files=("controller",)),
    _k("expected_brokers", int, 0, "create `topics` once this many brokers have registered (0: the largest "
       "replication factor in `topics`)", min=0, files=("controller",)),
    _k("frame_read_timeout_ms", int, 10000, "a request frame whose length prefix arrived must be complete "
       "within this, else the connection is closed", min=1, files=("controller",)),
    _k("max_replicas_per_broker", int, 0, "CREATE_TOPICS refuses a topic that would give a live broker more "
       "partition replicas than this (0: derived from the controller's fd limit)", min=0,
       files=("controller",)),
)
BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}


def keys_of(file: str) -> tuple[Key, ...]:
    return tuple(k for k in KEYS if file in k.files)


def section_keys() -> tuple[Key, ...]:
    """The keys a test file's [broker] section sets."""
    return tuple(k for k in KEYS if k.test)


def sim_keys() -> tuple[Key, ...]:
    return tuple(k for k in KEYS if k.sim)


def rule_keys() -> tuple[Key, ...]:
    return tuple(k for k in KEYS if k.rules)


def config_class(name: str, keys: Iterable[Key], *, namespace: dict[str, Any] | None = None,
                 attr: str = "name") -> type:
    """A frozen dataclass with one field per key (`attr`: the field's name), required ones first."""
    keys = list(keys)
    required = [(getattr(k, attr), k.setting.type) for k in keys if k.setting.required]
    optional = [(getattr(k, attr), k.setting.type, dataclasses.field(default=k.default)) for k in keys
                if not k.setting.required]
    return dataclasses.make_dataclass(name, required + optional, frozen=True, namespace=namespace or {})


CHOICE_SETS = ("files", "machine", "simulator")


def check_values(obj: Any, keys: Iterable[Key], error: type[Exception], prefix: str, *,
                 attr: str = "name", choices: Literal["files", "machine", "simulator"] = "files") -> None:
    """Raise `error(prefix + "key: problem")` for the first field of `obj` its key refuses (its type,
    choices, range). `choices`: whose a key's choices are: the files' (broker.json, controller.json); the
    state machine's ("machine": its demonstration choices too); the simulator's (only those it models,
    where the key names them, else the state machine's)."""
    if choices not in CHOICE_SETS:
        raise ValueError(f"check_values: choices must be one of {CHOICE_SETS}, got {choices!r}")
    for k in keys:
        field = getattr(k, attr)
        value = getattr(obj, field)
        s = k.setting
        if choices != "files" and k.demo_choices:
            s = k.with_choices(s.choices + k.demo_choices)
        if choices == "simulator" and isinstance(k.sim, tuple):
            s = k.with_choices(k.sim)
        try:
            if s.type is not object or s.parse is not None:
                s.convert(value)
            problem = s.problem(value)
        except SettingError as exc:
            problem = exc.problem
        if problem:
            raise error(f"{prefix}{field} {problem}")


# --- the docs' tables -------------------------------------------------------------------------------
# docs/architecture.md and docs/running.md hold these tables between `<!-- keys: NAME -->` and
# `<!-- end keys -->`; `python -m broker.config_keys DOC...` rewrites them, and a test compares them.

def _shown(value: Any) -> str:
    if value is REQUIRED:
        return "required"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"`\"{value}\"`"
    if value == ():
        return "`[]`"
    return str(value)


def _flag_cell(k: Key) -> str:
    if not k.flag:
        return ""
    return f"`--{k.flag}` / `--no-{k.flag}`" if k.setting.type is bool else f"`--{k.flag}`"


def docs_table(name: str) -> str:
    """The markdown table `name` names: "controller.json", "broker.json" or "test" (a test file's
    [broker] section, with its flags and a test run's defaults)."""
    if name == "test":
        rows = ["| TOML key | flag | default | meaning |", "|---|---|---|---|"]
        rows += [f"| `broker.{k.test}` | {_flag_cell(k)} | {_shown(k.run_default)} | {k.setting.doc} |"
                 for k in section_keys()]
        rows.append("| `broker.extra` | | `{}` | a table of any other broker.json key, passed through unchanged |")
        return "\n".join(rows)
    file = name.removesuffix(".json")
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{k.name}` | {_shown(k.default)} | {k.setting.doc} |" for k in keys_of(file)]
    return "\n".join(rows)


def rewrite_docs(text: str) -> str:
    """`text` with every marked table made anew."""
    import re
    return re.sub(r"(<!-- keys: ([\w.]+) -->\n).*?(<!-- end keys -->)",
                  lambda m: m.group(1) + docs_table(m.group(2)) + "\n" + m.group(3), text, flags=re.S)


if __name__ == "__main__":
    import sys
    from pathlib import Path
    for doc in sys.argv[1:]:
        path = Path(doc)
        path.write_text(rewrite_docs(path.read_text()))
        print(f"{doc}: tables rewritten")
