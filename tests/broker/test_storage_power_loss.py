"""Real SIGKILL of a process holding a log: with power_loss exactly the flushed records survive, without
it every appended record survives (it was in the OS page cache)."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.records import Record
from broker.storage import PartitionStore
from real_processes import run_then_sigkill

WRITER = """
import sys, time
from broker.records import Record
from broker.storage import PartitionStore
data_dir, power_loss = sys.argv[1], sys.argv[2] == "1"
store = PartitionStore.open(data_dir, "hw", 0, power_loss=power_loss, flush_policy="interval", segment_records=4)
log = store.log
log.append([Record(o, 1, str(o).encode(), None, 1000 + o) for o in range(0, 3)])
log.append([Record(o, 2, str(o).encode(), None, 1000 + o) for o in range(3, 6)])
log.flush()
log.append([Record(o, 2, str(o).encode(), None, 1000 + o) for o in range(6, 10)])
print("ready", log.leo(), log.flushed_offset(), len(log.read(0, 100)), flush=True)
time.sleep(120)
"""


def run_and_kill(data_dir: Path, power_loss: bool) -> str:
    return run_then_sigkill(WRITER, str(data_dir), "1" if power_loss else "0").strip()


def expected(start, stop):
    return [Record(o, 1 if o < 3 else 2, str(o).encode(), None, 1000 + o) for o in range(start, stop)]


@pytest.mark.parametrize("power_loss, survivors, segments", [(True, 6, [0, 4]), (False, 10, [0, 4, 8])])
def test_sigkill(tmp_path, power_loss, survivors, segments):
    line = run_and_kill(tmp_path, power_loss)
    assert line == "ready 10 6 10"
    store = PartitionStore.open(tmp_path, "hw", 0, segment_records=4)
    assert store.recovery.cut is False
    assert (store.log.leo(), store.log.last_epoch(), store.log.segment_bases()) == (survivors, 2, segments)
    assert store.log.read(0, 100) == expected(0, survivors)
    store.close()
