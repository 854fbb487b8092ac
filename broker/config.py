"""broker.json: loading and validating a broker node's configuration.

The keys, their defaults and rules are broker/config_keys.py's (the tables in docs/architecture.md are
made from the same list). `load_broker_config(path)` returns a frozen `BrokerConfig` with defaults filled
in, or raises `ConfigError` whose message is one line naming the file and the key, e.g.
`bad.json: key 'port': must be an integer, got 'x'`. `python -m broker node` turns that into exit
status 2. Unknown keys are errors too (a typo must not silently fall back to a default).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.config_file import ConfigError, parse_keys, read_json
from broker.config_keys import FLUSH_POLICIES, TRUNCATION_MODES, config_class, keys_of

__all__ = ["BrokerConfig", "ConfigError", "DEFAULTS", "FLUSH_POLICIES", "TRUNCATION_MODES", "load_broker_config",
           "validate_broker_config"]

KEYS = {k.name: k for k in keys_of("broker")}
BrokerConfig = config_class("BrokerConfig", KEYS.values(),
                            namespace={"node_name": property(lambda self: f"n{self.node_id}"),
                                       "__module__": __name__})

# the declared default of every optional key
DEFAULTS: dict[str, Any] = {name: k.default for name, k in KEYS.items() if not k.setting.required}


def validate_broker_config(raw: Any, source: str) -> BrokerConfig:
    """Validate a parsed broker.json object; `source` names it in error messages."""
    return BrokerConfig(**parse_keys(raw, source, KEYS))


def load_broker_config(path: str | Path) -> BrokerConfig:
    return validate_broker_config(read_json(path), str(path))
