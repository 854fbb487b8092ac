"""Storage faults spare the broker's own topics: with the test topic's partition 0 and the groups'
__consumer_offsets partition 0 side by side on a data dir, every fault lands on the test topic's
(clusters/storage_faults.py; a fault record names the partition number alone)."""
from __future__ import annotations

from broker.records import Record
from broker.storage import PartitionStore
from clusters.storage_faults import corrupt_data_dir


def _data_dir(path):
    for topic in ("hw", "__consumer_offsets"):
        store = PartitionStore.open(path, topic, 0)
        store.log.append([Record(offset=i, epoch=0, value=str(i).encode()) for i in range(20)])
        store.hw_checkpoint.write(20)
        store.close()
    return path


def test_storage_faults_never_choose_an_internal_topic(tmp_path):
    for seed in range(12):
        for how in ("bitflip", "hw-checkpoint-corrupt"):
            fault = corrupt_data_dir(_data_dir(tmp_path / f"{how}-{seed}"), how, seed=seed)
            touched = [str(p) for p in (fault.written or [])] + [fault.detail]
            assert all("__consumer_offsets" not in t for t in touched), (how, seed, fault)
            assert any(t.startswith("hw-0") for t in touched), (how, seed, fault)
