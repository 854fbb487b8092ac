"""The protocol rules' input leaves out the broker's own topics: a run whose brokers host the groups'
__consumer_offsets logs events for its partitions 0, 1, 2 too (with `topic` named), and those must not
mix with the test topic's partitions of the same numbers (checkers/ingest.py `_convert_events`)."""
from __future__ import annotations

import json

import pyarrow.parquet as pq

from checkers.ingest import _convert_events
from rundir import formats as rf


def test_events_of_internal_topics_are_left_out_of_the_events_table(tmp_path):
    log = tmp_path / rf.NODES_DIR / "n1" / rf.BROKER_LOG
    log.parent.mkdir(parents=True)
    lines = [
        {"ts": 1, "node": "n1", "event": "leader-change", "partition": 0, "leader": 1, "epoch": 3, "isr": [1]},
        {"ts": 2, "node": "n1", "event": "leader-change", "partition": 0, "leader": 1, "epoch": 0, "isr": [1],
         "topic": "__consumer_offsets"},
        {"ts": 3, "node": "n1", "event": "ack", "partition": 0, "topic": "__consumer_offsets", "base": 0, "last": 0,
         "epoch": 0, "acks": -1, "hw": 1, "isr": [1], "min_isr": 1, "flushed": 1},
        {"ts": 4, "node": "n1", "event": "hw-change", "partition": 0, "old": 0, "new": 5, "leo": 5},
    ]
    log.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))   # as EventLog writes
    out = tmp_path / "events"
    skipped = _convert_events(tmp_path, out, rf.arrow_schemas()["events"])
    assert skipped == {}
    rows = pq.read_table(out / rf.EVENTS_PARTITION_FILE.format(0)).to_pylist()
    assert [(r["ts"], r["event"]) for r in rows] == [(1, "leader-change"), (4, "hw-change")]
