"""The topic-level settings a topic may be created with (Kafka's topic configs), declared once.

Kafka's CreateTopics and the controller's CREATE_TOPICS accept these and refuse any other; the controller
keeps them with the topic (its state file) and sends them to the brokers in the metadata, and the
brokers apply them. Anything a topic does not set follows the broker's own setting.

    message.timestamp.type   CreateTime | LogAppendTime   whose clock stamps a record: the producer's
                                                          (CreateTime) or the leader's at the append
                                                          (default: the broker's log_message_timestamp_type)
"""
from __future__ import annotations

from typing import Mapping

TIMESTAMP_TYPE = "message.timestamp.type"
LOG_APPEND_TIME, CREATE_TIME = "LogAppendTime", "CreateTime"

# name -> the values it may take
TOPIC_CONFIGS: dict[str, tuple[str, ...]] = {TIMESTAMP_TYPE: (CREATE_TIME, LOG_APPEND_TIME)}


def config_problem(name: object, value: object) -> str | None:
    """Why a topic config cannot be set, or None when it can."""
    if name not in TOPIC_CONFIGS:
        return f"unsupported topic config {name!r} (supported: {', '.join(sorted(TOPIC_CONFIGS))})"
    if value not in TOPIC_CONFIGS[name]:
        return f"{name} must be one of {', '.join(TOPIC_CONFIGS[name])}, got {value!r}"
    return None


def checked_configs(raw: object) -> dict[str, str]:
    """`raw` as a topic's configs (a map of config name to value); ValueError names the first problem."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"must be a map of topic configs, got {raw!r:.60}")
    for name, value in raw.items():
        problem = config_problem(name, value)
        if problem is not None:
            raise ValueError(problem)
    return dict(raw)


def log_append_time(configs: Mapping[str, str] | None, broker_default: bool) -> bool:
    """Whether a topic with these configs stamps records with the leader's clock."""
    if configs and TIMESTAMP_TYPE in configs:
        return configs[TIMESTAMP_TYPE] == LOG_APPEND_TIME
    return broker_default
