"""Checkpoint files of a partition: the high watermark and the leader-epoch sequence.

Both are small text files written atomically (temp file, fsync, rename over, fsync the directory), so a
crash leaves either the old or the new content, never a mix. Formats (every line ends with "\\n"):

    hw.checkpoint                      leader-epoch.checkpoint
    highwater-hw-checkpoint 1          highwater-leader-epoch-checkpoint 1
    1234                               2                 <- number of entries
                                       0 0               <- epoch start_offset
                                       2 17

Leader-epoch entries have strictly increasing epochs and non-decreasing start offsets. Reading a
malformed file raises CheckpointError whose message names the file and the 1-based line.
A missing file reads as "no checkpoint yet" (None / []).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from broker.atomic_file import replace_atomically

HW_FILE = "hw.checkpoint"
EPOCH_FILE = "leader-epoch.checkpoint"
HW_HEADER = "highwater-hw-checkpoint 1"
EPOCH_HEADER = "highwater-leader-epoch-checkpoint 1"


class CheckpointError(ValueError):
    """A checkpoint file is malformed; the message is `<path>:<line>: <what>`."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` by the ASCII `text` so that a crash at any point leaves the old or the new content."""
    replace_atomically(path, text.encode("ascii"))


def _read_lines(path: Path, header: str) -> list[str] | None:
    """Lines after the header (without newlines), or None if the file does not exist."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise CheckpointError(path, None, "not an ASCII text file") from None
    if not text:
        raise CheckpointError(path, 1, f"empty file, expected header {header!r}")
    lines = text.split("\n")
    if lines[-1] != "":
        raise CheckpointError(path, len(lines), "last line has no newline (truncated file?)")
    lines.pop()
    if lines[0] != header:
        raise CheckpointError(path, 1, f"bad header {lines[0][:60]!r}, expected {header!r}")
    return lines[1:]


def _parse_int(path: Path, line_no: int, text: str, what: str) -> int:
    if not text.isdigit():  # ASCII digits only: no sign, no spaces
        raise CheckpointError(path, line_no, f"{what} must be a non-negative integer, got {text[:40]!r}")
    return int(text)


class HwCheckpoint:
    """The checkpointed high watermark of one partition."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def read(self) -> int | None:
        lines = _read_lines(self.path, HW_HEADER)
        if lines is None:
            return None
        if len(lines) != 1:
            raise CheckpointError(self.path, 2 if not lines else 3,
                                  f"expected exactly one value line, found {len(lines)}")
        return _parse_int(self.path, 2, lines[0], "high watermark")

    def write(self, hw: int) -> None:
        if not isinstance(hw, int) or hw < 0:
            raise ValueError(f"high watermark must be a non-negative int, not {hw!r}")
        write_atomically(self.path, f"{HW_HEADER}\n{hw}\n")


class EpochCheckpoint:
    """The checkpointed leader-epoch sequence [(epoch, start_offset), ...] of one partition."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def read(self) -> list[tuple[int, int]]:
        lines = _read_lines(self.path, EPOCH_HEADER)
        if lines is None:
            return []
        if not lines:
            raise CheckpointError(self.path, 2, "missing entry count")
        count = _parse_int(self.path, 2, lines[0], "entry count")
        entries = lines[1:]
        if len(entries) != count:
            raise CheckpointError(self.path, 3 + min(count, len(entries)),
                                  f"entry count says {count} but {len(entries)} entries follow")
        out: list[tuple[int, int]] = []
        for i, text in enumerate(entries):
            line_no = i + 3
            parts = text.split(" ")
            if len(parts) != 2:
                raise CheckpointError(self.path, line_no, f"expected 'epoch start_offset', got {text[:60]!r}")
            epoch = _parse_int(self.path, line_no, parts[0], "epoch")
            start = _parse_int(self.path, line_no, parts[1], "start offset")
            if out and epoch <= out[-1][0]:
                raise CheckpointError(self.path, line_no, f"epoch {epoch} does not increase (previous {out[-1][0]})")
            if out and start < out[-1][1]:
                raise CheckpointError(self.path, line_no,
                                      f"start offset {start} decreases (previous {out[-1][1]})")
            out.append((epoch, start))
        return out

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        entries = [(int(e), int(s)) for e, s in entries]
        for i, (e, s) in enumerate(entries):
            if e < 0 or s < 0:
                raise ValueError(f"leader-epoch entry {i} ({e}, {s}) has a negative value")
            if i and (e <= entries[i - 1][0] or s < entries[i - 1][1]):
                raise ValueError(f"leader-epoch entries must have increasing epochs and non-decreasing "
                                 f"start offsets: {entries[i - 1]} then {(e, s)}")
        body = "".join(f"{e} {s}\n" for e, s in entries)
        write_atomically(self.path, f"{EPOCH_HEADER}\n{len(entries)}\n{body}")
