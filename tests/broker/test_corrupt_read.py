"""Corruption found on the read path (issue 16 item 4): bytes that rot on disk while a broker runs are
never served to a consumer nor copied by a follower.

Unit level: decode_records and SegmentedLog.read verify every record (CRC, framing, offset) and name
the first bad offset. Real processes: a byte flipped in the running leader's segment file is caught by
the next read; the leader logs a `corrupt` event, recovers the replica the way a restart does (a
recovery cut at the bad record), re-registers, leadership moves, and every replica ends up holding the
produced values, none of them the flipped one.
"""
from __future__ import annotations

import time

import pytest

from broker.client import Admin, ClientError, Consumer, Producer
from broker.records import LogCorruption, Record
from clusters.bare import BareCluster, wait_until
from broker.storage import SegmentedLog
from broker.storage.codec import CorruptRecord, HEADER_SIZE, decode_records, encode_records
from broker.storage.partition_store import partition_dir_name
from broker.storage.scan import scan_partition


def recs(start, stop, epoch=1):
    return [Record(o, epoch, str(1_000_000 + o).encode(), None, 1000 + o) for o in range(start, stop)]


def flip(path, position):
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x01]))


# --- unit level ----------------------------------------------------------------------------------

def test_decode_verifies_crc_and_keeps_the_good_prefix():
    data, positions = encode_records(recs(0, 5))
    data = bytearray(data)
    assert decode_records(bytes(data), 0) == recs(0, 5)
    data[positions[3] + HEADER_SIZE] ^= 0x01            # first value byte of offset 3
    with pytest.raises(CorruptRecord) as info:
        decode_records(bytes(data), 0)
    assert info.value.crc_mismatch and info.value.position == positions[3]
    assert [r.offset for r in info.value.good] == [0, 1, 2]


def test_decode_rejects_an_offset_out_of_sequence_and_a_torn_tail():
    data, positions = encode_records(recs(0, 3))
    with pytest.raises(CorruptRecord, match="offset 0 where 7 was expected"):
        decode_records(bytes(data), 7)
    with pytest.raises(CorruptRecord, match="torn|framing"):
        decode_records(bytes(data[:-3]), 0)
    bad_length = bytearray(data)
    bad_length[positions[1]:positions[1] + 4] = (10**6).to_bytes(4, "big")
    with pytest.raises(CorruptRecord, match="torn record: length 1000000") as info:
        decode_records(bytes(bad_length), 0)
    assert [r.offset for r in info.value.good] == [0]


def test_log_read_raises_log_corruption_naming_the_offset(tmp_path):
    d = tmp_path / "t-0"
    log = SegmentedLog.open(d, segment_records=100)
    log.append(recs(0, 250))
    seg = d / f"{200:020d}.log"
    flip(seg, scan_partition(d).segments[2].positions[30] + HEADER_SIZE + 2)      # offset 230
    assert log.read(0, 230) == recs(0, 230)          # everything before it still reads
    with pytest.raises(LogCorruption) as info:
        log.read(190, 100)
    assert info.value.offset == 230 and "CRC mismatch" in info.value.reason
    assert seg.name in info.value.where
    log.close()
    reopened = SegmentedLog.open(d, segment_records=100)    # restart recovery cuts at the same record
    assert reopened.leo() == 230 and reopened.recovery.cut_offset == 230
    reopened.close()


def test_log_read_verifies_power_loss_pending_bytes_too(tmp_path):
    log = SegmentedLog.open(tmp_path / "t-0", power_loss=True, flush_policy="never")
    log.append(recs(0, 10))
    seg = log._segments[-1]
    seg.pending[seg.positions[4] + HEADER_SIZE] ^= 0x01      # rot in the emulated page cache
    with pytest.raises(LogCorruption) as info:
        log.read(0, 10)
    assert info.value.offset == 4
    log.close(flush=False)


# --- real processes ------------------------------------------------------------------------------

TOPIC = "t"
N = 2000
BAD = 1500
BROKER = {"min_insync_replicas": 2, "heartbeat_interval_ms": 200, "replica_lag_time_max_ms": 4000,
          "replica_fetch_wait_max_ms": 200, "hw_checkpoint_interval_ms": 100, "truncation": "leader-epoch"}


def value(offset: int) -> bytes:
    return str(1_000_000 + offset).encode()


def full_isr(admin):
    d = admin.describe(TOPIC)
    return d[0] if d and d[0].leader is not None and sorted(d[0].isr) == [1, 2, 3] else None


def send(producer, values, deadline_s=20.0):
    """Retry definite failures (a leader still taking over) until acknowledged."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return producer.send(TOPIC, 0, values)
        except ClientError as exc:
            assert exc.definite and time.monotonic() < deadline, f"produce failed: {exc}"
            time.sleep(0.05)


def read_range(consumer, start, stop, deadline_s=30.0):
    """Read [start, stop) retrying the errors a leader move produces; fail on anything else."""
    out: list[tuple[int, bytes]] = []
    errors = []
    deadline = time.monotonic() + deadline_s
    while start + len(out) < stop:
        try:
            f = consumer.fetch(TOPIC, 0, start + len(out), max_records=200)
        except ClientError as exc:
            errors.append(exc.code)
            assert time.monotonic() < deadline, f"no progress at offset {start + len(out)}: {errors[-5:]}"
            time.sleep(0.1)
            continue
        out.extend((o, v) for o, _e, v in f.records if o < stop)
    return out, errors


@pytest.mark.slow
def test_a_flipped_byte_on_the_running_leader_is_never_served_or_replicated(tmp_path):
    with BareCluster(tmp_path, brokers=3, broker_settings=BROKER,
                      controller_settings={"broker_session_timeout_ms": 2500},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 3}]) as cluster:
        admin = Admin(cluster.controller_address, timeout_s=1.0)
        producer = Producer(cluster.controller_address, acks="all", timeout_s=5.0)
        consumer = Consumer(cluster.controller_address, timeout_s=2.0)
        info = wait_until(lambda: full_isr(admin), 20, "a leader with a full ISR")
        for start in range(0, N, 100):
            send(producer, [value(o) for o in range(start, start + 100)])
        wait_until(lambda: leos(admin) == [N] * 3, 20, "every replica at the log end")
        leader = info.leader
        directory = cluster.data_dir(leader) / partition_dir_name(TOPIC, 0)
        scan = scan_partition(directory)
        assert scan.leo == N
        segment = scan.segments[-1]
        flip(segment.path, segment.positions[BAD - segment.base] + HEADER_SIZE + 3)   # '1001500' -> '1000500'

        got, errors = read_range(consumer, 0, N)
        assert [o for o, _ in got] == list(range(N))
        assert [v for _, v in got] == [value(o) for o in range(N)], "a corrupt value was served"
        assert "KAFKA_STORAGE_ERROR" in errors or "NOT_LEADER" in errors or errors == []

        events = cluster.events(leader)
        corrupt = [e for e in events if e.get("event") == "corrupt"]
        assert len(corrupt) == 1 and corrupt[0]["offset"] == BAD and "CRC" in corrupt[0]["reason"]
        assert corrupt[0]["role"] == "leader"
        cuts = [e for e in events if e.get("event") == "truncate" and e.get("why") == "recovery"]
        assert [e["to"] for e in cuts] == [BAD]
        moved = wait_until(lambda: (lambda d: d if d and d.leader not in (None, leader) else None)(
            admin.describe(TOPIC)[0] if admin.describe(TOPIC) else None), 20, "a new leader")
        assert moved.epoch > info.epoch

        # the recovered replica fetches the cut records back from the new leader and rejoins the ISR
        wait_until(lambda: full_isr(admin), 30, "the recovered replica back in the ISR")
        send(producer, [value(N)])
        wait_until(lambda: leos(admin) == [N + 1] * 3, 20, "every replica at the new log end")
    for broker in (1, 2, 3):       # offline, after a clean stop: every replica holds exactly the produced values
        directory = cluster.data_dir(broker) / partition_dir_name(TOPIC, 0)
        scan = scan_partition(directory, keep_records=True)
        assert scan.cut_offset is None, f"n{broker}: {scan.reason}"
        values = [r.value for s in scan.segments for r in s.records]
        assert values == [value(o) for o in range(N + 1)], f"n{broker} holds a wrong value"


def leos(admin) -> list[int | None]:
    """Every broker's LEO for the partition (None when it cannot be asked or lacks the replica)."""
    out = []
    for b in (1, 2, 3):
        replicas = admin.replicas(b)
        out.append(None if replicas is None or (TOPIC, 0) not in replicas else replicas[(TOPIC, 0)]["leo"])
    return out


# --- a disk error in periodic work never stops the broker ---------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(not hasattr(__import__("resource"), "prlimit"), reason="needs resource.prlimit (Linux)")
def test_emfile_during_the_hw_checkpoint_is_logged_and_retried_not_fatal(tmp_path):
    """Real EMFILE: the running broker's fd limit is lowered to the fds it holds, so the next HW
    checkpoint (which opens a temp file) fails. The broker logs one `storage-error`, keeps serving, and
    writes the checkpoint once the limit is back."""
    import os
    import resource

    from broker.storage.checkpoints import HW_FILE, HwCheckpoint
    with BareCluster(tmp_path, brokers=1, broker_settings={"hw_checkpoint_interval_ms": 50, "min_insync_replicas": 1},
                      topics=[{"name": TOPIC, "partitions": 1, "replication_factor": 1}]) as cluster:
        producer = Producer(cluster.controller_address, acks="all", timeout_s=5.0)
        send(producer, [value(0)])
        hw_file = HwCheckpoint(cluster.data_dir(1) / partition_dir_name(TOPIC, 0) / HW_FILE)
        wait_until(lambda: hw_file.read() == 1, 10, "the first HW checkpoint")
        pid = cluster.brokers[1].proc.pid
        before = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        held = len(os.listdir(f"/proc/{pid}/fd"))
        # below what it holds: an fd that was open only for a moment as we counted (a connection being
        # set up) would otherwise leave a free slot and the checkpoint would succeed (a flaky test)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (max(3, held - 4), before[1]))
        try:
            send(producer, [value(1), value(2)])         # an existing connection: no new fd needed
            wait_until(lambda: [e for e in cluster.events(1) if e.get("event") == "storage-error"], 10,
                       "a storage-error event")
            time.sleep(0.5)                                # several more failing ticks
            assert cluster.brokers[1].running(), "the broker died of EMFILE"
            errors = [e for e in cluster.events(1) if e.get("event") == "storage-error"]
            assert len(errors) == 1 and "checkpoint" in errors[0]["error"] and "Too many open files" in errors[0]["error"]
            assert hw_file.read() == 1
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, before)
        wait_until(lambda: hw_file.read() == 3, 10, "the HW checkpoint written after the limit is back")
        send(producer, [value(3)])
        assert cluster.brokers[1].running()


def test_a_failed_flush_at_close_still_closes_every_file_and_the_lock(tmp_path, monkeypatch):
    """A recovered replica is re-opened in the same process: a close whose flush fails (EIO on a rotting
    disk) must still release the directory lock, or the re-open is refused for good."""
    import os

    from broker.storage import log as log_mod
    d = tmp_path / "t-0"
    log = SegmentedLog.open(d, power_loss=True, flush_policy="never")
    log.append(recs(0, 3))

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(log_mod.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        log.close()
    monkeypatch.setattr(log_mod.os, "fsync", os.fsync)
    reopened = SegmentedLog.open(d)           # the lock was released
    reopened.close()


def test_a_recovered_replica_never_leads_its_old_epoch_again(tmp_path):
    """Real ReplicaManager and storage, RF 1 (no controller needed): after corruption is found, metadata
    from before the re-registration (leader = this broker, the old epoch) must not make the recovered
    replica lead with its cut log; the epoch the controller gives after fencing it may."""
    import asyncio

    from broker.config import BrokerConfig
    from broker.controller import messages as m
    from broker.eventlog import EventLog
    from broker.server.partitions import ReplicaManager

    cfg = BrokerConfig(node_id=1, host="127.0.0.1", port=1, controller_host="127.0.0.1", controller_port=1,
                       data_dir=str(tmp_path / "data"), log_file=str(tmp_path / "broker.log"))
    events = EventLog(cfg.log_file, cfg.node_name)

    def md(version, epoch):
        return m.Metadata(version, {1: m.BrokerInfo("127.0.0.1", 1, True)},
                          {(TOPIC, 0): m.PartitionState(TOPIC, 0, 1, epoch, (1,), (1,), version)})

    async def scenario():
        rm = ReplicaManager(cfg, events, controller=None)
        rejoined = []
        rm.rejoin = rejoined.append
        rm.open_existing()
        rm.apply_metadata(md(1, 3))
        old = rm.get(TOPIC, 0)
        assert old.replica.role == "leader"
        rm.recover_corrupt(old, LogCorruption(0, "CRC mismatch for offset 0", "test"))
        assert rm.get(TOPIC, 0) is None             # the recovery scan runs in a worker thread
        rm.apply_metadata(md(2, 3))                 # meanwhile metadata does not open it a second time
        for _ in range(500):
            if rm.get(TOPIC, 0) is not None:
                break
            await asyncio.sleep(0.01)
        fresh = rm.get(TOPIC, 0)
        seen = [fresh is not old, old.retired, rejoined]
        rm.apply_metadata(md(2, 3))          # stale: still names us at epoch 3
        seen.append(fresh.replica.role)
        rm.apply_metadata(md(3, 5))          # after the re-registration: fenced, re-elected, epoch 5
        seen.append((fresh.replica.role, fresh.replica.leader_epoch))
        rm.close_storage()
        return seen

    assert asyncio.run(scenario()) == [True, True, ["corrupt"], "none", ("leader", 5)]
    events.close()
    assert [e["event"] for e in map(__import__("json").loads, open(cfg.log_file)) if e["event"] == "corrupt"] == ["corrupt"]
