"""Storage faults on a broker's data directory: the byte-level mutations behind `Corruptible.corrupt`.

Pure functions on a data directory on this machine (the local backend passes the node's directory, the
Docker backend a copy it fetched from the stopped node and puts back). The broker must not be running.
Every choice (partition, segment, record, byte, bit, kind of garbage) comes from `seed`, so the same
seed on the same files gives the same fault. Kinds (STORAGE_FAULTS):

- bitflip: one bit of one record in the middle of a segment (a byte the record's CRC covers), in a
  segment chosen among those holding records: the restart's recovery scan cuts the log at that record,
  later segments included.
- truncate: the partition's last non-empty segment cut in the middle of a record in its second half
  (a torn tail): recovery cuts the half record.
- torn-last: the partition's last record cut in the middle (the smallest torn tail: recovery cuts that
  one record; the simulator's `damage` action, replayed by an explored scenario).
- hw-checkpoint-delete / epoch-checkpoint-delete: the checkpoint file removed.
- hw-checkpoint-corrupt / epoch-checkpoint-corrupt: the file garbled: random bytes, a wrong header or
  cut short (no final newline), chosen with the seed.

`corrupt_data_dir` returns a `StorageFault`: the files written or removed, a one-line detail naming the
file and the byte or offset, and for the log faults the partition and the first offset whose record is
damaged (recovery must cut the log there or below: the protocol rule damaged-record-kept, broker/rules).
A data directory with nothing to corrupt, or an unknown fault, raises ValueError (the backends
turn it into a ClusterError naming the node).
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from broker.limits import INTERNAL_PREFIX
from broker.storage.checkpoints import EPOCH_FILE, HW_FILE
from broker.storage.codec import PREFIX_SIZE
from broker.storage.partition_store import list_partitions, partition_dir_name
from broker.storage.scan import scan_partition

STORAGE_FAULTS = ("bitflip", "truncate", "hw-checkpoint-delete", "hw-checkpoint-corrupt",
                  "epoch-checkpoint-delete", "epoch-checkpoint-corrupt", "torn-last")
GARBLE_MODES = ("garbage", "bad-header", "cut-short")


@dataclass
class StorageFault:
    how: str
    detail: str                                         # one line: file, byte / offset
    written: list[Path] = field(default_factory=list)   # files changed or cut (relative to the data dir)
    removed: list[Path] = field(default_factory=list)   # files deleted (relative to the data dir)
    partition: int | None = None                        # the partition whose replica was damaged
    offset: int | None = None                           # the first offset whose record was damaged (log faults)

    def labelled(self, node: str) -> "StorageFault":
        """The same fault with its detail prefixed by the node it struck (what a backend returns)."""
        return replace(self, detail=f"{node}: {self.detail}")

    def history_entry(self, node: str) -> dict[str, Any]:
        """What a fault window's completion records of this damage (docs/formats.md, `damage`)."""
        return {"node": node, "how": self.how, "partition": self.partition, "offset": self.offset}


def corrupt_data_dir(data_dir: Path | str, how: str, *, partition: int | None = None, seed: int = 0) -> StorageFault:
    """Apply storage fault `how` to one partition replica in `data_dir` (any topic but the broker's own;
    `partition` restricts the choice to that partition number)."""
    data_dir = Path(data_dir)
    if how not in STORAGE_FAULTS:
        raise ValueError(f"unknown storage fault {how!r} (known: {', '.join(STORAGE_FAULTS)})")
    rng = random.Random(f"{seed}:{how}")
    if not data_dir.is_dir():
        raise ValueError(f"{data_dir}: no data directory to corrupt")
    # the broker's own topics (the groups' __consumer_offsets) are spared: a fault record names a partition
    # number, which the checker reads as the test topic's, and the nemesis spares the last in-sync copy
    # of the test topic's partitions only
    replicas = [(t, p) for t, p in list_partitions(data_dir)
                if not t.startswith(INTERNAL_PREFIX) and (partition is None or p == partition)]
    if how in ("bitflip", "truncate", "torn-last"):
        return _corrupt_log(data_dir, how, replicas, rng)
    name = HW_FILE if how.startswith("hw-") else EPOCH_FILE
    have = [(t, p) for t, p in replicas if (data_dir / partition_dir_name(t, p) / name).is_file()]
    if not have:
        raise ValueError(f"{data_dir}: no {name} to corrupt"
                                f"{'' if partition is None else f' in partition {partition}'}")
    topic, p = rng.choice(have)
    rel = Path(partition_dir_name(topic, p)) / name
    path = data_dir / rel
    if how.endswith("-delete"):
        size = path.stat().st_size
        path.unlink()
        return StorageFault(how, f"deleted {rel} ({size} bytes)", removed=[rel], partition=p)
    return StorageFault(how, _garble(path, rel, rng), written=[rel], partition=p)


def _corrupt_log(data_dir: Path, how: str, replicas: list[tuple[str, int]], rng: random.Random) -> StorageFault:
    candidates = []   # (topic, partition, segment scan) of segments holding at least one valid record
    for topic, p in replicas:
        scan = scan_partition(data_dir / partition_dir_name(topic, p))
        segs = [s for s in scan.segments if s.count > 0]
        if how in ("truncate", "torn-last"):
            segs = segs[-1:]
        candidates += [(topic, p, s) for s in segs]
    if not candidates:
        raise ValueError(f"{data_dir}: no segment holding records to corrupt")
    topic, p, seg = rng.choice(candidates)
    rel = Path(partition_dir_name(topic, p)) / seg.path.name
    ends = list(seg.positions[1:]) + [seg.valid_bytes]
    if how == "bitflip":
        # a record in the middle of the segment: the middle half of its records (the only one if it has one)
        i = rng.randint(seg.count // 4, max(seg.count // 4, (3 * seg.count - 1) // 4))
        start, end = seg.positions[i], ends[i]
        byte = rng.randrange(start + PREFIX_SIZE, end)      # covered by the CRC: never undetected
        bit = rng.randrange(8)
        with open(seg.path, "r+b") as fh:
            fh.seek(byte)
            old = fh.read(1)[0]
            fh.seek(byte)
            fh.write(bytes([old ^ (1 << bit)]))
            os.fsync(fh.fileno())
        return StorageFault(how, f"bit {bit} of byte {byte} flipped in {rel} (record of offset {seg.base + i}; "
                                 f"segment holds {seg.base}..{seg.end_offset - 1})", written=[rel],
                            partition=p, offset=seg.base + i)
    i = seg.count - 1 if how == "torn-last" else rng.randint(seg.count // 2, seg.count - 1)
    start, end = seg.positions[i], ends[i]
    cut = rng.randrange(start + 1, end)                    # mid-record: a torn write
    os.truncate(seg.path, cut)
    return StorageFault(how, f"{rel} cut at byte {cut} of {seg.file_size} (mid-record of offset {seg.base + i}; "
                             f"segment held {seg.base}..{seg.end_offset - 1})", written=[rel],
                        partition=p, offset=seg.base + i)


def _garble(path: Path, rel: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    mode = rng.choice(GARBLE_MODES)
    if mode == "garbage":
        new = bytes(rng.randrange(256) for _ in range(max(8, len(data))))
    elif mode == "bad-header":
        new = b"not-a-checkpoint 7\n" + data.split(b"\n", 1)[-1]
    else:
        new = data[:max(1, len(data) // 2)].rstrip(b"\n") if len(data) > 1 else b"x"
    with open(path, "wb") as fh:
        fh.write(new)
        os.fsync(fh.fileno())
    return f"{rel} garbled ({mode}): {len(data)} bytes replaced by {len(new)}"
