"""Idempotent producers' state of one partition replica (KIP-98), without I/O.

An idempotent producer stamps each batch with its producer id, its producer epoch and the sequence number
of the batch's first record (each record after it takes the next one). The leader appends a batch only
if it continues that producer's sequence; a retry of a batch already in the log is answered with the
offsets it got the first time instead of being appended again; a batch from an older producer epoch is
refused (a newer instance of the producer fenced it).

The state is derived from the log alone: every record keeps its producer id, epoch and sequence
(broker/records.py), so the table can be rebuilt from the log whenever it cannot be trusted: after a
restart, and after a truncation that removed more of a producer's history than the table remembers.
Followers keep it current as they append the leader's records, so a new leader starts with it.
`export` and `restore` carry the table to and from a snapshot (broker/storage/producer_snapshots.py), so
a restart replays only the records after the snapshot's offset.

Rules, as Kafka's ProducerStateManager applies them (Kafka 2.5+):
- an older epoch than the producer's: INVALID_PRODUCER_EPOCH;
- a newer epoch: its first batch must start at sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER);
- the same epoch: a batch whose sequences lie within one of the producer's last CACHED_BATCHES batches is a
  duplicate (answered with that batch's offsets); otherwise its first sequence must be the last appended
  one + 1 (else OUT_OF_ORDER_SEQUENCE_NUMBER);
- a producer the table does not know is accepted at any sequence (KIP-360: its state may have been
  lost with old log segments).
Sequence numbers wrap from 2**31 - 1 to 0, as Kafka's do.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from broker.records import Record

CACHED_BATCHES = 5          # the batches per producer a retry is matched against (Kafka's NUM_BATCHES_TO_RETAIN)
HISTORY = 20                # batches kept per producer, so a truncation rarely needs a rebuild
MAX_SEQUENCE = 2**31 - 1

SNAPSHOT_EVERY = 100_000    # records appended between two snapshots of a loaded table (and one at shutdown)

APPEND, DUPLICATE, REFUSE = "append", "duplicate", "refuse"


def next_sequence(seq: int) -> int:
    return 0 if seq == MAX_SEQUENCE else seq + 1


def last_sequence(first: int, count: int) -> int:
    """The sequence of a batch's last record: first + count - 1, wrapping past 2**31 - 1."""
    return (first + count - 1) % (MAX_SEQUENCE + 1)


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: list[BatchMeta] = field(default_factory=list)    # oldest first, at most HISTORY
    older: bool = False     # the log may hold records of it before `batches` (trimmed, or of an older epoch)


@dataclass(frozen=True)
class Snapshot:
    """The table as it stood at `offset` (built from the records before it), `export`ed. `last_epoch` is
    the leader epoch of the record at offset - 1 (-1 when there is none), which must still be there for the
    snapshot to fit the log."""
    offset: int
    last_epoch: int
    entries: list


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with an idempotent batch: APPEND it, answer it as the DUPLICATE `batch`, or REFUSE it
    with `error` (a broker error string: OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH)."""
    action: str
    batch: BatchMeta | None = None
    error: str | None = None
    message: str = ""


class ProducerStates:
    """The producer table of one replica. `loaded` is False until it was built from the log; the owner
    (replica.py) rebuilds it before the first idempotent batch it must judge."""

    def __init__(self) -> None:
        self._entries: dict[int, ProducerEntry] = {}
        self.loaded = False

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    # --- judging a batch (the leader) ------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, count: int) -> Verdict:
        entry = self._entries.get(producer_id)
        if entry is None or not entry.batches:
            return Verdict(APPEND)
        if epoch < entry.epoch:
            return Verdict(REFUSE, error="INVALID_PRODUCER_EPOCH",
                           message=f"producer {producer_id}: epoch {epoch} is older than its epoch {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                return Verdict(REFUSE, error="OUT_OF_ORDER_SEQUENCE_NUMBER",
                               message=f"producer {producer_id}: new epoch {epoch} starts at sequence {first_seq}, not 0")
            return Verdict(APPEND)
        last_seq = last_sequence(first_seq, count)
        for b in entry.batches[-CACHED_BATCHES:]:
            if b.first_seq <= first_seq and last_seq <= b.last_seq:
                skip = first_seq - b.first_seq
                return Verdict(DUPLICATE, BatchMeta(first_seq, last_seq, b.first_offset + skip,
                                                    b.first_offset + skip + count - 1))
        expected = next_sequence(entry.batches[-1].last_seq)
        if first_seq != expected:
            return Verdict(REFUSE, error="OUT_OF_ORDER_SEQUENCE_NUMBER",
                           message=f"producer {producer_id} epoch {epoch}: sequence {first_seq}, expected {expected}")
        return Verdict(APPEND)

    # --- keeping it current ----------------------------------------------------------------------

    def append(self, records: Sequence[Record]) -> None:
        """Note appended records (the leader's own, or a follower's copies): each run of one producer's
        records with consecutive sequences is one batch."""
        run: list[Record] = []
        for r in records:
            if r.producer_id < 0:
                continue
            if run and (r.producer_id != run[-1].producer_id or r.producer_epoch != run[-1].producer_epoch
                        or r.sequence != next_sequence(run[-1].sequence) or r.offset != run[-1].offset + 1):
                self._note(run)
                run = []
            run.append(r)
        if run:
            self._note(run)

    def _note(self, run: list[Record]) -> None:
        first, last = run[0], run[-1]
        self.note_batch(first.producer_id, first.producer_epoch,
                        BatchMeta(first.sequence, last.sequence, first.offset, last.offset))

    def note_batch(self, producer_id: int, epoch: int, batch: BatchMeta) -> None:
        """Note one appended batch of a producer (what `append` does for each run it finds)."""
        entry = self._entries.get(producer_id)
        if entry is None or epoch > entry.epoch:
            older = entry is not None and (bool(entry.batches) or entry.older)
            entry = self._entries[producer_id] = ProducerEntry(epoch, older=older)
        elif epoch < entry.epoch:
            return          # a fenced epoch's records cannot follow a newer epoch's in a leader's log
        prev = entry.batches[-1] if entry.batches else None
        if (prev is not None and prev.last_offset + 1 == batch.first_offset
                and next_sequence(prev.last_seq) == batch.first_seq):
            entry.batches[-1] = BatchMeta(prev.first_seq, batch.last_seq, prev.first_offset, batch.last_offset)
        else:
            entry.batches.append(batch)
            if len(entry.batches) > HISTORY:
                del entry.batches[:-HISTORY]
                entry.older = True

    def truncate(self, offset: int) -> None:
        """Forget what records at `offset` and after taught. If a producer loses every batch the table
        remembers while the log may still hold older ones, the table is marked not `loaded`."""
        for pid in list(self._entries):
            entry = self._entries[pid]
            kept = [b for b in entry.batches if b.first_offset < offset]
            if kept and kept[-1].last_offset >= offset:
                b = kept[-1]
                cut = b.last_offset - offset + 1
                kept[-1] = BatchMeta(b.first_seq, (b.last_seq - cut) % (MAX_SEQUENCE + 1), b.first_offset, offset - 1)
            if len(kept) == len(entry.batches) and (not kept or kept[-1] == entry.batches[-1]):
                continue
            if not kept:
                if entry.older:
                    self.loaded = False       # older batches of it are in the log: rebuild from there
                del self._entries[pid]
                continue
            entry.batches = kept

    def rebuild(self, chunks: Iterable[Sequence[Record]]) -> int:
        """Build the table anew from the whole log, read in chunks. Returns the records read."""
        self._entries.clear()
        return self.replay(chunks)

    def replay(self, chunks: Iterable[Sequence[Record]]) -> int:
        """Note the records of `chunks` on top of what the table holds, then trust it. Returns the records read."""
        read = 0
        for chunk in chunks:
            self.append(chunk)
            read += len(chunk)
        self.loaded = True
        return read

    # --- snapshots ---------------------------------------------------------------------------------
    def export(self) -> list[tuple[int, int, bool, list[tuple[int, int, int, int]]]]:
        """The table as plain values: [(producer id, epoch, older, [(first_seq, last_seq, first_offset,
        last_offset), ...])], by producer id."""
        return [(pid, e.epoch, e.older, [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches])
                for pid, e in sorted(self._entries.items())]

    def restore(self, entries: Iterable[tuple[int, int, bool, Sequence[tuple[int, int, int, int]]]]) -> None:
        """Replace the table by `export`ed entries. It is not `loaded` until the records after the
        snapshot's offset are replayed on top (`replay`)."""
        self._entries = {pid: ProducerEntry(epoch, [BatchMeta(*b) for b in batches], older)
                         for pid, epoch, older, batches in entries}
        self.loaded = False

    def forget_all(self) -> None:
        """Empty the table and keep believing it complete: what a broker that wrongly concluded no
        producer data is left in its log holds (broker/config_keys.py producer_state_rebuilt_after_truncation)."""
        self._entries.clear()
