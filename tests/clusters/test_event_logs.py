"""clusters/event_logs.py and the local backend's EventLogs: a node's event log read while the run goes on,
torn lines (a crash mid-write, then a restart appending after it) skipped wherever they are."""
from __future__ import annotations

import json

from broker.eventlog import EventLog
from clusters.base import EventLogs, require
from clusters.event_logs import parse_event_log
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from clusters.base import ClusterSpec


def test_torn_lines_are_skipped_anywhere():
    good = [{"ts": 1, "node": "n1", "event": "start"}, {"ts": 2, "node": "n1", "event": "truncate", "to": 2}]
    data = (json.dumps(good[0]) + "\n" + '{"ts": 5, "node": "n1", "ev' + json.dumps(good[1]) + "\n"
            + "[1, 2]\n\n" + json.dumps(good[1]) + "\n" + '{"torn')
    assert parse_event_log(data.encode()) == [good[0], good[1]]
    assert parse_event_log(b"") == []


def test_the_local_backend_reads_what_the_broker_event_log_wrote(tmp_path):
    c = LocalCluster(ClusterSpec("ev", tmp_path / "run", brokers=2), registry=Registry(tmp_path / "registry"))
    assert require(c, EventLogs, "assert") is c
    c._alloc = object()          # addresses are not needed to read a file; only the name is validated
    c._address = lambda node: node if node in ("c0", "n1", "n2") else (_ for _ in ()).throw(KeyError(node))
    assert c.events("n2") == []                          # nothing written yet
    log = EventLog(c.node_dir("n2") / "broker.log", "n2")
    log.emit("truncate", partition=0, **{"from": 3}, to=2, why="hw")
    log.emit("epoch-query", partition=0, leader=1, epoch=0, answer_end=2)
    events = c.events("n2")
    log.close()
    assert [(e["event"], e["node"]) for e in events] == [("truncate", "n2"), ("epoch-query", "n2")]
    assert {k: events[0][k] for k in ("partition", "from", "to", "why")} == {"partition": 0, "from": 3, "to": 2,
                                                                             "why": "hw"}
    assert isinstance(events[0]["ts"], int)
