"""Benchmark: how long a restarted leader takes to build its idempotent producers' table, with and without
a producer snapshot (broker/storage/producer_snapshots.py), on a real segmented log.

Writes --records records (idempotent batches of --batch records from --producers producers, one plain
record in ten) to a fresh log in a temporary directory, then times, --rounds times each, alternating:
- the whole log read (no snapshot: what every restart cost before snapshots);
- a snapshot at the log end (a clean stop's), nothing replayed;
- a snapshot SNAPSHOT_EVERY records behind the log end (the worst case after a SIGKILL), replayed from there.
Also prints the snapshot's size and the time to write it. Medians are printed; every case must build the
same table, or the script exits 1.

Usage: .venv/bin/python benchmarks/producer_state.py [--records 1000000] [--producers 50] [--batch 10]
       [--rounds 3] [--dir DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.records import Record  # noqa: E402
from broker.replication import Checkpoints, PartitionReplica, ReplicationConfig  # noqa: E402
from broker.replication.producers import SNAPSHOT_EVERY, Snapshot  # noqa: E402
from broker.storage import SegmentedLog  # noqa: E402
from broker.storage.producer_snapshots import ProducerSnapshots  # noqa: E402

PID = 1 << 40


def write_log(directory: Path, records: int, producers: int, batch: int) -> None:
    log = SegmentedLog.open(directory, segment_records=100_000, flush_policy="never")
    seqs = [0] * producers
    offset, k, j = 0, 0, 0
    value = b"v" * 50
    while offset < records:
        if k % 10 == 9:
            log.append([Record(offset, 1, value, None, 0)])
            offset += 1
        else:
            p = j % producers
            j += 1
            n = min(batch, records - offset)
            log.append([Record(offset + i, 1, value, None, 0, (), PID + p, 0, seqs[p] + i) for i in range(n)])
            seqs[p] += n
            offset += n
        k += 1
    log.close()


def load(directory: Path, snapshot: Snapshot | None) -> tuple[float, PartitionReplica]:
    log = SegmentedLog.open(directory, segment_records=100_000, flush_policy="never")
    try:
        r = PartitionReplica("bench", 0, 1, log, ReplicationConfig(min_insync_replicas=1),
                             checkpoints=Checkpoints(producer_snapshot=snapshot))
        start = time.perf_counter()
        r.load_producers()
        return time.perf_counter() - start, r
    finally:
        log.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--producers", type=int, default=50)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", help="where to write the log (default: the system temp dir)")
    args = ap.parse_args()
    if args.records <= SNAPSHOT_EVERY:
        print(f"producer_state: --records must be above SNAPSHOT_EVERY ({SNAPSHOT_EVERY})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp) / "bench-0"
        t0 = time.perf_counter()
        write_log(directory, args.records, args.producers, args.batch)
        print(f"log: {args.records:,} records, {args.producers} producers, batches of {args.batch} "
              f"(written in {time.perf_counter() - t0:.1f} s)")
        _, whole = load(directory, None)
        table = whole.producers.export()
        snaps = ProducerSnapshots(directory)
        start = time.perf_counter()
        snaps.write(args.records, 1, table)
        write_s = time.perf_counter() - start
        size = snaps.path(args.records).stat().st_size
        at_end = Snapshot(args.records, *snaps.read(args.records))
        behind_at = args.records - SNAPSHOT_EVERY
        prefix_log = Path(tmp) / "prefix-0"
        write_log(prefix_log, behind_at, args.producers, args.batch)
        _, prefix = load(prefix_log, None)
        behind = Snapshot(behind_at, 1, prefix.producers.export())
        cases = {"whole log": None, "snapshot at the end": at_end,
                 f"snapshot {SNAPSHOT_EVERY:,} behind": behind}
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, snap in cases.items():        # alternated, round after round
                took, r = load(directory, snap)
                if r.producers.export() != table:
                    print(f"producer_state: {name}: the table differs from the whole log's", file=sys.stderr)
                    return 1
                times[name].append(took)
        base = statistics.median(times["whole log"])
        print(f"snapshot file: {size:,} bytes for {len(table)} producers, written in {write_s * 1000:.1f} ms")
        print(f"{'case':<32} {'median s':>9} {'vs whole log':>13}   (rounds: {args.rounds})")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{name:<32} {med:>9.4f} {med / base:>12.4f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
