"""Error codes the replication state machine answers with (the same strings travel on the wire)."""
from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    NOT_LEADER = "NOT_LEADER"                                    # this replica is not the leader
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"                  # acks=all and |ISR| < min.insync: nothing appended
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"  # appended, but ISR fell below min.insync
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"                  # the request's leader epoch is older than ours
    UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"                # the request's leader epoch is newer than ours
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"                  # fetch offset outside [log start, LEO]
    NOT_ASSIGNED_REPLICA = "NOT_ASSIGNED_REPLICA"                # a follower fetch from a broker not in the assignment
    OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"  # an idempotent batch that skips or repeats sequences
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"            # an idempotent batch of a fenced (older) producer epoch


def check_leader_epoch(current_leader_epoch: int | None, my_epoch: int) -> ErrorCode | None:
    """KIP-320 fencing: a request carrying the sender's idea of the leader epoch must match ours.

    None (the sender does not say) is not checked, like Kafka's -1.
    """
    if current_leader_epoch is None or current_leader_epoch < 0:
        return None
    if current_leader_epoch < my_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current_leader_epoch > my_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return None
