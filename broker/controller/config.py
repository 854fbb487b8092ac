"""controller.json: loading and validating the controller's configuration.

The keys, their defaults and rules are broker/config_keys.py's (docs/architecture.md shows them). Of
note: `port` 0 is any free port (READY shows the real one); `topics` are created once `expected_brokers`
brokers are registered and live; `max_replicas_per_broker` 0 is derived from the controller's own
RLIMIT_NOFILE by broker/limits.replica_budget, which assumes the brokers run with the same fd limit, as
they do on the local backend. Topic names follow Kafka's rule (broker/limits.topic_name_problem).
Unknown keys are errors. `load_controller_config(path)` raises `ConfigError` with one line naming the
file and the key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.config_file import ConfigError, parse_keys, read_json
from broker.config_keys import config_class, keys_of
from broker.limits import replica_budget


__all__ = ["ConfigError", "ControllerConfig", "DEFAULTS", "load_controller_config", "parse_controller_config"]

KEYS = {k.name: k for k in keys_of("controller")}


def _brokers_needed(self) -> int:
    return self.expected_brokers or max((t.replication_factor for t in self.topics), default=0)


def _replica_budget(self) -> int:
    """How many partition replicas CREATE_TOPICS may place on one broker."""
    return self.max_replicas_per_broker or replica_budget()


ControllerConfig = config_class("ControllerConfig", KEYS.values(), namespace={
    "brokers_needed": property(_brokers_needed), "replica_budget": property(_replica_budget),
    "__module__": __name__})

# the declared default of every optional scalar key
DEFAULTS: dict[str, Any] = {name: k.default for name, k in KEYS.items()
                            if not k.setting.required and name != "topics"}


def parse_controller_config(raw: Any, source: str) -> ControllerConfig:
    return ControllerConfig(**parse_keys(raw, source, KEYS))


def load_controller_config(path: str | Path) -> ControllerConfig:
    return parse_controller_config(read_json(path), str(path))
