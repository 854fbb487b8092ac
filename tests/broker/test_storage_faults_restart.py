"""What a broker does at restart after a storage fault on its data files (issue 18; docs/architecture.md,
"Storage faults and restart"), at unit level: the data directory of one replica is written by the real
store, damaged by the real mutations of clusters/storage_faults.py, and opened again the way the broker
opens it (PartitionStore.open, read_checkpoints, PartitionReplica).

- a bit flip in the middle of a segment with later segments present: the log is cut at the flipped
  record, later segments deleted, the reason names the file and byte; no record failing its CRC is read;
- a segment tail cut mid-record: the half record is cut;
- a deleted or garbled HW checkpoint: the HW starts at the log start and the problem names the file;
- a deleted or garbled leader-epoch checkpoint: the entries are rebuilt from the log.
"""
from __future__ import annotations

import os

import pytest

from broker.records import Record
from broker.replication.config import ReplicationConfig
from broker.replication.replica import Checkpoints, PartitionReplica
from broker.storage.checkpoints import EPOCH_FILE, HW_FILE
from broker.storage.codec import encode_record
from broker.storage.partition_store import PartitionStore
from clusters.storage_faults import STORAGE_FAULTS, corrupt_data_dir

EPOCHS = [(1, 0), (3, 10), (4, 16)]   # epoch 1 writes 0..9, epoch 3 writes 10..15, epoch 4 writes 16..19


def records():
    out = []
    for i in range(20):
        epoch = 1 if i < 10 else 3 if i < 16 else 4
        out.append(Record(i, epoch, f"v{i}".encode(), None, 1000 + i))
    return out


def make_replica_dir(data_dir, *, hw=18):
    """Partition t-0 with 20 records in 4 segments of 5, HW 18 and the epoch entries above."""
    store = PartitionStore.open(data_dir, "t", 0, segment_records=5)
    store.log.append(records())
    store.hw_checkpoint.write(hw)
    store.epoch_checkpoint.write(EPOCHS)
    store.close()
    return data_dir / "t-0"


def restart(data_dir):
    """Open the replica as the broker's start-up does; return (store, loaded checkpoints, replica)."""
    store = PartitionStore.open(data_dir, "t", 0, segment_records=5)
    loaded = store.read_checkpoints()
    replica = PartitionReplica("t", 0, 1, store.log, ReplicationConfig(),
                               checkpoints=Checkpoints(hw=loaded.hw or 0, epoch_entries=loaded.epoch_entries))
    return store, loaded, replica


def test_a_clean_restart_keeps_everything(tmp_path):
    make_replica_dir(tmp_path)
    store, loaded, replica = restart(tmp_path)
    assert (store.recovery.cut, loaded.problems, replica.leo, replica.hw) == (False, (), 20, 18)
    assert replica.epoch_cache.entries() == EPOCHS
    store.close()


def test_bitflip_in_the_middle_of_a_segment_cuts_there_and_drops_later_segments(tmp_path):
    d = make_replica_dir(tmp_path)
    # seed 0 chooses; find which segment and record it hit from the detail, then check the exact cut
    fault = corrupt_data_dir(tmp_path, "bitflip", seed=0)
    seg_name = fault.written[0].name
    base = int(seg_name[:-4])
    offset = int(fault.detail.split("record of offset ")[1].split(";")[0])
    assert base + 1 <= offset <= base + 3
    store, loaded, replica = restart(tmp_path)
    rec = store.recovery
    first_pos = sum(len(encode_record(r)) for r in records()[base:offset])
    assert rec.cut_offset == offset
    assert rec.reason == f"{seg_name} byte {first_pos}: CRC mismatch (record of offset {offset})"
    later = [f"{b:020d}.log" for b in range(base + 5, 20, 5)]
    assert rec.segments_deleted == tuple(later)
    assert sorted(p.name for p in d.glob("*.log")) == [f"{b:020d}.log" for b in range(0, base + 1, 5)]
    assert replica.leo == offset and replica.log.read(0, 100) == records()[:offset]
    assert replica.hw == min(18, offset)
    # epoch entries starting at or past the cut are gone
    assert replica.epoch_cache.entries() == [e for e in EPOCHS if e[1] < offset]
    store.close()


@pytest.mark.parametrize("seed", range(6))
def test_bitflip_always_hits_a_middle_record_that_recovery_cuts(tmp_path, seed):
    make_replica_dir(tmp_path)
    fault = corrupt_data_dir(tmp_path, "bitflip", seed=seed)
    base = int(fault.written[0].name[:-4])
    offset = int(fault.detail.split("record of offset ")[1].split(";")[0])
    assert base + 1 <= offset <= base + 3                   # middle half of a 5-record segment
    store, _loaded, replica = restart(tmp_path)
    assert store.recovery.cut_offset == offset == replica.leo
    assert replica.log.read(0, 100) == records()[:offset]   # nothing failing its CRC is served
    store.close()


def test_truncate_cuts_the_last_segment_mid_record(tmp_path):
    d = make_replica_dir(tmp_path)
    size = os.path.getsize(d / f"{15:020d}.log")
    fault = corrupt_data_dir(tmp_path, "truncate", seed=3)
    assert fault.written[0].name == f"{15:020d}.log"
    offset = int(fault.detail.split("mid-record of offset ")[1].split(";")[0])
    assert 17 <= offset <= 19
    assert os.path.getsize(d / f"{15:020d}.log") < size
    store, loaded, replica = restart(tmp_path)
    assert store.recovery.cut_offset == offset
    assert "torn record" in store.recovery.reason or "framing" in store.recovery.reason
    assert replica.log.read(0, 100) == records()[:offset]
    assert replica.hw == min(18, offset)
    assert replica.epoch_cache.entries() == EPOCHS and loaded.problems == ()
    store.close()


@pytest.mark.parametrize("seed", range(3))
def test_torn_last_cuts_exactly_the_last_record(tmp_path, seed):
    """The simulator's `damage`: recovery cuts the last record (19) and nothing before it; the HW
    checkpoint (20) is past the cut log's LEO and is clamped to it."""
    make_replica_dir(tmp_path, hw=20)
    fault = corrupt_data_dir(tmp_path, "torn-last", seed=seed)
    assert fault.written[0].name == f"{15:020d}.log" and "mid-record of offset 19;" in fault.detail
    store, _loaded, replica = restart(tmp_path)
    assert store.recovery.cut_offset == 19 == replica.leo
    assert replica.log.read(0, 100) == records()[:19]
    assert replica.hw == 19
    store.close()


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_hw_checkpoint_corrupt_starts_from_the_log_start(tmp_path, seed):
    d = make_replica_dir(tmp_path)
    fault = corrupt_data_dir(tmp_path, "hw-checkpoint-corrupt", seed=seed)
    assert fault.written == [d.relative_to(tmp_path) / HW_FILE]
    store, loaded, replica = restart(tmp_path)
    assert loaded.hw is None and replica.hw == 0 and replica.leo == 20
    (problem,) = loaded.problems
    assert problem.file == HW_FILE and problem.path == str(d / HW_FILE)
    assert problem.problem.startswith(f"{d / HW_FILE}")    # CheckpointError: file and line
    assert problem.action == "HW starts at the log start 0"
    assert replica.epoch_cache.entries() == EPOCHS
    store.close()


def test_hw_checkpoint_deleted_starts_from_the_log_start(tmp_path):
    d = make_replica_dir(tmp_path)
    fault = corrupt_data_dir(tmp_path, "hw-checkpoint-delete")
    assert fault.removed == [d.relative_to(tmp_path) / HW_FILE] and not (d / HW_FILE).exists()
    store, loaded, replica = restart(tmp_path)
    assert (loaded.hw, replica.hw, replica.leo) == (None, 0, 20)
    assert [(p.file, p.problem) for p in loaded.problems] == [(HW_FILE, "missing")]
    store.close()


@pytest.mark.parametrize("how", ["epoch-checkpoint-delete", "epoch-checkpoint-corrupt"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_epoch_checkpoint_lost_is_rebuilt_from_the_log(tmp_path, how, seed):
    d = make_replica_dir(tmp_path)
    corrupt_data_dir(tmp_path, how, seed=seed)
    store, loaded, replica = restart(tmp_path)
    (problem,) = loaded.problems
    assert problem.file == EPOCH_FILE
    assert problem.action == "leader epochs rebuilt from the log (offsets 0..20)"
    assert loaded.epoch_entries == []
    assert replica.epoch_cache.entries() == EPOCHS          # rebuilt exactly
    assert replica.epoch_checkpoint_due() == EPOCHS         # and due to be written back
    assert (replica.hw, replica.leo) == (18, 20)
    store.close()
    if how == "epoch-checkpoint-delete":
        assert not (d / EPOCH_FILE).exists()


def test_a_fresh_replica_reports_no_problem(tmp_path):
    store = PartitionStore.open(tmp_path, "t", 0)
    assert store.read_checkpoints().problems == ()
    store.close()


def test_faults_refuse_when_there_is_nothing_to_corrupt(tmp_path):
    with pytest.raises(ValueError, match="no data directory"):
        corrupt_data_dir(tmp_path / "none", "bitflip")
    PartitionStore.open(tmp_path, "t", 0).close()
    with pytest.raises(ValueError, match="no segment holding records"):
        corrupt_data_dir(tmp_path, "bitflip")
    with pytest.raises(ValueError, match=f"no {HW_FILE} to corrupt"):
        corrupt_data_dir(tmp_path, "hw-checkpoint-corrupt")
    with pytest.raises(ValueError, match="unknown storage fault 'melt'"):
        corrupt_data_dir(tmp_path, "melt")
    with pytest.raises(ValueError, match="no segment holding records"):
        corrupt_data_dir(tmp_path, "torn-last")
    assert len(STORAGE_FAULTS) == 7


def test_same_seed_same_fault(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_replica_dir(a)
    make_replica_dir(b)
    for how in ("bitflip", "truncate", "hw-checkpoint-corrupt"):
        assert corrupt_data_dir(a, how, seed=7).detail == corrupt_data_dir(b, how, seed=7).detail
    assert {p.name: p.read_bytes() for p in (a / "t-0").iterdir() if p.name != ".lock"} == \
           {p.name: p.read_bytes() for p in (b / "t-0").iterdir() if p.name != ".lock"}
