"""Known answers of the protocol rules (broker/rules): for each rule, hand-written rows that break it
(the exact violation) and rows that come close without breaking it (nothing)."""
from __future__ import annotations

import pytest

from broker.rules import CLOCK_RULES, RULES, PartitionRules, RuleSettings, promised, run

SAFE = RuleSettings()


class Log:
    """Rows of partition 0 with increasing timestamps."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def _add(self, src: str, node: str, event: str, **fields) -> "Log":
        self.rows.append({"ts": len(self.rows) + 1, "node": node, "src": src, "seq": len(self.rows),
                          "event": event, "partition": 0, **fields})
        return self

    def b(self, node: str, event: str, **fields) -> "Log":
        return self._add("broker", node, event, **fields)

    def c(self, event: str, **fields) -> "Log":
        return self._add("controller", "c0", event, **fields)

    def read(self, offset: int | None, hw: int | None = None, epoch: int = 0, reported: int | None = None) -> "Log":
        return self._add("client", "client", "read", offset=offset, hw=hw, epoch=epoch,
                         reported_hw=hw if reported is None else reported)

    def sent(self, offset: int, value: int = 0) -> "Log":
        return self._add("client", "client", "sent", offset=offset, value=value)

    def kinds(self, settings: RuleSettings = SAFE) -> list[str]:
        return [v.kind for v in run(0, self.rows, settings)]


def cluster() -> Log:
    """A topic created with n1 leading epoch 0, ISR [1, 2, 3]; n1 leads, n2 and n3 follow."""
    log = Log()
    for n in ("n1", "n2", "n3"):
        log.b(n, "start").b(n, "recovered", leo=0, hw=0)
    log.c("leader-change", leader=1, epoch=0, isr=[1, 2, 3], version=0)
    log.b("n1", "role", role="leader", epoch=0)
    log.b("n2", "role", role="follower", epoch=0).b("n3", "role", role="follower", epoch=0)
    return log


def test_every_rule_is_named_and_the_safe_configuration_promises_them_all():
    assert len(RULES) == 21 and len(set(RULES)) == 21
    assert promised(SAFE) == frozenset(RULES)
    assert CLOCK_RULES <= set(RULES)


def test_a_clean_history_breaks_nothing():
    log = cluster()
    log.b("n1", "hw-change", old=0, new=0, leo=2)
    log.b("n2", "hw-change", old=0, new=0, leo=2)
    log.b("n1", "hw-change", old=0, new=2, leo=2).b("n1", "ack", base=0, last=1, epoch=0, acks=-1, hw=2,
                                                      isr=[1, 2, 3], min_isr=2)
    log.b("n2", "hw-change", old=0, new=2, leo=2).read(1, hw=2)
    # n1 fenced: the controller elects n2 from the ISR in epoch 1; n1 restarts and follows
    log.c("isr-change", isr=[2, 3], version=1).c("leader-change", leader=2, epoch=1, isr=[2, 3], version=1)
    log.b("n2", "role", role="leader", epoch=1).b("n1", "start").b("n1", "recovered", leo=2, hw=2)
    log.b("n1", "role", role="follower", epoch=1).b("n1", "truncate", to=2, why="leader-epoch")
    assert log.kinds() == []


# --- watermarks ---------------------------------------------------------------------------------------

def test_hw_above_leo():
    assert cluster().b("n2", "hw-change", old=0, new=3, leo=2).kinds() == ["hw-above-leo", "follower-hw-ahead"]
    assert cluster().b("n1", "hw-change", old=0, new=2, leo=2).kinds() == []
    # a replica reopened with an HW past the log its recovery left
    (v,) = run(0, cluster().b("n2", "start").b("n2", "recovered", leo=4, hw=6).rows)
    assert (v.kind, v.detail) == ("hw-above-leo", "n2 reopened its log with HW 6, past its LEO 4")


def test_leader_hw_decrease_within_one_leadership_only():
    log = cluster().b("n1", "hw-change", old=0, new=5, leo=5).b("n1", "hw-change", old=5, new=4, leo=5)
    (v,) = run(0, log.rows)
    assert (v.kind, v.node, v.epoch) == ("leader-hw-decrease", "n1", 0)
    assert "from 5 to 4" in v.detail
    # a follower's HW may go down (it follows a new leader's lower HW)
    assert cluster().b("n2", "hw-change", old=0, new=0, leo=3).b("n1", "hw-change", old=0, new=3, leo=3) \
        .b("n2", "hw-change", old=0, new=3, leo=3).b("n2", "hw-change", old=3, new=1, leo=3).kinds() == []


def test_follower_hw_ahead_of_every_leader_and_only_on_one_clock():
    log = cluster().b("n1", "hw-change", old=0, new=3, leo=5).b("n2", "hw-change", old=0, new=4, leo=5)
    (v,) = run(0, log.rows)
    assert v.kind == "follower-hw-ahead" and "above 3" in v.detail
    assert v.evidence[0]["event"] == "hw-change" and v.evidence[0]["node"] == "n1"
    assert log.kinds(RuleSettings(same_clock=False)) == []
    # the leader's HW at its election counts: it was its HW
    log = Log().c("leader-change", leader=1, epoch=0, isr=[1, 2], version=0)
    log.b("n1", "recovered", leo=6, hw=6).b("n2", "recovered", leo=6, hw=2)
    log.b("n1", "role", role="leader", epoch=0).b("n2", "role", role="follower", epoch=0)
    log.b("n2", "hw-change", old=2, new=6, leo=6)
    assert log.kinds() == []


# --- acknowledgements ------------------------------------------------------------------------------------

def test_ack_above_hw_and_below_min_isr():
    log = cluster().b("n1", "ack", base=0, last=4, epoch=0, acks=-1, hw=4, isr=[1, 2, 3], min_isr=2)
    (v,) = run(0, log.rows)
    assert (v.kind, v.detail) == ("ack-above-hw", "n1 acknowledged offsets up to 4 (acks=all) with its HW at 4")
    log = cluster().b("n1", "ack", base=0, last=4, epoch=0, acks=-1, hw=5, isr=[1], min_isr=2)
    assert log.kinds() == ["ack-below-min-isr"]
    # acks=1 is acknowledged on append: neither rule applies
    assert cluster().b("n1", "ack", base=0, last=4, epoch=0, acks=1, hw=0, isr=[1], min_isr=2).kinds() == []


def test_ack_before_flush_with_flush_always_only():
    log = cluster().b("n1", "ack", base=0, last=4, epoch=0, acks=-1, hw=5, isr=[1, 2, 3], min_isr=2, flushed=4)
    (v,) = run(0, log.rows)
    assert (v.kind, v.detail) == ("ack-before-flush",
                                  "n1 acknowledged offsets up to 4 with its log flushed below 4 (flush=always)")
    assert log.kinds(RuleSettings(flush="never")) == []
    assert "ack-before-flush" not in promised(RuleSettings(flush="never"))
    assert cluster().b("n1", "ack", base=0, last=4, epoch=0, acks=1, hw=0, isr=[1], min_isr=2,
                       flushed=5).kinds() == []


def test_reported_before_flush_with_flush_always_only():
    """A follower's fetch offset is its LEO as the leader counts it for the HW: fsynced first."""
    log = cluster().b("n2", "leo-reported", leo=5, flushed=3, epoch=0)
    (v,) = run(0, log.rows)
    assert (v.kind, v.node, v.detail) == ("reported-before-flush", "n2",
                                          "n2 told its leader its LEO was 5 with its log flushed only below 3 "
                                          "(flush=always)")
    assert cluster().b("n2", "leo-reported", leo=5, flushed=5, epoch=0).kinds() == []
    assert log.kinds(RuleSettings(flush="interval")) == []
    assert "reported-before-flush" not in promised(RuleSettings(flush="never"))


def test_flushed_past_truncation():
    (v,) = run(0, cluster().b("n2", "truncate", to=4, why="leader-epoch", flushed=6, log_start=0).rows)
    assert (v.kind, v.detail) == ("flushed-past-truncation",
                                  "n2 cut its log to 4 (leader-epoch) and still counted it flushed up to 6")
    assert cluster().b("n2", "truncate", to=4, why="leader-epoch", flushed=4, log_start=0).kinds() == []
    # a cut asked below the log start stops at the log start, and so does the flushed offset
    assert cluster().b("n2", "truncate", to=0, why="offset-out-of-range", flushed=3, log_start=3).kinds() == []
    # without the field (flush other than "always"), nothing is decided
    assert cluster().b("n2", "truncate", to=4, why="leader-epoch").kinds() == []


def test_a_damaged_brokers_own_recovery_cut_is_the_disks_loss():
    """A storage fault's `damaged` row (from the nemesis history) exempts that broker's next recovery,
    and only that one; other brokers are untouched."""
    log = cluster().b("n1", "ack", base=0, last=4, epoch=0, acks=1, hw=0, isr=[1], min_isr=1)
    log._add("nemesis", "n1", "damaged")
    log.b("n1", "start").b("n1", "truncate", to=2, why="recovery").b("n1", "recovered", leo=2, hw=0)
    assert log.kinds() == []
    log.c("leader-change", leader=1, epoch=1, isr=[1], version=1)
    log.b("n1", "role", role="leader", epoch=1).b("n1", "ack", base=2, last=6, epoch=1, acks=1, hw=0, isr=[1],
                                                    min_isr=1)
    log.b("n1", "start").b("n1", "recovered", leo=5, hw=0)
    assert log.kinds() == ["acked-not-durable"]
    other = cluster().b("n2", "ack", base=0, last=4, epoch=0, acks=1, hw=0, isr=[2], min_isr=1)
    other._add("nemesis", "n1", "damaged")
    assert other.b("n2", "start").b("n2", "recovered", leo=2, hw=0).kinds() == ["acked-not-durable"]


def test_damaged_record_kept_when_recovery_leaves_the_damaged_offset_in_the_log():
    """Recovery cuts at the first record failing its checks: after a storage fault damaged the record at
    offset 5 of this partition, the broker's next `recovered` LEO must be at most 5."""
    def damaged(offset: int | None = 5, partition: int | None = 0) -> Log:
        log = cluster()
        fields = {} if offset is None else {"damaged_partition": partition, "damaged_offset": offset}
        return log._add("nemesis", "n2", "damaged", **fields).b("n2", "start")

    kept = damaged().b("n2", "recovered", leo=9, hw=4)
    assert kept.kinds() == ["damaged-record-kept"]
    v = run(0, kept.rows)[0]
    assert v.node == "n2"
    assert "reopened its log with LEO 9, keeping offset 5" in v.detail
    assert [e["event"] for e in v.evidence] == ["damaged", "recovered"]
    assert damaged().b("n2", "recovered", leo=6, hw=4).kinds() == ["damaged-record-kept"]   # one past it
    # cut at the damaged record, or below it (an earlier problem): nothing
    assert damaged().b("n2", "truncate", to=5, why="recovery").b("n2", "recovered", leo=5, hw=4).kinds() == []
    assert damaged().b("n2", "recovered", leo=3, hw=3).kinds() == []
    # another partition's damage, a fault naming no record (a checkpoint's), another broker: nothing
    assert damaged(partition=1).b("n2", "recovered", leo=9, hw=4).kinds() == []
    assert damaged(offset=None).b("n2", "recovered", leo=9, hw=4).kinds() == []
    assert damaged().b("n3", "start").b("n3", "recovered", leo=9, hw=4).kinds() == []
    # only the recovery that follows the damage: the next restart is judged afresh
    again = damaged().b("n2", "recovered", leo=5, hw=4).b("n2", "start").b("n2", "recovered", leo=9, hw=4)
    assert again.kinds() == []
    assert "damaged-record-kept" in promised(RuleSettings(flush="never", power_loss=True, storage_faults=True))
    # the damage is stamped on the history's clock: judged only where every process reads one clock
    assert kept.kinds(RuleSettings(same_clock=False)) == []


def test_acked_not_durable_after_a_restart_and_the_promise():
    def lost() -> Log:
        log = cluster().b("n1", "ack", base=0, last=9, epoch=0, acks=-1, hw=10, isr=[1, 2, 3], min_isr=2)
        return log.b("n1", "start").b("n1", "truncate", to=7, why="recovery").b("n1", "recovered", leo=7, hw=7)
    assert lost().kinds() == ["acked-not-durable"]
    assert "cut its log to 7, below offset 9" in run(0, lost().rows)[0].detail
    never = RuleSettings(flush="never", power_loss=True)
    assert "acked-not-durable" not in promised(never)
    assert "acked-not-durable" in promised(RuleSettings(flush="never", power_loss=False))
    # a follower truncation of an acks=1 write is not a durability failure
    log = cluster().b("n1", "ack", base=0, last=9, epoch=0, acks=1, hw=0, isr=[1, 2, 3], min_isr=2)
    log.b("n1", "role", role="follower", epoch=1).b("n1", "truncate", to=5, why="leader-epoch")
    log.b("n1", "start").b("n1", "recovered", leo=5, hw=0)
    assert log.kinds() == []


# --- elections and epochs -----------------------------------------------------------------------------

def test_epoch_two_leaders():
    log = cluster().b("n2", "role", role="leader", epoch=0)
    assert log.kinds() == ["epoch-two-leaders", "leader-not-elected"]
    assert "n2 and n1 both led epoch 0" in run(0, log.rows)[0].detail


def test_leader_not_elected_is_decided_at_the_end():
    log = cluster().b("n3", "role", role="leader", epoch=1)
    log.c("isr-change", isr=[2, 3], version=1).c("leader-change", leader=2, epoch=1, isr=[2, 3], version=1)
    (v,) = run(0, log.rows)
    assert (v.kind, v.node) == ("leader-not-elected", "n3") and "the controller elected n2" in v.detail
    # a broker's role line written just before the controller's, in time order: still elected
    log = cluster().b("n2", "role", role="leader", epoch=1)
    log.c("isr-change", isr=[2, 3], version=1).c("leader-change", leader=2, epoch=1, isr=[2, 3], version=1)
    assert log.kinds() == []
    # without a controller log nothing is decided
    assert run(0, [r for r in cluster().b("n3", "role", role="leader", epoch=7).rows if r["src"] != "controller"]) == []


def test_epoch_outlived_restart():
    log = cluster().b("n1", "start").b("n1", "recovered", leo=3, hw=3).b("n1", "role", role="leader", epoch=0)
    (v,) = run(0, log.rows)
    assert (v.kind, v.node, v.epoch) == ("epoch-outlived-restart", "n1", 0)
    assert [e["event"] for e in v.evidence] == ["leader-change", "start", "role"]
    assert log.kinds(RuleSettings(same_clock=False)) == []
    # re-elected after the restart, in a new epoch: fine
    log = cluster().b("n1", "start").b("n1", "recovered", leo=3, hw=3)
    log.c("isr-change", isr=[2, 3], version=1).c("leader-change", leader=2, epoch=1, isr=[2, 3], version=1)
    log.c("isr-change", isr=[1, 2, 3], version=2).c("leader-change", leader=1, epoch=2, isr=[1, 2, 3], version=3)
    log.b("n1", "role", role="leader", epoch=2)
    assert log.kinds() == []


def test_election_outside_isr_reads_the_isr_before_the_election():
    log = cluster().c("isr-change", isr=[1], version=1)
    log.c("isr-change", isr=[3], version=2).c("leader-change", leader=3, epoch=1, isr=[3], version=2)
    (v,) = run(0, log.rows)
    assert v.kind == "election-outside-isr" and "from ISR [1]" in v.detail
    assert "election-outside-isr" not in promised(RuleSettings(unclean_leader_election=True))
    # an admin unclean election is asked for: allowed
    log = cluster().c("isr-change", isr=[1], version=1)
    log.c("elect-leader", requested=3, unclean=True, leader=3, how="unclean")
    log.c("isr-change", isr=[3], version=2).c("leader-change", leader=3, epoch=1, isr=[3], version=2)
    assert log.kinds() == []
    # KIP-966: an ELR member is eligible
    log = cluster().c("isr-change", isr=[1], elr=[2], version=1)
    log.c("isr-change", isr=[2], elr=[1], version=2).c("leader-change", leader=2, epoch=1, isr=[2], version=2)
    assert log.kinds() == []
    # a leader change without an ISR change: chosen from the current ISR
    log = cluster().c("leader-change", leader=2, epoch=1, isr=[1, 2, 3], version=1)
    assert log.kinds() == []


def test_epoch_not_increasing():
    log = cluster().c("leader-change", leader=2, epoch=0, isr=[1, 2, 3], version=1)
    assert log.kinds() == ["epoch-not-increasing"]
    # a leaderless partition's epoch counts too
    log = cluster().c("leader-change", leader=None, epoch=1, isr=[1], version=1)
    log.c("leader-change", leader=1, epoch=2, isr=[1], version=2)
    assert log.kinds() == []


# --- truncation ----------------------------------------------------------------------------------------

def test_truncate_below_hw_and_what_promises_it():
    log = cluster().b("n2", "hw-change", old=0, new=0, leo=6).b("n1", "hw-change", old=0, new=5, leo=6)
    log.b("n2", "hw-change", old=0, new=5, leo=6).b("n2", "truncate", to=4, why="leader-epoch")
    (v,) = run(0, log.rows)
    assert (v.kind, v.node) == ("truncate-below-hw", "n2") and "below its HW 5" in v.detail
    assert "truncate-below-hw" not in promised(RuleSettings(truncation="hw"))
    assert "truncate-below-hw" not in promised(RuleSettings(fetch_fencing=False))
    assert "truncate-below-hw" not in promised(RuleSettings(flush="never", power_loss=True))
    # to the HW itself (HW truncation), and a recovery cut at start-up, are not below it
    log = cluster().b("n1", "hw-change", old=0, new=5, leo=6).b("n2", "hw-change", old=0, new=5, leo=6)
    log.b("n2", "truncate", to=5, why="hw").b("n2", "truncate", to=3, why="recovery")
    assert log.kinds() == []


# --- ISR ---------------------------------------------------------------------------------------------------

def test_isr_join_lagging_below_the_hw_or_the_epoch_start():
    ok = cluster().b("n1", "isr-expand-proposed", replica=3, replica_leo=7, hw=7, epoch_start=4)
    assert ok.kinds() == []
    (v,) = run(0, cluster().b("n1", "isr-expand-proposed", replica=3, replica_leo=6, hw=7, epoch_start=4).rows)
    assert (v.kind, v.detail) == ("isr-join-lagging",
                                  "n1 proposed n3 for the ISR with its LEO at 6, short of the HW 7")
    late = cluster().b("n1", "isr-expand-proposed", replica=3, replica_leo=7, hw=7, epoch_start=9)
    assert late.kinds() == ["isr-join-lagging"]
    assert late.kinds(RuleSettings(isr_join_requires_epoch_start=False)) == []


# --- fencing ------------------------------------------------------------------------------------------------

def test_stale_epoch_served_only_with_fencing_promised():
    assert cluster().b("n1", "follower-served", replica=2, request="fetch", request_epoch=0).kinds() == []
    log = Log().c("leader-change", leader=1, epoch=3, isr=[1, 2], version=0)
    log.b("n1", "role", role="leader", epoch=3)
    log.b("n1", "follower-served", replica=2, request="epoch", request_epoch=2)
    (v,) = run(0, log.rows)
    assert (v.kind, v.epoch) == ("stale-epoch-served", 3)
    assert v.detail == "n1 leads epoch 3 and served an OffsetsForLeaderEpoch request of n2 carrying epoch 2"
    assert "stale-epoch-served" not in promised(RuleSettings(fetch_fencing=False))
    # a request without an epoch that names no follower (an old client) is not a fencing question ...
    assert cluster().b("n1", "follower-served", replica=None, request="fetch", request_epoch=None).kinds() == []
    # ... but a broker's follower always says its epoch: served without one, nothing could fence it
    (v,) = run(0, cluster().b("n1", "follower-served", replica=2, request="fetch", request_epoch=None).rows)
    assert v.detail == "n1 leads epoch 0 and served a fetch of n2 carrying no leader epoch"


# --- consumers ---------------------------------------------------------------------------------------------

def test_read_uncommitted_by_the_polls_own_hw_and_by_the_leaders():
    log = cluster().b("n1", "hw-change", old=0, new=5, leo=8)
    assert log.read(4, hw=5).kinds() == []
    assert cluster().b("n1", "hw-change", old=0, new=5, leo=8).read(5, hw=5).kinds() == ["read-uncommitted"]
    log = cluster().b("n1", "hw-change", old=0, new=5, leo=8).read(6, hw=None)
    (v,) = run(0, log.rows)
    assert v.kind == "read-uncommitted" and "no leader had an HW above 5" in v.detail
    assert log.kinds(RuleSettings(same_clock=False)) == []


def test_hw_reported_ahead_of_every_leader():
    """A poll is told an HW above every leader's (a LEO sent as the HW); polls without records count."""
    log = cluster().b("n1", "hw-change", old=0, new=5, leo=8).read(None, hw=None, epoch=-1, reported=8)
    (v,) = run(0, log.rows)
    assert (v.kind, v.detail) == ("hw-reported-ahead",
                                  "a poll was told the HW is 8; no leader had an HW above 5 by then")
    assert cluster().b("n1", "hw-change", old=0, new=5, leo=8).read(None, epoch=-1, reported=5).kinds() == []
    assert cluster().b("n1", "hw-change", old=0, new=5, leo=8).read(4, hw=5).kinds() == []
    # a later leader's lower HW does not lower the bar: the highest any leader had counts
    log = cluster().b("n1", "hw-change", old=0, new=5, leo=8)
    log.c("leader-change", leader=2, epoch=1, isr=[2, 3], version=1).b("n2", "role", role="leader", epoch=1)
    assert log.read(None, epoch=-1, reported=5).kinds() == []
    bad = cluster().b("n1", "hw-change", old=0, new=5, leo=8).read(None, epoch=-1, reported=8)
    assert bad.kinds(RuleSettings(same_clock=False)) == []


def test_rules_keep_partitions_apart():
    rules = PartitionRules(3)
    assert rules.feed({"ts": 1, "node": "n1", "src": "broker", "event": "hw-change", "partition": 3,
                       "old": 0, "new": 9, "leo": 1})[0].partition == 3


# --- ack-undecided --------------------------------------------------------------------------------------

def _acked_0_to_1() -> Log:
    return cluster().b("n1", "hw-change", old=0, new=2, leo=2).b(
        "n1", "ack", base=0, last=1, epoch=0, acks=-1, hw=2, isr=[1, 2, 3], min_isr=2, flushed=2)


def test_an_ok_send_at_an_offset_no_leader_acknowledged_is_ack_undecided():
    log = _acked_0_to_1().sent(0).sent(1).sent(2, value=7)
    found = run(0, log.rows, SAFE)
    assert [(v.kind, v.node, v.detail) for v in found] == [
        ("ack-undecided", "client", "a producer was told offset 2 succeeded; no leader logged an acknowledgement of it")]
    assert found[0].evidence[-1]["value"] == 7


def test_ok_sends_covered_by_an_ack_logged_later_or_by_another_leader_break_nothing():
    log = cluster().sent(0)                                      # the client's row may come first
    log.b("n1", "ack", base=0, last=0, epoch=0, acks=1, hw=0, isr=[1, 2, 3], min_isr=2, flushed=1)
    log.c("leader-change", leader=2, epoch=1, isr=[2, 3], version=1).b("n2", "role", role="leader", epoch=1)
    log.b("n2", "ack", base=1, last=3, epoch=1, acks=1, hw=1, isr=[2, 3], min_isr=2, flushed=4)
    log.sent(1).sent(2).sent(3)
    assert log.kinds() == []


def test_ack_undecided_is_not_judged_without_the_logs_of_every_elected_leader():
    # n3 is elected but its log is missing here: its acks cannot be seen, so nothing is judged
    log = Log()
    for n in ("n1", "n2"):
        log.b(n, "start").b(n, "recovered", leo=0, hw=0)
    log.c("leader-change", leader=1, epoch=0, isr=[1, 2, 3], version=0).b("n1", "role", role="leader", epoch=0)
    log.b("n1", "ack", base=0, last=0, epoch=0, acks=1, hw=0, isr=[1, 2, 3], min_isr=2, flushed=1)
    log.c("leader-change", leader=3, epoch=1, isr=[2, 3], version=1).sent(0).sent(5)
    assert log.kinds() == []
    # no controller log at all (an external cluster): nothing is judged either
    bare = Log().sent(0)
    assert bare.kinds() == []


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_has_a_known_answer_here(rule):
    """Every rule is broken by one of the logs above (the tests name them); this keeps the list honest."""
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    assert f'"{rule}"' in source.split("def test_each_rule_has_a_known_answer_here")[0]



def test_the_controllers_restored_state_replaces_what_its_log_showed_last():
    """A change saved just before the controller's SIGKILL is in force after its restart but was never
    logged (here ISR [3, 1, 2], version 9); its `partition-state` line at the restart says so, and the
    election of n2 that follows is from the ISR. Without that line the log shows ISR [3, 1] last."""
    def log(restored: bool) -> Log:
        lg = cluster()
        lg.c("isr-change", isr=[3, 1], version=8).c("leader-change", leader=3, epoch=3, isr=[3, 1], version=8)
        if restored:
            lg.c("start", version=27, restored=True)
            lg.c("partition-state", leader=3, epoch=3, isr=[3, 1, 2], elr=[], version=9)
        lg.c("isr-change", isr=[2, 1], version=10).c("leader-change", leader=2, epoch=4, isr=[2, 1], version=10)
        return lg
    assert log(True).kinds() == []
    assert log(False).kinds() == ["election-outside-isr"]


def test_ack_undecided_keeps_state_as_small_as_the_acks_in_flight():
    """100,000 acknowledged sends, each logged just before or just after its leader's `ack`: the rule
    keeps one range of decided offsets and no pending send, and still finds the one send no ack covers."""
    rules = PartitionRules(0, RuleSettings())
    rows = [{"ts": 0, "node": "c0", "src": "controller", "event": "leader-change", "leader": 1, "epoch": 0,
             "isr": [1], "version": 0},
            {"ts": 1, "node": "n1", "src": "broker", "event": "role", "role": "leader", "epoch": 0}]
    for o in range(100_000):
        ack = {"ts": 10 + 2 * o, "node": "n1", "src": "broker", "event": "ack", "base": o, "last": o, "epoch": 0,
               "acks": -1, "hw": o + 1, "isr": [1], "min_isr": 1}
        sent = {"ts": 10 + 2 * o, "node": "client", "src": "client", "event": "sent", "offset": o, "value": o}
        rows += [sent, ack] if o % 2 else [ack, sent]
    rows.append({"ts": 10**9, "node": "client", "src": "client", "event": "sent", "offset": 200_000, "value": -1})
    found = [v for r in rows for v in rules.feed(r)]
    assert found == []
    assert (rules.decided.starts, rules.decided.ends) == ([0], [100_000])
    assert [r["offset"] for r in rules.undecided.values()] == [200_000]
    late = rules.finish()
    assert [(v.kind, v.detail) for v in late] == [
        ("ack-undecided", "a producer was told offset 200000 succeeded; no leader logged an acknowledgement of it")]
