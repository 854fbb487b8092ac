"""A leader cut off (iptables) from the controller and its followers, while clients on the host still reach
it: the controller fences it and elects a new leader; acks=all producers must move to the new leader (they
refresh metadata after REQUEST_TIMED_OUT), the isolated leader must never acknowledge an acks=all write, and
it keeps acknowledging acks=1 writes, which are lost when it rejoins (Kafka's acks=1 trade-off)."""
from __future__ import annotations

import functools
import threading
import time

import pytest

from broker.client import Admin, ClientError, Consumer, Producer
from clusters.base import ClusterSpec
from clusters.local import LocalCluster
from clusters.run_registry import Registry
from polling import wait_until

TOPIC = "hw"
SESSION_MS = 1500
SEND_TIMEOUT_S = 1.0


_until = functools.partial(wait_until, timeout=30.0, interval=0.05, retry_on=(ClientError,))


class Sender(threading.Thread):
    """Sends 1, 2, 3, ... one at a time with acks=all; records (value, monotonic send start, outcome)."""

    def __init__(self, controller):
        super().__init__(daemon=True)
        self.producer = Producer(controller, acks="all", timeout_s=SEND_TIMEOUT_S)
        self.stop = threading.Event()
        self.log: list[tuple[int, float, float, object]] = []   # value, start, end, SendResult | ClientError

    def run(self) -> None:
        value = 0
        while not self.stop.is_set():
            value += 1
            start = time.monotonic()
            try:
                outcome = self.producer.send(TOPIC, 0, [str(value).encode()])
            except ClientError as exc:
                outcome = exc
                time.sleep(0.02)
            self.log.append((value, start, time.monotonic(), outcome))
        self.producer.close()

    def acked(self):
        return [(v, s, e, o) for v, s, e, o in self.log if not isinstance(o, ClientError)]


def _full(admin):
    parts = admin.describe(TOPIC)
    if len(parts) != 1:          # the controller has not created the topic yet
        return None
    (p,) = parts
    ok = p.leader is not None and len(p.isr) == 3 and all(v is not None for v in p.replica_state.values())
    return p if ok else None


@pytest.mark.root
def test_clients_leave_a_fenced_leader_that_never_acks_all(tmp_path):
    spec = ClusterSpec(f"fenced-{tmp_path.name}", tmp_path / "run", brokers=3,
                       broker_settings={"min_insync_replicas": 2, "replica_lag_time_max_ms": 1000},
                       controller_settings={"broker_session_timeout_ms": SESSION_MS,
                                            "topics": [{"name": TOPIC, "partitions": 1, "replication_factor": 3}]})
    with LocalCluster(spec, registry=Registry(tmp_path / "registry")) as c:
        c.check_faults(["partition"])
        c.start()
        ctl = (c.controller().host, c.controller().port)
        admin = Admin(ctl, timeout_s=1.0)
        p0 = _until(lambda: _full(admin), what="a leader with the full ISR, every replica open")
        old = f"n{p0.leader}"
        sender = Sender(ctl)
        sender.start()
        _until(lambda: len(sender.acked()) >= 5, what="acks=all sends before the fault")

        others = [n for n in c.nodes() if n != old]
        c.drop([(old, o) for o in others] + [(o, old) for o in others])
        cut_at = time.monotonic()            # the drop rules are in place from here on
        try:
            # acks=1 on the isolated leader (the client's metadata still names it): acknowledged
            with Producer(ctl, acks=1, timeout_s=SEND_TIMEOUT_S) as p1:
                p1.partition_meta(TOPIC, 0)                     # metadata fetched now: leader = old
                lossy = p1.send(TOPIC, 0, [b"-1"])
            assert lossy.epoch == p0.epoch
            new = _until(lambda: (lambda p: p if p.leader not in (None, p0.leader) else None)(
                admin.describe(TOPIC)[0]), timeout=15, what="the controller electing a new leader")
            fenced_at = time.monotonic()
            # (a) acks=all sends succeed again, on the new leader, within a few seconds of the fencing
            first_new = _until(lambda: next((x for x in sender.acked() if x[3].epoch == new.epoch), None),
                               timeout=3 * SEND_TIMEOUT_S + 2, what="an acks=all send acknowledged by the new leader")
            assert first_new[2] - fenced_at < 3 * SEND_TIMEOUT_S + 2
            _until(lambda: sum(1 for x in sender.acked() if x[3].epoch == new.epoch) >= 5,
                   what="more acks=all sends on the new leader")
        finally:
            c.heal()
        _until(lambda: (lambda p: p if p and p.leader == new.leader and len(p.isr) == 3 else None)(_full(admin)),
               timeout=30, what=f"{old} back in the ISR")
        sender.stop.set()
        sender.join(10)
        admin.close()

        # (b) no acks=all write acknowledged by the isolated old leader during the window ...
        in_window_old = [x for x in sender.acked() if x[1] > cut_at and x[3].epoch == p0.epoch]
        assert in_window_old == [], in_window_old       # it acknowledged none (HW cannot move without the ISR)
        # ... and every acknowledged acks=all write is in the final log, at its offset
        with Consumer(ctl, timeout_s=2.0) as consumer:
            log, offset = {}, 0
            while True:
                f = consumer.fetch(TOPIC, 0, offset, max_records=1000)
                log.update({o: v for o, _e, v in f.records})
                if not f.records or f.records[-1][0] + 1 >= f.hw:
                    break
                offset = f.records[-1][0] + 1
        acked = {o.offsets[0]: str(v).encode() for v, _s, _e, o in sender.acked()}
        missing = {off: val for off, val in acked.items() if log.get(off) != val}
        assert missing == {}
        # the acks=1 write the isolated leader acknowledged is gone: its offset now holds another value
        assert log.get(lossy.offsets[0]) != b"-1"
        assert b"-1" not in log.values()
