"""A short chaos run on real processes (slow): producers with acks=all, min.insync.replicas=2, RF=3,
leader-epoch truncation, power-loss emulation with flush=always, while a nemesis SIGKILLs/restarts and
SIGSTOPs/SIGCONTs random brokers. Afterwards, with every broker up again: every acknowledged write is
readable at its acknowledged offset below the HW, and the three replicas' logs are identical (no
divergence), compared record by record from their data directories after a clean SIGTERM."""
from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest

from broker.client import Admin, ClientError, Consumer, Producer
from clusters.bare import BareCluster, wait_until
from broker.storage import PartitionStore

TOPIC = "chaos"
PARTITIONS = 2
RUN_S = 25.0


@pytest.mark.slow
def test_chaos_keeps_acked_writes_and_replicas_identical(tmp_path):
    rng = random.Random(int(os.environ.get("HW_CHAOS_SEED", "20261121")))
    with BareCluster(tmp_path, brokers=3,
                      broker_settings={"min_insync_replicas": 2, "truncation": "leader-epoch", "flush": "always",
                                       "power_loss": True, "heartbeat_interval_ms": 200,
                                       "replica_lag_time_max_ms": 1500},
                      controller_settings={"broker_session_timeout_ms": 1500},
                      topics=[{"name": TOPIC, "partitions": PARTITIONS, "replication_factor": 3}]) as c:
        admin = Admin(c.controller_address, timeout_s=1.0)
        wait_until(lambda: (lambda d: len(d) == PARTITIONS and all(p.leader is not None and len(p.isr) == 3
                                                                   for p in d))(admin.describe(TOPIC)), 30, "full ISRs")
        acked: dict[tuple[int, int], bytes] = {}
        outcomes = {"ok": 0, "fail": 0, "info": 0}
        lock = threading.Lock()
        stop = threading.Event()

        def produce(k: int) -> None:
            p = Producer(c.controller_address, acks="all", timeout_s=1.0)
            i = 0
            while not stop.is_set():
                part = i % PARTITIONS
                vals = [b"%d-%d-%d" % (k, i, j) for j in range(5)]
                i += 1
                try:
                    r = p.send(TOPIC, part, vals)
                except ClientError as exc:
                    with lock:
                        outcomes["fail" if exc.definite else "info"] += 1
                    time.sleep(0.02)
                    continue
                with lock:
                    outcomes["ok"] += 1
                    for o, v in zip(r.offsets, vals):
                        assert (part, o) not in acked, f"offset {o} of p{part} acknowledged twice"
                        acked[(part, o)] = v
            p.close()

        producers = [threading.Thread(target=produce, args=(k,)) for k in range(3)]
        for t in producers:
            t.start()
        faults = []
        try:
            deadline = time.monotonic() + RUN_S
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(0.5, 1.5))
                victim = rng.randint(1, 3)
                if rng.random() < 0.6:
                    c.kill(victim)
                    time.sleep(rng.uniform(0.2, 2.5))
                    c.start_broker(victim)
                    faults.append(("kill", victim))
                else:
                    c.signal(victim, signal.SIGSTOP)
                    time.sleep(rng.uniform(0.2, 2.5))
                    c.signal(victim, signal.SIGCONT)
                    faults.append(("pause", victim))
        finally:
            stop.set()
            for b in (1, 2, 3):
                c.signal(b, signal.SIGCONT)
            for t in producers:
                t.join(30)

        def settled():
            d = admin.describe(TOPIC)
            ok = len(d) == PARTITIONS and all(p.leader is not None and sorted(p.isr) == [1, 2, 3]
                     and len(set(p.replica_state.values())) == 1 and None not in p.replica_state.values()
                     for p in d)
            return d if ok else None
        final = wait_until(settled, 60, "every partition settled (full ISR, equal LEO/HW everywhere)")
        print(f"chaos: {outcomes}, faults {faults}, {len(acked)} acked writes")
        assert outcomes["ok"] > 50 and len(faults) >= 8, (outcomes, faults)

        consumer = Consumer(c.controller_address, timeout_s=2.0)
        for p in final:
            hw = p.replica_state[p.leader][1]
            got: dict[int, bytes] = {}
            while len(got) < hw:
                f = consumer.fetch(TOPIC, p.partition, len(got), max_records=1000)
                got.update((o, v) for o, _e, v in f.records)
            assert sorted(got) == list(range(hw))
            mine = {o: v for (part, o), v in acked.items() if part == p.partition}
            lost = {o: v for o, v in mine.items() if got.get(o) != v}
            assert not lost, f"p{p.partition}: {len(lost)} acknowledged writes lost or changed, e.g. {list(lost.items())[:3]}"

        for b in (1, 2, 3):
            assert c.brokers[b].terminate() == 0
        for part in range(PARTITIONS):
            logs = []
            for b in (1, 2, 3):
                store = PartitionStore.open(c.data_dir(b), TOPIC, part)
                logs.append([(r.offset, r.epoch, r.value) for r in store.log.read(0, 10**9)])
                store.close()
            assert logs[0] == logs[1] == logs[2], f"p{part}: replicas diverge"
