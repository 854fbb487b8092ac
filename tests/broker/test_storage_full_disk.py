"""A full disk under the segmented log, for real: a small tmpfs is mounted, filled, and freed again. An
append that hits ENOSPC must take back what it wrote (the log holds exactly what it held before), the
files must stay readable by a fresh open, and appends must work again once space returns."""
from __future__ import annotations

import errno
import os
import subprocess

import pytest

from broker.records import Record
from broker.storage.log import SegmentedLog

pytestmark = pytest.mark.root


@pytest.fixture
def small_fs(tmp_path):
    """A 256 KiB tmpfs of this test's own, unmounted afterwards."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt, leave: int) -> os.PathLike:
    """Fill the filesystem up to `leave` bytes free with one filler file; return its path."""
    filler = mnt / "filler"
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    return filler


def _records(start: int, n: int, size: int = 1000, epoch: int = 1) -> list[Record]:
    return [Record(start + i, epoch, bytes([65 + (start + i) % 26]) * size, None, 0) for i in range(n)]


@pytest.mark.parametrize("power_loss", [False, True], ids=["page-cache", "power-loss"])
@pytest.mark.parametrize("segment_records", [1000, 3], ids=["one-segment", "rolling"])
def test_an_append_that_hits_enospc_takes_back_what_it_wrote(small_fs, power_loss, segment_records):
    d = small_fs / "p0"
    log = SegmentedLog.open(d, segment_records=segment_records, power_loss=power_loss, flush_policy="always")
    log.append(_records(0, 5))
    before = [(r.offset, r.value) for r in log.read(0, 100)]
    filler = _fill(small_fs, leave=4096)
    with pytest.raises(OSError) as exc:
        log.append(_records(5, 20))            # ~20 KB into 4 KiB: fails part way
    assert exc.value.errno == errno.ENOSPC
    assert log.leo() == 5 and log.flushed_offset() == 5
    assert [(r.offset, r.value) for r in log.read(0, 100)] == before

    filler.unlink()                             # space returns: the same append now works
    log.append(_records(5, 20))
    assert log.leo() == 25
    log.close()
    again = SegmentedLog.open(d, segment_records=segment_records, power_loss=power_loss)
    try:
        assert not again.recovery.cut, again.recovery     # nothing torn was left in the files
        assert [r.offset for r in again.read(0, 100)] == list(range(25))
        assert again.read(5, 1)[0].value == _records(5, 1)[0].value
    finally:
        again.close()


def test_a_failed_append_leaves_the_files_as_a_fresh_open_finds_them(small_fs):
    """Reopened straight after the failure (the broker killed then): the same five records, nothing cut."""
    d = small_fs / "p0"
    log = SegmentedLog.open(d, segment_records=4)
    log.append(_records(0, 5))
    _fill(small_fs, leave=2048)
    with pytest.raises(OSError):
        log.append(_records(5, 30))
    log.close(flush=False)
    again = SegmentedLog.open(d, segment_records=4)
    try:
        assert again.leo() == 5 and not again.recovery.cut
    finally:
        again.close()
