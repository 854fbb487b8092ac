"""Snapshots of a partition's idempotent-producer table, so a restart need not read the whole log again.

A snapshot taken at offset O holds the table built from the records before O (broker/replication/
producers.py). At start-up the replica restores the newest snapshot whose offset its log still reaches and
replays only the records from O on; without a usable one it reads the whole log, as before. Kafka keeps
the same files (`<offset>.snapshot`, ProducerStateManager), written at segment rolls and at shutdown.

One file per snapshot, `<offset, 20 digits>.producers`, written atomically (broker/atomic_file.py):

    highwater-producer-snapshot 1
    17 2                 <- the snapshot's offset, the leader epoch of the record at offset - 1 (-1: none)
    2                    <- number of producers
    1099511627776 0 0 2  <- producer id, producer epoch, older (1: the log may hold batches before these), batches
    0 4 0 4              <- first sequence, last sequence, first offset, last offset (oldest batch first)
    5 9 10 14
    ...

The epoch of the record before O is a fence: a truncation deletes the snapshots above its offset
(`delete_above`), and if one survived a crash in between, the record now at O - 1 was appended in a newer
epoch than the one written down, so the replica refuses the snapshot when it builds the table
(broker/replication/replica.py `_snapshot_misfit`) and reads the log instead. A malformed file raises
CheckpointError naming the file and the 1-based line; the caller reads the log instead and says why.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

from broker.atomic_file import replace_atomically
from broker.storage.checkpoints import CheckpointError

HEADER = "highwater-producer-snapshot 1"
SUFFIX = ".producers"
KEEP = 2                    # snapshots kept per partition: the newest, and one before it
_NAME = re.compile(r"^(\d{20})\.producers$")

# (producer id, producer epoch, older, [(first_seq, last_seq, first_offset, last_offset), ...])
Entry = tuple[int, int, bool, list[tuple[int, int, int, int]]]


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SUFFIX}"


def _ints(path: Path, line_no: int, text: str, count: int, what: str, unknown_at: tuple[int, ...] = ()) -> list[int]:
    """`count` space-separated non-negative integers; those at the positions `unknown_at` may be -1."""
    parts = text.split(" ")
    if len(parts) != count:
        raise CheckpointError(path, line_no, f"expected {what}, got {text[:80]!r}")
    out = []
    for i, p in enumerate(parts):
        if not (p.isdigit() or (i in unknown_at and p == "-1")):
            raise CheckpointError(path, line_no, f"{what}: {p[:40]!r} is not a non-negative integer")
        out.append(int(p))
    return out


class ProducerSnapshots:
    """The snapshot files of one partition directory."""

    def __init__(self, directory: Path | str):
        self.directory = Path(directory)

    def offsets(self) -> list[int]:
        """The offsets of the snapshots present, ascending."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := _NAME.match(n)))

    def path(self, offset: int) -> Path:
        return self.directory / snapshot_name(offset)

    def write(self, offset: int, last_epoch: int, entries: Iterable[Entry]) -> None:
        """Write the snapshot at `offset` (the table of the records before it), then drop all but the
        newest KEEP."""
        entries = list(entries)
        lines = [HEADER, f"{offset} {last_epoch}", str(len(entries))]
        for pid, epoch, older, batches in entries:
            lines.append(f"{pid} {epoch} {int(older)} {len(batches)}")
            lines.extend(f"{a} {b} {c} {d}" for a, b, c, d in batches)
        replace_atomically(self.path(offset), ("\n".join(lines) + "\n").encode("ascii"))
        for old in self.offsets()[:-KEEP]:
            self._remove(old)

    def read(self, offset: int) -> tuple[int, list[Entry]]:
        """(the epoch of the record before `offset`, the entries) of the snapshot at `offset`."""
        path = self.path(offset)
        try:
            text = path.read_bytes().decode("ascii")
        except UnicodeDecodeError:
            raise CheckpointError(path, None, "not an ASCII text file") from None
        if not text.endswith("\n"):
            raise CheckpointError(path, text.count("\n") + 1, "last line has no newline (truncated file?)")
        lines = text[:-1].split("\n")
        if lines[0] != HEADER:
            raise CheckpointError(path, 1, f"bad header {lines[0][:60]!r}, expected {HEADER!r}")
        if len(lines) < 3:
            raise CheckpointError(path, len(lines) + 1, "missing the offset line or the producer count")
        at, last_epoch = _ints(path, 2, lines[1], 2, "'offset epoch'", unknown_at=(1,))
        if at != offset:
            raise CheckpointError(path, 2, f"offset {at} does not match the file name's {offset}")
        (count,) = _ints(path, 3, lines[2], 1, "the producer count")
        entries: list[Entry] = []
        i = 3
        for _ in range(count):
            if i >= len(lines):
                raise CheckpointError(path, i + 1, f"producer count says {count} but {len(entries)} follow")
            pid, epoch, older, n = _ints(path, i + 1, lines[i], 4, "'producer_id epoch older batches'")
            if older > 1:
                raise CheckpointError(path, i + 1, f"older must be 0 or 1, got {older}")
            batches = []
            for j in range(n):
                line_no = i + 2 + j
                if line_no > len(lines):
                    raise CheckpointError(path, line_no, f"producer {pid} says {n} batches but {j} follow")
                fs, ls, fo, lo = _ints(path, line_no, lines[line_no - 1], 4,
                                       "'first_seq last_seq first_offset last_offset'")
                if lo < fo or lo >= offset:
                    raise CheckpointError(path, line_no, f"batch offsets {fo}..{lo} are not within 0..{offset - 1}")
                batches.append((fs, ls, fo, lo))
            entries.append((pid, epoch, bool(older), batches))
            i += 1 + n
        if i != len(lines):
            raise CheckpointError(path, i + 1, f"{len(lines) - i} lines after the {count} producers")
        return last_epoch, entries

    def delete_above(self, offset: int) -> list[int]:
        """Remove the snapshots taken past `offset` (a truncation to `offset` made them wrong)."""
        gone = [o for o in self.offsets() if o > offset]
        for o in gone:
            self._remove(o)
        return gone

    def _remove(self, offset: int) -> None:
        try:
            self.path(offset).unlink()
        except FileNotFoundError:
            pass
