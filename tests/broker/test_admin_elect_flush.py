"""The two admin APIs on real processes: ELECT_LEADER (Admin.elect_leader, served by the controller) moves
leadership to a named ISR member and refuses an ineligible one; FLUSH (Admin.flush, served by a broker)
makes the pending tail durable under the power-loss emulation, so a SIGKILL afterwards loses only what was
appended after the flush."""
from __future__ import annotations

import json

import pytest

from broker.client import Admin, Producer
from broker.client.errors import ClientError
from clusters.bare import BareCluster, wait_until
from clusters.storage_faults import corrupt_data_dir
from real_processes import wait_full_isr


def test_elect_leader_moves_leadership_to_a_named_isr_member(tmp_path):
    with BareCluster(tmp_path, brokers=3, broker_settings={"min_insync_replicas": 2},
                      topics=[{"name": "el", "partitions": 1, "replication_factor": 3}]) as c:
        with Admin(c.controller_address, timeout_s=3.0) as admin:
            info = wait_full_isr(admin, "el", 30, "a leader with the full ISR", replica_states=False)
            target = next(b for b in (1, 2, 3) if b != info.leader)
            said = admin.elect_leader("el", 0, broker=target)
            assert said == f"broker {target} leads el/0 at epoch {info.epoch + 1} (isr election)"
            assert admin.elect_leader("el", 0) == \
                f"broker {target} leads el/0 at epoch {info.epoch + 1}: no election needed"
            with pytest.raises(ClientError) as e:
                admin.elect_leader("el", 0, broker=7)
            assert e.value.code == "INELIGIBLE_REPLICA"
            assert "broker 7 is not a replica of el/0" in str(e.value)
            with Producer(c.controller_address, acks="all", timeout_s=5.0) as p:
                sent = wait_until(lambda: _try_send(p), 15, "an acks=all write through the new leader")
            assert sent.epoch == info.epoch + 1
            (d,) = admin.describe("el")
            assert (d.leader, d.epoch) == (target, info.epoch + 1)
        log = (tmp_path / "c0" / "controller.log").read_text()
        assert '"event": "elect-leader"' in log or '"event":"elect-leader"' in log


def _try_send(p):
    try:
        return p.send("el", 0, [b"x"])
    except ClientError:
        return None


def test_flush_makes_the_pending_tail_durable_before_a_kill(tmp_path):
    with BareCluster(tmp_path, brokers=1,
                      broker_settings={"min_insync_replicas": 1, "flush": "never", "power_loss": True},
                      topics=[{"name": "fl", "partitions": 1, "replication_factor": 1}]) as c:
        with Admin(c.controller_address, timeout_s=3.0) as admin:
            wait_full_isr(admin, "fl", 30, "broker 1 leading fl/0", isr_size=1)
            with Producer(c.controller_address, acks="all", timeout_s=5.0) as p:
                assert p.send("fl", 0, [b"a", b"b", b"c"]).offsets == [0, 1, 2]
                assert admin.flush(1) == "broker 1 flushed fl/0 to offset 3 (was 0)"
                assert admin.flush(1, "fl", 0) == "broker 1 flushed fl/0 to offset 3 (was 3)"
                with pytest.raises(ClientError) as e:
                    admin.flush(1, "fl", 5)
                assert e.value.code == "UNKNOWN_PARTITION"
                assert p.send("fl", 0, [b"d", b"e"]).offsets == [3, 4]     # never flushed
        flushes = [e for e in c.events(1) if e["event"] == "flush"]
        assert [f["partitions"] for f in flushes] == [[["fl", 0, 0, 3]], [["fl", 0, 3, 3]]]
        c.kill(1)                                           # power cut: the unflushed d, e are gone
        c.start_broker(1)
        recovered = wait_until(lambda: [e for e in c.events(1) if e["event"] == "recovered"][1:], 15,
                               "broker 1 recovered after the restart")
        assert recovered[0]["leo"] == 3


def test_clean_shutdown_marker_is_written_on_sigterm_and_reported_at_registration(tmp_path):
    with BareCluster(tmp_path, brokers=1, broker_settings={"min_insync_replicas": 1},
                      controller_settings={"eligible_leader_replicas": True, "min_insync_replicas": 1},
                      topics=[{"name": "cs", "partitions": 1, "replication_factor": 1}]) as c:
        marker = c.data_dir(1) / "clean-shutdown"
        with Admin(c.controller_address, timeout_s=3.0) as admin:
            wait_full_isr(admin, "cs", 30, "broker 1 leading cs/0", isr_size=1)
            assert c.brokers[1].terminate() == 0
            assert marker.exists()
            c.start_broker(1)
            wait_until(lambda: not marker.exists(), 10, "the marker removed at start-up")
            wait_until(lambda: _registrations(c) == 2, 15, "the second registration")
            with Producer(controller=c.controller_address, acks=1, timeout_s=5.0) as producer:
                producer.send("cs", 0, [b"v0", b"v1", b"v2"])
            assert c.brokers[1].terminate() == 0    # a clean stop writes the marker ...
            assert marker.exists()
            corrupt_data_dir(c.data_dir(1), "bitflip", seed=1)   # ... but the log is damaged while down
            c.start_broker(1)
            wait_until(lambda: _registrations(c) == 3, 15, "the third registration")
            c.kill(1)                               # SIGKILL: no marker
            assert not marker.exists()
            c.start_broker(1)
            wait_until(lambda: _registrations(c) == 4, 15, "the fourth registration")
        starts = [e["clean_shutdown"] for e in c.events(1) if e["event"] == "start"]
        registered = [e["clean_shutdown"] for e in c.events(1) if e["event"] == "registered"]
        # new data dir (no marker: it may be a replaced disk), after SIGTERM, after SIGTERM with a record
        # damaged while the broker was down (the recovery cut makes it unclean), after SIGKILL
        assert starts == registered == [False, True, False, False]
        assert [e["why"] for e in c.events(1) if e["event"] == "truncate"] == ["recovery"]
        stops = [e for e in c.events(1) if e["event"] == "stop"]
        assert [s["clean_shutdown_marker"] for s in stops] == [True, True]
        controller = [json.loads(line) for line in (tmp_path / "c0" / "controller.log").read_text().splitlines()]
        assert [e["clean_shutdown"] for e in controller if e["event"] == "registered"] == [False, True, False, False]
        # only the registrations that took something away: after the cut, broker 1 (the sole ISR member
        # of a leaderless cs/0) leaves the ISR; by the SIGKILL restart it is in no ISR or ELR any more
        assert [(e["broker"], e["partitions"]) for e in controller if e["event"] == "unclean-shutdown"] \
            == [(1, ["cs/0"])]


def _registrations(c) -> int:
    return len([e for e in c.events(1) if e["event"] == "registered"])
