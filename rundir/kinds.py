"""The anomaly kinds, declared once: each kind's name and what the checker and the report need to know.

A kind's name is part of the results.json contract (docs/formats.md), so the registry sits with the
run-directory formats (`rundir/formats.py` takes ANOMALY_KINDS from here). The rest is read by:
  checkers/policy.py        `fails_by_default`: which kinds fail a run unless configured otherwise
  checkers/totals.py        `timed`: which kinds have an operation time (the histogram); the others
                            are all `untimed`
  checkers/anomalies/*.py   `family`: the module of the Spark checker that finds the kind and builds its
                            examples (its `KINDS` lists the kinds it owns; a test checks they agree)
  checkers/reference.py     the names: every kind is in its output
  reports/anomalies.py      `explanation`: what the report tells a reader about the kind
  checkers/explain.py       `replicas`: which replica records an example's `replicas` field shows
  tests                     `example_fields`: the fields every example of the kind carries, in order

The order of KINDS is the documented order: results.json's `failed_kinds`, the verdict line and the
report list kinds in it.

Adding a kind: declare it here and add it to KINDS (with `needs` if it reads what only some workloads
record); in its Spark family module (checkers/anomalies/<family>.py, which the engine imports by the
family's name), list it in `KINDS`,
find it (a finding with the kind's name) and build its examples in `examples`; write the same rule in
checkers/reference.py (the independent implementation the Spark checker is cross-checked against);
give tests/checkers/checker_scenarios.py a scenario that finds it (tests/checkers/test_kinds.py
requires one) and describe it in docs/formats.md ("Checker rules"). Policy, totals, results.json and
the report follow from here. Only an example that needs history lines the other kinds do not look up
(checkers/anomalies/engine.look_up_details) touches more.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Needs:
    """What a kind reads that not every workload records: a column of the ops table (docs/formats.md)
    that some operation must fill, and the status reason of a run where none does (checkers/coverage.py:
    the kind is `not-exercised` there)."""
    column: str
    missing: str


@dataclass(frozen=True)
class Kind:
    name: str
    family: str                      # its Spark family module: checkers/anomalies/<family>.py
    summary: str                     # one line
    explanation: str                 # for a reader of the report: what it means, typical causes
    fails_by_default: bool           # whether a finding fails the run (checkers/policy.py may change it)
    timed: bool                      # whether a finding has an operation time (checkers/totals.py)
    example_fields: tuple[str, ...]  # the fields of each example, in the order the checker writes them
    replicas: str | None = None      # what the example's `replicas` field shows (checkers/explain.py):
                                     # one of REPLICAS_SHOWING, or None for no such field
    needs: Needs | None = None       # what its workload must record (None: any history has it)


# what an example's `replicas` field shows, per node
REPLICAS_SHOWING = (
    "value-and-offset",   # where the replica holds the value, and its record at the example's offset
    "value",              # where the replica holds the value
    "offset",             # its record at the example's offset
    "offset-and-meta",    # its record at the example's offset, with the replica's HW and LEO
)


LOST_WRITE = Kind(
    "lost-write", "values",
    "an acknowledged send whose value is not in the final log",
    "A send was acknowledged (ok): the producer was told the record was stored at an offset. Yet the value "
    "is missing from the partition's final log. Typical causes: acks=1 and the leader fails before its "
    "followers copied the record; or pre-0.11 high-watermark truncation, where a restarted follower cuts "
    "its log back to its own HW, becomes leader, and overwrites acknowledged records on every replica.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "value", "offset", "epoch", "index", "time", "process", "invoke_index",
                    "final_values_at_offset", "replicas"),
    replicas="value-and-offset")

FAILED_WRITE_PRESENT = Kind(
    "failed-write-present", "values",
    "a failed send whose value is in the final log",
    "A send failed definitely (fail), so the producer was told the record was NOT written, yet the "
    "value is in the final log. A producer that retries after a definite failure then creates a "
    "duplicate; a definite failure must really be one.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "value", "index", "time", "process", "invoke_index", "error", "final_offsets",
                    "replicas"),
    replicas="value")

DIVERGENCE = Kind(
    "divergence", "divergence",
    "two replicas hold different records at the same offset",
    "Two replicas hold different records (a different value or leader epoch) at the same offset after "
    "the cluster recovered. Divergence below the HW (committed) means readers of different replicas see "
    "different histories; above the HW it shows where the logs split and were never reconciled.",
    fails_by_default=True, timed=False,
    example_fields=("partition", "offset", "committed", "replicas"),
    replicas="offset-and-meta")

INCONSISTENT_OFFSET = Kind(
    "inconsistent-offset", "offsets",
    "the acknowledgements and reads of one offset show more than one record (value or leader epoch)",
    "A value was acknowledged at one offset but read at another, or different values were acknowledged "
    "at the same offset, or the same value was seen at the offset with different leader epochs. The offset "
    "a producer is given must be where consumers find the record, and a record keeps the epoch of the "
    "leader that appended it: consumers use it to detect truncation (KIP-320).",
    fails_by_default=True, timed=True,
    example_fields=("partition", "offset", "values", "epochs", "index", "observations", "replicas"),
    replicas="offset")

DUPLICATE = Kind(
    "duplicate", "values",
    "a value at more than one offset of the final log",
    "One value, sent once, appears at more than one offset of the partition (in the final log or in "
    "what consumers read).",
    fails_by_default=False, timed=False,
    example_fields=("partition", "value", "offsets", "count", "index", "send", "replicas"),
    replicas="value")

NONMONOTONIC_SEND = Kind(
    "nonmonotonic-send", "ordering",
    "a producer's later acknowledged offset is below an earlier one",
    "A producer's acknowledged offsets on one partition went backwards: a later send was acknowledged at "
    "an offset at or below an earlier one, so an acknowledged offset was handed out twice.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "process", "index", "earlier", "later"))

POLL_SKIP = Kind(
    "poll-skip", "ordering",
    "a consumer's polls skipped offsets",
    "A consumer's consecutive polls of a partition, with no reassignment in between, skipped offsets: "
    "records between two polls were never delivered to it.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "process", "index", "time", "offset", "value", "previous", "gap", "skipped"))

NONMONOTONIC_POLL = Kind(
    "nonmonotonic-poll", "ordering",
    "a consumer's polls went backwards or repeated offsets",
    "A consumer's consecutive polls of a partition, with no reassignment in between, went backwards or "
    "repeated offsets it had already consumed.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "process", "index", "time", "offset", "value", "previous"))

DIRTY_READ = Kind(
    "dirty-read", "values",
    "a poll read a value that is not in the final log",
    "A poll returned a record that is not in the final committed log: a consumer saw data that was "
    "later truncated away. Consumers must only see records below the high watermark.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "value", "offset", "index", "time", "process", "reads", "send", "replicas"),
    replicas="value")

ABORTED_READ = Kind(
    "aborted-read", "values",
    "a poll read a value whose send failed",
    "A poll returned a value whose send failed definitely: a consumer saw a write its producer was told "
    "never happened.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "value", "offset", "index", "time", "process", "reads", "send", "error",
                    "replicas"),
    replicas="value")

HW_REGRESSION = Kind(
    "hw-regression", "watermarks",
    "a partition's high watermark went backwards within one leader epoch",
    "Within one leader epoch, the high watermark reported to a consumer went backwards: data that had been "
    "committed (and could have been consumed) became uncommitted again.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "epoch", "hw", "index", "time", "process", "invoke_index", "f", "previous"))

HW_REGRESSION_CROSS_EPOCH = Kind(
    "hw-regression-cross-epoch", "watermarks",
    "a partition's high watermark went backwards across a leader change",
    "The high watermark reported to a consumer went backwards across a leader change: a new leader's HW may "
    "lag the old leader's until its followers catch up, so by default this is counted but does not fail "
    "the run.",
    fails_by_default=False, timed=True,
    example_fields=("partition", "epoch", "hw", "index", "time", "process", "invoke_index", "f", "previous"))

REALTIME_ORDER = Kind(
    "realtime-order", "ordering",
    "a send acknowledged before another was invoked got an offset at or above the later one's",
    "Two sends to one partition, possibly from different producers, did not overlap: the first was "
    "acknowledged before the second was invoked, yet the second was acknowledged at an offset at or below "
    "the first one's. A log hands out offsets in the order it appends, so an acknowledged offset was handed "
    "out again or a record was acknowledged before it was appended. Typical causes: an acknowledged write "
    "truncated away and its offset given to a later write (acks=1, or pre-0.11 high-watermark truncation); "
    "a leader acknowledging before appending. With acks=0 or 1 it is counted but does not fail the run "
    "(an acks=1 leader may lose an acknowledged write and reuse its offset; lost-write reports the loss).",
    fails_by_default=True, timed=True,
    example_fields=("partition", "offset", "value", "epoch", "index", "time", "process", "invoke_index",
                    "invoke_time", "previous"))

KEY_REORDER = Kind(
    "key-reorder", "keys",
    "a key's record sent after another's acknowledgement sits below it in the final log",
    "Two sends of one key (the keyed workload) did not overlap: the first was acknowledged before the "
    "second was invoked, yet in the partition's final log the second one's record sits at a lower offset. "
    "A consumer reading the key would see its updates out of order. Unlike realtime-order, it compares "
    "where the records are in the final log, not what the acknowledgements said, and the later send may "
    "have any outcome: a send whose outcome was unknown that landed below an acknowledged record of its "
    "key means the log was rewritten below an acknowledged offset. Typical causes: a committed record "
    "truncated away and its offset reused (pre-0.11 high-watermark truncation, an unclean election), an "
    "acknowledgement given out of order with the appends.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "key", "value", "offset", "type", "index", "time", "invoke_index", "previous"),
    needs=Needs("key", "the workload sends no keys"))

# --- the group workload's kinds (family `groups`, checkers/anomalies/groups.py): a consumer group's
# assignments, commits and polls (docs/formats.md "Group operations"); none is exercised without a group
_GROUP_NEEDS = Needs("group", "the workload has no consumer group")

COMMITTED_REGRESSION = Kind(
    "committed-regression", "groups",
    "a group's committed offset read below one whose commit was acknowledged before the read",
    "A commit of a group's offset for a partition was acknowledged, and a later read of the group's "
    "committed offsets (an OffsetFetch: the final `committed` read, or the committed offsets a member was "
    "given with its assignment), invoked after that acknowledgement, answered a lower offset, or none. An "
    "acknowledged commit is durable: a member resuming from the lower offset reads records again, and one "
    "resuming from none may start anywhere. Typical causes: the offsets partition's committed records "
    "truncated away (pre-0.11 high-watermark truncation applies to commits too), a coordinator that "
    "acknowledged a commit before it was replicated, a new coordinator answering before it loaded the "
    "group's state, a commit from a member of an older generation accepted after a newer one.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "group", "offset", "f", "index", "time", "invoke_index", "process", "previous"),
    needs=_GROUP_NEEDS)

GROUP_RESUME_MISMATCH = Kind(
    "group-resume-mismatch", "groups",
    "after an assignment, a member's first records did not start at the group's acknowledged commit",
    "A member was assigned a partition, and the first records it polled from it did not start at the "
    "group's highest offset whose commit was acknowledged before the assignment, nor at the offset of a "
    "commit still in flight across it (which may have been the last one applied). The member either reads "
    "records again or skips some that nobody in the group reads. Typical causes: the coordinator answered "
    "an older committed offset (or none) after a failover, lost a commit it had acknowledged, or the "
    "member reset its position (a committed offset past the log end).",
    fails_by_default=True, timed=True,
    example_fields=("partition", "group", "member", "generation", "offset", "expected", "index", "time",
                    "process", "assign"),
    needs=_GROUP_NEEDS)

LOST_BY_GROUP = Kind(
    "lost-by-group", "groups",
    "a record below the group's final committed offset that no member of the group ever polled",
    "The group's final committed offset for a partition says that every record below it was consumed, yet "
    "this record of the partition's final log, below that offset, was never returned to any member of the "
    "group. At-least-once consumption promises every record up to the committed offset was read by "
    "someone. Typical causes: a member resumed past where the previous owner stopped (a commit of an "
    "offset it had not read, an assignment handed out twice or skipped), records appended below the "
    "committed offset after the group read past them (a rewritten log).",
    fails_by_default=True, timed=True,
    example_fields=("partition", "group", "offset", "value", "committed", "index", "time"),
    needs=_GROUP_NEEDS)

COMMIT_BEYOND_LOG = Kind(
    "commit-beyond-log", "groups",
    "an acknowledged or final committed offset above the partition's final log end",
    "A commit of a group's offset for a partition was acknowledged, or the group's final committed offset "
    "is, above the partition's high watermark in the final state: the group claims to have consumed "
    "records the log does not hold. A member resuming there finds its position out of range and resets "
    "it. Typical causes: records the group read were truncated away (the log was rewritten below its "
    "old high watermark), a consumer read above the high watermark and committed it.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "group", "offset", "hw", "f", "index", "time", "process", "member", "generation"),
    needs=_GROUP_NEEDS)

ASSIGNMENT_OVERLAP = Kind(
    "assignment-overlap", "groups",
    "two members of one generation of a group were assigned the same partition",
    "Within one generation of a group, two different members were each assigned the same partition: both "
    "consume it at once, so records are processed twice and commits race. A generation's assignment "
    "shares the partitions out; only the next generation may move one. An assignment whose generation the "
    "client could not tell (-1) or whose member is unknown is never compared. Typical causes: a "
    "coordinator that handed out two leaders' assignments in one generation, a member that kept its "
    "partitions after its session expired without learning of the new generation.",
    fails_by_default=True, timed=True,
    example_fields=("partition", "group", "generation", "members", "member", "index", "time", "process", "first"),
    needs=_GROUP_NEEDS)

GROUP_REREAD = Kind(
    "group-reread", "groups",
    "a record the group polled more than once",
    "A record was returned to the group's members more than once, typically after a rebalance: the new "
    "owner resumed from the last commit, below where the previous owner had read. Consumer groups promise "
    "at-least-once consumption, so by default this is counted but does not fail the run.",
    fails_by_default=False, timed=True,
    example_fields=("partition", "group", "value", "offset", "reads", "index", "time", "process", "first"),
    needs=_GROUP_NEEDS)

GROUP_KINDS: tuple[Kind, ...] = (COMMITTED_REGRESSION, GROUP_RESUME_MISMATCH, LOST_BY_GROUP, COMMIT_BEYOND_LOG,
                                 ASSIGNMENT_OVERLAP, GROUP_REREAD)

KINDS: tuple[Kind, ...] = (
    LOST_WRITE,
    FAILED_WRITE_PRESENT,
    DIVERGENCE,
    INCONSISTENT_OFFSET,
    DUPLICATE,
    NONMONOTONIC_SEND,
    POLL_SKIP,
    NONMONOTONIC_POLL,
    DIRTY_READ,
    ABORTED_READ,
    HW_REGRESSION,
    HW_REGRESSION_CROSS_EPOCH,
    REALTIME_ORDER,
    KEY_REORDER,
    *GROUP_KINDS,
)

# --- protocol kinds: the white-box rules of broker/rules, checked on the brokers' and the controller's
# event logs (checkers/protocol_trace.py). Each finding is one broken rule at one moment; which of them
# fail a run depends on what its configuration promises (broker/rules `promised`, checkers/policy.py).
PROTOCOL_FIELDS = ("partition", "node", "time", "ts", "epoch", "detail", "promised", "evidence")

_PROTOCOL_EXPLANATIONS = {
    "hw-above-leo":
        "A replica logged a high watermark above its own log end offset. The HW marks records every ISR member "
        "holds, so it can never pass what this replica holds itself (a follower takes min(leader HW, own LEO)).",
    "leader-hw-decrease":
        "While one broker led one leader epoch, its high watermark went back. Records below a leader's HW are "
        "committed and may have been read or acknowledged; a leader never un-commits them.",
    "follower-hw-ahead":
        "A follower set its high watermark above every HW any leader of the partition had logged by then. A "
        "follower learns the HW from its leader's fetch answers, so it can only lag it: a follower ahead of "
        "its leader would let a later election commit what no ISR agreed on.",
    "ack-above-hw":
        "An acks=all produce was acknowledged while the leader's HW had not passed its last offset, so not "
        "every ISR member had the records yet: a failover can lose an acknowledged write.",
    "ack-below-min-isr":
        "An acks=all produce was acknowledged while the leader's ISR had fewer members than "
        "min.insync.replicas: the durability the producer asked for was not there.",
    "acked-not-durable":
        "A leader acknowledged records, restarted, and reopened its log without them (a recovery cut below "
        "the acknowledged offset). With flush=always every acknowledged record is on disk first; with no "
        "power loss nothing written is lost. Not promised with flush=never and power loss, or with storage "
        "faults a scenario or schedule file staged; the recovery of a broker whose files a storage fault "
        "damaged is exempt (the disk's loss: the other copies keep the records).",
    "ack-before-flush":
        "With flush=always a produce was acknowledged while the leader's log was flushed (fsynced) only below "
        "the records it acknowledged: a power cut then could lose an acknowledged write. The group commit "
        "must finish before the answer goes out. Not promised with another flush policy.",
    "epoch-two-leaders":
        "Two brokers each took the leadership of the same leader epoch. The epoch names one leadership: two "
        "leaders in one epoch can accept different records at the same offsets, and fencing cannot tell them "
        "apart.",
    "leader-not-elected":
        "A broker acted as leader of an epoch the controller never gave it (the controller's log has another "
        "leader, or no election, for that epoch).",
    "epoch-outlived-restart":
        "A broker restarted and then led a leader epoch that the controller had elected it for before the "
        "restart. A leadership belongs to one incarnation: the controller fences the old incarnation when the "
        "new one registers and elects again with a new epoch, so followers and fencing can tell the leader "
        "that lost its memory (and perhaps its unflushed tail) from the one they followed.",
    "election-outside-isr":
        "The controller elected a leader that was not in the ISR (nor, with KIP-966, in the ELR) just before "
        "the election: an unclean election. It may lack committed records. Reported but not failing when "
        "unclean.leader.election is on, or for an admin unclean election.",
    "epoch-not-increasing":
        "A leader election did not give the partition a leader epoch above every earlier one. Fencing, "
        "truncation and the epoch cache all rely on epochs growing with every election.",
    "truncate-below-hw":
        "A follower cut its log below its own high watermark. Below its HW a replica holds only committed "
        "records, which every cleanly elected leader has, so leader-epoch truncation never goes there. "
        "Promised with leader-epoch truncation, clean elections, fetch fencing, no unflushed power loss and no "
        "staged storage faults; "
        "pre-0.11 HW truncation cuts to the HW itself, never below it.",
    "stale-epoch-served":
        "A leader served a follower's fetch or OffsetsForLeaderEpoch request that carried another leader epoch "
        "than its own, or none (a broker's follower always sends it). With KIP-320 fencing (Kafka 2.1) a leader refuses such requests (FENCED_LEADER_EPOCH or "
        "UNKNOWN_LEADER_EPOCH): a follower acting on another epoch's answer can cut or keep the wrong records "
        "(KAFKA-6880). Not promised with fetch_fencing off.",
    "isr-join-lagging":
        "A leader proposed a follower for the ISR while the follower's log end was still below the leader's "
        "high watermark, or below the start offset of the leader's epoch (the KAFKA-7128 rule). An ISR member "
        "is counted for commitment and may be elected: one that lacks committed records can lose them.",
    "read-uncommitted":
        "A consumer's poll returned a record at or above the high watermark: the HW the poll itself reported, "
        "or every HW any leader had logged by the time the poll completed. Consumers may read committed "
        "records only; an uncommitted one can still be truncated away.",
    "hw-reported-ahead":
        "A consumer was told a high watermark (in a fetch answer, or by ListOffsets for the latest offset) above "
        "every HW any leader had logged by the time its poll completed. Offsets below the HW a consumer is told "
        "are committed as far as it knows: it may seek to them, wait for them or report them as the end of the "
        "log, so a broker must report its own HW, never its log end.",
    "reported-before-flush":
        "With flush=always a follower fetched from an offset (which tells the leader its log end, so the leader "
        "may advance the HW and acknowledge) while its own log was fsynced only below it: an acks=all write "
        "could be acknowledged with fewer durable copies than min.insync.replicas. A follower must flush what "
        "it appended before its next fetch. Not promised with another flush policy.",
    "flushed-past-truncation":
        "A log was truncated to an offset but still counted records above it as flushed (fsynced). Records "
        "appended again at those offsets would then count as durable before any fsync, and a power cut could "
        "lose what was acknowledged. A truncation lowers the flushed offset to the cut.",
    "ack-undecided":
        "A producer was told a write succeeded at an offset that no leader logged an acknowledgement for. A "
        "broker answers a produce success only after its replication state machine decided it (the `ack` "
        "line, with the HW and ISR it was decided on); a success with no such decision came from elsewhere, "
        "such as a wire handler that turned a timeout or an error after the append into success, and that "
        "write may never have been committed.",
    "damaged-record-kept":
        "A storage fault damaged a record of this broker's log while it was down (a flipped bit, a torn "
        "write), and the broker reopened the log with that record still in it. Start-up recovery must cut the "
        "log at the first record failing its checks (length, CRC, dense offsets), as Kafka's log recovery "
        "does; a kept record serves rotten bytes to consumers and followers, and a replica that trusts it "
        "may be elected with data no producer wrote.",
}


def _protocol_kinds() -> tuple[Kind, ...]:
    from broker.rules import RULES, SUMMARIES

    assert set(RULES) == set(_PROTOCOL_EXPLANATIONS), "rundir/kinds.py: explain every rule of broker/rules"
    return tuple(Kind(name, "protocol", SUMMARIES[name], _PROTOCOL_EXPLANATIONS[name], fails_by_default=True,
                      timed=True, example_fields=PROTOCOL_FIELDS) for name in RULES)


PROTOCOL_KINDS = _protocol_kinds()
PROTOCOL_NAMES: tuple[str, ...] = tuple(k.name for k in PROTOCOL_KINDS)
KINDS = KINDS + PROTOCOL_KINDS
# the families, in the order of their first kind: the Spark engine and the reference run them in it
FAMILY_NAMES: tuple[str, ...] = tuple(dict.fromkeys(k.family for k in KINDS))

NAMES: tuple[str, ...] = tuple(k.name for k in KINDS)
BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
