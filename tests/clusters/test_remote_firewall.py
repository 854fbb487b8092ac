"""The SSH/Docker backends' packet drops (clusters/ssh_control.RemoteFirewall): the very shell commands they
run on a node, run here by a local shell as root, with real iptables rules and real packets on loopback."""
from __future__ import annotations

import shutil
import socket
import subprocess

import pytest

from clusters.local_firewall import short_id
from clusters.ssh_control import RemoteFirewall, RemoteResult, ClusterError, SshTarget

pytestmark = [pytest.mark.root, pytest.mark.skipif(shutil.which("iptables") is None, reason="needs iptables")]

DST = "127.83.0.1"
SOURCES = ["127.83.0.2", "127.83.0.3", "127.83.0.4"]


class LocalShell:
    """What RemoteFirewall needs of an SshNode (run, target), running /bin/sh here instead of over SSH."""
    target = SshTarget("n1", "localhost")

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True, stdin=None) -> RemoteResult:
        r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=timeout_s or 60)
        if check and r.returncode != 0:
            raise ClusterError(f"`{command}` exited {r.returncode}: {r.stderr.strip()}")
        return RemoteResult(command, r.returncode, r.stdout, r.stderr)


def _udp_delivered(src: str, dst: str, timeout: float = 0.5) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind((dst, 0))
        rx.settimeout(timeout)
        tx.bind((src, 0))
        tx.sendto(b"x", rx.getsockname())
        try:
            return rx.recv(4) == b"x"
        except socket.timeout:
            return False


@pytest.fixture
def fw(request):
    f = RemoteFirewall(LocalShell(), f"remote-fw-{request.node.name}")
    yield f
    f.remove()
    assert f"HW-{short_id(f.run_id)}" not in subprocess.run(["iptables", "-w", "-S"], capture_output=True,
                                                            text=True).stdout


def test_partial_heal_deletes_only_the_named_sources(fw):
    fw.drop_from(SOURCES)
    fw.drop_from([SOURCES[0]])                  # dropped twice: both copies go at the partial heal
    assert [_udp_delivered(s, DST) for s in SOURCES] == [False, False, False]
    fw.heal_from([SOURCES[0], SOURCES[2], "127.83.0.9"])
    assert fw.rules() == [f"-A {fw.chain} -s {SOURCES[1]}/32 -j DROP"]
    assert fw.sources == [SOURCES[1]]
    assert [_udp_delivered(s, DST) for s in SOURCES] == [True, False, True]
    fw.heal()
    assert fw.rules() == [] and fw.sources == []
    assert [_udp_delivered(s, DST) for s in SOURCES] == [True, True, True]
