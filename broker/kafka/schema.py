"""Our declarative table of the Kafka request/response schemas the broker speaks.

One `Message` per api key and direction (plus the request/response headers): its fields in wire
order, each with its Kafka name, type, the versions it exists in, the versions it may be null in,
its tag (tagged fields) and its default. The facts come from Apache Kafka's message JSON files
(clients/src/main/resources/common/message/); only the fields that exist in some version of
`versions.SUPPORTED` / `versions.SCHEMA_ONLY` are declared. tests/broker/kafka/test_schema_fields.py
checks this table, version by version, against a field list derived from those files
(scripts/kafka-schema-fields).

Types are Kafka's: int8/int16/int32/int64, bool, string, bytes, records, uuid, `[]<primitive>`
and `[]<StructName>` (an array of structs, with `fields`). Body dicts use the snake_case names
(`snake()`): `TopicData` -> `topic_data`.

The table is written with three builders: `F` (a field), `S` (a struct field and its members) and `classic`
(a field kept in its classic encoding in flexible versions); a tagged field names its `Tagged(tag, versions)`.
"""
from __future__ import annotations

import re
import dataclasses
from dataclasses import dataclass, field as dc_field
from typing import NamedTuple

from . import versions as V

NO_DEFAULT = object()
ANY = 0x7FFF  # "N+" upper bound


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """Kafka version spec ("3+", "0-14", "7", "none"/None) -> inclusive (lo, hi), or None for none."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), ANY
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def in_range(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake(name: str) -> str:
    """Kafka field name -> body dict key: `ThrottleTimeMs` -> `throttle_time_ms`."""
    return _SNAKE.sub("_", name).lower()


@dataclass(frozen=True)
class Field:
    name: str                                   # Kafka's name
    type: str                                   # Kafka's type
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    tagged: tuple[int, int] | None = None       # versions in which it is a tagged field
    default: object = NO_DEFAULT                # explicit schema default (None = "null")
    fields: tuple["Field", ...] = ()            # struct members (array of structs or struct)
    flexible: tuple[int, int] | None | str = "inherit"   # per-field flexibleVersions override

    @property
    def key(self) -> str:
        return snake(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:]

    @property
    def is_struct(self) -> bool:
        return bool(self.fields)

    def exists(self, version: int) -> bool:
        return in_range(self.versions, version)

    def is_nullable(self, version: int) -> bool:
        return in_range(self.nullable, version)

    def is_tagged(self, version: int) -> bool:
        return self.tag is not None and in_range(self.tagged, version)

    def default_value(self, version: int):
        """The value a missing field takes on encode: the schema's default, else None for a nullable
        scalar, [] for an array, False, "" or 0 by type."""
        if self.default is not NO_DEFAULT:
            return self.default
        if self.is_array:
            return []
        if self.is_struct:
            return {}
        if self.is_nullable(version):
            return None
        return TYPE_DEFAULTS[self.type]


TYPE_DEFAULTS = {"int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint32": 0, "bool": False,
                 "string": "", "bytes": b"", "records": b"", "uuid": bytes(16), "float64": 0.0}


class Tagged(NamedTuple):
    """A tagged field's tag and the versions it is tagged in (Kafka's "tag" and "taggedVersions")."""
    tag: int
    versions: str


def F(name: str, type_: str, versions: str, *, nullable: str | None = None, tagged: Tagged | None = None,
      default=NO_DEFAULT) -> Field:
    """A field of a primitive type or an array of one, its version specs as Kafka's JSON writes them."""
    tag, tagged_versions = tagged if tagged is not None else (None, None)
    return Field(name, type_, parse_versions(versions), parse_versions(nullable), tag, parse_versions(tagged_versions),
                 default)


def S(name: str, type_: str, versions: str, *, fields: tuple[Field, ...], nullable: str | None = None,
      tagged: Tagged | None = None) -> Field:
    """A struct field (an array of structs, or a struct) with its member `fields`."""
    return dataclasses.replace(F(name, type_, versions, nullable=nullable, tagged=tagged), fields=tuple(fields))


def classic(f: Field) -> Field:
    """`f` in its classic encoding (int16 lengths) even in a flexible version of its message (Kafka's
    per-field "flexibleVersions": "none")."""
    return dataclasses.replace(f, flexible=None)


@dataclass(frozen=True)
class Message:
    name: str
    api_key: int | None               # None for the headers
    valid: tuple[int, int]            # versions declared here (Kafka may know more)
    flexible: tuple[int, int] | None
    fields: tuple[Field, ...] = dc_field(default=())

    def is_flexible(self, version: int) -> bool:
        return in_range(self.flexible, version)


def M(name: str, api_key: int | None, valid: tuple[int, int], flexible: str, *fields: Field) -> Message:
    return Message(name, api_key, valid, parse_versions(flexible), tuple(fields))


# ---- headers ----------------------------------------------------------------------------------------

REQUEST_HEADER = M(
    "RequestHeader", None, (1, 2), "2+",
    F("RequestApiKey", "int16", "0+"),
    F("RequestApiVersion", "int16", "0+"),
    F("CorrelationId", "int32", "0+"),
    # a classic (int16-length) nullable string even in header v2
    classic(F("ClientId", "string", "1+", nullable="1+")),
)

RESPONSE_HEADER = M(
    "ResponseHeader", None, (0, 1), "1+",
    F("CorrelationId", "int32", "0+"),
)

# ---- ApiVersions (18) --------------------------------------------------------------------------------

_API_VERSIONS_REQUEST = M(
    "ApiVersionsRequest", V.API_VERSIONS, (0, 3), "3+",
    F("ClientSoftwareName", "string", "3+"),
    F("ClientSoftwareVersion", "string", "3+"),
)

_API_VERSIONS_RESPONSE = M(
    "ApiVersionsResponse", V.API_VERSIONS, (0, 3), "3+",
    F("ErrorCode", "int16", "0+"),
    S("ApiKeys", "[]ApiVersion", "0+", fields=(
        F("ApiKey", "int16", "0+"),
        F("MinVersion", "int16", "0+"),
        F("MaxVersion", "int16", "0+"),
    )),
    F("ThrottleTimeMs", "int32", "1+"),
    S("SupportedFeatures", "[]SupportedFeatureKey", "3+", tagged=Tagged(0, "3+"), fields=(
        F("Name", "string", "3+"),
        F("MinVersion", "int16", "3+"),
        F("MaxVersion", "int16", "3+"),
    )),
    F("FinalizedFeaturesEpoch", "int64", "3+", tagged=Tagged(1, "3+"), default=-1),
    S("FinalizedFeatures", "[]FinalizedFeatureKey", "3+", tagged=Tagged(2, "3+"), fields=(
        F("Name", "string", "3+"),
        F("MaxVersionLevel", "int16", "3+"),
        F("MinVersionLevel", "int16", "3+"),
    )),
    F("ZkMigrationReady", "bool", "3+", tagged=Tagged(3, "3+"), default=False),
)

# ---- Produce (0) ----------------------------------------------------------------------------------------

_PRODUCE_REQUEST = M(
    "ProduceRequest", V.PRODUCE, (3, 8), "9+",
    F("TransactionalId", "string", "3+", nullable="3+", default=None),
    F("Acks", "int16", "0+"),
    F("TimeoutMs", "int32", "0+"),
    S("TopicData", "[]TopicProduceData", "0+", fields=(
        F("Name", "string", "0+"),
        S("PartitionData", "[]PartitionProduceData", "0+", fields=(
            F("Index", "int32", "0+"),
            F("Records", "records", "0+", nullable="0+"),
        )),
    )),
)

_PRODUCE_RESPONSE = M(
    "ProduceResponse", V.PRODUCE, (3, 8), "9+",
    S("Responses", "[]TopicProduceResponse", "0+", fields=(
        F("Name", "string", "0+"),
        S("PartitionResponses", "[]PartitionProduceResponse", "0+", fields=(
            F("Index", "int32", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("BaseOffset", "int64", "0+"),
            F("LogAppendTimeMs", "int64", "2+", default=-1),
            F("LogStartOffset", "int64", "5+", default=-1),
            S("RecordErrors", "[]BatchIndexAndErrorMessage", "8+", fields=(
                F("BatchIndex", "int32", "8+"),
                F("BatchIndexErrorMessage", "string", "8+", nullable="8+", default=None),
            )),
            F("ErrorMessage", "string", "8+", nullable="8+", default=None),
        )),
    )),
    F("ThrottleTimeMs", "int32", "1+", default=0),
)

# ---- Fetch (1) ------------------------------------------------------------------------------------------

_FETCH_REQUEST = M(
    "FetchRequest", V.FETCH, (4, 11), "12+",
    F("ReplicaId", "int32", "0-14", default=-1),
    F("MaxWaitMs", "int32", "0+"),
    F("MinBytes", "int32", "0+"),
    F("MaxBytes", "int32", "3+", default=0x7FFFFFFF),
    F("IsolationLevel", "int8", "4+", default=0),
    F("SessionId", "int32", "7+", default=0),
    F("SessionEpoch", "int32", "7+", default=-1),
    S("Topics", "[]FetchTopic", "0+", fields=(
        F("Topic", "string", "0-12"),
        S("Partitions", "[]FetchPartition", "0+", fields=(
            F("Partition", "int32", "0+"),
            F("CurrentLeaderEpoch", "int32", "9+", default=-1),
            F("FetchOffset", "int64", "0+"),
            F("LogStartOffset", "int64", "5+", default=-1),
            F("PartitionMaxBytes", "int32", "0+"),
        )),
    )),
    S("ForgottenTopicsData", "[]ForgottenTopic", "7+", fields=(
        F("Topic", "string", "7-12"),
        F("Partitions", "[]int32", "7+"),
    )),
    F("RackId", "string", "11+", default=""),
)

_FETCH_RESPONSE = M(
    "FetchResponse", V.FETCH, (4, 11), "12+",
    F("ThrottleTimeMs", "int32", "1+"),
    F("ErrorCode", "int16", "7+"),
    F("SessionId", "int32", "7+", default=0),
    S("Responses", "[]FetchableTopicResponse", "0+", fields=(
        F("Topic", "string", "0-12"),
        S("Partitions", "[]PartitionData", "0+", fields=(
            F("PartitionIndex", "int32", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("HighWatermark", "int64", "0+"),
            F("LastStableOffset", "int64", "4+", default=-1),
            F("LogStartOffset", "int64", "5+", default=-1),
            S("AbortedTransactions", "[]AbortedTransaction", "4+", nullable="4+", fields=(
                F("ProducerId", "int64", "4+"),
                F("FirstOffset", "int64", "4+"),
            )),
            F("PreferredReadReplica", "int32", "11+", default=-1),
            F("Records", "records", "0+", nullable="0+"),
        )),
    )),
)

# ---- ListOffsets (2) ------------------------------------------------------------------------------------

_LIST_OFFSETS_REQUEST = M(
    "ListOffsetsRequest", V.LIST_OFFSETS, (1, 5), "6+",
    F("ReplicaId", "int32", "0+"),
    F("IsolationLevel", "int8", "2+"),
    S("Topics", "[]ListOffsetsTopic", "0+", fields=(
        F("Name", "string", "0+"),
        S("Partitions", "[]ListOffsetsPartition", "0+", fields=(
            F("PartitionIndex", "int32", "0+"),
            F("CurrentLeaderEpoch", "int32", "4+", default=-1),
            F("Timestamp", "int64", "0+"),
        )),
    )),
)

_LIST_OFFSETS_RESPONSE = M(
    "ListOffsetsResponse", V.LIST_OFFSETS, (1, 5), "6+",
    F("ThrottleTimeMs", "int32", "2+"),
    S("Topics", "[]ListOffsetsTopicResponse", "0+", fields=(
        F("Name", "string", "0+"),
        S("Partitions", "[]ListOffsetsPartitionResponse", "0+", fields=(
            F("PartitionIndex", "int32", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("Timestamp", "int64", "1+", default=-1),
            F("Offset", "int64", "1+", default=-1),
            F("LeaderEpoch", "int32", "4+", default=-1),
        )),
    )),
)

# ---- Metadata (3) ---------------------------------------------------------------------------------------

_METADATA_REQUEST = M(
    "MetadataRequest", V.METADATA, (1, 9), "9+",
    S("Topics", "[]MetadataRequestTopic", "0+", nullable="1+", fields=(
        F("Name", "string", "0+", nullable="10+"),
    )),
    F("AllowAutoTopicCreation", "bool", "4+", default=True),
    F("IncludeClusterAuthorizedOperations", "bool", "8-10"),
    F("IncludeTopicAuthorizedOperations", "bool", "8+"),
)

_METADATA_RESPONSE = M(
    "MetadataResponse", V.METADATA, (1, 9), "9+",
    F("ThrottleTimeMs", "int32", "3+"),
    S("Brokers", "[]MetadataResponseBroker", "0+", fields=(
        F("NodeId", "int32", "0+"),
        F("Host", "string", "0+"),
        F("Port", "int32", "0+"),
        F("Rack", "string", "1+", nullable="1+", default=None),
    )),
    F("ClusterId", "string", "2+", nullable="2+", default=None),
    F("ControllerId", "int32", "1+", default=-1),
    S("Topics", "[]MetadataResponseTopic", "0+", fields=(
        F("ErrorCode", "int16", "0+"),
        F("Name", "string", "0+", nullable="12+"),
        F("IsInternal", "bool", "1+", default=False),
        S("Partitions", "[]MetadataResponsePartition", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("PartitionIndex", "int32", "0+"),
            F("LeaderId", "int32", "0+"),
            F("LeaderEpoch", "int32", "7+", default=-1),
            F("ReplicaNodes", "[]int32", "0+"),
            F("IsrNodes", "[]int32", "0+"),
            F("OfflineReplicas", "[]int32", "5+"),
        )),
        F("TopicAuthorizedOperations", "int32", "8+", default=-2147483648),
    )),
    F("ClusterAuthorizedOperations", "int32", "8-10", default=-2147483648),
)

# ---- FindCoordinator (10), not advertised --------------------------------------------------------------

_FIND_COORDINATOR_REQUEST = M(
    "FindCoordinatorRequest", V.FIND_COORDINATOR, (0, 2), "3+",
    F("Key", "string", "0-3"),
    F("KeyType", "int8", "1+", default=0),
)

_FIND_COORDINATOR_RESPONSE = M(
    "FindCoordinatorResponse", V.FIND_COORDINATOR, (0, 2), "3+",
    F("ThrottleTimeMs", "int32", "1+"),
    F("ErrorCode", "int16", "0-3"),
    F("ErrorMessage", "string", "1-3", nullable="1-3"),
    F("NodeId", "int32", "0-3"),
    F("Host", "string", "0-3"),
    F("Port", "int32", "0-3"),
)

# ---- the classic group protocol: JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14),
# ---- DescribeGroups (15), ListGroups (16), OffsetCommit (8), OffsetFetch (9) ------------------------------

_JOIN_GROUP_REQUEST = M(
    "JoinGroupRequest", V.JOIN_GROUP, (2, 5), "6+",
    F("GroupId", "string", "0+"),
    F("SessionTimeoutMs", "int32", "0+"),
    F("RebalanceTimeoutMs", "int32", "1+", default=-1),
    F("MemberId", "string", "0+"),
    F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
    F("ProtocolType", "string", "0+"),
    S("Protocols", "[]JoinGroupRequestProtocol", "0+", fields=(
        F("Name", "string", "0+"),
        F("Metadata", "bytes", "0+"),
    )),
)

_JOIN_GROUP_RESPONSE = M(
    "JoinGroupResponse", V.JOIN_GROUP, (2, 5), "6+",
    F("ThrottleTimeMs", "int32", "2+"),
    F("ErrorCode", "int16", "0+"),
    F("GenerationId", "int32", "0+", default=-1),
    F("ProtocolName", "string", "0+", nullable="7+"),
    F("Leader", "string", "0+"),
    F("MemberId", "string", "0+"),
    S("Members", "[]JoinGroupResponseMember", "0+", fields=(
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
        F("Metadata", "bytes", "0+"),
    )),
)

_HEARTBEAT_REQUEST = M(
    "HeartbeatRequest", V.HEARTBEAT, (0, 3), "4+",
    F("GroupId", "string", "0+"),
    F("GenerationId", "int32", "0+"),
    F("MemberId", "string", "0+"),
    F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
)

_HEARTBEAT_RESPONSE = M(
    "HeartbeatResponse", V.HEARTBEAT, (0, 3), "4+",
    F("ThrottleTimeMs", "int32", "1+"),
    F("ErrorCode", "int16", "0+"),
)

_LEAVE_GROUP_REQUEST = M(
    "LeaveGroupRequest", V.LEAVE_GROUP, (0, 1), "4+",
    F("GroupId", "string", "0+"),
    F("MemberId", "string", "0-2"),
)

_LEAVE_GROUP_RESPONSE = M(
    "LeaveGroupResponse", V.LEAVE_GROUP, (0, 1), "4+",
    F("ThrottleTimeMs", "int32", "1+"),
    F("ErrorCode", "int16", "0+"),
)

_SYNC_GROUP_REQUEST = M(
    "SyncGroupRequest", V.SYNC_GROUP, (0, 3), "4+",
    F("GroupId", "string", "0+"),
    F("GenerationId", "int32", "0+"),
    F("MemberId", "string", "0+"),
    F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
    S("Assignments", "[]SyncGroupRequestAssignment", "0+", fields=(
        F("MemberId", "string", "0+"),
        F("Assignment", "bytes", "0+"),
    )),
)

_SYNC_GROUP_RESPONSE = M(
    "SyncGroupResponse", V.SYNC_GROUP, (0, 3), "4+",
    F("ThrottleTimeMs", "int32", "1+"),
    F("ErrorCode", "int16", "0+"),
    F("Assignment", "bytes", "0+"),
)

_DESCRIBE_GROUPS_REQUEST = M(
    "DescribeGroupsRequest", V.DESCRIBE_GROUPS, (0, 4), "5+",
    F("Groups", "[]string", "0+"),
    F("IncludeAuthorizedOperations", "bool", "3+"),
)

_DESCRIBE_GROUPS_RESPONSE = M(
    "DescribeGroupsResponse", V.DESCRIBE_GROUPS, (0, 4), "5+",
    F("ThrottleTimeMs", "int32", "1+"),
    S("Groups", "[]DescribedGroup", "0+", fields=(
        F("ErrorCode", "int16", "0+"),
        F("GroupId", "string", "0+"),
        F("GroupState", "string", "0+"),
        F("ProtocolType", "string", "0+"),
        F("ProtocolData", "string", "0+"),
        S("Members", "[]DescribedGroupMember", "0+", fields=(
            F("MemberId", "string", "0+"),
            F("GroupInstanceId", "string", "4+", nullable="4+", default=None),
            F("ClientId", "string", "0+"),
            F("ClientHost", "string", "0+"),
            F("MemberMetadata", "bytes", "0+"),
            F("MemberAssignment", "bytes", "0+"),
        )),
        F("AuthorizedOperations", "int32", "3+", default=-2147483648),
    )),
)

_LIST_GROUPS_REQUEST = M(
    "ListGroupsRequest", V.LIST_GROUPS, (0, 2), "3+",
)

_LIST_GROUPS_RESPONSE = M(
    "ListGroupsResponse", V.LIST_GROUPS, (0, 2), "3+",
    F("ThrottleTimeMs", "int32", "1+"),
    F("ErrorCode", "int16", "0+"),
    S("Groups", "[]ListedGroup", "0+", fields=(
        F("GroupId", "string", "0+"),
        F("ProtocolType", "string", "0+"),
    )),
)

_OFFSET_COMMIT_REQUEST = M(
    "OffsetCommitRequest", V.OFFSET_COMMIT, (2, 7), "8+",
    F("GroupId", "string", "0+"),
    F("GenerationIdOrMemberEpoch", "int32", "1+", default=-1),
    F("MemberId", "string", "1+"),
    F("GroupInstanceId", "string", "7+", nullable="7+", default=None),
    F("RetentionTimeMs", "int64", "2-4", default=-1),
    S("Topics", "[]OffsetCommitRequestTopic", "0+", fields=(
        F("Name", "string", "0+"),
        S("Partitions", "[]OffsetCommitRequestPartition", "0+", fields=(
            F("PartitionIndex", "int32", "0+"),
            F("CommittedOffset", "int64", "0+"),
            F("CommittedLeaderEpoch", "int32", "6+", default=-1),
            F("CommittedMetadata", "string", "0+", nullable="0+"),
        )),
    )),
)

_OFFSET_COMMIT_RESPONSE = M(
    "OffsetCommitResponse", V.OFFSET_COMMIT, (2, 7), "8+",
    F("ThrottleTimeMs", "int32", "3+"),
    S("Topics", "[]OffsetCommitResponseTopic", "0+", fields=(
        F("Name", "string", "0+"),
        S("Partitions", "[]OffsetCommitResponsePartition", "0+", fields=(
            F("PartitionIndex", "int32", "0+"),
            F("ErrorCode", "int16", "0+"),
        )),
    )),
)

_OFFSET_FETCH_REQUEST = M(
    "OffsetFetchRequest", V.OFFSET_FETCH, (1, 7), "6+",
    F("GroupId", "string", "0-7"),
    S("Topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=(
        F("Name", "string", "0-7"),
        F("PartitionIndexes", "[]int32", "0-7"),
    )),
    F("RequireStable", "bool", "7+", default=False),
)

_OFFSET_FETCH_RESPONSE = M(
    "OffsetFetchResponse", V.OFFSET_FETCH, (1, 7), "6+",
    F("ThrottleTimeMs", "int32", "3+"),
    S("Topics", "[]OffsetFetchResponseTopic", "0-7", fields=(
        F("Name", "string", "0-7"),
        S("Partitions", "[]OffsetFetchResponsePartition", "0-7", fields=(
            F("PartitionIndex", "int32", "0-7"),
            F("CommittedOffset", "int64", "0-7"),
            F("CommittedLeaderEpoch", "int32", "5-7", default=-1),
            F("Metadata", "string", "0-7", nullable="0-7"),
            F("ErrorCode", "int16", "0-7"),
        )),
    )),
    F("ErrorCode", "int16", "2-7", default=0),
)

# ---- DeleteTopics (20) ---------------------------------------------------------------------------------

_DELETE_TOPICS_REQUEST = M(
    "DeleteTopicsRequest", V.DELETE_TOPICS, (0, 3), "4+",
    F("TopicNames", "[]string", "0-5"),
    F("TimeoutMs", "int32", "0+"),
)

_DELETE_TOPICS_RESPONSE = M(
    "DeleteTopicsResponse", V.DELETE_TOPICS, (0, 3), "4+",
    F("ThrottleTimeMs", "int32", "1+"),
    S("Responses", "[]DeletableTopicResult", "0+", fields=(
        F("Name", "string", "0+", nullable="6+"),
        F("ErrorCode", "int16", "0+"),
    )),
)

# ---- CreateTopics (19) -----------------------------------------------------------------------------------

_CREATE_TOPICS_REQUEST = M(
    "CreateTopicsRequest", V.CREATE_TOPICS, (2, 4), "5+",
    S("Topics", "[]CreatableTopic", "0+", fields=(
        F("Name", "string", "0+"),
        F("NumPartitions", "int32", "0+"),
        F("ReplicationFactor", "int16", "0+"),
        S("Assignments", "[]CreatableReplicaAssignment", "0+", fields=(
            F("PartitionIndex", "int32", "0+"),
            F("BrokerIds", "[]int32", "0+"),
        )),
        S("Configs", "[]CreatableTopicConfig", "0+", fields=(
            F("Name", "string", "0+"),
            F("Value", "string", "0+", nullable="0+"),
        )),
    )),
    F("timeoutMs", "int32", "0+", default=60000),
    F("validateOnly", "bool", "1+", default=False),
)

_CREATE_TOPICS_RESPONSE = M(
    "CreateTopicsResponse", V.CREATE_TOPICS, (2, 4), "5+",
    F("ThrottleTimeMs", "int32", "2+"),
    S("Topics", "[]CreatableTopicResult", "0+", fields=(
        F("Name", "string", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "1+", nullable="0+"),
    )),
)

# ---- CreatePartitions (37) -------------------------------------------------------------------------------

_CREATE_PARTITIONS_REQUEST = M(
    "CreatePartitionsRequest", V.CREATE_PARTITIONS, (0, 1), "2+",
    S("Topics", "[]CreatePartitionsTopic", "0+", fields=(
        F("Name", "string", "0+"),
        F("Count", "int32", "0+"),
        S("Assignments", "[]CreatePartitionsAssignment", "0+", nullable="0+", fields=(
            F("BrokerIds", "[]int32", "0+"),
        )),
    )),
    F("TimeoutMs", "int32", "0+"),
    F("ValidateOnly", "bool", "0+"),
)

_CREATE_PARTITIONS_RESPONSE = M(
    "CreatePartitionsResponse", V.CREATE_PARTITIONS, (0, 1), "2+",
    F("ThrottleTimeMs", "int32", "0+"),
    S("Results", "[]CreatePartitionsTopicResult", "0+", fields=(
        F("Name", "string", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
    )),
)

# ---- InitProducerId (22) ---------------------------------------------------------------------------------

_INIT_PRODUCER_ID_REQUEST = M(
    "InitProducerIdRequest", V.INIT_PRODUCER_ID, (0, 4), "2+",
    F("TransactionalId", "string", "0+", nullable="0+"),
    F("TransactionTimeoutMs", "int32", "0+"),
    F("ProducerId", "int64", "3+", default=-1),
    F("ProducerEpoch", "int16", "3+", default=-1),
)

_INIT_PRODUCER_ID_RESPONSE = M(
    "InitProducerIdResponse", V.INIT_PRODUCER_ID, (0, 4), "2+",
    F("ThrottleTimeMs", "int32", "0+"),
    F("ErrorCode", "int16", "0+"),
    F("ProducerId", "int64", "0+", default=-1),
    F("ProducerEpoch", "int16", "0+"),
)

# ---- OffsetForLeaderEpoch (23) ----------------------------------------------------------------------------

_OFFSET_FOR_LEADER_EPOCH_REQUEST = M(
    "OffsetForLeaderEpochRequest", V.OFFSET_FOR_LEADER_EPOCH, (0, 3), "4+",
    F("ReplicaId", "int32", "3+", default=-2),
    S("Topics", "[]OffsetForLeaderTopic", "0+", fields=(
        F("Topic", "string", "0+"),
        S("Partitions", "[]OffsetForLeaderPartition", "0+", fields=(
            F("Partition", "int32", "0+"),
            F("CurrentLeaderEpoch", "int32", "2+", default=-1),
            F("LeaderEpoch", "int32", "0+"),
        )),
    )),
)

_OFFSET_FOR_LEADER_EPOCH_RESPONSE = M(
    "OffsetForLeaderEpochResponse", V.OFFSET_FOR_LEADER_EPOCH, (0, 3), "4+",
    F("ThrottleTimeMs", "int32", "2+"),
    S("Topics", "[]OffsetForLeaderTopicResult", "0+", fields=(
        F("Topic", "string", "0+"),
        S("Partitions", "[]EpochEndOffset", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("Partition", "int32", "0+"),
            F("LeaderEpoch", "int32", "1+", default=-1),
            F("EndOffset", "int64", "0+", default=-1),
        )),
    )),
)

REQUESTS: dict[int, Message] = {m.api_key: m for m in (
    _PRODUCE_REQUEST, _FETCH_REQUEST, _LIST_OFFSETS_REQUEST, _METADATA_REQUEST, _FIND_COORDINATOR_REQUEST,
    _API_VERSIONS_REQUEST, _CREATE_TOPICS_REQUEST, _CREATE_PARTITIONS_REQUEST, _INIT_PRODUCER_ID_REQUEST,
    _OFFSET_FOR_LEADER_EPOCH_REQUEST, _JOIN_GROUP_REQUEST, _HEARTBEAT_REQUEST, _LEAVE_GROUP_REQUEST,
    _SYNC_GROUP_REQUEST, _DESCRIBE_GROUPS_REQUEST, _LIST_GROUPS_REQUEST, _OFFSET_COMMIT_REQUEST, _OFFSET_FETCH_REQUEST,
    _DELETE_TOPICS_REQUEST)}

RESPONSES: dict[int, Message] = {m.api_key: m for m in (
    _PRODUCE_RESPONSE, _FETCH_RESPONSE, _LIST_OFFSETS_RESPONSE, _METADATA_RESPONSE, _FIND_COORDINATOR_RESPONSE,
    _API_VERSIONS_RESPONSE, _CREATE_TOPICS_RESPONSE, _CREATE_PARTITIONS_RESPONSE, _INIT_PRODUCER_ID_RESPONSE,
    _OFFSET_FOR_LEADER_EPOCH_RESPONSE, _JOIN_GROUP_RESPONSE, _HEARTBEAT_RESPONSE, _LEAVE_GROUP_RESPONSE,
    _SYNC_GROUP_RESPONSE, _DESCRIBE_GROUPS_RESPONSE, _LIST_GROUPS_RESPONSE, _OFFSET_COMMIT_RESPONSE,
    _OFFSET_FETCH_RESPONSE, _DELETE_TOPICS_RESPONSE)}


def message(api_key: int, kind: str) -> Message:
    """The request ("request") or response ("response") schema of an api key (KeyError if none)."""
    return (REQUESTS if kind == "request" else RESPONSES)[api_key]


def field_list(msg: Message, version: int) -> list[tuple[str, str, bool, int | None, object]]:
    """(dotted Kafka path, type, nullable, tag or None, explicit default or NO_DEFAULT) of every field
    that exists in `version`, depth first in wire order (tagged fields where declared)."""
    out: list = []

    def walk(fields: tuple[Field, ...], prefix: str) -> None:
        for f in fields:
            if not f.exists(version):
                continue
            path = prefix + f.name
            out.append((path, f.type, f.is_nullable(version), f.tag if f.is_tagged(version) else None, f.default))
            if f.fields:
                walk(f.fields, path + ".")

    walk(msg.fields, "")
    return out
