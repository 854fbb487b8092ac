"""controller.json: loading and validating the controller's configuration (docs/architecture.md).

Keys: host, port (0 = any free port; READY shows the real one), data_dir, log_file (required);
broker_session_timeout_ms (3000), unclean_leader_election (false), eligible_leader_replicas (false,
KIP-966), min_insync_replicas (1: the ISR size under which members leaving the ISR join the ELR; set it to
the brokers' value), topics ([] of
{"name", "partitions", "replication_factor"}, created once `expected_brokers` brokers are registered and live;
expected_brokers defaults to the largest replication factor listed), frame_read_timeout_ms (10000: a
frame whose length prefix arrived must be complete within this), max_replicas_per_broker (0: derived from
the controller's own RLIMIT_NOFILE by broker/limits.replica_budget, which assumes the brokers run with the
same fd limit, as they do on the local backend; set it when they do not). Topic names follow Kafka's rule
(broker/limits.topic_name_problem). Unknown keys are errors.
`load_controller_config(path)` raises `ConfigError` with one line naming the file and the key.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from broker.config_file import ConfigError, check_keys

from broker.controller.messages import TopicSpec
from broker.limits import replica_budget, topic_name_problem


@dataclass(frozen=True)
class ControllerConfig:
    host: str
    port: int
    data_dir: str
    log_file: str
    broker_session_timeout_ms: int = 3000
    unclean_leader_election: bool = False
    # KIP-966: eligible leader replicas and unclean-shutdown detection (docs/architecture.md "Safety levels")
    eligible_leader_replicas: bool = False
    min_insync_replicas: int = 1    # KIP-966: the brokers' min ISR, the threshold of the ELR rule
    topics: tuple[TopicSpec, ...] = field(default_factory=tuple)
    expected_brokers: int = 0       # 0: the largest replication factor in `topics`
    frame_read_timeout_ms: int = 10000
    max_replicas_per_broker: int = 0  # 0: replica_budget() of this process's fd limit

    @property
    def brokers_needed(self) -> int:
        return self.expected_brokers or max((t.replication_factor for t in self.topics), default=0)

    @property
    def replica_budget(self) -> int:
        """How many partition replicas CREATE_TOPICS may place on one broker."""
        return self.max_replicas_per_broker or replica_budget()


# the declared default of every optional scalar key; the harness takes its controller defaults from here
DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(ControllerConfig) if f.default is not MISSING}
_REQUIRED = ("host", "port", "data_dir", "log_file")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_controller_config(raw: Any, source: str) -> ControllerConfig:
    check_keys(raw, source, set(ControllerConfig.__dataclass_fields__), _REQUIRED)

    def bad(key: str, want: str) -> ConfigError:
        return ConfigError(f"{source}: key {key!r}: must be {want}, got {json.dumps(raw[key])[:60]}")

    for key in ("host", "data_dir", "log_file"):
        if not isinstance(raw[key], str) or not raw[key]:
            raise bad(key, "a non-empty string")
    if not _is_int(raw["port"]) or not 0 <= raw["port"] <= 65535:
        raise bad("port", "an integer in 0..65535")
    for key, minimum in (("broker_session_timeout_ms", 1), ("expected_brokers", 0), ("frame_read_timeout_ms", 1),
                         ("max_replicas_per_broker", 0), ("min_insync_replicas", 1)):
        if key in raw and (not _is_int(raw[key]) or raw[key] < minimum):
            raise bad(key, f"an integer >= {minimum}")
    for key in ("unclean_leader_election", "eligible_leader_replicas"):
        if key in raw and not isinstance(raw[key], bool):
            raise bad(key, "true or false")
    topics = []
    raw_topics = raw.get("topics", [])
    if not isinstance(raw_topics, list):
        raise bad("topics", "a list")
    for i, t in enumerate(raw_topics):
        where = f"{source}: key 'topics[{i}]'"
        if not isinstance(t, dict):
            raise ConfigError(f"{where}: must be an object with name, partitions, replication_factor")
        extra = set(t) - {"name", "partitions", "replication_factor"}
        if extra:
            raise ConfigError(f"{where}.{sorted(extra)[0]}: unknown key")
        if not isinstance(t.get("name"), str) or not t["name"]:
            raise ConfigError(f"{where}.name: must be a non-empty string")
        if topic_name_problem(t["name"]) is not None:
            raise ConfigError(f"{where}.name: {topic_name_problem(t['name'])}")
        for key in ("partitions", "replication_factor"):
            if not _is_int(t.get(key)) or t[key] < 1:
                raise ConfigError(f"{where}.{key}: must be a positive integer, got {json.dumps(t.get(key))}")
        topics.append(TopicSpec(t["name"], t["partitions"], t["replication_factor"]))
    values = {k: v for k, v in raw.items() if k != "topics"}
    return ControllerConfig(**values, topics=tuple(topics))


def load_controller_config(path: str | Path) -> ControllerConfig:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}") from None
    return parse_controller_config(raw, source)
