"""Replacing a small file atomically: write a temp file beside it, fsync it, rename it over the old one,
fsync the directory. A crash at any point leaves either the old or the new content, never a torn one.
The controller's state file and the storage checkpoints and marker are all written this way.
"""
from __future__ import annotations

import os
from pathlib import Path


def replace_atomically(path: str | Path, data: bytes) -> None:
    """Replace `path` by `data` (the temp file is `<name>.tmp` in the same directory)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
