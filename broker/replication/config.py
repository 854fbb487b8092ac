"""The replication settings the state machine needs (a subset of broker.json, docs/architecture.md)."""
from __future__ import annotations

from dataclasses import dataclass

# "hw": pre-0.11 Kafka, truncate to the high watermark on becoming a follower.
# "leader-epoch": KIP-101 with KIP-279's iterative OffsetsForLeaderEpoch exchange (Kafka >= 2.0).
# "kip-101": KIP-101's single-round exchange without KIP-279; a demonstration mode for the scenario
#            tests (it still diverges after alternating unclean elections). broker.json accepts only
#            the first two.
TRUNCATION_MODES = ("hw", "leader-epoch", "kip-101")


@dataclass(frozen=True)
class ReplicationConfig:
    truncation: str = "leader-epoch"
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 2000
    replica_fetch_max_records: int = 1000
    # KAFKA-7128: a follower joins the ISR only once its LEO has reached the start offset of the
    # leader's current epoch (as well as the HW). False restores the buggy rule (LEO >= HW only); it
    # exists so the scenario tests can show the data loss the rule prevents.
    isr_join_requires_epoch_start: bool = True
    # KIP-320 (Kafka 2.1): the leader refuses follower fetches and OffsetsForLeaderEpoch requests whose
    # current leader epoch is not its own. False is a pre-2.1 broker: a zombie fetcher is served (KAFKA-6880).
    fetch_fencing: bool = True
    # KIP-966: the HW advances only while the ISR has at least min_insync_replicas members.
    strict_min_isr_hw: bool = False

    def __post_init__(self) -> None:
        if self.truncation not in TRUNCATION_MODES:
            raise ValueError(f"replication config: truncation must be one of {TRUNCATION_MODES}, got {self.truncation!r}")
        if self.min_insync_replicas < 1:
            raise ValueError(f"replication config: min_insync_replicas must be >= 1, got {self.min_insync_replicas}")
        if self.replica_lag_time_max_ms < 0:
            raise ValueError(f"replication config: replica_lag_time_max_ms must be >= 0, got {self.replica_lag_time_max_ms}")
        if self.replica_fetch_max_records < 1:
            raise ValueError(f"replication config: replica_fetch_max_records must be >= 1, got {self.replica_fetch_max_records}")

    @classmethod
    def from_broker_config(cls, broker_config) -> "ReplicationConfig":
        """Take the replication keys from a broker.config.BrokerConfig (or anything with those attributes)."""
        return cls(
            truncation=broker_config.truncation,
            min_insync_replicas=broker_config.min_insync_replicas,
            replica_lag_time_max_ms=broker_config.replica_lag_time_max_ms,
            replica_fetch_max_records=broker_config.replica_fetch_max_records,
            fetch_fencing=broker_config.fetch_fencing,
            strict_min_isr_hw=broker_config.eligible_leader_replicas,
        )
