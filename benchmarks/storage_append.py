"""Benchmark: appends/s of the segmented log for batch sizes 1, 10, 100 with flush "always" and "never".

Also prints the rate of follower-style reads (1000-record chunks from the file) and of start-up
recovery (scan + index rebuild) on the log the last case wrote.

Each case appends ~100-byte records for a fixed wall-clock budget into a fresh temporary directory
(the system temp dir unless --dir is given) and prints records/s and append calls/s.
Usage: .venv/bin/python benchmarks/storage_append.py [--seconds-per-case 1.0] [--dir DIR]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.records import Record  # noqa: E402
from broker.storage import SegmentedLog  # noqa: E402


def run_case(directory: Path, batch: int, policy: str, budget_s: float, power_loss: bool) -> tuple[float, float]:
    log = SegmentedLog.open(directory, segment_records=100_000, flush_policy=policy, power_loss=power_loss)
    value = b"1" * 100
    offset = 0
    calls = 0
    start = time.perf_counter()
    deadline = start + budget_s
    while time.perf_counter() < deadline:
        log.append([Record(o, 1, value, None, 1_763_765_100_000) for o in range(offset, offset + batch)])
        offset += batch
        calls += 1
    elapsed = time.perf_counter() - start
    log.close()
    return offset / elapsed, calls / elapsed


def read_and_recover(directory: Path, budget_s: float) -> tuple[float, float, int]:
    log = SegmentedLog.open(directory, segment_records=100_000)
    leo = log.leo()
    start = time.perf_counter()
    n = offset = 0
    while time.perf_counter() - start < budget_s:
        n += len(log.read(offset, 1000))
        offset = offset + 1000 if offset + 1000 < leo else 0
    read_rate = n / (time.perf_counter() - start)
    log.close()
    start = time.perf_counter()
    SegmentedLog.open(directory, segment_records=100_000).close()
    return read_rate, leo / (time.perf_counter() - start), leo


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds-per-case", type=float, default=1.0)
    p.add_argument("--dir", default=None, help="parent directory for the temporary logs")
    args = p.parse_args()
    parent = args.dir or tempfile.gettempdir()
    print(f"segmented log appends, 100-byte values, {args.seconds_per_case:.1f} s per case, in {parent}")
    print(f"{'flush':>7} {'power_loss':>10} {'batch':>6} {'records/s':>12} {'appends/s':>11}")
    with tempfile.TemporaryDirectory(prefix="hw-bench-", dir=parent) as tmp:
        n = 0
        for policy in ("always", "never"):
            for power_loss in (False, True):
                for batch in (1, 10, 100):
                    n += 1
                    rps, cps = run_case(Path(tmp) / f"b-{n}", batch, policy, args.seconds_per_case, power_loss)
                    print(f"{policy:>7} {str(power_loss):>10} {batch:>6} {rps:>12,.0f} {cps:>11,.0f}")
        read_rate, recover_rate, leo = read_and_recover(Path(tmp) / f"b-{n}", args.seconds_per_case)
        print(f"read in 1000-record chunks: {read_rate:,.0f} records/s; "
              f"recovery scan of {leo:,} records: {recover_rate:,.0f} records/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
