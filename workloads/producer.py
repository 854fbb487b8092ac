"""Producer workers: send unique values to partitions and record each send in the history.

One worker is one thread with its own client (the client serializes calls per object). Each send is an
`invoke` then exactly one completion: `ok` with the offset and leader epoch the broker returned, `fail`
when the client says the write certainly did not happen (ClientError.definite), `info` otherwise (timeout,
lost connection, acks=0, an unexpected exception). After an `info` the worker continues under a new
process id (Jepsen's rule: a process with an operation of unknown outcome never issues another).
"""
from __future__ import annotations

import logging
import random
import threading
from typing import Any, Callable

from broker.client import ClientError
from workloads.decode import encode_value
from workloads.pacing import RateLimiter, ValueSource
from workloads.worker import ClientWorker
from workloads.clients import ProducerClient

log = logging.getLogger(__name__)


def send_op(history, process: int, client: ProducerClient, topic: str, partition: int, value: int) -> str:
    """One recorded send. Returns the completion type ("ok", "fail" or "info")."""
    invoke = {"partition": partition, "value": value}
    history.invoke(process, "send", invoke)
    try:
        result = client.send(topic, partition, [encode_value(value)])
    except ClientError as exc:
        kind = "fail" if exc.definite else "info"
        history.complete(process, kind, "send", dict(invoke), error=exc.code)
        return kind
    except Exception as exc:  # noqa: BLE001 - unknown outcome: record it, never lose the completion
        log.warning("send of %s to partition %s raised %r", value, partition, exc)
        history.complete(process, "info", "send", dict(invoke), error=f"exception: {type(exc).__name__}: {exc}")
        return "info"
    if not result.offsets:          # acks=0: the broker did not say whether or where it appended
        history.complete(process, "info", "send", dict(invoke), error="no-ack")
        return "info"
    history.complete(process, "ok", "send",
                     {"partition": partition, "value": value, "offset": int(result.offsets[0]),
                      "epoch": result.epoch})
    return "ok"


class ProducerWorker(ClientWorker):
    role = "producer"

    def __init__(self, *, history, make_client: Callable[[], Any], topic: str, partitions: int,
                 values: ValueSource, limiter: RateLimiter, stop: threading.Event, seed: int, index: int):
        super().__init__(make_client=make_client, index=index)
        self.history = history
        self.topic = topic
        self.partitions = partitions
        self.values = values
        self.limiter = limiter
        self.stop_event = stop
        self.rng = random.Random(seed * 1_000_003 + index)
        self.process = history.new_process()
        self.counts = {"ok": 0, "fail": 0, "info": 0}

    def work(self, client) -> None:
        while not self.stop_event.is_set():
            if not self.limiter.acquire(self.stop_event):
                break
            partition = self.rng.randrange(self.partitions)
            kind = send_op(self.history, self.process, client, self.topic, partition, self.values.next())
            self.counts[kind] += 1
            if kind == "info":
                self.process = self.history.new_process()
