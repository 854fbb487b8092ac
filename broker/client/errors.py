"""ClientError and the classification of every failure as definite (the write certainly did not happen)
or indefinite (it may have happened).

Codes are the broker's protocol error strings (NOT_LEADER, NOT_ENOUGH_REPLICAS, ...) plus these
client-side ones:

    BROKER_NOT_AVAILABLE    could not connect, or the request could not be sent (definite)
    LEADER_NOT_AVAILABLE    the controller's metadata names no leader for the partition (definite)
    CONTROLLER_NOT_AVAILABLE the controller could not be reached for metadata (definite)
    TIMEOUT                 no answer within the deadline after the request was sent (indefinite)
    CONNECTION_LOST         the connection broke after the request was sent (indefinite)
    INVALID_RESPONSE        the answer could not be decoded (indefinite)
"""
from __future__ import annotations

# broker error codes after which a PRODUCE certainly did not append anything
DEFINITE_BROKER_ERRORS = frozenset({
    "NOT_LEADER", "NOT_ENOUGH_REPLICAS", "UNKNOWN_PARTITION", "INVALID_REQUEST",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_OUT_OF_RANGE", "BROKER_NOT_AVAILABLE",
    "INVALID_UPDATE_VERSION", "LEADER_NOT_AVAILABLE", "CONTROLLER_NOT_AVAILABLE", "KAFKA_STORAGE_ERROR",
})
# the client's metadata may be stale after these: refresh it from the controller before the next request.
# Timeouts count too: a leader cut off from the controller and its followers still answers clients, but
# its acks=all produces end REQUEST_TIMED_OUT, while the controller has fenced it and elected a new leader.
REFRESH_METADATA = frozenset({
    "NOT_LEADER", "UNKNOWN_PARTITION", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
    "BROKER_NOT_AVAILABLE", "LEADER_NOT_AVAILABLE", "TIMEOUT", "CONNECTION_LOST", "INVALID_RESPONSE",
    "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "KAFKA_STORAGE_ERROR",      # the replica found corruption and is being recovered; leadership moves
})


class ClientError(Exception):
    """A request failed. `definite` is True when the operation certainly did not take effect."""

    def __init__(self, code: str, definite: bool, message: str = ""):
        self.code = code
        self.definite = definite
        self.message = message or code
        super().__init__(f"{code}: {self.message}" if message else code)

    def __reduce__(self):
        return (ClientError, (self.code, self.definite, self.message))


def broker_error(code: str, context: str) -> ClientError:
    """The ClientError for an error code a broker answered with."""
    return ClientError(code, code in DEFINITE_BROKER_ERRORS, f"{context}: broker answered {code}")
