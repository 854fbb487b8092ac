"""Kafka-style replication as a pure state machine (simulated by the top-level `simulator` package).

`PartitionReplica` (replica.py) is one partition's replica on one broker: leader (produce, follower
fetches, HW, ISR proposals, OffsetsForLeaderEpoch), follower (truncation, fetching, follower HW) or
neither. It does no I/O and reads no clock: the broker server feeds it requests, `now_ms` and
controller decisions, and carries out what it asks for. README.md in this folder lists the rules and
where each rule of the design notes (seeds) lives.

Modules: config.py (settings), errors.py (error codes, KIP-320 fencing), events.py (event-log
events), epoch_cache.py (leader-epoch cache), messages.py (requests/answers), leader.py (remote
followers, HW and ISR rules), truncation.py (hw / KIP-101 / KIP-279 truncation), replica.py (the
state machine).
"""
from broker.replication.config import ReplicationConfig, TRUNCATION_MODES
from broker.replication.epoch_cache import EpochCache, EpochEndOffset, UNDEFINED
from broker.replication.errors import ErrorCode
from broker.replication.events import (
    EpochAnswer, EpochQuery, Event, FetchFenced, HwChange, IsrChange, LeaderChange, RoleChange,
    StaleFetchServed, Truncate,
)
from broker.replication.messages import (
    PLAIN, BatchFields, ConsumerRead, EpochRequest, EpochResponse, FetchRequest, FetchResponse, IsrProposal,
    ProduceResult, ProduceStatus,
)
from broker.replication.replica import ACKS_ALL, NO_CHECKPOINTS, Checkpoints, PartitionReplica, StateError

__all__ = [
    "ReplicationConfig", "TRUNCATION_MODES", "EpochCache", "EpochEndOffset", "UNDEFINED", "ErrorCode",
    "Event", "HwChange", "IsrChange", "LeaderChange", "RoleChange", "Truncate",
    "EpochAnswer", "EpochQuery", "FetchFenced", "StaleFetchServed",
    "BatchFields", "PLAIN", "ConsumerRead", "EpochRequest", "EpochResponse", "FetchRequest", "FetchResponse", "IsrProposal",
    "ProduceResult", "ProduceStatus", "ACKS_ALL", "Checkpoints", "NO_CHECKPOINTS", "PartitionReplica",
    "StateError",
]
