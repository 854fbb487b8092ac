"""The test configuration: one dataclass tree with safe defaults, loadable from a TOML test file.

`highwater run` builds a `TestConfig` from (1) the defaults below, (2) an optional TOML test file and
(3) command-line flags, later ones overriding earlier ones. Every setting is declared once: the
[broker] section's keys, defaults and flags in broker/config_keys.py (with a test run's defaults, such
as min_insync_replicas 2, where they differ from a broker started by hand), the [workload] section's by
the workloads (workloads/workload.py SETTINGS and FLAGS), the others in the dataclasses below (`setting(default, doc, rules)`, rundir/settings.py). Every value is validated against
its declaration; a bad one raises `ConfigError` whose one-line message names the file, the key and (when
it can be found) the line. The fault names are the nemesis's (nemesis/faults.py).

TOML layout (every key optional):

    name = "chaos"            time_limit = 30        seed = 42          results_dir = "results"
    final_wait = 60
    [cluster]   backend = "local"   nodes = 3
    [topic]     name = "hw"  partitions = 3  replication_factor = 3  configs = {}
    [broker]    truncation = "leader-epoch"  min_insync_replicas = 2  unclean_leader_election = false
                flush = "always"  flush_interval_ms = 1000  power_loss = false  ... (extra broker keys)
    [client]    kind = "mixed"  library = "confluent"  acks = "all"  timeout = 2.0  retries = 0
    [workload]  name = "producer-consumer"  rate = 100.0  concurrency = 4  consumers = 2
    [nemesis]   faults = ["mix"]  interval = 5.0  schedule_file = ""
    [checker]   engine = "spark"  allow = []  fail_on = []
"""
from __future__ import annotations

import copy
import dataclasses
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config_keys import parse_acks, section_keys
from broker.errors import ConfigError
from nemesis.faults import on_the_cluster
from nemesis.schedule import aims_at_coordinator, expand_faults, fault_list, fault_name, needs_power_loss
from rundir.formats import ANOMALY_KINDS
from rundir.settings import Setting, at_line, did_you_mean, line_of, read_toml, schema_of, section_class, setting
from workloads import workload as workload_settings
from broker.limits import topic_name_problem  # Kafka's rule, the one the controller applies
from broker.topic_configs import checked_configs  # the topic configs the controller accepts
from harness import backends
from harness.backends import BACKENDS  # the registry of backend names (imports no backend)

WORKLOADS = workload_settings.NAMES         # the workloads' registry (workloads/workload.py KINDS)
CLIENT_KINDS = ("native", "kafka", "mixed")
KAFKA_LIBRARIES = ("confluent", "kafka-python")   # workloads/kafka_client.py LIBRARIES
CHECKER_ENGINES = ("spark", "reference")


def workload_group(cfg: "TestConfig") -> str | None:
    """The consumer group of the configured workload (its `group_id`), or None for a workload without one:
    the coordinator faults aim at that group's coordinator (nemesis/driver.py Aim)."""
    kind = workload_settings.KINDS.get(cfg.workload.name)
    return cfg.workload.group_id if kind is not None and "group_id" in kind.settings else None


def _coordinator_problem(cfg: "TestConfig", faults: list[str]) -> str | None:
    """Why `faults` cannot be played with this workload: a coordinator fault and no consumer group."""
    aimed = aims_at_coordinator(faults)
    if aimed and workload_group(cfg) is None:
        return (f"has {aimed[0]!r}, which aims at a consumer group's coordinator, and workload "
                f"{cfg.workload.name!r} has no group (workload.name = \"group\")")
    return None


def parse_faults(raw: Any) -> list[str]:
    if isinstance(raw, str):
        items = [s.strip() for s in raw.split(",") if s.strip()]
        if raw.strip().lower() in ("none", ""):
            items = []
    elif isinstance(raw, list):
        items = raw
    else:
        raise ValueError(f"must be a list of fault names, got {raw!r}")
    out = []
    for item in items:
        fault_name(item)
        if item not in out:
            out.append(item)
    return fault_list(out)


def parse_anomaly_kinds(raw: Any) -> list[str]:
    if isinstance(raw, str):
        raw = [s.strip() for s in raw.split(",") if s.strip()]
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise ValueError(f"must be a list of anomaly kinds, got {raw!r}")
    for k in raw:
        if k not in ANOMALY_KINDS:
            raise ValueError(f"unknown anomaly kind {k!r} (known: {', '.join(ANOMALY_KINDS)})")
    return list(raw)


_SEED = Setting("seed", int, None, floor=0)


def parse_seed(raw: Any) -> int | None:
    return None if raw is None else _SEED.convert(raw, text=True)


def _n(default: Any, doc: str, **rules: Any) -> Any:
    """A numeric setting: a negative number is refused as soon as it is set (floor 0)."""
    return setting(default, doc, floor=0, **rules)


@dataclass
class ClusterConfig:
    backend: str = setting("local", "where the nodes run (harness/backends.py)")
    nodes: int = _n(3, "brokers in the cluster", min=1)
    nodes_file: str = setting("", "ssh backend: the nodes file (clusters/ssh.py); external: the brokers' hosts "
                              "(clusters/external_hosts.py)")
    ssh_accept_unknown_hosts: bool = setting(False, "ssh backend: accept host keys not in known_hosts")
    base_image: str = setting("", "docker backend: an existing base image instead of debootstrap")
    docker_kill: str = setting("process", "docker backend: kill = SIGKILL of the process, or \"node\" (docker kill)")
    bootstrap: str = setting("", "external backend: host:port[,host:port] of the Kafka-compatible cluster")
    docker_containers: str = setting("", "external backend: the brokers' Docker containers, name[=node id],... "
                                     "(clusters/external_docker.py)")


@dataclass
class TopicConfig:
    name: str = setting("hw", "the topic the workload writes (Kafka's naming rule)")
    partitions: int = _n(3, "partitions of the topic", min=1)
    replication_factor: int = _n(3, "replicas per partition, at most the number of nodes")
    configs: dict = setting({}, "topic configs the topic is created with (broker/topic_configs.py), e.g. "
                            "{\"message.timestamp.type\" = \"LogAppendTime\"}", parse=checked_configs)


# [broker]: the broker and controller keys broker/config_keys.py marks `test`, with a test run's
# defaults, and `extra` for any other broker.json key
BrokerConfig = dataclasses.make_dataclass("BrokerConfig", [
    *[(k.test, k.setting.type, setting(k.run_default, k.setting.doc, **k.checks())) for k in section_keys()],
    ("extra", dict, setting({}, "any other broker.json key, passed through unchanged"))],
    namespace={"__module__": __name__})


@dataclass
class ClientConfig:
    kind: str = setting("mixed", "\"native\" (broker/client), \"kafka\" (a real Kafka client, docs/clients.md) "
                        "or \"mixed\" (the odd-numbered workers Kafka, the rest and the final reads native)",
                        choices=CLIENT_KINDS)
    library: str = setting("confluent", "the Kafka client with kind = \"kafka\": \"confluent\" (confluent-kafka) "
                           "or \"kafka-python\"", choices=KAFKA_LIBRARIES)
    acks: int | str = setting("all", "0, 1 or \"all\"", type=object, parse=parse_acks)
    timeout: float = _n(2.0, "seconds per request", above=0)
    retries: int = _n(0, "client retries per send")
    idempotence: bool = setting(False, "the Kafka client's idempotent producer (KIP-98), with kind = \"kafka\" and "
                                "acks = \"all\": the library retries within the request timeout, and a value "
                                "stored twice (`duplicate`) fails the run (docs/clients.md)")


# the [workload] section, declared by the workloads (workloads/workload.py SETTINGS)
WorkloadConfig = section_class("WorkloadConfig", workload_settings.SETTINGS)
WorkloadConfig.__module__ = __name__        # found here by pickle and repr, as a class written here would be


@dataclass
class NemesisConfig:
    faults: list = setting(["mix"], "fault names (nemesis/faults.py NAMES; \"mix\": the rotating mix)",
                           parse=parse_faults)
    interval: float = _n(5.0, "seconds between nemesis decisions", above=0)
    schedule_file: str = setting("", "explicit schedule (nemesis/ format); overrides the random schedule")


@dataclass
class CheckerConfig:
    engine: str = setting("spark", "\"spark\" (the PySpark checker) or \"reference\" (single process)",
                          choices=CHECKER_ENGINES)
    allow: list = setting([], "anomaly kinds that do not fail the run", parse=parse_anomaly_kinds)
    fail_on: list = setting([], "anomaly kinds that do (checkers/policy.py)", parse=parse_anomaly_kinds)


@dataclass
class TestConfig:
    name: str = setting("chaos", "the test's name (letters, digits, '.', '_', '-')")
    time_limit: float = _n(30.0, "seconds of workload under the nemesis", above=0)
    seed: int | None = setting(None, "the run's seed; random when not given", parse=parse_seed)
    results_dir: str = setting("results", "the run store")
    final_wait: float = _n(60.0, "bound on the final phase's wait for a healthy cluster", above=0)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    topic: TopicConfig = field(default_factory=TopicConfig)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    nemesis: NemesisConfig = field(default_factory=NemesisConfig)
    checker: CheckerConfig = field(default_factory=CheckerConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def recorded(self) -> dict[str, Any]:
        """The config as test.json records it: `to_dict`, with `broker.power_loss` what the brokers ran
        with (the faults may turn the emulation on: `broker_settings`), which the report's header shows."""
        out = self.to_dict()
        out["broker"]["power_loss"] = bool(self.broker_settings()["power_loss"])
        return out

    def with_seed(self) -> "TestConfig":
        """Fill in a random seed when none was given, so every run records the seed it used."""
        if self.seed is None:
            self.seed = random.SystemRandom().randrange(1, 2**31)
        return self

    # --- what the cluster backend needs ----------------------------------------------------------
    def broker_settings(self) -> dict[str, Any]:
        """broker.json's settings: every [broker] key of broker.json, then `extra`."""
        b = self.broker
        settings = {k.name: getattr(b, k.test) for k in section_keys() if "broker" in k.files}
        # power-loss faults need brokers running in the power-loss emulation (a schedule file replaces
        # the faults: its power-loss steps need broker.power_loss set)
        settings["power_loss"] = b.power_loss or (not self.nemesis.schedule_file
                                                  and needs_power_loss(self.nemesis.faults))
        # the consumer groups' offsets topic is replicated like the test's topic
        settings["offsets_topic_replication_factor"] = self.topic.replication_factor
        settings.update(b.extra)
        return settings

    def controller_settings(self) -> dict[str, Any]:
        """controller.json's settings: every [broker] key of controller.json, and the test's topic."""
        settings = {k.name: getattr(self.broker, k.test) for k in section_keys() if "controller" in k.files}
        settings["topics"] = [{"name": self.topic.name, "partitions": self.topic.partitions,
                               "replication_factor": self.topic.replication_factor,
                               **({"configs": dict(self.topic.configs)} if self.topic.configs else {})}]
        return settings


SECTIONS = {"cluster": ClusterConfig, "topic": TopicConfig, "broker": BrokerConfig,
            "client": ClientConfig, "workload": WorkloadConfig, "nemesis": NemesisConfig,
            "checker": CheckerConfig}
# every setting of a test, by dotted key ("time_limit", "broker.truncation"), in declaration order
SCHEMA = {**schema_of(TestConfig), **{k: v for name, cls in SECTIONS.items() for k, v in schema_of(cls, f"{name}.").items()}}

# command-line flag -> dotted key (the flags of `highwater run`; harness/run_command.py uses this table)
FLAG_KEYS = {
    "nodes": "cluster.nodes",
    "backend": "cluster.backend",
    "nodes_file": "cluster.nodes_file",
    "ssh_accept_unknown_hosts": "cluster.ssh_accept_unknown_hosts",
    "base_image": "cluster.base_image",
    "bootstrap": "cluster.bootstrap",
    "docker_containers": "cluster.docker_containers",
    "partitions": "topic.partitions",
    "replication_factor": "topic.replication_factor",
    "time_limit": "time_limit",
    # the [workload] keys with a flag (workloads/workload.py FLAGS)
    **{flag: f"workload.{key}" for flag, key in workload_settings.FLAGS.items()},
    "nemesis": "nemesis.faults",
    "nemesis_interval": "nemesis.interval",
    "nemesis_schedule": "nemesis.schedule_file",
    "acks": "client.acks",
    "client": "client.kind",
    "kafka_library": "client.library",
    "idempotence": "client.idempotence",
    "seed": "seed",
    "results_dir": "results_dir",
    "test_name": "name",
    "final_wait": "final_wait",
    "checker": "checker.engine",
    # the [broker] keys with a flag (broker/config_keys.py)
    **{k.flag.replace("-", "_"): f"broker.{k.test}" for k in section_keys() if k.flag},
}


# --- applying values ------------------------------------------------------------------------------

def _owner(cfg: TestConfig, dotted: str) -> tuple[Any, str]:
    section, _, key = dotted.rpartition(".")
    return (getattr(cfg, section) if section else cfg), key


def set_key(cfg: TestConfig, dotted: str, raw: Any) -> None:
    """Set one dotted key ("broker.truncation", "seed") from a raw value (a TOML value or a flag's
    text); raise KeyError (no such setting) or ValueError (SettingError: a bad value)."""
    s = SCHEMA.get(dotted)
    if s is None:
        raise KeyError(dotted)
    target, key = _owner(cfg, dotted)
    setattr(target, key, s.convert(raw, text=True))


def with_values(cfg: TestConfig, values: dict[str, Any]) -> TestConfig:
    """A copy of `cfg` with dotted keys set ({"broker.truncation": "hw", "client.acks": 1}); raises as
    `set_key` does."""
    out = copy.deepcopy(cfg)
    for dotted, raw in values.items():
        set_key(out, dotted, raw)
    return out


def unknown_key(dotted: str) -> str:
    """The problem of a key that is no setting, with a suggestion when one is close."""
    return f"unknown key '{dotted}'{did_you_mean(dotted, [*SCHEMA, *SECTIONS])}"


def validate(cfg: TestConfig) -> list[tuple[str, str]]:
    """Every value against its declaration (choices, ranges), then the rules between settings.
    Returns (key, problem) pairs; empty when the configuration is usable."""
    problems: list[tuple[str, str]] = []
    c, t, b = cfg.cluster, cfg.topic, cfg.broker
    if not cfg.name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", cfg.name):
        problems.append(("name", f"must be letters, digits, '.', '_' or '-', got {cfg.name!r}"))
    for dotted, s in SCHEMA.items():
        target, key = _owner(cfg, dotted)
        problem = s.problem(getattr(target, key))
        if problem:
            problems.append((dotted, problem))
    if c.backend not in BACKENDS:
        problems.append(("cluster.backend", f"must be one of {', '.join(BACKENDS)}, got {c.backend!r}"))
    problems += _external_problems(cfg)
    if c.backend != "external" and not 1 <= t.replication_factor <= c.nodes:
        problems.append(("topic.replication_factor",
                         f"must be between 1 and the number of nodes ({c.nodes}), got {t.replication_factor}"))
    if topic_name_problem(t.name) is not None:
        problems.append(("topic.name", f"{topic_name_problem(t.name)} (got {t.name!r:.60})"))
    if cfg.client.idempotence and cfg.client.kind != "kafka":
        problems.append(("client.idempotence", f"needs client.kind = \"kafka\" (the native client and \"mixed\" "
                                               f"workers are not idempotent), got {cfg.client.kind!r}"))
    elif cfg.client.idempotence and cfg.client.acks != "all" and cfg.client.acks != -1:
        problems.append(("client.idempotence", f"needs client.acks = \"all\", as Kafka's producers do, got "
                                               f"{cfg.client.acks!r}"))
    coordinator = _coordinator_problem(cfg, list(cfg.nemesis.faults))
    if coordinator and not cfg.nemesis.schedule_file:   # a schedule file's steps: checked by preflight
        problems.append(("nemesis.faults", coordinator))
    if not 1 <= b.min_insync_replicas <= t.replication_factor:
        problems.append(("broker.min_insync_replicas",
                         f"must be between 1 and the replication factor ({t.replication_factor}), "
                         f"got {b.min_insync_replicas}"))
    return problems


def _external_problems(cfg: TestConfig) -> list[tuple[str, str]]:
    """The external backend (clusters/external.py): its bootstrap servers are required and parse, and
    its client is a Kafka client; `bootstrap` means nothing to the other backends. The
    replication factor is the cluster's business (CreateTopics refuses one it cannot place)."""
    from clusters.external import ClusterError, parse_bootstrap
    c = cfg.cluster
    from clusters.external_docker import parse_containers
    if c.backend != "external":
        return [(k, f"is only for the external backend (cluster.backend is {c.backend!r})")
                for k in ("cluster.bootstrap", "cluster.docker_containers") if getattr(c, k[8:])][:1]
    if not c.bootstrap:
        return [("cluster.bootstrap", "is required by the external backend (--bootstrap host:port[,host:port])")]
    try:
        parse_bootstrap(c.bootstrap)
    except ClusterError as exc:
        return [("cluster.bootstrap", str(exc))]
    if c.docker_containers:
        if c.nodes_file:
            return [("cluster.docker_containers", "and cluster.nodes_file exclude each other (faults go through "
                                                  "SSH or through Docker)")]
        try:
            parse_containers(c.docker_containers)
        except ClusterError as exc:
            return [("cluster.docker_containers", str(exc))]
    if cfg.client.kind != "kafka":
        return [("client.kind", f"must be \"kafka\" with the external backend (the cluster is reached only "
                                f"through Kafka clients), got {cfg.client.kind!r}")]
    return []


def external_defaults(cfg: TestConfig, given: set[str]) -> None:
    """An external cluster is workload-only unless faults were asked for: the default faults become
    none (asking for one is refused by preflight, naming the key). Its client is a Kafka client."""
    if cfg.cluster.backend == "external" and "nemesis.faults" not in given:
        cfg.nemesis.faults = []
    # reached only through Kafka clients (harness/lifecycle.py); a native client asked for is refused
    if cfg.cluster.backend == "external" and "client.kind" not in given:
        cfg.client.kind = "kafka"


def _where(path: Path, text: str | None, dotted: str) -> str:
    section, _, key = dotted.rpartition(".")
    return at_line(path, line_of(text, key, table=section))


def load_toml(path: Path | str, cfg: TestConfig | None = None) -> TestConfig:
    """Apply a TOML test file on top of `cfg` (defaults when None). Raise ConfigError naming file/key/line."""
    path = Path(path)
    cfg = cfg or TestConfig()
    text, data = read_toml(path, ConfigError, cannot_read="{path}: cannot read test file ({reason})")
    for top, value in data.items():
        if top in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{_where(path, text, top)}: key '{top}' must be a table [{top}]")
            for key, raw in value.items():
                _apply(cfg, path, text, f"{top}.{key}", raw)
        else:
            _apply(cfg, path, text, top, value)
    external_defaults(cfg, {f"{top}.{key}" for top, value in data.items() if top in SECTIONS for key in value})
    check(cfg, source=str(path), text=text)
    return cfg


def _apply(cfg: TestConfig, path: Path, text: str, dotted: str, raw: Any) -> None:
    try:
        set_key(cfg, dotted, raw)
    except KeyError:
        raise ConfigError(f"{_where(path, text, dotted)}: {unknown_key(dotted)}") from None
    except ValueError as exc:
        raise ConfigError(f"{_where(path, text, dotted)}: key '{dotted}' {exc}") from None


def apply_flags(cfg: TestConfig, flags: dict[str, Any]) -> TestConfig:
    """Apply command-line flags (FLAG_KEYS names; None = not given) on top of cfg."""
    for flag, raw in flags.items():
        if raw is None:
            continue
        dotted = FLAG_KEYS[flag]
        try:
            set_key(cfg, dotted, raw)
        except ValueError as exc:
            raise ConfigError(f"--{flag.replace('_', '-')}: {exc}") from None
    return cfg


def check(cfg: TestConfig, *, source: str = "configuration", text: str | None = None) -> None:
    """Raise ConfigError for the first cross-field problem, naming where it comes from."""
    problems = validate(cfg)
    if problems:
        key, problem = problems[0]
        where = _where(Path(source), text, key) if text is not None else source
        raise ConfigError(f"{where}: key '{key}' {problem}")


def build(test_file: str | Path | None = None, flags: dict[str, Any] | None = None) -> TestConfig:
    """The validate step of `highwater run`: defaults, then the test file, then the flags; every value,
    the cross-field rules, the backend choice and the schedule file checked (`preflight`) before
    anything is created. Raises ConfigError naming the flag or file:line and the key. Seed not filled in."""
    cfg = TestConfig()
    text = None
    if test_file is not None:
        cfg = load_toml(test_file, cfg)
        try:
            text = Path(test_file).read_text()
        except OSError:
            text = None
    given = {FLAG_KEYS[f]: f for f, v in (flags or {}).items() if v is not None}
    if flags:
        apply_flags(cfg, flags)
    external_defaults(cfg, set(given) | {k for k in ("nemesis.faults", "client.kind")
                                         if line_of(text, k.partition(".")[2], table=k.partition(".")[0])})

    def where(dotted: str) -> str:
        if dotted in given:
            return f"--{given[dotted].replace('_', '-')}"
        if test_file is not None:
            return _where(Path(test_file), text, dotted) if text is not None else str(test_file)
        return "command line" if given else "configuration"

    problems = validate(cfg)
    if problems:
        key, problem = problems[0]
        raise ConfigError(f"{where(key)}: key '{key}' {problem}")
    preflight(cfg, where=where)
    if cfg.nemesis.schedule_file:   # recorded absolute in test.json, so `highwater rerun` works from anywhere
        cfg.nemesis.schedule_file = str(Path(cfg.nemesis.schedule_file).resolve())
    return cfg


def preflight(cfg: TestConfig, *, where: Any = None, faults: list[str] | None = None) -> None:
    """What can be checked before a run directory exists, beyond `validate`: the backend can be loaded
    and given its options (the ssh nodes file parses and lists enough brokers), the schedule file reads
    and fits this cluster, and the faults it will inject can be injected here (partitions on the local
    backend need root and iptables/nft; power-loss needs the power-loss brokers). `where(dotted_key)`
    names where a key was set (a flag or file:line); `faults` replaces the configured faults and schedule
    (a scenario injects its own). Raises ConfigError."""
    where = where or (lambda _dotted: "configuration")
    try:
        backends.check_backend(cfg.cluster.backend, cfg.cluster, brokers=cfg.cluster.nodes)
    except backends.ConfigError as exc:
        raise ConfigError(f"{where('cluster.backend')}: key 'cluster.backend': {exc}") from None
    except Exception as exc:  # noqa: BLE001 - ClusterError and friends: one line naming the file
        key = "cluster.nodes_file" if cfg.cluster.backend in ("ssh", "external") else "cluster.backend"
        raise ConfigError(f"{where(key)}: key '{key}': {exc}") from None
    own_faults = faults is not None
    faults = list(faults) if own_faults else list(cfg.nemesis.faults)
    if cfg.nemesis.schedule_file and not own_faults:
        from nemesis.schedule import load_schedule
        nodes = ["c0", *(f"n{i}" for i in range(1, cfg.cluster.nodes + 1))]
        try:
            steps = load_schedule(Path(cfg.nemesis.schedule_file), nodes, partitions=cfg.topic.partitions,
                                  seed=cfg.seed or 0)
        except ConfigError as exc:
            raise ConfigError(f"{where('nemesis.schedule_file')}: key 'nemesis.schedule_file': {exc}") from None
        faults = sorted({s.fault for s in steps})
    fault_key = "nemesis.schedule_file" if cfg.nemesis.schedule_file and not own_faults else "nemesis.faults"
    coordinator = _coordinator_problem(cfg, faults)
    if coordinator:
        raise ConfigError(f"{where(fault_key)}: key '{fault_key}' {coordinator}")
    if needs_power_loss(faults) and cfg.broker_settings().get("power_loss") is not True:
        raise ConfigError(f"{where(fault_key)}: key '{fault_key}' injects power-loss faults, which need "
                          "broker.power_loss = true (--power-loss)")
    try:
        backends.check_faults(cfg.cluster.backend, on_the_cluster(expand_faults(faults)), cfg.cluster)
    except Exception as exc:  # noqa: BLE001 - ClusterError: no root, no iptables/nft
        raise ConfigError(f"{where(fault_key)}: key '{fault_key}' cannot be injected here: {exc}") from None


def from_dict(data: dict[str, Any]) -> TestConfig:
    """Rebuild a TestConfig from `to_dict()` output (test.json's "config")."""
    cfg = TestConfig()
    for top, value in data.items():
        if top in SECTIONS:
            for key, raw in value.items():
                set_key(cfg, f"{top}.{key}", raw)
        else:
            set_key(cfg, top, value)
    return cfg
