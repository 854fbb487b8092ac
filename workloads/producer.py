"""Producer workers: send unique values to partitions and record each send in the history.

One worker is one thread with its own client (the client serializes calls per object). Each send is an
`invoke` then exactly one completion: `ok` with the offset and leader epoch the broker returned, `fail`
when the client says the write certainly did not happen (ClientError.definite), `info` otherwise (timeout,
lost connection, acks=0, an unexpected exception). After an `info` the worker continues under a new
process id (Jepsen's rule: a process with an operation of unknown outcome never issues another).

A `ProducerWorker` sends each value to a seeded random partition, or, where its `Sending` has `keys`
(the keyed workload), gives each send a key drawn from that many and sends key k to partition k mod
partitions, so that a key's records share one partition's order; its sends record their key
(docs/formats.md).
"""
from __future__ import annotations

import logging
import random
import threading
from dataclasses import dataclass
from typing import Any, Callable

from broker.client import ClientError
from workloads.decode import encode_value
from workloads.pacing import RateLimiter, ValueSource
from workloads.worker import ClientWorker
from workloads.clients import ProducerClient

log = logging.getLogger(__name__)


def send_op(history, process: int, client: ProducerClient, topic: str, partition: int, value: int) -> str:
    """One recorded send of `value` to `partition`. Returns the completion type ("ok", "fail" or "info")."""
    return send_record(history, process, client, topic, {"partition": partition, "value": value})


def send_record(history, process: int, client: ProducerClient, topic: str, invoke: dict[str, Any]) -> str:
    """One recorded send of `invoke["value"]` to `invoke["partition"]`; the invoke's other fields (a key)
    are recorded with it and with its completion. Returns the completion type."""
    partition, value = invoke["partition"], invoke["value"]
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
    history.complete(process, "ok", "send", dict(invoke, offset=int(result.offsets[0]), epoch=result.epoch))
    return "ok"


@dataclass(frozen=True)
class Sending:
    """What every producer worker of a workload shares: where it sends (the topic and its partition
    count), the value source, the rate limiter, the stop event, and how many keys its sends draw from
    (None: the sends carry no key)."""
    topic: str
    partitions: int
    values: ValueSource
    limiter: RateLimiter
    stop: threading.Event
    keys: int | None = None


class ProducerWorker(ClientWorker):
    role = "producer"

    def __init__(self, *, history, make_client: Callable[[], Any], sending: Sending, seed: int, index: int):
        super().__init__(make_client=make_client, index=index)
        self.history = history
        self.sending = sending
        self.rng = random.Random(seed * 1_000_003 + index)
        self.process = history.new_process()
        self.counts = {"ok": 0, "fail": 0, "info": 0}

    def next_send(self) -> dict[str, Any]:
        """The next send's invoke: a seeded random partition and the next value, or with keys, a seeded
        random key, its partition and the next value."""
        s = self.sending
        if s.keys is None:
            partition = self.rng.randrange(s.partitions)
            return {"partition": partition, "value": s.values.next()}
        key = self.rng.randrange(s.keys)
        return {"partition": key % s.partitions, "key": key, "value": s.values.next()}

    def work(self, client) -> None:
        s = self.sending
        while not s.stop.is_set():
            if not s.limiter.acquire(s.stop):
                break
            kind = send_record(self.history, self.process, client, s.topic, self.next_send())
            self.counts[kind] += 1
            if kind == "info":
                self.process = self.history.new_process()

