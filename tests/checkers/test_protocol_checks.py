"""The protocol rules (broker/rules) on whole run directories: known answers through `check_run` for each
family of rules, what a configuration does not promise (reported, not failing), and the Spark engine
giving the reference engine's findings on the same node event logs."""
from __future__ import annotations

import pytest

from checkers import ingest, protocol_trace, reference
from checkers.check import CheckOptions, check_run
from rundir.verdict import failing_kinds
from rundir import kinds
from simulated_runs import RunBuilder
import checker_scenarios as sc

START = 1_763_765_100_000_000_000   # a wall clock like a real run's


def _run(tmp_path, scenarios, **builder) -> dict:
    b = RunBuilder(**builder)
    for p, s in enumerate(scenarios):
        s(b, p)
    b.write(tmp_path)
    return check_run(tmp_path, CheckOptions(engine="reference"))


def _found(res: dict) -> dict[str, int]:
    return {k: res["anomalies"][k]["count"] for k in kinds.PROTOCOL_NAMES if res["anomalies"][k]["count"]}


# (scenarios, [(kind, partition, node, a piece of the detail)]): one family of rules per case
FAMILIES = {
    "watermarks": ([sc.hw_above_leo, sc.leader_hw_decrease, sc.follower_hw_ahead],
                   [("hw-above-leo", 0, "n1", "past its LEO 4"),
                    ("leader-hw-decrease", 1, "n1", "went back from 5 to 3"),
                    ("follower-hw-ahead", 2, "n2", "no leader had an HW above 2")]),
    "acknowledgements": ([sc.ack_above_hw, sc.ack_below_min_isr],
                         [("ack-above-hw", 0, "n1", "up to 3 (acks=all) with its HW at 2"),
                          ("ack-below-min-isr", 1, "n1", "with ISR [1], below min.insync.replicas 2")]),
    "durability": ([sc.acked_not_durable], [("acked-not-durable", 0, "n1", "LEO 2, below offset 3")]),
    "elections and epochs": ([sc.epoch_two_leaders, sc.leader_not_elected, sc.election_outside_isr,
                              sc.epoch_not_increasing],
                             [("epoch-two-leaders", 0, "n2", "n2 and n1 both led epoch 3"),
                              ("leader-not-elected", 1, "n2", "the controller elected n1"),
                              ("election-outside-isr", 2, "c0", "elected n3 for epoch 2 from ISR [1, 2]"),
                              ("epoch-not-increasing", 3, "c0", "not above the previous epoch 3")]),
    "truncation": ([sc.truncate_below_hw], [("truncate-below-hw", 0, "n2", "cut its log to 2 (hw), below its HW 4")]),
    "ISR joins": ([sc.isr_join_lagging], [("isr-join-lagging", 0, "n1", "proposed n2 for the ISR with its LEO at 3")]),
    "fencing": ([sc.stale_epoch_served], [("stale-epoch-served", 0, "n1", "served a fetch of n2 carrying epoch 1")]),
    "consumer reads": ([sc.read_uncommitted], [("read-uncommitted", 0, "client", "offset 1 with the HW it reported at 1")]),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_of_rules_fails_the_run_it_is_promised_in(tmp_path, family):
    scenarios, want = FAMILIES[family]
    res = _run(tmp_path, scenarios)
    assert _found(res) == {kind: 1 for kind, *_ in want}
    for kind, partition, node, detail in want:
        a = res["anomalies"][kind]
        (ex,) = a["examples"]
        assert (ex["partition"], ex["node"], ex["promised"]) == (partition, node, True), kind
        assert detail in ex["detail"], (kind, ex["detail"])
        assert ex["time"] == ex["ts"] and ex["time"] > 0      # the builder's start_wall_ns is 0
        assert ex["evidence"] and ex["evidence"][-1]["node"] == node
        assert a["promised"] is True and a["fails_run"] is True
        assert a["by_partition"] == {str(partition): 1} and sum(a["histogram"]["counts"]) == 1
        assert kind in failing_kinds(res) and kind in res["failed_kinds"]
    assert res["valid"] is False


def test_a_clean_log_breaks_no_rule(tmp_path):
    res = _run(tmp_path, [sc.protocol_clean, sc.protocol_clean, sc.clean], backend="local")
    assert _found(res) == {} and res["valid"] is True
    assert (tmp_path / "columnar" / "events").is_dir()


def test_what_the_configuration_does_not_promise_is_reported_not_failing(tmp_path):
    """Unclean leader election allowed: electing n3 from outside the ISR is the configuration's doing. The
    finding is listed (promised: false) and the run stays valid."""
    res = _run(tmp_path, [sc.election_outside_isr], config={"broker": {"unclean_leader_election": True}})
    a = res["anomalies"]["election-outside-isr"]
    assert a["count"] == 1 and a["promised"] is False and a["fails_run"] is False
    assert a["examples"][0]["promised"] is False and a["examples"][0]["node"] == "c0"
    assert "election-outside-isr" not in failing_kinds(res) and res["failed_kinds"] == []
    assert res["valid"] is True


def test_hw_truncation_does_not_promise_truncation_above_the_hw(tmp_path):
    """truncation = "hw" (pre-KIP-101) truncates to a possibly stale HW: reported only."""
    res = _run(tmp_path, [sc.truncate_below_hw], config={"broker": {"truncation": "hw"}})
    a = res["anomalies"]["truncate-below-hw"]
    assert (a["count"], a["promised"], a["fails_run"], res["valid"]) == (1, False, False, True)


def test_clock_rules_are_not_checked_across_clocks(tmp_path):
    """On hosts with their own clocks (ssh) a follower's HW is not compared with its leader's by time."""
    res = _run(tmp_path, [sc.hw_above_leo, sc.follower_hw_ahead])
    assert _found(res) == {"hw-above-leo": 1, "follower-hw-ahead": 1}   # the scenario's run: one clock
    b = RunBuilder()
    for p, s in enumerate([sc.hw_above_leo, sc.follower_hw_ahead]):
        s(b, p)
    b.backend = "ssh"
    b.write(tmp_path / "ssh")
    assert _found(check_run(tmp_path / "ssh", CheckOptions(engine="reference"))) == {"hw-above-leo": 1}


# --- the two engines on one run: several rules broken on three partitions ----------------------------------

def _unsafe_run(b: RunBuilder) -> None:
    """Partition 0: an unclean failover (acks below min.insync.replicas, a leader from outside the ISR, the
    old leader cutting below its HW, the new leader's HW going back). Partition 1: a zombie leader (two
    leaders of epoch 4, one not elected, an election that did not raise the epoch, an HW past the LEO, a
    request of an older epoch served, and two sends the producer was told succeeded that no leader acked).
    Partition 2: a consumer read above the HW, a follower proposed for the ISR short of the HW,
    acknowledged records lost at a restart, a follower's HW ahead of its leader's. A torn last line in n3's log is skipped."""
    for p in range(3):
        b.send(1 + 10 * p, p, 1, offset=0, epoch=0)
        b.send(1 + 10 * p, p, 2, offset=1, epoch=0)
    c = dict(topic="hw", partition=0)
    b.event("c0", "leader-change", **c, leader=1, epoch=0, isr=[1, 2, 3], version=0)
    b.event("n1", "role", partition=0, role="leader", epoch=0)
    for n in ("n2", "n3"):
        b.event(n, "role", partition=0, role="follower", epoch=0)
    b.event("n1", "hw-change", partition=0, old=0, new=3, leo=3)
    b.event("n1", "ack", partition=0, base=0, last=2, epoch=0, acks=-1, hw=3, isr=[1, 2, 3], min_isr=2)
    b.event("n2", "hw-change", partition=0, old=0, new=3, leo=3)
    b.event("c0", "isr-change", **c, isr=[1], version=1)
    for k in range(3):   # three more acknowledgements with n1 alone in the ISR
        b.event("n1", "hw-change", partition=0, old=3 + k, new=4 + k, leo=4 + k)
        b.event("n1", "ack", partition=0, base=3 + k, last=3 + k, epoch=0, acks=-1, hw=4 + k, isr=[1], min_isr=2)
    b.event("c0", "isr-change", **c, isr=[3], version=2)
    b.event("c0", "leader-change", **c, leader=3, epoch=1, isr=[3], version=2)
    b.event("n3", "role", partition=0, role="leader", epoch=1)
    b.event("n1", "role", partition=0, role="follower", epoch=1)
    b.event("n1", "truncate", **c, **{"from": 6, "to": 0, "why": "leader-epoch"})
    b.event("n3", "hw-change", partition=0, old=0, new=1, leo=1)
    b.event("n3", "hw-change", partition=0, old=1, new=0, leo=1)

    c = dict(topic="hw", partition=1)
    b.event("c0", "leader-change", **c, leader=2, epoch=4, isr=[2, 3], version=7)
    b.event("n2", "role", partition=1, role="leader", epoch=4)
    b.event("n3", "role", partition=1, role="leader", epoch=4)
    b.event("c0", "leader-change", **c, leader=3, epoch=4, isr=[2, 3], version=8)
    b.event("n2", "hw-change", partition=1, old=0, new=2, leo=1)
    b.event("n2", "follower-served", partition=1, replica=3, request="epoch", request_epoch=3)

    b.assign(31, 2, 0)
    b.poll(31, 2, 0, [(0, 1), (1, 2)], hw=1, epoch=0)
    b.event("n1", "role", partition=2, role="leader", epoch=0)
    b.event("n2", "role", partition=2, role="follower", epoch=0)
    b.event("n1", "hw-change", partition=2, old=0, new=1, leo=3)
    b.event("n1", "ack", partition=2, base=0, last=2, epoch=0, acks=1, hw=1, isr=[1, 2], min_isr=1)
    b.event("n1", "isr-expand-proposed", partition=2, replica=3, replica_leo=0, hw=1, epoch_start=0)
    b.event("n2", "hw-change", partition=2, old=0, new=2, leo=2)
    b.event("n1", "recovered", topic="hw", partition=2, leo=1, hw=1, checkpoint_hw=1, epochs=[[0, 0]])
    b.raw_event("n3", '{"ts":1,"node":"n3","event":"hw-change","partition":0,"ol')
    for p in range(3):
        b.final(p, [1, 2], epoch=0, process=99)


UNSAFE_COUNTS = {"ack-below-min-isr": 3, "election-outside-isr": 1, "truncate-below-hw": 1, "leader-hw-decrease": 1,
                 "epoch-two-leaders": 1, "leader-not-elected": 1, "epoch-not-increasing": 1, "hw-above-leo": 1,
                 "stale-epoch-served": 1, "isr-join-lagging": 1, "read-uncommitted": 1, "acked-not-durable": 1, "follower-hw-ahead": 1,
                 "ack-undecided": 2}


def _columnar(tmp_path, build) -> tuple:
    b = RunBuilder(backend="local", start_wall_ns=START)
    build(b)
    b.write(tmp_path)
    return ingest.ingest(tmp_path).columnar_dir, protocol_trace.run_facts(tmp_path)


def test_reference_finds_the_unsafe_runs_rules(tmp_path):
    col_dir, facts = _columnar(tmp_path, _unsafe_run)
    res = reference.analyze(col_dir, examples=2, facts=facts)
    assert {k: res["anomalies"][k]["count"] for k in kinds.PROTOCOL_NAMES if res["anomalies"][k]["count"]} \
        == UNSAFE_COUNTS
    assert res["anomalies"]["ack-below-min-isr"]["by_partition"] == {"0": 3}
    assert len(res["anomalies"]["ack-below-min-isr"]["examples"]) == 2
    assert {e["partition"] for k in UNSAFE_COUNTS for e in res["anomalies"][k]["examples"]} == {0, 1, 2}
    for k in UNSAFE_COUNTS:
        for e in res["anomalies"][k]["examples"]:
            assert 0 < e["time"] == e["ts"] - START, k   # on the history's axis
            assert all("src" not in r and "seq" not in r for r in e["evidence"]), k


def _clean_run(b: RunBuilder) -> None:
    for p, s in enumerate([sc.protocol_clean, sc.protocol_clean, sc.clean]):
        s(b, p)


@pytest.mark.spark
@pytest.mark.parametrize("path", ["driver", "executors"])
@pytest.mark.parametrize("build", [_unsafe_run, _clean_run], ids=["unsafe", "clean"])
def test_spark_and_reference_give_the_same_protocol_findings(tmp_path, spark, monkeypatch, build, path):
    """Small runs' rules run on the Spark driver; forced below that size, the mapInArrow pass does."""
    from checkers.anomalies import engine, protocol

    if path == "executors":
        monkeypatch.setattr(protocol, "DRIVER_ROWS", 0)
    col_dir, facts = _columnar(tmp_path, build)
    ref = reference.analyze(col_dir, examples=2, facts=facts)
    got = engine.analyze(spark, col_dir, examples=2, facts=facts)
    assert got["time_axis"] == ref["time_axis"]
    for k in kinds.PROTOCOL_NAMES:
        assert got["anomalies"][k] == ref["anomalies"][k], k    # count, examples with evidence, totals
    counts = {k: ref["anomalies"][k]["count"] for k in kinds.PROTOCOL_NAMES if ref["anomalies"][k]["count"]}
    assert counts == (UNSAFE_COUNTS if build is _unsafe_run else {})


def test_a_polls_hw_decides_read_uncommitted_only_where_it_is_the_fetchs():
    """In a native run every poll's HW is that of the fetch that returned its records; in a mixed run only
    the polls carrying the answering leader's epoch (the native client's) are; a Kafka library's poll
    (epoch -1) takes its HW from a later ListOffsets, which may reach another leader. Every poll's HW
    feeds hw-reported-ahead."""
    from checkers.protocol_trace import Poll, read_row

    def poll(epoch: int, hw: int, offset: int | None = 4) -> Poll:
        return Poll(partition=0, index=7, time_ns=10, offset=offset, epoch=epoch, hw=hw)

    native = read_row(poll(2, 5), 0, True)
    assert (native["hw"], native["reported_hw"], native["epoch"]) == (5, 5, 2)
    mixed_native = read_row(poll(2, 5), 0, False)
    assert (mixed_native["hw"], mixed_native["reported_hw"]) == (5, 5)
    library = read_row(poll(-1, 5), 0, False)
    assert (library["hw"], library["reported_hw"], library["epoch"]) == (None, 5, None)
    empty = read_row(poll(-1, -1001, offset=None), 0, False)
    assert (empty["offset"], empty["hw"], empty["reported_hw"]) == (None, None, None)


def test_storage_faults_drawn_at_random_keep_the_promises_staged_ones_do_not(tmp_path):
    """A corrupt fault drawn at random spares the last in-sync copy (nemesis/driver.py), so the run still
    promises truncate-below-hw and acked-not-durable (the damaged broker's own recovery cut exempt); one
    staged by a scenario or a schedule file may damage it, and then neither is promised."""
    from checkers.protocol_trace import run_facts

    b = RunBuilder()
    sc.acked_not_durable_damaged(b, 0)
    b.write(tmp_path / "drawn")
    res = check_run(tmp_path / "drawn", CheckOptions(engine="reference"))
    assert _found(res) == {"acked-not-durable": 1} and res["anomalies"]["acked-not-durable"]["promised"] is True
    facts = run_facts(tmp_path / "drawn", tmp_path / "drawn" / "columnar")
    assert facts["settings"].storage_faults is False
    b = RunBuilder({"nemesis": {"schedule_file": "storage.toml"}})
    sc.acked_not_durable_damaged(b, 0)
    b.write(tmp_path / "staged")
    res = check_run(tmp_path / "staged", CheckOptions(engine="reference"))
    a = res["anomalies"]["acked-not-durable"]
    assert (a["count"], a["promised"], res["valid"]) == (1, False, True)
    assert run_facts(tmp_path / "staged", tmp_path / "staged" / "columnar")["settings"].storage_faults is True


def test_an_ops_table_of_an_older_converter_still_gives_the_damage_rows(tmp_path):
    """Tables converted before the `damage` column (converter 8, a reused synthetic run) are still read:
    the damaged rows then name no offset, so damaged-record-kept decides nothing, and nothing fails."""
    import pyarrow.parquet as pq

    res = _run(tmp_path, [sc.damaged_record_kept])
    assert _found(res) == {"damaged-record-kept": 1}
    ops = tmp_path / "columnar" / "ops"
    for f in sorted(ops.glob("*.parquet")):
        table = pq.read_table(f)
        pq.write_table(table.drop(["damage"]), f)
    facts = protocol_trace.run_facts(tmp_path, tmp_path / "columnar")
    rows = protocol_trace.rows_by_partition(tmp_path / "columnar", facts)[0]
    damaged = [r for r in rows if r["event"] == "damaged"]
    assert [(r["node"], "damaged_offset" in r) for r in damaged] == [("n2", False)]
    assert protocol_trace.check_reference(tmp_path / "columnar", facts) == []
