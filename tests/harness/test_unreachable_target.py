"""A run whose cluster cannot be reached fails at once with one line, and creates nothing: no run
directory, no `latest` link moved, no index row (harness/backends.reach, clusters/reach.py). Real CLI
processes against real closed ports on loopback and a Docker socket that does not exist."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from clusters import reach
from clusters.base import ClusterError


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _snapshot(root) -> dict:
    """Every path under the results root, with a symlink's target and a file's bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    out[rel] = ("file", f.read())
            else:
                out[rel] = ("dir", None)
    return out


@pytest.fixture
def results(tmp_path):
    """A results directory that already holds a run, its `latest` links and an index."""
    root = tmp_path / "results"
    old = root / "chaos" / "20261101T000000Z"
    old.mkdir(parents=True)
    (old / "test.json").write_text('{"name": "chaos"}\n')
    (root / "chaos" / "latest").symlink_to("20261101T000000Z")
    (root / "latest").symlink_to("chaos/20261101T000000Z")
    (root / "index.html").write_text("<html>the index before</html>\n")
    return root


def _run(results, *args, env=None) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--results-dir", str(results),
                        "--nemesis", "none", "--time-limit", "30", *args],
                       capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})
    return r, time.monotonic() - started


def _assert_nothing_made(r, elapsed, before, results, *expected):
    assert r.returncode == 254, (r.stdout, r.stderr)
    assert elapsed < 10, elapsed
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(e in lines[0] for e in expected), r.stderr
    assert r.stdout == ""                         # no report path: there is no run
    assert _snapshot(results) == before


def test_an_unreachable_external_cluster_fails_fast_and_leaves_the_store_alone(results):
    before = _snapshot(results)
    port = _closed_port()
    r, elapsed = _run(results, "--cluster", "external", "--bootstrap", f"127.0.0.1:{port}")
    _assert_nothing_made(r, elapsed, before, results, "highwater: the external backend's cluster cannot be reached",
                         f"127.0.0.1:{port} (Connection refused)")


def test_an_unreachable_ssh_host_fails_fast_naming_it(results, tmp_path):
    up = socket.socket()
    up.bind(("127.0.0.1", 0))
    up.listen(8)                                  # the controller's host answers; broker n2's does not
    down = _closed_port()
    nodes = tmp_path / "nodes.toml"
    nodes.write_text(f'[controller]\nhost = "127.0.0.1"\nport = {up.getsockname()[1]}\n'
                     f'[[broker]]\nhost = "127.0.0.1"\nport = {up.getsockname()[1]}\n'
                     f'[[broker]]\nhost = "127.0.0.1"\nport = {down}\n')
    before = _snapshot(results)
    try:
        r, elapsed = _run(results, "--cluster", "ssh", "--nodes-file", str(nodes), "--nodes", "2",
                          "--replication-factor", "2")
    finally:
        up.close()
    _assert_nothing_made(r, elapsed, before, results, "the ssh backend's cluster cannot be reached",
                         "does not answer on 1 of 3 hosts", f"n2 (root@127.0.0.1:{down}) at 127.0.0.1:{down}")


def test_a_docker_engine_that_does_not_answer_fails_fast(results, tmp_path):
    before = _snapshot(results)
    r, elapsed = _run(results, "--cluster", "docker", env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    _assert_nothing_made(r, elapsed, before, results, "the docker backend's cluster cannot be reached",
                         "needs a running Docker engine", "no-engine.sock")


def test_the_probes_name_every_host_that_does_not_answer():
    up = socket.socket()
    up.bind(("127.0.0.1", 0))
    up.listen(8)
    a, b = _closed_port(), _closed_port()
    try:
        assert reach.tcp([("c0", "127.0.0.1", up.getsockname()[1])]) == "SSH answers on all 1 hosts"
        with pytest.raises(ClusterError) as err:
            reach.tcp([("c0", "127.0.0.1", up.getsockname()[1]), ("n1", "127.0.0.1", a), ("n2", "127.0.0.1", b)],
                      timeout_s=2)
    finally:
        up.close()
    assert str(err.value) == (f"SSH does not answer on 2 of 3 hosts within 2s: n1 at 127.0.0.1:{a} (Connection "
                              f"refused), n2 at 127.0.0.1:{b} (Connection refused)")
