"""The test configuration: one dataclass tree with safe defaults, loadable from a TOML test file.

`highwater run` builds a `TestConfig` from (1) the defaults below, (2) an optional TOML test file and
(3) command-line flags, later ones overriding earlier ones. Every value is validated here; a bad one
raises `ConfigError` whose one-line message names the file, the key and (when it can be found) the line.

TOML layout (every key optional):

    name = "chaos"            time_limit = 30        seed = 42          results_dir = "results"
    final_wait = 60
    [cluster]   backend = "local"   nodes = 3
    [topic]     name = "hw"  partitions = 3  replication_factor = 3
    [broker]    truncation = "leader-epoch"  min_insync_replicas = 2  unclean_leader_election = false
                flush = "always"  flush_interval_ms = 1000  power_loss = false  ... (extra broker keys)
    [client]    acks = "all"  timeout = 2.0  retries = 0
    [workload]  name = "producer-consumer"  rate = 100.0  concurrency = 4  consumers = 2
    [nemesis]   faults = ["kill", "partition"]  interval = 5.0  schedule_file = ""
    [checker]   engine = "spark"  allow = []  fail_on = []
"""
from __future__ import annotations

import dataclasses
import random
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRUNCATION_MODES = ("hw", "leader-epoch")
FLUSH_POLICIES = ("always", "interval", "never")
WORKLOADS = ("producer", "producer-consumer")
# the faults the nemesis knows (nemesis/ owns them: nemesis.FAULTS); validated here so a typo fails early
NEMESIS_FAULTS = ("kill", "kill-leader", "kill-controller", "pause", "pause-leader", "pause-controller",
                  "power-loss", "power-loss-leader", "partition", "partition-isolate", "partition-halves",
                  "partition-ring", "partition-leader", "partition-bridge", "partition-one-way",
                  "partition-controller")
ACKS = (0, 1, "all")
CHECKER_ENGINES = ("spark", "reference")


class ConfigError(ValueError):
    """A bad setting. The message is one line naming where (file:line or flag) and the key."""


@dataclass
class ClusterConfig:
    backend: str = "local"
    nodes: int = 3
    nodes_file: str = ""                   # ssh backend: the nodes file (clusters/ssh.py)
    ssh_accept_unknown_hosts: bool = False  # ssh backend: accept host keys not in known_hosts
    base_image: str = ""                   # docker backend: an existing base image instead of debootstrap
    docker_kill: str = "process"           # docker backend: kill = SIGKILL of the process, or "node" (docker kill)


@dataclass
class TopicConfig:
    name: str = "hw"
    partitions: int = 3
    replication_factor: int = 3


@dataclass
class BrokerConfig:
    truncation: str = "leader-epoch"
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    flush: str = "always"
    flush_interval_ms: int = 1000
    power_loss: bool = False
    session_timeout_ms: int = 3000
    replica_lag_time_max_ms: int = 2000
    replica_fetch_wait_max_ms: int = 200
    hw_checkpoint_interval_ms: int = 500
    extra: dict = field(default_factory=dict)   # any other broker.json key, passed through unchanged


@dataclass
class ClientConfig:
    acks: int | str = "all"
    timeout: float = 2.0
    retries: int = 0


@dataclass
class WorkloadConfig:
    name: str = "producer-consumer"
    rate: float = 100.0          # send operations per second, all producers together
    concurrency: int = 4         # producer workers
    consumers: int = 2           # consumer workers (producer-consumer only)
    final_read_chunk: int = 1000


@dataclass
class NemesisConfig:
    faults: list = field(default_factory=lambda: ["kill", "partition"])
    interval: float = 5.0        # seconds between nemesis decisions
    schedule_file: str = ""      # explicit schedule (nemesis/ format); overrides the random schedule


@dataclass
class CheckerConfig:
    engine: str = "spark"        # "spark" (the PySpark checker) or "reference" (single process)
    allow: list = field(default_factory=list)     # anomaly kinds that do not fail the run
    fail_on: list = field(default_factory=list)   # anomaly kinds that do (checkers/policy.py)


@dataclass
class TestConfig:
    name: str = "chaos"
    time_limit: float = 30.0
    seed: int | None = None
    results_dir: str = "results"
    final_wait: float = 60.0     # bound on the final phase's wait for a healthy cluster
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    topic: TopicConfig = field(default_factory=TopicConfig)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    nemesis: NemesisConfig = field(default_factory=NemesisConfig)
    checker: CheckerConfig = field(default_factory=CheckerConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_seed(self) -> "TestConfig":
        """Fill in a random seed when none was given, so every run records the seed it used."""
        if self.seed is None:
            self.seed = random.SystemRandom().randrange(1, 2**31)
        return self

    # --- what the cluster backend needs ----------------------------------------------------------
    def broker_settings(self) -> dict[str, Any]:
        b = self.broker
        settings = {
            "truncation": b.truncation,
            "min_insync_replicas": b.min_insync_replicas,
            "flush": b.flush,
            "flush_interval_ms": b.flush_interval_ms,
            # power-loss faults need brokers running in the power-loss emulation
            "power_loss": b.power_loss or any(f.startswith("power-loss") for f in self.nemesis.faults),
            "replica_lag_time_max_ms": b.replica_lag_time_max_ms,
            "replica_fetch_wait_max_ms": b.replica_fetch_wait_max_ms,
            "hw_checkpoint_interval_ms": b.hw_checkpoint_interval_ms,
        }
        settings.update(b.extra)
        return settings

    def controller_settings(self) -> dict[str, Any]:
        return {
            "broker_session_timeout_ms": self.broker.session_timeout_ms,
            "unclean_leader_election": self.broker.unclean_leader_election,
            "topics": [{"name": self.topic.name, "partitions": self.topic.partitions,
                        "replication_factor": self.topic.replication_factor}],
        }


SECTIONS = {"cluster": ClusterConfig, "topic": TopicConfig, "broker": BrokerConfig,
            "client": ClientConfig, "workload": WorkloadConfig, "nemesis": NemesisConfig,
            "checker": CheckerConfig}

# command-line flag -> dotted key (the flags of `highwater run`; harness/run_command.py uses this table)
FLAG_KEYS = {
    "nodes": "cluster.nodes",
    "backend": "cluster.backend",
    "nodes_file": "cluster.nodes_file",
    "ssh_accept_unknown_hosts": "cluster.ssh_accept_unknown_hosts",
    "base_image": "cluster.base_image",
    "partitions": "topic.partitions",
    "replication_factor": "topic.replication_factor",
    "time_limit": "time_limit",
    "rate": "workload.rate",
    "concurrency": "workload.concurrency",
    "consumers": "workload.consumers",
    "workload": "workload.name",
    "nemesis": "nemesis.faults",
    "nemesis_interval": "nemesis.interval",
    "nemesis_schedule": "nemesis.schedule_file",
    "truncation": "broker.truncation",
    "acks": "client.acks",
    "min_insync_replicas": "broker.min_insync_replicas",
    "unclean_election": "broker.unclean_leader_election",
    "flush": "broker.flush",
    "power_loss": "broker.power_loss",
    "seed": "seed",
    "results_dir": "results_dir",
    "test_name": "name",
    "final_wait": "final_wait",
    "checker": "checker.engine",
}


# --- parsing single values ------------------------------------------------------------------------

def parse_acks(raw: Any) -> int | str:
    if isinstance(raw, str):
        s = raw.strip().lower()
        if s in ("all", "-1"):
            return "all"
        if s in ("0", "1"):
            return int(s)
    elif isinstance(raw, int) and not isinstance(raw, bool):
        if raw == -1:
            return "all"
        if raw in (0, 1):
            return raw
    raise ValueError(f"must be 0, 1 or \"all\", got {raw!r}")


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
        if not isinstance(item, str) or item not in NEMESIS_FAULTS:
            raise ValueError(f"unknown fault {item!r} (known: {', '.join(NEMESIS_FAULTS)})")
        if item not in out:
            out.append(item)
    return out


def _coerce(section: str, key: str, default: Any, raw: Any) -> Any:
    """Convert raw (TOML value or flag string) to the type of `default`'s field; raise ValueError."""
    dotted = f"{section}.{key}" if section else key
    if dotted == "client.acks":
        return parse_acks(raw)
    if dotted == "nemesis.faults":
        return parse_faults(raw)
    if dotted in ("checker.allow", "checker.fail_on"):
        if isinstance(raw, str):
            raw = [s.strip() for s in raw.split(",") if s.strip()]
        if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
            raise ValueError(f"must be a list of anomaly kinds, got {raw!r}")
        from rundir.formats import ANOMALY_KINDS
        for k in raw:
            if k not in ANOMALY_KINDS:
                raise ValueError(f"unknown anomaly kind {k!r} (known: {', '.join(ANOMALY_KINDS)})")
        return list(raw)
    if dotted == "seed":
        if raw is None:
            return None
        return _as_int(raw, minimum=0)
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false", "yes", "no", "1", "0"):
            return raw.lower() in ("true", "yes", "1")
        raise ValueError(f"must be true or false, got {raw!r}")
    if isinstance(default, int):
        return _as_int(raw, minimum=0)
    if isinstance(default, float):
        if isinstance(raw, bool):
            raise ValueError(f"must be a number, got {raw!r}")
        try:
            v = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"must be a number, got {raw!r}") from None
        if v < 0 or v != v:
            raise ValueError(f"must be a non-negative number, got {raw!r}")
        return v
    if isinstance(default, str):
        if not isinstance(raw, str):
            raise ValueError(f"must be a string, got {raw!r}")
        return raw
    if isinstance(default, dict):
        if not isinstance(raw, dict):
            raise ValueError(f"must be a table, got {raw!r}")
        return dict(raw)
    raise ValueError(f"unsupported value {raw!r}")


def _as_int(raw: Any, *, minimum: int) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"must be an integer, got {raw!r}")
    if isinstance(raw, int):
        v = raw
    elif isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
        v = int(raw)
    else:
        raise ValueError(f"must be an integer, got {raw!r}")
    if v < minimum:
        raise ValueError(f"must be at least {minimum}, got {v}")
    return v


# --- applying values ------------------------------------------------------------------------------

def set_key(cfg: TestConfig, dotted: str, raw: Any) -> None:
    """Set one dotted key ("broker.truncation", "seed") from a raw value; raise KeyError/ValueError."""
    parts = dotted.split(".")
    if len(parts) == 1:
        section, key, target = "", parts[0], cfg
    elif len(parts) == 2 and parts[0] in SECTIONS:
        section, key, target = parts[0], parts[1], getattr(cfg, parts[0])
    else:
        raise KeyError(dotted)
    names = {f.name for f in dataclasses.fields(target)}
    if key not in names or (section == "" and key in SECTIONS):
        raise KeyError(dotted)
    setattr(target, key, _coerce(section, key, getattr(target, key), raw))


def validate(cfg: TestConfig) -> list[tuple[str, str]]:
    """Cross-field checks. Returns (key, problem) pairs; empty when the configuration is usable."""
    problems: list[tuple[str, str]] = []
    c, t, b, w, n = cfg.cluster, cfg.topic, cfg.broker, cfg.workload, cfg.nemesis
    if not cfg.name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", cfg.name):
        problems.append(("name", f"must be letters, digits, '.', '_' or '-', got {cfg.name!r}"))
    if cfg.time_limit <= 0:
        problems.append(("time_limit", f"must be above 0, got {cfg.time_limit}"))
    if c.nodes < 1:
        problems.append(("cluster.nodes", f"must be at least 1, got {c.nodes}"))
    from harness.backends import BACKENDS  # the registry of backend names (imports no backend)
    if c.backend not in BACKENDS:
        problems.append(("cluster.backend", f"must be one of {', '.join(BACKENDS)}, got {c.backend!r}"))
    if t.partitions < 1:
        problems.append(("topic.partitions", f"must be at least 1, got {t.partitions}"))
    if not 1 <= t.replication_factor <= c.nodes:
        problems.append(("topic.replication_factor",
                         f"must be between 1 and the number of nodes ({c.nodes}), got {t.replication_factor}"))
    from broker.limits import topic_name_problem  # Kafka's rule, the one the controller applies
    if topic_name_problem(t.name) is not None:
        problems.append(("topic.name", f"{topic_name_problem(t.name)} (got {t.name!r:.60})"))
    if b.truncation not in TRUNCATION_MODES:
        problems.append(("broker.truncation", f"must be one of {', '.join(TRUNCATION_MODES)}, got {b.truncation!r}"))
    if b.flush not in FLUSH_POLICIES:
        problems.append(("broker.flush", f"must be one of {', '.join(FLUSH_POLICIES)}, got {b.flush!r}"))
    if not 1 <= b.min_insync_replicas <= t.replication_factor:
        problems.append(("broker.min_insync_replicas",
                         f"must be between 1 and the replication factor ({t.replication_factor}), "
                         f"got {b.min_insync_replicas}"))
    if b.session_timeout_ms < 100:
        problems.append(("broker.session_timeout_ms", f"must be at least 100, got {b.session_timeout_ms}"))
    if cfg.client.timeout <= 0:
        problems.append(("client.timeout", f"must be above 0, got {cfg.client.timeout}"))
    if w.name not in WORKLOADS:
        problems.append(("workload.name", f"must be one of {', '.join(WORKLOADS)}, got {w.name!r}"))
    if w.rate <= 0:
        problems.append(("workload.rate", f"must be above 0, got {w.rate}"))
    if w.concurrency < 1:
        problems.append(("workload.concurrency", f"must be at least 1, got {w.concurrency}"))
    if w.final_read_chunk < 1:
        problems.append(("workload.final_read_chunk", f"must be at least 1, got {w.final_read_chunk}"))
    if n.interval <= 0:
        problems.append(("nemesis.interval", f"must be above 0, got {n.interval}"))
    if cfg.checker.engine not in CHECKER_ENGINES:
        problems.append(("checker.engine", f"must be one of {', '.join(CHECKER_ENGINES)}, got {cfg.checker.engine!r}"))
    if cfg.final_wait <= 0:
        problems.append(("final_wait", f"must be above 0, got {cfg.final_wait}"))
    return problems


def _line_of(text: str, section: str, key: str) -> int | None:
    """Best-effort 1-based line of `key` inside `[section]` (or at top level) of a TOML text."""
    current = ""
    for no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        m = re.match(r"^\[\s*([A-Za-z0-9_.-]+)\s*\]", s)
        if m:
            current = m.group(1)
            if not key and current == section:
                return no
            continue
        if current == section and re.match(rf"^\"?{re.escape(key)}\"?\s*=", s):
            return no
    return None


def _where(path: Path, text: str, dotted: str) -> str:
    section, _, key = dotted.rpartition(".")
    line = _line_of(text, section, key)
    return f"{path}:{line}" if line else str(path)


def load_toml(path: Path | str, cfg: TestConfig | None = None) -> TestConfig:
    """Apply a TOML test file on top of `cfg` (defaults when None). Raise ConfigError naming file/key/line."""
    path = Path(path)
    cfg = cfg or TestConfig()
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read test file ({exc.strerror or exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    for top, value in data.items():
        if top in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{_where(path, text, top)}: key '{top}' must be a table [{top}]")
            for key, raw in value.items():
                _apply(cfg, path, text, f"{top}.{key}", raw)
        else:
            _apply(cfg, path, text, top, value)
    check(cfg, source=str(path), text=text)
    return cfg


def _apply(cfg: TestConfig, path: Path, text: str, dotted: str, raw: Any) -> None:
    try:
        set_key(cfg, dotted, raw)
    except KeyError:
        raise ConfigError(f"{_where(path, text, dotted)}: unknown key '{dotted}'") from None
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
    from harness import backends
    try:
        backends.check_backend(cfg.cluster.backend, cfg.cluster, brokers=cfg.cluster.nodes)
    except backends.BackendUnavailable as exc:
        raise ConfigError(f"{where('cluster.backend')}: key 'cluster.backend': {exc}") from None
    except Exception as exc:  # noqa: BLE001 - NodesFileError and friends: one line naming the file
        key = "cluster.nodes_file" if cfg.cluster.backend == "ssh" else "cluster.backend"
        raise ConfigError(f"{where(key)}: key '{key}': {exc}") from None
    own_faults = faults is not None
    faults = list(faults) if own_faults else list(cfg.nemesis.faults)
    if cfg.nemesis.schedule_file and not own_faults:
        from nemesis.schedule import ScheduleError, load_schedule
        nodes = ["c0", *(f"n{i}" for i in range(1, cfg.cluster.nodes + 1))]
        try:
            steps = load_schedule(Path(cfg.nemesis.schedule_file), nodes, partitions=cfg.topic.partitions,
                                  seed=cfg.seed or 0)
        except ScheduleError as exc:
            raise ConfigError(f"{where('nemesis.schedule_file')}: key 'nemesis.schedule_file': {exc}") from None
        faults = sorted({s.fault for s in steps})
    fault_key = "nemesis.schedule_file" if cfg.nemesis.schedule_file and not own_faults else "nemesis.faults"
    if any(f.startswith("power-loss") for f in faults) and cfg.broker_settings().get("power_loss") is not True:
        raise ConfigError(f"{where(fault_key)}: key '{fault_key}' injects power-loss faults, which need "
                          "broker.power_loss = true (--power-loss)")
    try:
        backends.check_faults(cfg.cluster.backend, faults)
    except Exception as exc:  # noqa: BLE001 - FirewallUnavailable: no root, no iptables/nft
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
