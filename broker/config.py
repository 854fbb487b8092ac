"""broker.json: loading and validating a broker node's configuration (keys in docs/architecture.md).

`load_broker_config(path)` returns a frozen `BrokerConfig` with defaults filled in, or raises
`ConfigError` whose message is one line naming the file and the key, e.g.
`bad.json: key 'port': must be an integer in 0..65535, got "x"`. `python -m broker node` turns that into
exit status 2. Unknown keys are errors too (a typo must not silently fall back to a default).
"""
from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from broker.config_file import ConfigError, check_keys

TRUNCATION_MODES = ("hw", "leader-epoch")
FLUSH_POLICIES = ("always", "interval", "never")


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int
    host: str
    port: int
    controller_host: str
    controller_port: int
    data_dir: str
    log_file: str
    truncation: str = "leader-epoch"
    min_insync_replicas: int = 1
    flush: str = "always"
    flush_interval_ms: int = 1000
    power_loss: bool = False
    replica_lag_time_max_ms: int = 2000
    replica_fetch_wait_max_ms: int = 200
    replica_fetch_max_records: int = 1000
    heartbeat_interval_ms: int = 500
    hw_checkpoint_interval_ms: int = 500
    segment_records: int = 100000
    # safety levels (docs/architecture.md "Safety levels"): KIP-320 fencing of follower requests by
    # leader epoch (Kafka >= 2.1); KIP-966's strict min-ISR high watermark (the controller's half, eligible
    # leader replicas and unclean-shutdown handling, is the controller's setting of the same name)
    fetch_fencing: bool = True
    eligible_leader_replicas: bool = False

    @property
    def node_name(self) -> str:
        return f"n{self.node_id}"


# the declared default of every optional key; the harness takes its broker defaults from here
DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(BrokerConfig) if f.default is not MISSING}


# key -> (kind, check, description of the check); kind is one of "int", "str", "bool"
_RULES: dict[str, tuple[str, Any, str]] = {
    "node_id": ("int", lambda v: v >= 1, "a positive integer"),
    "host": ("str", lambda v: bool(v), "a non-empty string"),
    "port": ("int", lambda v: 0 <= v <= 65535, "an integer in 0..65535"),
    "controller_host": ("str", lambda v: bool(v), "a non-empty string"),
    "controller_port": ("int", lambda v: 1 <= v <= 65535, "an integer in 1..65535"),
    "data_dir": ("str", lambda v: bool(v), "a non-empty string"),
    "log_file": ("str", lambda v: bool(v), "a non-empty string"),
    "truncation": ("str", lambda v: v in TRUNCATION_MODES, "one of " + ", ".join(map(repr, TRUNCATION_MODES))),
    "min_insync_replicas": ("int", lambda v: v >= 1, "a positive integer"),
    "flush": ("str", lambda v: v in FLUSH_POLICIES, "one of " + ", ".join(map(repr, FLUSH_POLICIES))),
    "flush_interval_ms": ("int", lambda v: v >= 1, "a positive integer"),
    "power_loss": ("bool", lambda v: True, "true or false"),
    "replica_lag_time_max_ms": ("int", lambda v: v >= 1, "a positive integer"),
    "replica_fetch_wait_max_ms": ("int", lambda v: v >= 0, "a non-negative integer"),
    "replica_fetch_max_records": ("int", lambda v: v >= 1, "a positive integer"),
    "heartbeat_interval_ms": ("int", lambda v: v >= 1, "a positive integer"),
    "hw_checkpoint_interval_ms": ("int", lambda v: v >= 1, "a positive integer"),
    "segment_records": ("int", lambda v: v >= 1, "a positive integer"),
    "fetch_fencing": ("bool", lambda v: True, "true or false"),
    "eligible_leader_replicas": ("bool", lambda v: True, "true or false"),
}
_REQUIRED = tuple(f.name for f in fields(BrokerConfig) if f.default is MISSING)


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    return isinstance(value, bool)


def validate_broker_config(raw: Any, source: str) -> BrokerConfig:
    """Validate a parsed broker.json object; `source` names it in error messages."""
    check_keys(raw, source, _RULES, _REQUIRED)
    for key, value in raw.items():
        kind, check, what = _RULES[key]
        if not _type_ok(kind, value) or not check(value):
            raise ConfigError(f"{source}: key {key!r}: must be {what}, got {json.dumps(value)}")
    return BrokerConfig(**raw)


def load_broker_config(path: str | Path) -> BrokerConfig:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
    return validate_broker_config(raw, str(path))
