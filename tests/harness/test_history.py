"""The history writer: dense indexes, invoke/complete pairs, nemesis mirror, crash-safe lines."""
import json
import threading

import pytest

from rundir.history import History
from rundir.formats import iter_jsonl, validate_op


def test_ops_are_written_in_order_with_dense_indexes(tmp_path):
    ticks = iter(range(0, 10_000, 10))
    h = History(tmp_path / "history.jsonl", clock=lambda: next(ticks), mirror=tmp_path / "nemesis.jsonl")
    p = h.new_process()
    h.invoke(p, "send", {"partition": 0, "value": 1})
    h.complete(p, "ok", "send", {"partition": 0, "value": 1, "offset": 0, "epoch": 0})
    h.invoke("nemesis", "kill", {"fault": "kill", "phase": "start", "id": 0, "targets": ["n1"]})
    h.complete("nemesis", "info", "kill", {"fault": "kill", "phase": "start", "id": 0, "targets": ["n1"]})
    h.close()
    ops = [line.obj for line in iter_jsonl(tmp_path / "history.jsonl")]
    assert [op["index"] for op in ops] == [0, 1, 2, 3]
    assert [op["type"] for op in ops] == ["invoke", "ok", "invoke", "info"]
    assert [op["time"] for op in ops] == [10, 20, 30, 40]
    for i, op in enumerate(ops, start=1):
        validate_op(op, "history.jsonl", i)
    mirrored = [json.loads(l) for l in (tmp_path / "nemesis.jsonl").read_text().splitlines()]
    assert [op["index"] for op in mirrored] == [2, 3]


def test_completion_type_is_checked(tmp_path):
    with History(tmp_path / "h.jsonl") as h:
        with pytest.raises(ValueError, match="completion type"):
            h.complete(0, "invoke", "send", {})


def test_concurrent_writers_never_interleave_lines(tmp_path):
    h = History(tmp_path / "h.jsonl")

    def worker():
        p = h.new_process()
        for v in range(200):
            h.invoke(p, "send", {"partition": 0, "value": v})
            h.complete(p, "ok", "send", {"partition": 0, "value": v, "offset": v, "epoch": 0})

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.close()
    ops = [line.obj for line in iter_jsonl(tmp_path / "h.jsonl")]
    assert len(ops) == 1600
    assert [op["index"] for op in ops] == list(range(1600))
    assert len({op["process"] for op in ops}) == 4


def test_torn_last_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / "h.jsonl"
    with History(path) as h:
        h.invoke(0, "send", {"partition": 0, "value": 1})
    with path.open("a") as fh:
        fh.write('{"index": 1, "time": 5, "proc')  # what a SIGKILLed writer leaves
    skipped = []
    ops = list(iter_jsonl(path, skipped=skipped))
    assert len(ops) == 1 and skipped == [2]
