"""The data directory: marker, partition directories, and the PartitionStore facade."""
from __future__ import annotations

import json
import re

import pytest

from broker.records import Record
from broker.storage import ConfigError, PartitionStore, check_data_dir, init_data_dir, list_partitions


def test_open_creates_layout_and_lists_partitions(tmp_path):
    data = tmp_path / "data"
    a = PartitionStore.open(data, "my-topic", 12, segment_records=2)
    b = PartitionStore.open(data, "my-topic", 0)
    c = PartitionStore.open(data, "hw", 3)
    (data / "not-a-partition-x").mkdir()
    (data / "hw-7").write_text("a file, not a directory")
    assert json.loads((data / "highwater-storage.json").read_text()) == {"format": "highwater-storage", "version": 1}
    assert list_partitions(data) == [("hw", 3), ("my-topic", 0), ("my-topic", 12)]
    assert a.directory == data / "my-topic-12"
    a.log.append([Record(0, 1, b"0"), Record(1, 1, b"1"), Record(2, 2, b"2")])
    a.hw_checkpoint.write(2)
    a.epoch_checkpoint.write([(1, 0), (2, 2)])
    for s in (a, b, c):
        s.close()
    a = PartitionStore.open(data, "my-topic", 12, segment_records=2)
    assert (a.log.leo(), a.log.segment_bases(), a.recovery.cut) == (3, [0, 2], False)
    assert (a.hw_checkpoint.read(), a.epoch_checkpoint.read()) == (2, [(1, 0), (2, 2)])
    a.close()
    assert check_data_dir(data) == data


def test_check_data_dir_errors(tmp_path):
    with pytest.raises(ConfigError, match=f"^{re.escape(str(tmp_path / 'x'))}: no such directory$"):
        check_data_dir(tmp_path / "x")
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(tmp_path / 'f'))}: not a directory$"):
        check_data_dir(tmp_path / "f")
    with pytest.raises(ConfigError, match=r"not a broker data directory \(no highwater-storage.json\)$"):
        check_data_dir(tmp_path)
    init_data_dir(tmp_path)
    (tmp_path / "highwater-storage.json").write_text('{"format": "highwater-storage", "version": 9}')
    with pytest.raises(ConfigError, match="unsupported storage version 9$"):
        check_data_dir(tmp_path)
    (tmp_path / "highwater-storage.json").write_text("{")
    with pytest.raises(ConfigError, match="highwater-storage.json: unreadable marker"):
        check_data_dir(tmp_path)


@pytest.mark.parametrize("topic, partition, message", [
    ("", 0, "bad topic name ''"), ("a/b", 0, "bad topic name 'a/b'"), ("..", 0, "bad topic name '..'"),
    ("hw", -1, "bad partition -1"),
])
def test_bad_names(tmp_path, topic, partition, message):
    with pytest.raises(ValueError) as exc:
        PartitionStore.open(tmp_path, topic, partition)
    assert str(exc.value) == message
