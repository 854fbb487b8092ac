"""The broker's on-disk storage: segmented logs, checkpoints, recovery and the offline dump.

Public API (what the broker server and the tests use):

    PartitionStore.open(data_dir, topic, partition, power_loss=..., segment_records=..., flush_policy=...)
        -> .log (SegmentedLog, a broker.records.Log), .hw_checkpoint, .epoch_checkpoint, .recovery
    SegmentedLog: log_start/leo/append/read/truncate_to/last_epoch, flush(), flushed_offset(), close()
    RecoveryReport: cut_offset, bytes_cut, segments_deleted, reason (what start-up recovery cut)
    HwCheckpoint / EpochCheckpoint: read() / write(), CheckpointError on a malformed file
    init_data_dir, check_data_dir, list_partitions
    broker.storage.dump.main(argv): `python -m broker dump DATA_DIR --out DIR --node NODE`
"""
from broker.storage.checkpoints import CheckpointError, EpochCheckpoint, HwCheckpoint
from broker.storage.log import FLUSH_POLICIES, RecoveryReport, SegmentedLog
from broker.storage.partition_store import (ConfigError, PartitionStore, check_data_dir, init_data_dir,
                                            list_partitions)

__all__ = [
    "CheckpointError", "EpochCheckpoint", "HwCheckpoint", "FLUSH_POLICIES", "RecoveryReport", "SegmentedLog",
    "ConfigError", "PartitionStore", "check_data_dir", "init_data_dir", "list_partitions",
]
