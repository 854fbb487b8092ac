"""A run's configuration in a few words (for the report header and the results index) and in full.

test.json's `config` is whatever the harness recorded, nested; the report flattens it to dotted keys.
The summary picks the settings that decide a run's outcome when they are present (truncation mode, acks,
min ISR, unclean election, faults, sizes), so it works for any config shape without knowing it. A run whose
workload went through a Kafka client (`client.kind = "kafka"`) says so right after acks, with its library.
"""
from __future__ import annotations

from typing import Any

from reports.jsonfast import dumps_compact

KEY_SETTINGS = (
    "truncation", "acks", "min_insync_replicas", "min.insync.replicas", "unclean_leader_election",
    "unclean.leader.election.enable", "faults", "flush", "power_loss", "time_limit", "time_limit_s", "duration_s",
    "replication_factor", "partitions", "nodes", "concurrency", "workers", "backend",
)
SHORT = {"min_insync_replicas": "min ISR", "min.insync.replicas": "min ISR", "unclean_leader_election": "unclean",
         "unclean.leader.election.enable": "unclean", "replication_factor": "RF", "time_limit": "time limit",
         "time_limit_s": "time limit", "duration_s": "duration", "power_loss": "power loss"}


def flatten(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts as (dotted.key, leaf value) pairs, in the config's own order."""
    if not isinstance(config, dict):
        return [(prefix or "config", config)]
    out: list[tuple[str, Any]] = []
    for k, v in config.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.extend(flatten(v, key))
        else:
            out.append((key, v))
    return out


def show(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in value):
        return ", ".join(str(x) for x in value) if len(value) <= 8 else f"{len(value)} items"
    if isinstance(value, (int, float)) or value is None:
        return "null" if value is None else str(value)
    return dumps_compact(value)


# settings a scenario's steps decide instead (its sends and faults are steps; it has no time limit)
NOT_FOR_SCENARIOS = {"faults", "time_limit", "time_limit_s", "duration_s", "concurrency", "workers"}


def summary(config: Any, limit: int = 8, *, kind: str = "run") -> list[tuple[str, str]]:
    """The settings that matter most, as (short name, text); the first scalars when none is known. Only
    settings that apply: an empty value is left out, and for a scenario run (`kind`) the ones its steps
    decide."""
    flat = flatten(config) if isinstance(config, dict) else []
    picked: list[tuple[str, str]] = []
    seen: set[str] = set()
    skip = NOT_FOR_SCENARIOS if kind == "scenario" else set()
    for name in KEY_SETTINGS:
        if name in skip:
            continue
        for key, value in flat:
            leaf = key.rsplit(".", 1)[-1]
            if value in ("", [], None):
                if leaf != "faults":
                    continue
                value = "none"             # a run without faults says so
            if leaf == name and SHORT.get(leaf, leaf) not in seen and not (isinstance(value, dict) and value):
                seen.add(SHORT.get(leaf, leaf))
                picked.append((SHORT.get(leaf, leaf), show(value)))
    client = _kafka_client(flat)
    if client is not None:
        after = next((i + 1 for i, (name, _) in enumerate(picked) if name == "acks"), 0)
        picked.insert(after, ("client", client))
    if not picked:
        picked = [(k, show(v)) for k, v in flat if not isinstance(v, (dict, list))][:limit]
    return picked[:limit]


def _kafka_client(flat: list[tuple[str, Any]]) -> str | None:
    """"kafka (confluent)" for a run through a Kafka client library, "mixed (native + confluent)" for one
    whose workers alternate; None for the native client or no record."""
    values = dict(flat)
    kind = values.get("client.kind")
    if kind not in ("kafka", "mixed"):
        return None
    library = values.get("client.library")
    library = library if isinstance(library, str) and library else "kafka"
    return f"kafka ({library})" if kind == "kafka" else f"mixed (native + {library})"
