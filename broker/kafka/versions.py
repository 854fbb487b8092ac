"""Kafka api keys and the version ranges the broker advertises in ApiVersions.

`SUPPORTED` is what `messages.decode_request` accepts and what an ApiVersions response lists; the
schema table (`schema.py`) holds exactly these versions (plus `SCHEMA_ONLY`, declared but not
advertised). librdkafka uses the v2 record format (MsgVer2) only with Produce v3+ and Fetch v4+, so
those are the lowest versions offered. Every range stops below the api's first flexible version except
ApiVersions v3 and Metadata v9: librdkafka and kafka-python keep a partition's leader epoch from a
Metadata answer only from v9 on (KAFKA-9212), and only then send it as the current leader epoch that the
broker checks (KIP-320) in Fetch, ListOffsets and OffsetForLeaderEpoch (docs/kafka-protocol.md).
"""
from __future__ import annotations

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
FIND_COORDINATOR = 10
API_VERSIONS = 18
CREATE_TOPICS = 19
CREATE_PARTITIONS = 37
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23

NAMES: dict[int, str] = {
    PRODUCE: "Produce",
    FETCH: "Fetch",
    LIST_OFFSETS: "ListOffsets",
    METADATA: "Metadata",
    FIND_COORDINATOR: "FindCoordinator",
    API_VERSIONS: "ApiVersions",
    CREATE_TOPICS: "CreateTopics",
    CREATE_PARTITIONS: "CreatePartitions",
    INIT_PRODUCER_ID: "InitProducerId",
    OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch",
}

# api key -> (min, max) advertised, inclusive
SUPPORTED: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 3),
    METADATA: (1, 9),
    PRODUCE: (3, 8),
    FETCH: (4, 11),
    LIST_OFFSETS: (1, 5),
    OFFSET_FOR_LEADER_EPOCH: (0, 3),
    CREATE_TOPICS: (2, 4),
    CREATE_PARTITIONS: (0, 1),
    INIT_PRODUCER_ID: (0, 4),
}

# declared in schema.py (so tests and probes can speak them) but not advertised nor accepted
SCHEMA_ONLY: dict[int, tuple[int, int]] = {
    FIND_COORDINATOR: (0, 3),
}


def supported(api_key: int, api_version: int) -> bool:
    rng = SUPPORTED.get(api_key)
    return rng is not None and rng[0] <= api_version <= rng[1]
