"""Broker event logs on the history's time axis: leadership, ISR, truncation, HW thinning, bad lines."""
from __future__ import annotations

import json

import pytest
from report_fixtures import START_WALL_NS, make_run

from reports.broker_events import HW_SLOTS, read_broker_events


def test_fixture_events_per_partition(tmp_path):
    run = make_run(tmp_path, "invalid")
    ev = read_broker_events(run, START_WALL_NS, 8.1)
    assert ev.nodes == ["controller", "n1", "n2", "n3"]
    assert ev.bad_lines == 1  # "this is not json" in n3's log
    p0 = ev.partitions[0]
    assert [(t, leader, epoch) for t, leader, epoch, _isr in p0.leaders] == [(0.05, "n1", 0), (3.4, "n2", 1)]
    assert [(t, isr) for t, isr, _v in p0.isr] == [(5.6, ["n1", "n2", "n3"]), (6.6, ["n1", "n2"]),
                                                  (8.0, ["n1", "n2", "n3"])]
    assert [(t, node, frm, to, why) for t, node, frm, to, why in p0.truncations] == [
        (5.2, "n1", 9, 7, "hw"), (8.05, "n3", 9, 9, "<script>alert(1)</script>")]
    assert p0.hw["n2"] == [(4.5, 8), (4.7, 10)]
    assert p0.hw["n1"][-1] == (pytest.approx(2.21), 7)
    assert ev.fenced == [(3.4, "controller", "n1")]
    assert ev.controllers == ["controller"]
    assert ev.counts["hw-change"] == 11
    assert [r["event"] for r in ev.table][:4] == ["start", "leader-change", "leader-change", "role"]
    assert ev.table_total == 15
    assert ev.lifecycle == [(0.01, "n1", "start"), (5.1, "n1", "start")]
    fenced_row = next(r for r in ev.table if r["event"] == "fenced")
    assert fenced_row["fields"] == {"broker": "n1"}  # broker numbers shown as node names


def test_same_election_logged_twice_is_shown_once(tmp_path):
    d = tmp_path / "nodes"
    for node in ("controller", "n1"):
        (d / node).mkdir(parents=True)
        (d / node / "broker.log").write_text(json.dumps(
            {"ts": START_WALL_NS + 2_000_000_000 + (5 if node == "n1" else 0), "node": node, "event": "leader-change",
             "partition": 0, "leader": "n1", "epoch": 3, "isr": ["n1"]}) + "\n")
    ev = read_broker_events(tmp_path, START_WALL_NS, 10.0)
    assert [(t, leader, epoch) for t, leader, epoch, _ in ev.partitions[0].leaders] == [(2.0, "n1", 3)]


def test_hw_changes_are_thinned_to_one_point_per_slot_keeping_the_last(tmp_path):
    d = tmp_path / "nodes" / "n1"
    d.mkdir(parents=True)
    duration = 10.0
    with (d / "broker.log").open("w") as fh:
        for k in range(10_000):  # one HW change per millisecond
            fh.write(json.dumps({"ts": START_WALL_NS + k * 1_000_000, "node": "n1", "event": "hw-change",
                                 "partition": 0, "old": k, "new": k + 1}) + "\n")
    ev = read_broker_events(tmp_path, START_WALL_NS, duration)
    series = ev.partitions[0].hw["n1"]
    assert ev.partitions[0].hw_changes == 10_000
    assert len(series) <= HW_SLOTS + 1
    assert series[-1] == (pytest.approx(9.999), 10_000)  # the final HW survives thinning
    assert [v for _t, v in series] == sorted(v for _t, v in series)


def test_without_start_time_events_are_relative_to_the_first(tmp_path):
    d = tmp_path / "nodes" / "n1"
    d.mkdir(parents=True)
    (d / "broker.log").write_text("\n".join(json.dumps(
        {"ts": 5_000_000_000 + k * 1_000_000_000, "node": "n1", "event": "role", "partition": 1, "role": "leader",
         "epoch": k}) for k in range(3)) + "\n")
    ev = read_broker_events(tmp_path, None, 3.0)
    assert [t for t, *_ in ev.partitions[1].roles] == [0.0, 1.0, 2.0]


def test_no_nodes_directory(tmp_path):
    ev = read_broker_events(tmp_path, START_WALL_NS, 1.0)
    assert ev.partitions == {} and ev.nodes == []


def test_torn_line_from_a_killed_broker_is_skipped_and_the_rest_read(tmp_path):
    d = tmp_path / "nodes" / "n2"
    d.mkdir(parents=True)
    line = lambda t, new: json.dumps({"ts": START_WALL_NS + int(t * 1e9), "node": "n2", "event": "hw-change",  # noqa: E731
                                      "partition": 0, "old": new - 1, "new": new})
    torn = line(1.0, 5)[:40]  # SIGKILL mid-write, then the restarted broker appends
    (d / "broker.log").write_text("\n".join([line(0.5, 4), torn + line(2.0, 6), line(3.0, 7)]) + "\n"
                                  + '{"ts":1,"node":"n2","event":"hw-change","partition":0,"ne')
    ev = read_broker_events(tmp_path, START_WALL_NS, 10.0)
    assert ev.partitions[0].hw["n2"] == [(0.5, 4), (3.0, 7)]
    assert ev.bad_lines == 2 and ev.counts["hw-change"] == 2


def test_pyarrow_and_line_by_line_hw_readers_agree(tmp_path):
    from reports.broker_events import BrokerEvents, _hw_series

    lines = [json.dumps({"ts": START_WALL_NS + k * 10_000_000, "event": "hw-change", "partition": k % 2,
                         "old": k, "new": k + 1}).encode() + b"\n" for k in range(500)]
    fast, slow = BrokerEvents(), BrokerEvents()
    _hw_series(fast, [("n1", lines)], START_WALL_NS, 0.2)
    _hw_series(slow, [("n1", lines + [b'{"ts": 5, "partition": 0, "new": "x"}\n'])], START_WALL_NS, 0.2)
    assert fast.counts == slow.counts == {"hw-change": 500}
    for p in (0, 1):
        assert sorted(fast.partitions[p].hw["n1"]) == sorted(slow.partitions[p].hw["n1"])
        assert len(fast.partitions[p].hw["n1"]) == 25  # 5 s in 0.2 s slots


def _write_log(path, events):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"ts": START_WALL_NS + int(t * 1e9), **e}) + "\n" for t, e in events))


def test_replication_exchanges_are_aggregated_per_kind_follower_and_epoch(tmp_path):
    nodes = tmp_path / "nodes"
    fenced = {"event": "fetch-fenced", "node": "n1", "partition": 0, "replica": 2, "request": "fetch",
              "request_epoch": 0, "leader_epoch": 2, "error": "FENCED_LEADER_EPOCH"}
    _write_log(nodes / "n1" / "broker.log", [
        (1.0, {"event": "leader-change", "node": "n1", "partition": 0, "leader": 1, "epoch": 0, "isr": [1, 2]}),
        (4.0, {"event": "leader-change", "node": "n1", "partition": 0, "leader": 1, "epoch": 2, "isr": [1]}),
        (4.5, fenced), (4.6, fenced), (5.0, {**fenced, "request": "epoch"}),
        (6.0, {**fenced, "leader_epoch": 3}),
        (6.5, {"event": "stale-fetch-served", "node": "n1", "partition": 0, "replica": 3, "request": "fetch",
               "request_epoch": 1, "leader_epoch": 2}),
        (7.0, {"event": "epoch-answer", "node": "n1", "partition": 0, "replica": 2, "epoch": 0,
               "answer_epoch": 0, "answer_end": 1}),
        (7.1, {"event": "epoch-answer", "node": "n1", "partition": 0, "replica": None, "epoch": 0,
               "answer_epoch": 0, "answer_end": 1}),
    ])
    _write_log(nodes / "n2" / "broker.log", [
        (7.2, {"event": "epoch-query", "node": "n2", "partition": 0, "leader": 1, "epoch": 0, "current_epoch": 2,
               "error": None, "answer_epoch": 0, "answer_end": 1, "truncate_to": 1}),
    ])
    ev = read_broker_events(tmp_path, START_WALL_NS, 10.0)
    marks = [(m.kind, m.node, m.epoch, m.first, m.last, m.count, m.details) for m in ev.partitions[0].marks]
    assert marks == [
        ("fetch-fenced", "n2", 2, 4.5, 5.0, 3, [
            "n1 (leader, epoch 2) refused its fetch at epoch 0: FENCED_LEADER_EPOCH",
            "n1 (leader, epoch 2) refused its OffsetsForLeaderEpoch at epoch 0: FENCED_LEADER_EPOCH"]),
        ("fetch-fenced", "n2", 3, 6.0, 6.0, 1, ["n1 (leader, epoch 3) refused its fetch at epoch 0: FENCED_LEADER_EPOCH"]),
        ("stale-fetch-served", "n3", 2, 6.5, 6.5, 1,
         ["n1 (leader, epoch 2) served its fetch at epoch 1 (no KIP-320 fencing)"]),
        ("epoch-answer", "n2", 2, 7.0, 7.0, 1, ["n1 answered: epoch 0 asked, epoch 0 ends at 1"]),
        ("epoch-query", "n2", 2, 7.2, 7.2, 1, ["asked n1 where epoch 0 ends: epoch 0 ends at 1; truncated to 1"]),
    ]
    assert ev.counts["fetch-fenced"] == 4 and ev.counts["epoch-answer"] == 2
    assert [r["event"] for r in ev.table].count("fetch-fenced") == 4      # the events table lists them too
    assert "epoch-answer" not in [r["event"] for r in ev.table]


def test_many_fenced_fetches_draw_one_mark_with_their_count(tmp_path):
    from reports import charts

    events = [(1.0, {"event": "leader-change", "node": "n1", "partition": 0, "leader": 1, "epoch": 5, "isr": [1]})]
    events += [(2.0 + k * 0.01, {"event": "fetch-fenced", "node": "n1", "partition": 0, "replica": 2,
                                 "request": "fetch", "request_epoch": 4, "leader_epoch": 5,
                                 "error": "FENCED_LEADER_EPOCH"}) for k in range(500)]
    _write_log(tmp_path / "nodes" / "n1" / "broker.log", events)
    ev = read_broker_events(tmp_path, START_WALL_NS, 10.0)
    pe = ev.partitions[0]
    assert [(m.node, m.epoch, m.count, m.first, m.last) for m in pe.marks] == [("n2", 5, 500, 2.0, pytest.approx(6.99))]
    svg = charts.partition_state(pe, ["n1", "n2"], charts.ClusterTimeline([], 10.0, {"n1": "n0", "n2": "n1"}))
    assert svg.count('class="rmark fenced-fetch"') == 1
    assert "×500" in svg
    assert "n2: 500 fetch-fenced events in leader epoch 5, 2.000-6.990 s" in svg
