"""A broker node's life cycle on real processes: READY line, SIGTERM (flush + checkpoints, exit 0) and
what SIGKILL keeps under each flush policy with power-loss emulation."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from broker.client import Admin, Consumer, Producer
from clusters.bare import BareCluster, wait_until
from broker.storage import HwCheckpoint

TOPIC = "life"
REPO = Path(__file__).resolve().parents[2]


def cluster(tmp_path, **settings) -> BareCluster:
    return BareCluster(tmp_path, brokers=1, broker_settings=settings,
                        controller_settings={"broker_session_timeout_ms": 1000},
                        topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 1}])


def wait_leader(c: BareCluster, min_epoch: int = 0) -> int:
    admin = Admin(c.controller_address, timeout_s=1.0)
    info = wait_until(lambda: (lambda d: d if d and d[0].leader == 1 and d[0].epoch >= min_epoch
                               and d[0].replica_state[1] is not None else None)(admin.describe(TOPIC)), 20, "a leader")
    admin.close()
    return info[0].epoch


def read(c: BareCluster):
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
        # the offline dump of the stopped broker, through `python -m broker dump`
        out = tmp_path / "dump"
        r = subprocess.run([sys.executable, "-m", "broker", "dump", str(c.data_dir(1)), "--out", str(out),
                            "--node", "n1"], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        lines = [json.loads(line) for line in (out / "p0.jsonl").read_text().splitlines()]
        assert {k: lines[0][k] for k in ("kind", "node", "partition", "leo", "hw", "epochs")} == {
            "kind": "meta", "node": "n1", "partition": 0, "leo": 3, "hw": 3, "epochs": [[epoch, 0]]}
        assert [(x["offset"], x["value"]) for x in lines[1:]] == [(0, 1), (1, 2), (2, 3)]
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


def test_restart_cuts_a_torn_tail_and_logs_it(tmp_path):
    with cluster(tmp_path) as c:
        epoch = wait_leader(c)
        Producer(c.controller_address, acks=1).send(TOPIC, 0, [b"1", b"2", b"3"])
        assert c.brokers[1].terminate() == 0
        segment = c.data_dir(1) / f"{TOPIC}-0" / ("0" * 20 + ".log")
        with open(segment, "ab") as fh:
            fh.write(b"\x00\x00\x00\x40torn")          # a record header promising 64 bytes, then 4
        c.start_broker(1)
        wait_leader(c, epoch + 1)
        cut = [e for e in c.events(1) if e["event"] == "truncate"]
        assert [(e["partition"], e["to"], e["why"], e["bytes_cut"]) for e in cut] == [(0, 3, "recovery", 8)]
        assert read(c) == ([b"1", b"2", b"3"], 3)
