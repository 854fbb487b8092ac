"""A broker node's life cycle on real processes: READY line, SIGTERM (flush + checkpoints, exit 0) and
what SIGKILL keeps under each flush policy with power-loss emulation."""
from __future__ import annotations

import pytest

from broker.client import Admin, Consumer, Producer
from broker.server.launch import LocalCluster, wait_until
from broker.storage import HwCheckpoint

TOPIC = "life"


def cluster(tmp_path, **settings) -> LocalCluster:
    return LocalCluster(tmp_path, brokers=1, broker_settings=settings,
                        controller_settings={"broker_session_timeout_ms": 1000},
                        topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 1}])


def wait_leader(c: LocalCluster, min_epoch: int = 0) -> int:
    admin = Admin(c.controller_address, timeout_s=1.0)
    info = wait_until(lambda: (lambda d: d if d and d[0].leader == 1 and d[0].epoch >= min_epoch
                               and d[0].replica_state[1] is not None else None)(admin.describe(TOPIC)), 20, "a leader")
    admin.close()
    return info[0].epoch


def read(c: LocalCluster):
    f = Consumer(c.controller_address).fetch(TOPIC, 0, 0)
    return [v for _o, _e, v in f.records], f.hw


def test_sigterm_flushes_checkpoints_and_exits_0(tmp_path):
    with cluster(tmp_path, flush="never", power_loss=True, hw_checkpoint_interval_ms=60_000) as c:
        epoch = wait_leader(c)
        assert Producer(c.controller_address, acks=1).send(TOPIC, 0, [b"1", b"2", b"3"]).offsets == [0, 1, 2]
        assert c.brokers[1].terminate() == 0
        events = c.events(1)
        assert events[-1]["event"] == "stop" and events[-1]["node"] == "n1"
        # the periodic checkpoint never ran (60 s): the HW on disk was written at shutdown
        assert HwCheckpoint(c.data_dir(1) / f"{TOPIC}-0" / "hw.checkpoint").read() == 3
        c.start_broker(1)
        wait_leader(c, epoch + 1)
        assert read(c) == ([b"1", b"2", b"3"], 3)


@pytest.mark.parametrize("flush, survivors", [("never", []), ("always", [b"1", b"2", b"3"])])
def test_sigkill_under_power_loss_keeps_only_flushed(tmp_path, flush, survivors):
    with cluster(tmp_path, flush=flush, power_loss=True) as c:
        epoch = wait_leader(c)
        Producer(c.controller_address, acks=1).send(TOPIC, 0, [b"1", b"2", b"3"])
        assert read(c) == ([b"1", b"2", b"3"], 3)
        c.kill(1)
        c.start_broker(1)
        wait_leader(c, epoch + 1)
        assert read(c) == (survivors, len(survivors))
