"""The column-wise feed (checkers/quiet_rows.py) finds what the rules find row by row (broker/rules).

Random partitions of event rows, dense in violations of every rule the bulk lines can break (small offsets,
roles that change, fields left out or of the wrong type), fed both ways: the same violations in the same
order, the same acknowledged ranges, the same state at the end. Known answers beside: a quiet run folds
without a row fed, and one bad row among quiet ones is the one fed and found.
"""
from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from broker.rules import PartitionRules, RuleSettings
from checkers.quiet_rows import QuietFeed, spans_of, table_of
from broker.rules.catalogue import decided_ranges

NODES = ("n1", "n2", "n3")
small = st.integers(min_value=0, max_value=12)
maybe = st.one_of(small, st.none(), st.just(True), st.just("7"))   # some fields odd: not quiet


def _bulk(draw, node: str) -> dict:
    event = draw(st.sampled_from(["hw-change", "hw-change", "ack", "leo-reported"]))
    pick = lambda: draw(small) if draw(st.integers(0, 9)) else draw(maybe)    # noqa: E731
    if event == "hw-change":
        return {"event": event, "old": pick(), "new": pick(), "leo": pick()}
    if event == "ack":
        row = {"event": event, "base": pick(), "last": pick(), "epoch": draw(st.integers(0, 3)),
               "acks": draw(st.sampled_from([-1, -1, 1, 0])), "hw": pick(), "flushed": pick()}
        if draw(st.booleans()):
            row["isr"] = draw(st.lists(st.integers(1, 3), max_size=3, unique=True))
        if draw(st.booleans()):
            row["min_isr"] = draw(st.integers(1, 3))
        return row
    return {"event": event, "leo": pick(), "flushed": pick(), "epoch": 1, "leader": 1}


def _other(draw, node: str) -> tuple[str, dict]:
    kind = draw(st.sampled_from(["role", "role", "recovered", "start", "truncate", "isr-expand-proposed",
                                 "follower-served", "leader-change", "isr-change", "read"]))
    if kind == "role":
        return "broker", {"event": "role", "role": draw(st.sampled_from(["leader", "follower", "none"])),
                          "epoch": draw(st.integers(1, 4))}
    if kind == "recovered":
        return "broker", {"event": "recovered", "leo": draw(small), "hw": draw(small)}
    if kind == "start":
        return "broker", {"event": "start"}
    if kind == "truncate":
        return "broker", {"event": "truncate", "to": draw(small), "why": draw(st.sampled_from(["leader-epoch", "recovery"])),
                          "flushed": draw(small)}
    if kind == "isr-expand-proposed":
        return "broker", {"event": kind, "replica": 2, "replica_leo": draw(small), "hw": draw(small), "epoch_start": 0}
    if kind == "follower-served":
        return "broker", {"event": kind, "replica": 2, "request": "fetch", "request_epoch": draw(st.integers(0, 4))}
    if kind == "leader-change":
        return "controller", {"event": kind, "leader": draw(st.integers(1, 3)), "epoch": draw(st.integers(1, 4)),
                              "isr": [1, 2, 3], "version": draw(st.integers(1, 9))}
    if kind == "isr-change":
        return "controller", {"event": kind, "isr": [1, 2], "elr": [], "version": draw(st.integers(1, 9))}
    return "client", {"event": "read", "offset": draw(st.one_of(small, st.none())), "hw": draw(st.one_of(small, st.none())),
                      "reported_hw": draw(st.one_of(small, st.none())), "epoch": None}


@st.composite
def partitions(draw):
    rows, extras = [], []
    ts = 0
    for seq in range(draw(st.integers(1, 120))):
        ts += draw(st.sampled_from([0, 1, 1, 2]))        # ties on ts, broken by node and seq
        node = draw(st.sampled_from(NODES))
        if draw(st.integers(0, 3)):
            src, fields = "broker", _bulk(draw, node)
        else:
            src, fields = _other(draw, node)
        if src == "controller":
            node = "c0"
        if src == "client":
            node = "client"
        row = {**fields, "partition": 0, "ts": ts, "node": node, "src": src, "seq": seq}
        (extras if src == "client" else rows).append(row)
    return rows, extras


def _key(r):
    return r["ts"], r["node"], r["seq"]


def _read(row):
    return row() if callable(row) else row


def _state(rules: PartitionRules):
    return ({n: (v.role, v.epoch, v.hw, v.leo, v.acked_end, _read(v.last)) for n, v in rules.nodes.items()},
            rules.leader_hw, _read(rules.leader_hw_row))


def _both(rows, extras, cfg: RuleSettings, batch_rows: int):
    by_row = PartitionRules(0, cfg, sends=False)
    expected = []
    for r in sorted(rows + extras, key=_key):
        expected += by_row.feed(r)
    expected += by_row.finish()
    table = table_of(sorted(rows, key=_key))
    feed = QuietFeed(PartitionRules(0, cfg, sends=False), table.to_batches(max_chunksize=batch_rows), extras)
    got = list(feed.violations())
    return expected, got, by_row, feed


@settings(max_examples=200, deadline=None)
@given(partitions(), st.sampled_from([1, 3, 7, 1000]), st.booleans(), st.booleans())
def test_the_column_wise_feed_finds_what_the_rules_find_row_by_row(part, batch_rows, always, clock):
    rows, extras = part
    cfg = RuleSettings(flush="always" if always else "never", same_clock=clock)
    expected, got, by_row, feed = _both(rows, extras, cfg, batch_rows)
    assert [v.as_dict() for v in got] == [v.as_dict() for v in expected]
    assert _state(feed.rules) == _state(by_row)
    want = decided_ranges(spans_of(rows))
    assert (feed.decided.starts, feed.decided.ends) == (want.starts, want.ends)


def _produce(n: int, start: int = 0) -> list[dict]:
    """A clean acks=all produce per offset: followers report, the leader's HW moves, it acks, followers follow."""
    rows, ts = [], 100
    for o in range(start, start + n):
        for node, f in (("n2", {"event": "leo-reported", "leo": o + 1, "flushed": o + 1}),
                        ("n1", {"event": "hw-change", "old": o, "new": o + 1, "leo": o + 1}),
                        ("n1", {"event": "ack", "base": o, "last": o, "acks": -1, "hw": o + 1, "isr": [1, 2],
                                "min_isr": 2, "flushed": o + 1, "epoch": 1}),
                        ("n2", {"event": "hw-change", "old": o, "new": o + 1, "leo": o + 1})):
            ts += 1
            rows.append({**f, "partition": 0, "ts": ts, "node": node, "src": "broker", "seq": ts})
    return rows


def _roles() -> list[dict]:
    return [{"event": "role", "role": role, "epoch": 1, "partition": 0, "ts": i, "node": node, "src": "broker", "seq": i}
            for i, (node, role) in enumerate((("n1", "leader"), ("n2", "follower")))]


def test_a_clean_produce_run_is_folded_without_a_row_fed():
    rows = _roles() + _produce(500)
    feed = QuietFeed(PartitionRules(0, RuleSettings(flush="always"), sends=False),
                     table_of(rows).to_batches(max_chunksize=64), [])
    assert list(feed.violations()) == []
    assert (feed.fed, feed.folded) == (2, 2000)
    assert feed.rules.leader_hw == 500 and _read(feed.rules.leader_hw_row)["ts"] == 100 + 4 * 499 + 2
    assert feed.rules.nodes["n1"].acked_end == 500
    assert (feed.decided.starts, feed.decided.ends) == ([0], [500])


def test_one_bad_ack_among_quiet_rows_is_the_row_fed_and_found():
    rows = _roles() + _produce(300)
    bad = next(r for r in rows if r["event"] == "ack" and r["last"] == 150)
    bad["hw"] = 150                       # acknowledged with the HW not past it
    feed = QuietFeed(PartitionRules(0, RuleSettings(), sends=False), table_of(rows).to_batches(max_chunksize=50), [])
    found = list(feed.violations())
    assert [(v.kind, v.ts, v.detail) for v in found] == [
        ("ack-above-hw", bad["ts"], "n1 acknowledged offsets up to 150 (acks=all) with its HW at 150")]
    assert feed.fed == 3
    assert json.loads(json.dumps(found[0].evidence[-1]))["hw"] == 150


def test_a_field_of_another_type_sends_its_row_through_the_rules():
    rows = _roles() + _produce(10)
    rows[5]["new"] = True                 # a bool is an int to Python, not to a column
    table = table_of(rows)
    assert table.column("quiet").to_pylist()[5] is False
    feed = QuietFeed(PartitionRules(0, RuleSettings(), sends=False), table.to_batches(), [])
    list(feed.violations())
    assert feed.fed == 3


def test_extras_are_fed_in_their_place_among_the_batches():
    rows = _roles() + _produce(100)
    read = {"event": "read", "offset": 60, "hw": None, "reported_hw": None, "epoch": None, "partition": 0,
            "ts": 100 + 4 * 50, "node": "client", "src": "client", "seq": 1}
    feed = QuietFeed(PartitionRules(0, RuleSettings(), sends=False), table_of(rows).to_batches(max_chunksize=32), [read])
    found = list(feed.violations())
    # by then the leader's HW was 50: offset 60 was not committed yet
    assert [(v.kind, v.detail) for v in found] == [
        ("read-uncommitted", "a poll returned offset 60; no leader had an HW above 50 by then")]
    assert isinstance(pa.Table, type)
