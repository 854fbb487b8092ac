"""Unit tests for the workload op shapes (docs/formats.md) against a real History and scripted clients.

The clients here are fakes that answer from a script; the same workers run against real brokers in the
end-to-end tests (tests/harness/test_e2e_run.py).
"""
from __future__ import annotations

import json
import threading
from types import SimpleNamespace

from broker.client import ClientError, FetchResult, SendResult
from rundir.history import History
from rundir import formats as runformat
from workloads.consumer import ConsumerWorker, Position, assign_op, poll_op
from workloads.final_read import ReadPlan, final_read_partition
from workloads.pacing import RateLimiter, ValueSource
from workloads.producer import ProducerWorker, Sending, send_op
from workloads.workload import Run, Workload


def ops(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def strip(op):
    return {k: v for k, v in op.items() if k not in ("index", "time")}


class Scripted:
    """A client stand-in: each call gets the next scripted answer (an exception in the script is raised)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.closed = False

    def _answer(self):
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    def close(self):
        self.closed = True


class ScriptedProducer(Scripted):
    def __init__(self, answers):
        super().__init__(answers)
        self.sent = []

    def send(self, topic, partition, values):
        self.sent.append((topic, partition, values))
        return self._answer()


def test_send_ok_fail_info_shapes(tmp_path):
    h = History(tmp_path / "h.jsonl")
    c = ScriptedProducer([SendResult([5], 2), ClientError("NOT_ENOUGH_REPLICAS", True),
                          ClientError("TIMEOUT", False), SendResult([], None)])
    assert send_op(h, 0, c, "hw", 1, 17) == "ok"
    assert send_op(h, 0, c, "hw", 1, 18) == "fail"
    assert send_op(h, 0, c, "hw", 2, 19) == "info"
    assert send_op(h, 1, c, "hw", 0, 20) == "info"
    h.close()
    assert c.sent[0] == ("hw", 1, [b"17"])
    assert [strip(o) for o in ops(tmp_path / "h.jsonl")] == [
        {"process": 0, "type": "invoke", "f": "send", "value": {"partition": 1, "value": 17}},
        {"process": 0, "type": "ok", "f": "send", "value": {"partition": 1, "value": 17, "offset": 5, "epoch": 2}},
        {"process": 0, "type": "invoke", "f": "send", "value": {"partition": 1, "value": 18}},
        {"process": 0, "type": "fail", "f": "send", "value": {"partition": 1, "value": 18}, "error": "NOT_ENOUGH_REPLICAS"},
        {"process": 0, "type": "invoke", "f": "send", "value": {"partition": 2, "value": 19}},
        {"process": 0, "type": "info", "f": "send", "value": {"partition": 2, "value": 19}, "error": "TIMEOUT"},
        {"process": 1, "type": "invoke", "f": "send", "value": {"partition": 0, "value": 20}},
        {"process": 1, "type": "info", "f": "send", "value": {"partition": 0, "value": 20}, "error": "no-ack"},
    ]
    for line in runformat.iter_jsonl(tmp_path / "h.jsonl"):
        runformat.validate_op(line.obj, "h", line.line_no)


def test_producer_worker_takes_new_process_after_info(tmp_path):
    h = History(tmp_path / "h.jsonl")
    answers = [SendResult([0], 0), ClientError("CONNECTION_LOST", False), SendResult([1], 0)]
    stop = threading.Event()
    client = ScriptedProducer(answers)
    orig = client.send

    def send(topic, partition, values):
        r = orig(topic, partition, values)
        if not client.answers:
            stop.set()
        return r
    client.send = send
    w = ProducerWorker(history=h, make_client=lambda: client,
                       sending=Sending("hw", 1, ValueSource(), RateLimiter(1000.0), stop), seed=1, index=0)
    w.run()
    h.close()
    got = [(o["process"], o["type"], o["value"]["value"]) for o in ops(tmp_path / "h.jsonl")]
    assert got == [(0, "invoke", 0), (0, "ok", 0), (0, "invoke", 1), (0, "info", 1), (1, "invoke", 2), (1, "ok", 2)]
    assert w.counts == {"ok": 2, "fail": 0, "info": 1}
    assert client.closed


class ScriptedConsumer(Scripted):
    def __init__(self, answers):
        super().__init__(answers)
        self.calls = []

    def fetch(self, topic, partition, offset, max_records=1000, max_wait_ms=0):
        self.calls.append((partition, offset, max_records))
        return self._answer()


def test_poll_and_assign_shapes(tmp_path):
    h = History(tmp_path / "h.jsonl")
    c = ScriptedConsumer([FetchResult([(3, 1, b"40"), (4, 1, b"41")], 6, 1), ClientError("NOT_LEADER", True)])
    assign_op(h, 4, 2, 3)
    assert poll_op(h, 4, c, Position("hw", 2, 3))[0] == "ok"
    assert poll_op(h, 4, c, Position("hw", 2, 5))[0] == "fail"
    h.close()
    assert [strip(o) for o in ops(tmp_path / "h.jsonl")] == [
        {"process": 4, "type": "invoke", "f": "assign", "value": {"partition": 2, "offset": 3}},
        {"process": 4, "type": "ok", "f": "assign", "value": {"partition": 2, "offset": 3}},
        {"process": 4, "type": "invoke", "f": "poll", "value": {"partition": 2, "offset": 3}},
        {"process": 4, "type": "ok", "f": "poll", "value": {"partition": 2, "offset": 3, "records": [[3, 40, 1], [4, 41, 1]],
                                                          "hw": 6, "epoch": 1}},
        {"process": 4, "type": "invoke", "f": "poll", "value": {"partition": 2, "offset": 5}},
        {"process": 4, "type": "fail", "f": "poll", "value": {"partition": 2, "offset": 5}, "error": "NOT_LEADER"},
    ]


def test_consumer_reassigns_after_out_of_range_and_info(tmp_path):
    h = History(tmp_path / "h.jsonl")
    stop = threading.Event()
    answers = [FetchResult([(0, 0, b"1"), (1, 0, b"2")], 2, 0),
               ClientError("OFFSET_OUT_OF_RANGE", True),
               FetchResult([(0, 1, b"1")], 1, 1),
               ClientError("TIMEOUT", False),
               FetchResult([], 1, 1)]
    c = ScriptedConsumer(answers)
    orig = c.fetch

    def fetch(*a, **k):
        r = orig(*a, **k)
        if not c.answers:
            stop.set()
        return r
    c.fetch = fetch
    w = ConsumerWorker(history=h, make_client=lambda: c, topic="hw", partitions=[0], stop=stop, index=0)
    w.idle_sleep = 0
    w.run()
    h.close()
    seq = [(o["process"], o["type"], o["f"], o["value"]["offset"]) for o in ops(tmp_path / "h.jsonl")]
    assert seq == [
        (0, "invoke", "assign", 0), (0, "ok", "assign", 0),
        (0, "invoke", "poll", 0), (0, "ok", "poll", 0),
        (0, "invoke", "poll", 2), (0, "fail", "poll", 2),
        (0, "invoke", "assign", 0), (0, "ok", "assign", 0),
        (0, "invoke", "poll", 0), (0, "ok", "poll", 0),
        (0, "invoke", "poll", 1), (0, "info", "poll", 1),
        (1, "invoke", "assign", 0), (1, "ok", "assign", 0),
        (1, "invoke", "poll", 0), (1, "ok", "poll", 0),
    ]
    assert w.records_read == 3


def test_final_read_chunks_up_to_hw(tmp_path):
    h = History(tmp_path / "h.jsonl")
    h.new_process()
    c = ScriptedConsumer([FetchResult([(0, 0, b"7"), (1, 0, b"8")], 3, 2),
                          ClientError("CONNECTION_LOST", False),
                          FetchResult([(2, 2, b"9")], 3, 2),
                          FetchResult([], 3, 2)])
    r = final_read_partition(h, c, "hw", 0, ReadPlan(chunk=2, backoff_s=0))
    h.close()
    assert (r.read_to, r.hw, r.records, r.covered, r.error) == (3, 3, 3, True, None)
    assert c.calls == [(0, 0, 2), (0, 2, 2), (0, 2, 2), (0, 3, 2)]
    seq = [(o["process"], o["type"], o["f"], o["value"]["offset"]) for o in ops(tmp_path / "h.jsonl")]
    assert seq == [(1, "invoke", "final-read", 0), (1, "ok", "final-read", 0),
                   (1, "invoke", "final-read", 2), (1, "info", "final-read", 2),
                   (2, "invoke", "final-read", 2), (2, "ok", "final-read", 2),
                   (2, "invoke", "final-read", 3), (2, "ok", "final-read", 3)]


def test_final_read_gives_up_and_says_so(tmp_path):
    h = History(tmp_path / "h.jsonl")
    c = ScriptedConsumer([ClientError("LEADER_NOT_AVAILABLE", True)] * 3)
    r = final_read_partition(h, c, "hw", 1, ReadPlan(max_attempts=3, backoff_s=0))
    h.close()
    assert (r.read_to, r.covered, r.error) == (0, False, "LEADER_NOT_AVAILABLE")


def test_workload_values_unique_and_rate_limited(tmp_path):
    h = History(tmp_path / "h.jsonl")

    class Fine:
        def __init__(self):
            self.n = 0

        def send(self, topic, partition, values):
            self.n += 1
            return SendResult([self.n], 0)

        def close(self):
            pass

    wl = Workload("producer", Run(h, "hw", 3, 3, make_producer=lambda i: Fine()),
                  SimpleNamespace(rate=200.0, concurrency=3, consumers=0))
    wl.start()
    threading.Event().wait(0.5)
    assert wl.stop() == []
    h.close()
    sends = [o for o in ops(tmp_path / "h.jsonl") if o["type"] == "ok"]
    values = [o["value"]["value"] for o in sends]
    assert len(values) == len(set(values))
    assert 60 <= len(values) <= 140          # 200/s for 0.5 s, allowing for thread start-up
    assert {o["value"]["partition"] for o in sends} == {0, 1, 2}
    assert wl.errors() == []


def test_rate_limiter_spaces_slots():
    t = [0.0]
    slept = []
    rl = RateLimiter(10.0, clock=lambda: t[0], sleep=lambda d: slept.append(round(d, 6)))
    for _ in range(3):
        rl.acquire()
    assert slept == [0.1, 0.2]


def test_producer_consumer_splits_partitions_among_consumers(tmp_path):
    h = History(tmp_path / "h.jsonl")

    class Idle:
        def send(self, topic, partition, values):
            return SendResult([0], 0)

        def fetch(self, topic, partition, offset, max_records=1000, max_wait_ms=0):
            return FetchResult([], 0, 0)

        def close(self):
            pass

    wl = Workload("producer-consumer", Run(h, "hw", 5, 1, make_producer=lambda i: Idle(),
                                           make_consumer=lambda i: Idle()),
                  SimpleNamespace(rate=10.0, concurrency=2, consumers=2))
    consumers = [w for w in wl.workers if isinstance(w, ConsumerWorker)]
    assert [c.partitions for c in consumers] == [[0, 2, 4], [1, 3]]
    assert len(wl.workers) == 4
    wl.start()
    threading.Event().wait(0.3)
    assert wl.stop() == []
    h.close()
    assigns = sorted(o["value"]["partition"] for o in ops(tmp_path / "h.jsonl") if o["f"] == "assign" and o["type"] == "ok")
    assert assigns == [0, 1, 2, 3, 4]
