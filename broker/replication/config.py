"""The replication settings the state machine needs: the keys broker/config_keys.py marks `replication`.

`ReplicationConfig` has one field per such key (named by the mark: `eligible_leader_replicas` is
`strict_min_isr_hw` here, the broker's half of KIP-966), checked by the keys' own rules, with the
demonstration truncation mode "kip-101" allowed too. `from_broker_config` takes them from a BrokerConfig.
"""
from __future__ import annotations

from broker.config_keys import DEMO_TRUNCATION_MODES, KEYS, TRUNCATION_MODES as FILE_MODES, check_values, \
    config_class

# every mode the state machine runs: the files' and the demonstration one
TRUNCATION_MODES = FILE_MODES + DEMO_TRUNCATION_MODES
REPLICATION_KEYS = tuple(k for k in KEYS if k.replication)


def _check(self) -> None:
    check_values(self, REPLICATION_KEYS, ValueError, "replication config: ", attr="replication", choices="machine")


def _from_broker_config(cls, broker_config) -> "ReplicationConfig":
    """Take the replication keys from a broker.config.BrokerConfig (or anything with those attributes;
    a key it lacks keeps its default)."""
    return cls(**{k.replication: getattr(broker_config, k.name) for k in REPLICATION_KEYS
                  if hasattr(broker_config, k.name)})


ReplicationConfig = config_class("ReplicationConfig", REPLICATION_KEYS, attr="replication", namespace={
    "__post_init__": _check, "from_broker_config": classmethod(_from_broker_config), "__module__": __name__})
