"""A broker data directory and the per-partition store in it (segmented log + checkpoints).

Layout:

    <data_dir>/highwater-storage.json         marker: {"format": "highwater-storage", "version": 1}
    <data_dir>/<topic>-<partition>/           one directory per replica (topic may contain '-')
        00000000000000000000.log ...          segments (broker/storage/log.py)
        hw.checkpoint                         broker/storage/checkpoints.py
        leader-epoch.checkpoint
        00000000000000100000.producers ...    idempotent producers' table (broker/storage/producer_snapshots.py)
        .lock                                 flock held while the log is open

The marker is what tells the offline dump that a directory is a broker data directory.

A checkpoint that cannot be read at start-up (garbage bytes, wrong header, cut short) never stops the
broker: `read_checkpoints` reads it as missing and says why (docs/architecture.md, "Storage faults and
restart"): a lost HW restarts from the log start, lost leader-epoch entries are rebuilt from the log.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from broker.limits import topic_name_problem
from broker.storage.checkpoints import (EPOCH_FILE, HW_FILE, CheckpointError, EpochCheckpoint, HwCheckpoint,
                                        write_atomically)
from broker.storage.log import DEFAULT_SEGMENT_RECORDS, RecoveryReport, SegmentedLog
from broker.storage.producer_snapshots import ProducerSnapshots
from broker.errors import ConfigError

MARKER_FILE = "highwater-storage.json"
MARKER = {"format": "highwater-storage", "version": 1}
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def partition_dir_name(topic: str, partition: int) -> str:
    if topic_name_problem(topic) is not None:   # the one rule (Kafka's) that also keeps paths inside data_dir
        raise ValueError(f"bad topic name {topic!r}")
    if partition < 0:
        raise ValueError(f"bad partition {partition}")
    return f"{topic}-{partition}"


def init_data_dir(data_dir: Path | str) -> Path:
    """Create the data directory and its marker if needed (idempotent)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    if not (data_dir / MARKER_FILE).exists():
        write_atomically(data_dir / MARKER_FILE, json.dumps(MARKER) + "\n")
    return data_dir


def check_data_dir(data_dir: Path | str) -> Path:
    """Raise ConfigError (one-line message) unless `data_dir` is a broker data directory."""
    data_dir = Path(data_dir)
    if not data_dir.exists():
        raise ConfigError(f"{data_dir}: no such directory")
    if not data_dir.is_dir():
        raise ConfigError(f"{data_dir}: not a directory")
    marker = data_dir / MARKER_FILE
    try:
        content = json.loads(marker.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{data_dir}: not a broker data directory (no {MARKER_FILE})") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{marker}: unreadable marker ({exc})") from None
    if not isinstance(content, dict) or content.get("format") != MARKER["format"]:
        raise ConfigError(f"{marker}: field 'format' is not {MARKER['format']!r}")
    if content.get("version") != MARKER["version"]:
        raise ConfigError(f"{marker}: unsupported storage version {content.get('version')!r}")
    return data_dir


def list_partitions(data_dir: Path | str) -> list[tuple[str, int]]:
    """(topic, partition) of every partition directory in `data_dir`, sorted."""
    found = []
    for entry in os.scandir(data_dir):
        m = _PARTITION_DIR.match(entry.name)
        if m and entry.is_dir():
            found.append((m.group(1), int(m.group(2))))
    return sorted(found)


@dataclass(frozen=True)
class CheckpointProblem:
    """A checkpoint file that could not be used at start-up and what was done instead."""

    file: str           # HW_FILE or EPOCH_FILE
    path: str
    problem: str        # "missing" or the CheckpointError message (file, line)
    action: str         # what the broker does instead


@dataclass(frozen=True)
class LoadedCheckpoints:
    hw: int | None                      # None: no usable HW checkpoint (start from the log start)
    epoch_entries: list[tuple[int, int]]
    problems: tuple[CheckpointProblem, ...] = ()


@dataclass
class PartitionStore:
    """Everything one replica keeps on disk: the log, the two checkpoints and the producer snapshots."""

    topic: str
    partition: int
    directory: Path
    log: SegmentedLog
    hw_checkpoint: HwCheckpoint
    epoch_checkpoint: EpochCheckpoint
    producer_snapshots: ProducerSnapshots

    @classmethod
    def open(cls, data_dir: Path | str, topic: str, partition: int, *, power_loss: bool = False,
             segment_records: int = DEFAULT_SEGMENT_RECORDS, flush_policy: str = "always") -> "PartitionStore":
        """Open (creating if needed) the replica's directory and recover its log."""
        data_dir = init_data_dir(data_dir)
        directory = data_dir / partition_dir_name(topic, partition)
        log = SegmentedLog.open(directory, segment_records=segment_records, power_loss=power_loss,
                                flush_policy=flush_policy)
        return cls(topic, partition, directory, log, HwCheckpoint(directory / HW_FILE),
                   EpochCheckpoint(directory / EPOCH_FILE), ProducerSnapshots(directory))

    def read_checkpoints(self) -> LoadedCheckpoints:
        """Both checkpoints for start-up, never raising for a bad one: a corrupt file reads as missing (the
        file stays until the next checkpoint write replaces it) and is listed in `problems`, as is a
        missing file while the log holds records (it was lost: a fresh replica has neither)."""
        problems = []
        has_records = self.log.leo() > self.log.log_start()
        try:
            hw = self.hw_checkpoint.read()
            if hw is None and has_records:
                problems.append(CheckpointProblem(HW_FILE, str(self.hw_checkpoint.path), "missing",
                                                  f"HW starts at the log start {self.log.log_start()}"))
        except CheckpointError as exc:
            hw = None
            problems.append(CheckpointProblem(HW_FILE, str(self.hw_checkpoint.path), str(exc),
                                              f"HW starts at the log start {self.log.log_start()}"))
        rebuild = f"leader epochs rebuilt from the log (offsets {self.log.log_start()}..{self.log.leo()})"
        try:
            entries = self.epoch_checkpoint.read()
            if not entries and has_records and not self.epoch_checkpoint.path.exists():
                problems.append(CheckpointProblem(EPOCH_FILE, str(self.epoch_checkpoint.path), "missing", rebuild))
        except CheckpointError as exc:
            entries = []
            problems.append(CheckpointProblem(EPOCH_FILE, str(self.epoch_checkpoint.path), str(exc), rebuild))
        return LoadedCheckpoints(hw, entries, tuple(problems))

    def read_producer_snapshot(self) -> tuple[tuple[int, int, list] | None, tuple[CheckpointProblem, ...]]:
        """The newest producer snapshot the log can still start from, as (offset, last epoch, entries), for
        start-up, never raising: snapshots past the log end (a truncation or a lost tail cut the records
        they describe) are deleted, an unreadable one is skipped for the one before it and listed in
        `problems`."""
        problems = []
        leo = self.log.leo()
        self.producer_snapshots.delete_above(leo)
        for offset in reversed(self.producer_snapshots.offsets()):
            try:
                last_epoch, entries = self.producer_snapshots.read(offset)
            except (CheckpointError, OSError) as exc:
                problems.append(CheckpointProblem(self.producer_snapshots.path(offset).name,
                                                  str(self.producer_snapshots.path(offset)), str(exc),
                                                  "an older snapshot or the whole log is read instead"))
                continue
            return (offset, last_epoch, entries), tuple(problems)
        return None, tuple(problems)

    @property
    def recovery(self) -> RecoveryReport:
        return self.log.recovery

    def close(self, *, flush: bool = True) -> None:
        self.log.close(flush=flush)
