"""Kafka api keys and the version ranges the broker advertises in ApiVersions.

`SUPPORTED` is what `messages.decode_request` accepts and what an ApiVersions response lists; the
schema table (`schema.py`) holds exactly these versions (plus `SCHEMA_ONLY`, declared but not
advertised). librdkafka uses the v2 record format (MsgVer2) only with Produce v3+ and Fetch v4+, so
those are the lowest versions offered. Every range stops below the api's first flexible version except
ApiVersions v3, OffsetFetch v6-7 (v7 brings require_stable, which transactional consumers use) and
Metadata v9: librdkafka and kafka-python keep a partition's leader epoch from a
Metadata answer only from v9 on (KAFKA-9212), and only then send it as the current leader epoch that the
broker checks (KIP-320) in Fetch, ListOffsets and OffsetForLeaderEpoch (docs/kafka-protocol.md).
"""
from __future__ import annotations

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23

NAMES: dict[int, str] = {
    PRODUCE: "Produce",
    FETCH: "Fetch",
    LIST_OFFSETS: "ListOffsets",
    METADATA: "Metadata",
    OFFSET_COMMIT: "OffsetCommit",
    OFFSET_FETCH: "OffsetFetch",
    FIND_COORDINATOR: "FindCoordinator",
    JOIN_GROUP: "JoinGroup",
    HEARTBEAT: "Heartbeat",
    LEAVE_GROUP: "LeaveGroup",
    SYNC_GROUP: "SyncGroup",
    DESCRIBE_GROUPS: "DescribeGroups",
    LIST_GROUPS: "ListGroups",
    API_VERSIONS: "ApiVersions",
    CREATE_TOPICS: "CreateTopics",
    DELETE_TOPICS: "DeleteTopics",
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
    DELETE_TOPICS: (0, 3),
    INIT_PRODUCER_ID: (0, 4),
    # the classic group protocol (broker/server/coordinator.py), advertised together: librdkafka enables
    # groups only when every one of these overlaps its own ranges
    FIND_COORDINATOR: (0, 2),
    JOIN_GROUP: (2, 5),
    SYNC_GROUP: (0, 3),
    HEARTBEAT: (0, 3),
    LEAVE_GROUP: (0, 1),
    OFFSET_COMMIT: (2, 7),
    OFFSET_FETCH: (1, 7),
    LIST_GROUPS: (0, 2),
    DESCRIBE_GROUPS: (0, 4),
}

# the group protocol's apis (broker/server/group_handlers.py)
GROUP_APIS = (FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH,
              LIST_GROUPS, DESCRIBE_GROUPS)

# declared in schema.py (so tests and probes can speak them) but not advertised nor accepted
SCHEMA_ONLY: dict[int, tuple[int, int]] = {}


def supported(api_key: int, api_version: int) -> bool:
    rng = SUPPORTED.get(api_key)
    return rng is not None and rng[0] <= api_version <= rng[1]
