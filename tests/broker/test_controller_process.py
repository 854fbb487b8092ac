"""The controller as a real process on loopback: fencing seen through a METADATA long-poll, durability across
SIGKILL, garbage on the port, clean SIGTERM exit, bad config exit status."""
from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest

from broker.controller import messages as m
from broker.controller.client import ControllerClient, ControllerError, ControllerSyncClient
from broker.protocol import apis, framing
from broker.protocol.framing import Frame

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


class ControllerProcess:
    def __init__(self, tmp_path: Path, settings: dict):
        self.dir = tmp_path
        self.config = tmp_path / "controller.json"
        self.log_file = tmp_path / "controller.log"
        cfg = {"host": HOST, "port": 0, "data_dir": str(tmp_path / "data"), "log_file": str(self.log_file)}
        self.config.write_text(json.dumps({**cfg, **settings}))
        self.proc: subprocess.Popen | None = None
        self.address: tuple[str, int] | None = None

    def start(self) -> "ControllerProcess":
        stderr = open(self.dir / "stderr.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "broker.controller", "--config", str(self.config)],
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)
        stderr.close()
        os.set_blocking(self.proc.stdout.fileno(), False)
        deadline, buf = time.monotonic() + 15, b""
        while b"\n" not in buf:
            assert self.proc.poll() is None, f"controller exited {self.proc.returncode}: " \
                                             f"{(self.dir / 'stderr.log').read_text()}"
            assert time.monotonic() < deadline, "no READY line within 15 s"
            buf += self.proc.stdout.read() or b""
            time.sleep(0.02)
        line = buf.split(b"\n")[0].decode()
        assert line.startswith("READY ")
        host, port = line.split()[1].rsplit(":", 1)
        self.address = (host, int(port))
        return self

    def signal(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=10)

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.log_file.read_text().splitlines()]

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc is not None:
            self.proc.stdout.close()


@pytest.fixture
def controller(tmp_path):
    started: list[ControllerProcess] = []

    def start(**settings) -> ControllerProcess:
        c = ControllerProcess(tmp_path, settings)
        started.append(c)
        return c.start()

    yield start
    for c in started:
        c.cleanup()


def layout(md: m.Metadata, topic: str = "hw"):
    return [(p.leader, p.leader_epoch, p.isr, p.isr_version) for p in md.topic(topic)]


def test_silent_broker_is_fenced_and_replaced_as_seen_through_a_metadata_long_poll(controller):
    c = controller(broker_session_timeout_ms=1000, topics=[{"name": "hw", "partitions": 2, "replication_factor": 3}])

    async def scenario():
        cl = ControllerClient(*c.address, timeout_s=2.0)
        epochs = {b: await cl.register(b, HOST, 9100 + b) for b in (1, 2, 3)}
        t0 = time.monotonic()
        first = await cl.metadata()
        # nothing changes: the long-poll waits its full max_wait_ms and returns the same version
        idle = await cl.metadata(known_version=first.version, max_wait_ms=300)
        idle_s = time.monotonic() - t0
        stop = asyncio.Event()

        async def beat():   # brokers 2 and 3 heartbeat on the same connection as the long-poll
            while not stop.is_set():
                for b in (2, 3):
                    await cl.heartbeat(b, epochs[b])
                await asyncio.sleep(0.2)

        hb = asyncio.get_running_loop().create_task(beat())
        seen, polls = idle, 0
        while seen.brokers[1].alive:
            seen = await cl.metadata(known_version=seen.version, max_wait_ms=5000)
            polls += 1
            assert time.monotonic() - t0 < 5
        fenced_s = time.monotonic() - t0
        stop.set()
        await hb
        await cl.close()
        return first, idle, idle_s, seen, fenced_s, polls

    first, idle, idle_s, seen, fenced_s, polls = asyncio.run(scenario())
    assert layout(first) == [(1, 0, (1, 2, 3), 0), (2, 0, (2, 3, 1), 0)]
    assert idle.version == first.version and 0.28 <= idle_s < 2.0
    assert polls == 1 and 0.8 <= fenced_s < 4.0
    assert seen.version == first.version + 1
    assert layout(seen) == [(2, 1, (2, 3), 1), (2, 0, (2, 3), 1)]
    assert seen.brokers == {1: m.BrokerInfo(HOST, 9101, False), 2: m.BrokerInfo(HOST, 9102, True),
                            3: m.BrokerInfo(HOST, 9103, True)}
    events = c.events()
    assert {e["node"] for e in events} == {"c0"}
    assert [e["broker"] for e in events if e["event"] == "fenced"] == [1]
    changes = [(e["partition"], e["leader"], e["epoch"], e["isr"]) for e in events if e["event"] == "leader-change"]
    assert changes == [(0, 1, 0, [1, 2, 3]), (1, 2, 0, [2, 3, 1]), (0, 2, 1, [2, 3])]


def test_state_survives_sigkill_and_a_restart_gives_brokers_one_session_of_grace(controller):
    c = controller(broker_session_timeout_ms=1500, topics=[{"name": "hw", "partitions": 2, "replication_factor": 3}])
    cl = ControllerSyncClient(c.address, timeout_s=2.0)
    epochs = {b: cl.register(b, HOST, 9200 + b) for b in (1, 2, 3)}
    old_epoch_1 = epochs[1]
    epochs[1] = cl.register(1, HOST, 9201)          # broker 1 bounced: partition 0 moves to 2, epoch 1
    r = cl.alter_isr(m.AlterIsr("hw", 0, 2, 1, 1, (2, 3, 1)))   # the new leader takes 1 back into the ISR
    assert r == m.AlterIsrResult(m.NONE, (1, 2, 3), 2, 2, 1)
    before = cl.metadata()
    assert layout(before) == [(2, 1, (1, 2, 3), 2), (2, 0, (2, 3), 1)]
    cl.close()

    assert c.signal(signal.SIGKILL) == -signal.SIGKILL
    c.start()
    cl = ControllerSyncClient(c.address, timeout_s=2.0)
    t0 = time.monotonic()
    after = cl.metadata()
    assert after == before                          # same version, epochs, ISRs, brokers (all still alive)
    cl.heartbeat(1, epochs[1])                      # broker epochs survived
    with pytest.raises(ControllerError) as err:
        cl.heartbeat(1, old_epoch_1)
    assert err.value.code == m.STALE_BROKER_EPOCH
    start = [e for e in c.events() if e["event"] == "start"]
    assert [e["restored"] for e in start] == [False, True]
    # each start says every partition's state as loaded: the restored one matches what was in force
    states = [(e["partition"], e["leader"], e["epoch"], tuple(e["isr"]), e["version"])
              for e in c.events() if e["event"] == "partition-state"]
    assert states == [(0, 2, 1, (1, 2, 3), 2), (1, 2, 0, (2, 3), 1)]

    # only broker 1 heartbeats now: 2 and 3 are fenced one session timeout after the restart, not before
    seen = after
    while seen.brokers[2].alive or seen.brokers[3].alive:
        cl.heartbeat(1, epochs[1])
        seen = cl.metadata(known_version=seen.version, max_wait_ms=300)
        assert time.monotonic() - t0 < 6
    assert time.monotonic() - t0 >= 1.0
    # p1 (replicas [2, 3, 1]) had ISR [2, 3], both fenced at once: the ISR keeps its leader 2 as last member,
    # and without unclean election there is no leader
    assert layout(seen) == [(1, 2, (1,), 3), (None, 1, (2,), 2)]
    cl.close()
    assert c.signal(signal.SIGTERM) == 0


def raw_exchange(address, data: bytes, *, half_close: bool = False) -> tuple[list[Frame], bool]:
    """Send bytes, read frames until the controller closes (True) or 5 s pass (False)."""
    s = socket.create_connection(address, timeout=5)
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        frames = []
        while True:
            try:
                f = framing.read_frame_blocking(s)
            except (socket.timeout, TimeoutError):
                return frames, False
            except (ConnectionResetError, framing.FrameError):
                return frames, True
            if f is None:
                return frames, True
            frames.append(f)
    finally:
        s.close()


def frame_bytes(api: int, body_bytes: bytes, kind: int = framing.REQUEST, corr: int = 7) -> bytes:
    payload = struct.pack(">2sBBIH", b"HW", framing.PROTOCOL_VERSION, kind, corr, api) + body_bytes
    return struct.pack(">I", len(payload)) + payload


def test_garbage_on_the_port_is_answered_with_an_error_and_closed_and_the_controller_keeps_serving(controller):
    c = controller(frame_read_timeout_ms=500)
    rng = random.Random(1234)
    random_payload = bytes(rng.randrange(256) for _ in range(200))
    metadata_req = frame_bytes(apis.METADATA, msgpack.packb({"known_version": -1, "max_wait_ms": 0}))
    cases = {
        "random bytes": struct.pack(">I", len(random_payload)) + random_payload,
        "oversized length": struct.pack(">I", 0xFFFFFFF0) + b"x" * 64,
        "non-map body": frame_bytes(apis.METADATA, msgpack.packb([1, 2, 3])),
        "response frame": frame_bytes(apis.METADATA, msgpack.packb({}), kind=framing.RESPONSE),
        "bad protocol version": metadata_req[:6] + bytes([99]) + metadata_req[7:],
    }
    for name, data in cases.items():
        frames, closed = raw_exchange(c.address, data)
        assert closed, name
        assert [(f.api, f.body["error"]) for f in frames] == [(apis.ERROR, m.INVALID_REQUEST)], name
    # a truncated frame, then the client closes its side: error frame, then closed
    frames, closed = raw_exchange(c.address, metadata_req[:9], half_close=True)
    assert closed and [(f.api, f.body["error"]) for f in frames] == [(apis.ERROR, m.INVALID_REQUEST)]
    # a truncated frame left hanging: closed after frame_read_timeout_ms
    t0 = time.monotonic()
    frames, closed = raw_exchange(c.address, metadata_req[:-3])
    assert closed and 0.45 <= time.monotonic() - t0 < 3
    assert "not complete within 0.5s" in frames[0].body["message"]
    # a truncated length prefix
    frames, closed = raw_exchange(c.address, b"\x00\x00", half_close=True)
    assert closed and [f.api for f in frames] == [apis.ERROR]

    # well-formed frames with a bad field or an unknown API: an error on that API, the connection stays open
    with socket.create_connection(c.address, timeout=5) as s:
        s.sendall(frame_bytes(apis.HEARTBEAT, msgpack.packb({"broker_id": "one", "broker_epoch": 1}), corr=1))
        s.sendall(frame_bytes(4242, msgpack.packb({}), corr=2))
        s.sendall(metadata_req)
        answers = [framing.read_frame_blocking(s) for _ in range(3)]
    assert [(f.correlation_id, f.api, f.body["error"]) for f in answers] == [
        (1, apis.HEARTBEAT, m.INVALID_REQUEST), (2, 4242, m.INVALID_REQUEST), (7, apis.METADATA, m.NONE)]
    assert answers[0].body["message"] == "HEARTBEAT: field 'broker_id' must be an integer, got 'one'"

    with ControllerSyncClient(c.address) as cl:
        assert cl.register(1, HOST, 9301) == 1
        md = cl.metadata()
    assert (md.version, md.brokers) == (1, {1: m.BrokerInfo(HOST, 9301, True)})
    assert c.proc.poll() is None


def test_sigterm_exits_0_after_logging_stop(controller):
    c = controller()
    with ControllerSyncClient(c.address) as cl:
        assert cl.create_topics([m.TopicSpec("x", 1, 1)]) == {"x": m.INVALID_REPLICATION_FACTOR}
        cl.register(1, HOST, 9401)
        assert cl.create_topics([m.TopicSpec("x", 2, 1)]) == {"x": m.NONE}
        assert cl.create_topics([m.TopicSpec("x", 2, 1)]) == {"x": m.NONE}
        assert layout(cl.metadata(), "x") == [(1, 0, (1,), 0), (1, 0, (1,), 0)]
    assert c.signal(signal.SIGTERM) == 0
    assert c.events()[-1]["event"] == "stop"


def test_bad_config_exits_2_with_one_line_naming_file_and_key(tmp_path):
    cfg = tmp_path / "controller.json"
    cfg.write_text(json.dumps({"host": HOST, "port": "nine", "data_dir": str(tmp_path), "log_file": "x.log"}))
    r = subprocess.run([sys.executable, "-m", "broker.controller", "--config", str(cfg)], cwd=REPO,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr == f"{cfg}: key 'port': must be an integer, got 'nine'\n"
    assert r.stdout == ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def test_clients_report_an_unreachable_controller_and_reconnect_after_its_restart(controller):
    c = controller(port=free_port(), broker_session_timeout_ms=3000)

    async def scenario():
        cl = ControllerClient(*c.address, timeout_s=1.0)
        epoch = await cl.register(1, HOST, 9501)
        await cl.heartbeat(1, epoch)
        assert c.signal(signal.SIGKILL) == -signal.SIGKILL
        with pytest.raises(ControllerError) as err:
            await cl.heartbeat(1, epoch)
        down = err.value.code
        c.start()
        await cl.heartbeat(1, epoch)            # reconnects; the registration survived the restart
        md = await cl.metadata()
        await cl.close()
        return down, md

    down, md = asyncio.run(scenario())
    assert down == m.CONTROLLER_NOT_AVAILABLE
    assert (md.version, md.brokers) == (1, {1: m.BrokerInfo(HOST, 9501, True)})
    sync = ControllerSyncClient(c.address, timeout_s=1.0)
    assert sync.metadata().version == 1
    c.signal(signal.SIGKILL)
    with pytest.raises(ControllerError) as err:
        sync.metadata()
    assert err.value.code == m.CONTROLLER_NOT_AVAILABLE
    c.start()
    assert sync.metadata().version == 1
    sync.close()


def test_a_paused_controller_times_clients_out_and_does_not_fence_everyone_when_resumed(controller):
    c = controller(broker_session_timeout_ms=800)
    cl = ControllerSyncClient(c.address, timeout_s=0.5)
    epochs = {b: cl.register(b, HOST, 9600 + b) for b in (1, 2)}
    version = cl.metadata().version
    c.proc.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        with pytest.raises(ControllerError) as err:
            cl.metadata()
        assert err.value.code == m.CONTROLLER_NOT_AVAILABLE and 0.45 <= time.monotonic() - t0 < 3
        time.sleep(1.2)                          # paused for longer than a session timeout
    finally:
        c.proc.send_signal(signal.SIGCONT)
    for b in (1, 2):
        cl.heartbeat(b, epochs[b])
    md = cl.metadata()
    assert md.version == version and all(b.alive for b in md.brokers.values())
    assert [e["event"] for e in c.events()].count("stall") == 1
    assert [e for e in c.events() if e["event"] == "fenced"] == []
    cl.close()
