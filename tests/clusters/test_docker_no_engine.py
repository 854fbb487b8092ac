"""`--cluster docker` without a Docker engine fails at once, with one line saying so (no engine needed)."""
from __future__ import annotations

import time

import pytest

from clusters.base import ClusterError, ClusterSpec
from harness import backends


def test_no_engine_fails_at_once_with_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such-docker.sock")
    started = time.monotonic()
    with pytest.raises(ClusterError) as err:
        backends.make_cluster("docker", ClusterSpec("nodocker", tmp_path, brokers=1))
    assert time.monotonic() - started < 5
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("the docker backend needs a running Docker engine and none answers")
    assert f"unix://{tmp_path}/no-such-docker.sock" in msg
    assert list(tmp_path.iterdir()) == []      # nothing was created
