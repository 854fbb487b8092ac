"""The degrade backend's delayer bookkeeping (clusters/local_netem.py) on real iptables rules and real delayer
processes, no cluster: a replaced delayer's rules go by the queue they were made with, a dead delayer is
reported at restore, and iptables' errors are one line."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from clusters import local_netem
from clusters.base import ClusterError
from clusters.local_netem import Degradation

REPO = Path(__file__).resolve().parents[2]
A, B, C = "127.71.0.1", "127.71.0.2", "127.71.0.3"


@pytest.fixture
def deg(request):
    d = Degradation(f"netem-delayers-{request.node.name}-{os.getpid()}", python=sys.executable,
                    env={**os.environ, "PYTHONPATH": str(REPO)})
    yield d
    d.remove()
    assert d.chain not in local_netem._ipt(["-S"]).stdout


def _queue_rule(d: Degradation, src: str, dst: str, queue: int) -> str:
    return f"-A {d.chain} -s {src}/32 -d {dst}/32 -j NFQUEUE --queue-num {queue} --queue-bypass"


def _kill(d: Degradation, key=(5.0, 0.0)) -> local_netem.Delayer:
    old = d.delayers[key]
    os.kill(old.proc.pid, signal.SIGKILL)
    old.proc.wait(5)
    return old


@pytest.mark.root
def test_a_replaced_delayer_s_links_are_deleted_by_their_own_queue_and_moved_to_the_new_one(deg):
    deg.degrade([(A, B), (B, A)], delay_ms=5)
    old = _kill(deg)
    deg.degrade([(A, B)], delay_ms=5)            # a new delayer, bound to another queue
    new = deg.delayers[(5.0, 0.0)]
    assert new.proc.pid != old.proc.pid and new.queue != old.queue
    # exactly one rule per link, both on the new queue: the old A->B rule was deleted by ITS queue, and
    # B->A (same setting, its delayer dead) moved along
    assert sorted(deg.rules()) == sorted([_queue_rule(deg, A, B, new.queue), _queue_rule(deg, B, A, new.queue)])
    assert {p: link.queue for p, link in deg.links.items()} == {(A, B): new.queue, (B, A): new.queue}
    assert old.proc.stdout.closed                # the dead one was forgotten (pipes closed)
    deg.restore([(A, B)])
    assert deg.rules() == [_queue_rule(deg, B, A, new.queue)]


@pytest.mark.root
def test_a_dead_delayer_is_reported_at_restore_after_its_links_are_removed(deg):
    deg.degrade([(A, B)], delay_ms=5)
    deg.degrade([(A, C)], delay_ms=9, loss_pct=10)
    q = deg.delayers[(5.0, 0.0)].queue
    _kill(deg)
    deg.restore([(A, C)])                        # its delayer is alive: no error
    with pytest.raises(ClusterError) as err:
        deg.restore([(A, B)])
    assert str(err.value) == (f"degrade: the delayer of queue {q} (5ms+-0ms) exited with code -9: "
                              f"{A}->{B} passed undelayed")
    assert deg.rules() == [] and deg.links == {} and deg.delayers == {}
    deg.degrade([(A, B)], delay_ms=5)
    _kill(deg)
    with pytest.raises(ClusterError, match=r"^degrade: the delayer of queue \d+ \(5ms\+-0ms\) exited with code -9: "
                                           rf"{A}->{B} passed undelayed$"):
        deg.restore(None)
    assert deg.rules() == [] and deg.delayers == {}


@pytest.mark.root
def test_iptables_errors_are_one_line():
    with pytest.raises(ClusterError) as err:
        local_netem._ipt(["-L", "--no-such-option"])
    msg = str(err.value)
    assert "\n" not in msg and " | " in msg, msg
    assert msg.startswith("degrade: command failed (2): iptables -w -t mangle -L --no-such-option: "), msg
