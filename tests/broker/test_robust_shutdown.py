"""Broker shutdown is bounded: a task that swallows its cancellation (Python 3.11's asyncio.wait_for can do
that when a result and the cancel arrive together), or peers and a controller that no longer answer,
cannot hold a SIGTERMed broker; the flush and the checkpoints still happen and `stop` is logged."""
from __future__ import annotations

import asyncio
import json
import signal
import time

from broker.client import Admin, Producer
from broker.config import load_broker_config
from broker.server.app import BrokerNode
from clusters.bare import BareCluster, free_port, wait_until
from broker.storage import HwCheckpoint
from real_processes import wait_full_isr

TOPIC = "down"
STUBBORN_S = 12.0       # how long the stubborn task keeps swallowing cancellations


async def stubborn_task() -> None:
    """Ignores every cancellation for STUBBORN_S seconds, then ends (so a failing test does not hang)."""
    end = time.monotonic() + STUBBORN_S
    while time.monotonic() < end:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            continue


def test_shutdown_finishes_although_a_task_swallows_its_cancellation(tmp_path):
    cfg_path = tmp_path / "broker.json"
    cfg_path.write_text(json.dumps({
        "node_id": 1, "host": "127.0.0.1", "port": free_port(), "controller_host": "127.0.0.1",
        "controller_port": free_port(),        # nothing listens: the node keeps trying to register
        "data_dir": str(tmp_path / "data"), "log_file": str(tmp_path / "broker.log")}))
    node = BrokerNode(load_broker_config(str(cfg_path)), str(cfg_path))

    async def scenario() -> tuple[int, float]:
        run = asyncio.ensure_future(node.run())
        while node.address is None or not node._tasks:
            await asyncio.sleep(0.01)
        node._tasks.append(asyncio.ensure_future(stubborn_task()))
        started = time.monotonic()
        node._stop.set()                       # what SIGTERM does
        done, _ = await asyncio.wait({run}, timeout=STUBBORN_S - 2)
        took = time.monotonic() - started
        return (run.result() if done else None), took

    loop = asyncio.new_event_loop()
    try:
        status, took = loop.run_until_complete(scenario())
        leftovers = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in leftovers:
            t.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.wait(leftovers, timeout=1.0))
    finally:
        loop.close()
    assert status == 0 and took < 6.0, (status, took)
    events = [json.loads(line) for line in (tmp_path / "broker.log").read_text().splitlines()]
    assert events[-1]["event"] == "stop"
    assert events[-1]["reason"] == "signal"
    assert events[-1]["stuck_tasks"] == ["stubborn_task"]


def test_sigterm_with_paused_leader_and_controller_exits_0_and_keeps_acked_writes(tmp_path):
    with BareCluster(tmp_path, brokers=3,
                      broker_settings={"min_insync_replicas": 2, "hw_checkpoint_interval_ms": 60_000,
                                       "replica_fetch_wait_max_ms": 500},
                      controller_settings={"broker_session_timeout_ms": 3000},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
        with Admin(c.controller_address, timeout_s=1.0) as admin:
            info = wait_full_isr(admin, TOPIC, 30, "a leader with the full ISR")
            with Producer(c.controller_address, acks="all", timeout_s=5.0) as p:
                assert p.send(TOPIC, 0, [b"1", b"2", b"3"]).offsets == [0, 1, 2]
            follower = next(b for b in info.replicas if b != info.leader)
            # the follower learns HW 3 with its next fetch
            wait_until(lambda: admin.replicas(follower)[(TOPIC, 0)]["hw"] == 3, 10, "follower HW 3")
        # the leader and the controller stop answering; the follower is then asked to stop
        c.signal(info.leader, signal.SIGSTOP)
        c.controller.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(0.3)      # a fetch and a metadata long-poll are now in flight to stopped processes
            started = time.monotonic()
            status = c.brokers[follower].terminate(timeout_s=15)
            took = time.monotonic() - started
        finally:
            c.controller.proc.send_signal(signal.SIGCONT)
            c.signal(info.leader, signal.SIGCONT)
        assert status == 0 and took < 8.0, (status, took)
        events = c.events(follower)
        assert events[-1]["event"] == "stop" and events[-1]["reason"] == "signal"
        # the periodic checkpoint never ran (60 s): HW 3 on disk was written at shutdown
        assert HwCheckpoint(c.data_dir(follower) / f"{TOPIC}-0" / "hw.checkpoint").read() == 3


def test_sigterm_leaves_no_asyncio_traceback_in_the_broker_output(tmp_path):
    """Connections still open at SIGTERM (followers' long-poll fetches, an idle client) are closed without
    Python 3.11's "Exception in callback ... CancelledError" traceback in stdout.log (issue 28)."""
    with BareCluster(tmp_path, brokers=3, broker_settings={"min_insync_replicas": 2},
                     topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as c:
        with Admin(c.controller_address, timeout_s=2.0) as admin:
            wait_full_isr(admin, TOPIC, 30, "a leader with the full ISR")
            with Producer(c.controller_address, acks="all", timeout_s=5.0) as p:
                for i in range(20):
                    p.send(TOPIC, 0, [b"v%d" % i])
                statuses = [c.brokers[b].terminate(timeout_s=15) for b in (1, 2, 3)]
    assert statuses == [0, 0, 0]
    for b in (1, 2, 3):
        out = (c.node_dir(f"n{b}") / "stdout.log").read_text()
        assert "Exception in callback" not in out and "Traceback" not in out, out[-2000:]
