"""SegmentedLog.count_within, which lets a Kafka fetch read by bytes rather than by record count: how
many records from an offset fit whole in a byte budget as stored (at least one if any), checked against a
plain sum over the records' stored sizes, across segment boundaries, with and without power-loss
buffering (where the newest bytes are still in memory)."""
from __future__ import annotations

import random

import pytest

from broker.records import Record
from broker.storage.log import SegmentedLog


def _stored_sizes(log: SegmentedLog) -> list[int]:
    out = []
    for seg in log._segments:
        for k in range(seg.count):
            out.append((seg.positions[k + 1] if k + 1 < seg.count else seg.size) - seg.positions[k])
    return out


@pytest.mark.parametrize("power_loss", [False, True], ids=["page-cache", "power-loss"])
@pytest.mark.parametrize("segment_records", [1, 3, 7, 1000])
def test_count_within_matches_a_sum_of_stored_sizes(tmp_path, segment_records, power_loss):
    rng = random.Random(segment_records * 2 + power_loss)
    log = SegmentedLog.open(tmp_path / "p", segment_records=segment_records, power_loss=power_loss)
    try:
        log.append([Record(i, 1, b"x" * rng.randint(1, 300), None, 0) for i in range(40)])
        sizes = _stored_sizes(log)
        assert len(sizes) == 40
        for _ in range(1500):
            start, max_records, max_bytes = rng.randint(0, 42), rng.randint(0, 50), rng.randint(0, 3000)
            end, n, used = min(40, start + max_records), 0, 0
            for o in range(start, end):
                if used + sizes[o] > max_bytes:
                    break
                used, n = used + sizes[o], n + 1
            want = max(n, 1) if end > start else 0
            assert log.count_within(start, max_records, max_bytes) == want, (start, max_records, max_bytes)
    finally:
        log.close()
