"""HW and leader-epoch checkpoint files: exact contents, atomic replacement, clear corruption errors."""
from __future__ import annotations

import os

import pytest

from broker.storage import CheckpointError, EpochCheckpoint, HwCheckpoint


def test_hw_round_trip(tmp_path):
    cp = HwCheckpoint(tmp_path / "hw.checkpoint")
    assert cp.read() is None
    cp.write(1234)
    assert (tmp_path / "hw.checkpoint").read_text() == "highwater-hw-checkpoint 1\n1234\n"
    assert cp.read() == 1234
    cp.write(0)
    assert cp.read() == 0
    assert os.listdir(tmp_path) == ["hw.checkpoint"]       # no temp file left behind
    with pytest.raises(ValueError, match="non-negative int"):
        cp.write(-1)
    assert cp.read() == 0


def test_epoch_round_trip(tmp_path):
    cp = EpochCheckpoint(tmp_path / "leader-epoch.checkpoint")
    assert cp.read() == []
    cp.write([(0, 0), (2, 17), (3, 17)])
    assert (tmp_path / "leader-epoch.checkpoint").read_text() == (
        "highwater-leader-epoch-checkpoint 1\n3\n0 0\n2 17\n3 17\n")
    assert cp.read() == [(0, 0), (2, 17), (3, 17)]
    cp.write([])
    assert cp.read() == []
    with pytest.raises(ValueError, match=r"increasing epochs.*\(2, 5\) then \(2, 6\)"):
        cp.write([(2, 5), (2, 6)])
    with pytest.raises(ValueError, match=r"\(1, 5\) then \(2, 4\)"):
        cp.write([(1, 5), (2, 4)])
    assert cp.read() == []


HW_CORRUPTIONS = [
    ("", 1, "empty file, expected header 'highwater-hw-checkpoint 1'"),
    ("highwater-hw-checkpoint 2\n5\n", 1, "bad header 'highwater-hw-checkpoint 2', expected 'highwater-hw-checkpoint 1'"),
    ("highwater-hw-checkpoint 1\n12", 2, "last line has no newline (truncated file?)"),
    ("highwater-hw-checkpoint 1\n-3\n", 2, "high watermark must be a non-negative integer, got '-3'"),
    ("highwater-hw-checkpoint 1\n", 2, "expected exactly one value line, found 0"),
    ("highwater-hw-checkpoint 1\n4\n5\n", 3, "expected exactly one value line, found 2"),
]

H = "highwater-leader-epoch-checkpoint 1\n"

EPOCH_CORRUPTIONS = [
    ("highwater-hw-checkpoint 1\n0\n", 1,
     "bad header 'highwater-hw-checkpoint 1', expected 'highwater-leader-epoch-checkpoint 1'"),
    (H, 2, "missing entry count"),
    (H + "x\n", 2, "entry count must be a non-negative integer, got 'x'"),
    (H + "2\n0 0\n", 4, "entry count says 2 but 1 entries follow"),
    (H + "1\n0 0\n1 5\n", 4, "entry count says 1 but 2 entries follow"),
    (H + "2\n0 0\n1\n", 4, "expected 'epoch start_offset', got '1'"),
    (H + "2\n0 0\n1 x\n", 4, "start offset must be a non-negative integer, got 'x'"),
    (H + "2\n3 0\n3 5\n", 4, "epoch 3 does not increase (previous 3)"),
    (H + "2\n1 9\n3 5\n", 4, "start offset 5 decreases (previous 9)"),
]


@pytest.mark.parametrize("checkpoint, name, content, line, message",
                         [(HwCheckpoint, "hw.checkpoint", *case) for case in HW_CORRUPTIONS]
                         + [(EpochCheckpoint, "leader-epoch.checkpoint", *case) for case in EPOCH_CORRUPTIONS])
def test_corruption(tmp_path, checkpoint, name, content, line, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(CheckpointError) as exc:
        checkpoint(path).read()
    assert str(exc.value) == f"{path}:{line}: {message}"
    assert (exc.value.path, exc.value.line) == (str(path), line)


def test_binary_garbage(tmp_path):
    path = tmp_path / "hw.checkpoint"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CheckpointError) as exc:
        HwCheckpoint(path).read()
    assert str(exc.value) == f"{path}: not an ASCII text file"
