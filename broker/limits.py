"""Limits on what clients and operators may ask of the brokers, checked where the input enters.

- Topic names follow Kafka's rule: 1..249 characters from `[a-zA-Z0-9._-]`, and not `.` or `..`
  (`topic_name_problem`). The controller's CREATE_TOPICS and controller.json, the harness's
  `[topic] name` and the broker's metadata handling all use this one function.
- File descriptors: every partition replica a broker holds keeps open files (the directory lock and the
  active segment, plus one per older segment), so a broker can hold at most `replica_budget()` replicas:
  a safe share (`FD_SHARE`) of its RLIMIT_NOFILE divided by `FDS_PER_REPLICA`. The rest is left for
  connections, checkpoints and the event log.
- One produce request appends at most `MAX_VALUES_PER_PRODUCE` values to a partition, over either protocol
  (a native PRODUCE's `values`, a Kafka Produce's one record batch).
- One fetch answer carries at most `FETCH_MAX_BYTES` of records (as stored; at least one record), over
  either protocol and for consumers and followers alike: records are read and encoded on the event loop
  that also sends the broker's heartbeats, and 4 MiB take about 150 ms (Kafka's broker setting
  fetch.max.bytes plays this role there, at 55 MiB). Clients and followers simply fetch again.
"""
from __future__ import annotations

import re

MAX_TOPIC_NAME = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")

FDS_PER_REPLICA = 4        # lock + active segment (2), and room for two older segments
FD_SHARE = 0.5             # at most half of the fd limit goes to partition replicas
MAX_VALUES_PER_PRODUCE = 100_000   # values one produce request appends to one partition
FETCH_MAX_BYTES = 4 * 1024 * 1024  # the most one fetch answer carries (see above)


def topic_name_problem(name: object) -> str | None:
    """None if `name` is a legal topic name, else a short reason (no trailing period)."""
    if not isinstance(name, str) or not name:
        return "a topic name must be a non-empty string"
    if len(name) > MAX_TOPIC_NAME:
        return f"a topic name has at most {MAX_TOPIC_NAME} characters, got {len(name)}"
    if name in (".", ".."):
        return f"a topic name cannot be {name!r}"
    if not _TOPIC_CHARS.fullmatch(name):
        return f"a topic name has only letters, digits, '.', '_' and '-', got {name[:60]!r}"
    return None


def fd_limit() -> int | None:
    """This process's soft RLIMIT_NOFILE, or None when unlimited or unknown."""
    try:
        import resource
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    return soft


def replica_budget(nofile: int | None = None) -> int:
    """How many partition replicas a process with `nofile` open files (default: this process's limit) may
    hold: FD_SHARE of the limit at FDS_PER_REPLICA each, at least 1. Unlimited -> 1,000,000."""
    if nofile is None:
        nofile = fd_limit()
    if nofile is None:
        return 1_000_000
    return max(1, int(nofile * FD_SHARE) // FDS_PER_REPLICA)


INTERNAL_PREFIX = "__"   # the topics the broker makes for itself (__consumer_offsets); their events name them


def internal_topic(topic: str) -> dict[str, str]:
    """The `topic` field of an event about a partition of an internal topic ({} for the test's topics,
    whose events have always named the partition alone)."""
    return {"topic": topic} if topic.startswith(INTERNAL_PREFIX) else {}
