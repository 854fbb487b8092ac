"""Kafka protocol error codes (the subset the broker's Kafka handlers answer with) and the mapping from the
broker's own error strings (broker/replication/errors.py, broker/server/partitions.py, the controller's
codes in broker/controller/messages.py) to them.

Codes and names follow Apache Kafka's `Errors` table; `NAMES` maps a code back to its name for messages.
"""
from __future__ import annotations

UNKNOWN_SERVER_ERROR = -1                 # a handler bug or an error without a better code
NONE = 0                                  # success
OFFSET_OUT_OF_RANGE = 1                   # fetch offset outside [log start, log end]
CORRUPT_MESSAGE = 2                       # a produced batch fails its CRC-32C or cannot be parsed
UNKNOWN_TOPIC_OR_PARTITION = 3            # no such topic/partition (on this broker, for data requests)
LEADER_NOT_AVAILABLE = 5                  # the partition has no leader right now (metadata)
NOT_LEADER_OR_FOLLOWER = 6                # this broker is not the partition's leader
REQUEST_TIMED_OUT = 7                     # acks=all produce not replicated in time: outcome unknown
BROKER_NOT_AVAILABLE = 8                  # a broker the request needs is not reachable
MESSAGE_TOO_LARGE = 10                    # a record or batch over the broker's limits
OFFSET_METADATA_TOO_LARGE = 12            # an OffsetCommit's metadata string over offset.metadata.max.bytes
COORDINATOR_LOAD_IN_PROGRESS = 14         # the group's coordinator is still loading its offsets partition
COORDINATOR_NOT_AVAILABLE = 15            # no coordinator now (offsets topic missing, leaderless, not writable)
NOT_COORDINATOR = 16                      # this broker does not coordinate the group (any more)
INVALID_TOPIC_EXCEPTION = 17              # a topic name outside Kafka's rule
NOT_ENOUGH_REPLICAS = 19                  # acks=all and the ISR is below min.insync.replicas: not appended
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20     # appended, but the ISR fell below min.insync.replicas
INVALID_REQUIRED_ACKS = 21                # acks other than 0, 1, -1
ILLEGAL_GENERATION = 22                   # a group request from another generation than the group's
INCONSISTENT_GROUP_PROTOCOL = 23          # a member's protocol type or protocols do not fit the group's
INVALID_GROUP_ID = 24                     # an empty group id
UNKNOWN_MEMBER_ID = 25                    # the group has no such member (expired, left, never joined)
INVALID_SESSION_TIMEOUT = 26              # session timeout outside the broker's group_*_session_timeout_ms
REBALANCE_IN_PROGRESS = 27                # the group is rebalancing: join again
INVALID_COMMIT_OFFSET_SIZE = 28           # the commit's records do not fit the offsets topic
UNSUPPORTED_VERSION = 35                  # ApiVersions asked in a version this broker does not speak
TOPIC_ALREADY_EXISTS = 36                 # CreateTopics of an existing topic
INVALID_PARTITIONS = 37                   # CreateTopics with a bad partition count
INVALID_REPLICATION_FACTOR = 38           # CreateTopics with more replicas than brokers
INVALID_REPLICA_ASSIGNMENT = 39           # CreateTopics with a manual assignment (not supported)
INVALID_CONFIG = 40                       # CreateTopics with topic configs (not supported)
NOT_CONTROLLER = 41                       # the controller could not be reached to create a topic
INVALID_REQUEST = 42                      # a well-formed request asking for something impossible
OUT_OF_ORDER_SEQUENCE_NUMBER = 45         # an idempotent batch that does not continue its producer's sequence
INVALID_PRODUCER_EPOCH = 47               # an idempotent batch from a producer epoch a newer one fenced
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43       # transactional / control batches: not supported
KAFKA_STORAGE_ERROR = 56                  # this replica's disk failed or its log is being recovered
FETCH_SESSION_ID_NOT_FOUND = 70           # an incremental fetch for a session this broker never made
FENCED_LEADER_EPOCH = 74                  # the request's current leader epoch is older than the leader's
UNKNOWN_LEADER_EPOCH = 75                 # the request's current leader epoch is newer than the leader's
UNSUPPORTED_COMPRESSION_TYPE = 76         # a compressed batch (the broker stores uncompressed values)
MEMBER_ID_REQUIRED = 79                   # JoinGroup v4+ without a member id: join again with the one given
INVALID_RECORD = 87                       # a produce without records, or with several batches for one partition

NAMES: dict[int, str] = {v: k for k, v in dict(globals()).items() if k.isupper() and isinstance(v, int)}

# the broker's error strings -> Kafka codes
_BROKER_CODES: dict[str, int] = {
    "NONE": NONE,
    "NOT_LEADER": NOT_LEADER_OR_FOLLOWER,
    "NOT_ASSIGNED_REPLICA": NOT_LEADER_OR_FOLLOWER,
    "NOT_ENOUGH_REPLICAS": NOT_ENOUGH_REPLICAS,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    "FENCED_LEADER_EPOCH": FENCED_LEADER_EPOCH,
    "UNKNOWN_LEADER_EPOCH": UNKNOWN_LEADER_EPOCH,
    "OFFSET_OUT_OF_RANGE": OFFSET_OUT_OF_RANGE,
    "UNKNOWN_PARTITION": UNKNOWN_TOPIC_OR_PARTITION,
    "REQUEST_TIMED_OUT": REQUEST_TIMED_OUT,
    "KAFKA_STORAGE_ERROR": KAFKA_STORAGE_ERROR,
    "INVALID_REQUEST": INVALID_REQUEST,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": OUT_OF_ORDER_SEQUENCE_NUMBER,
    "INVALID_PRODUCER_EPOCH": INVALID_PRODUCER_EPOCH,
    # controller codes (CreateTopics)
    "TOPIC_ALREADY_EXISTS": TOPIC_ALREADY_EXISTS,
    "INVALID_TOPIC_EXCEPTION": INVALID_TOPIC_EXCEPTION,
    "INVALID_PARTITIONS": INVALID_PARTITIONS,
    "INVALID_REPLICATION_FACTOR": INVALID_REPLICATION_FACTOR,
    "CONTROLLER_NOT_AVAILABLE": NOT_CONTROLLER,
    "LEADER_NOT_AVAILABLE": LEADER_NOT_AVAILABLE,
    "BROKER_NOT_AVAILABLE": BROKER_NOT_AVAILABLE,
    # the group coordinator's (broker/groups, broker/server/coordinator.py): Kafka's own names
    **{name: code for name, code in dict(globals()).items() if name in (
        "OFFSET_METADATA_TOO_LARGE", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
        "ILLEGAL_GENERATION", "INCONSISTENT_GROUP_PROTOCOL", "INVALID_GROUP_ID", "UNKNOWN_MEMBER_ID",
        "INVALID_SESSION_TIMEOUT", "REBALANCE_IN_PROGRESS", "INVALID_COMMIT_OFFSET_SIZE", "MEMBER_ID_REQUIRED",
        "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_SERVER_ERROR")},
}


def kafka_code(broker_error: str | None) -> int:
    """The Kafka error code for one of the broker's error strings (None is success); an unknown string
    is UNKNOWN_SERVER_ERROR."""
    if broker_error is None:
        return NONE
    return _BROKER_CODES.get(str(broker_error), UNKNOWN_SERVER_ERROR)
