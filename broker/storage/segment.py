"""One open segment file of a live log: its offset->position index, writes, reads, truncation, fsync.

With `buffered` (power-loss emulation) appended bytes stay in `pending` (process memory) until
`write_pending`, and the file itself is only created then; otherwise they are written to the file at
once (into the OS page cache) and made durable by `sync`. Positions in the index are logical: bytes
[0, file_size) are in the file, [file_size, file_size + len(pending)) in `pending`.
"""
from __future__ import annotations

import os
from array import array
from pathlib import Path

from broker.storage.scan import OffsetSpan, segment_name


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """os.write until every byte is written (a regular file normally takes it in one call)."""
    done, total = 0, len(data)
    with memoryview(data) as view:    # released even when a write fails, so a bytearray may be resized
        while done < total:
            done += os.write(fd, view[done:])


class Segment(OffsetSpan):
    __slots__ = ("directory", "base", "path", "fd", "positions", "epochs", "file_size", "pending", "dirty")

    def __init__(self, directory: Path, base: int, *, fd: int | None, positions: array | None = None,
                 epochs: array | None = None, file_size: int = 0):
        self.directory = directory
        self.base = base
        self.path = directory / segment_name(base)
        self.fd = fd
        self.positions = positions if positions is not None else array("Q")
        self.epochs = epochs if epochs is not None else array("i")
        self.file_size = file_size
        self.pending = bytearray()
        self.dirty = False            # bytes or a truncation not yet fsynced

    @staticmethod
    def open_fd(path: Path) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    # --- state --------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Logical size in bytes: file plus pending."""
        return self.file_size + len(self.pending)

    # --- writing ------------------------------------------------------------------------------------

    def append(self, data: bytearray, positions: array, epochs: array, *, buffered: bool) -> None:
        if buffered:
            self.pending += data
        else:
            if self.fd is None:
                self.fd = self.open_fd(self.path)
            self._write(data)
        self.positions.extend(positions)
        self.epochs.extend(epochs)
        self.dirty = True

    def write_pending(self) -> bool:
        """Move pending bytes into the file; True when the file had to be created."""
        created = False
        if self.fd is None:
            created = not self.path.exists()
            self.fd = self.open_fd(self.path)
        if self.pending:
            self._write(self.pending)
            self.pending = bytearray()
        return created

    def _write(self, data: bytes | bytearray) -> None:
        """Write `data` at the end of the file. A failed write (ENOSPC, EIO) may have put part of it in the
        file: that part is cut off again, so the file keeps exactly `file_size` bytes, then the error is
        raised."""
        try:
            write_all(self.fd, data)
        except OSError:
            try:
                os.ftruncate(self.fd, self.file_size)    # frees blocks: works on a full disk too
            except OSError:
                pass                                     # the next open's recovery scan cuts the torn tail
            raise
        self.file_size += len(data)
        self.dirty = True

    def sync(self) -> None:
        if self.dirty and self.fd is not None:
            os.fsync(self.fd)
        self.dirty = False

    def truncate_records(self, keep: int) -> None:
        """Keep the first `keep` records."""
        if keep >= self.count:
            return
        new_size = self.positions[keep]
        if new_size >= self.file_size:
            del self.pending[new_size - self.file_size:]
        else:
            self.pending = bytearray()
            if self.fd is not None:
                os.ftruncate(self.fd, new_size)
            self.file_size = new_size
            self.dirty = True
        del self.positions[keep:]
        del self.epochs[keep:]

    # --- reading ------------------------------------------------------------------------------------

    def read_bytes(self, first: int, stop: int) -> bytes:
        """Encoded bytes of records with relative indexes [first, stop)."""
        start_pos = self.positions[first]
        end_pos = self.positions[stop] if stop < self.count else self.size
        parts = []
        if start_pos < self.file_size:
            want = min(end_pos, self.file_size) - start_pos
            got = os.pread(self.fd, want, start_pos)
            if len(got) != want:
                raise OSError(f"{self.path}: short read of {want} bytes at {start_pos} (got {len(got)})")
            parts.append(got)
        if end_pos > self.file_size:
            parts.append(bytes(self.pending[max(start_pos - self.file_size, 0):end_pos - self.file_size]))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    # --- lifetime -----------------------------------------------------------------------------------

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
