"""Unit tests for harness/backends.py: names map to Cluster classes; unknown or missing backends give a
clear error naming the backend."""
from __future__ import annotations

import pytest

from clusters.base import Cluster
from clusters.local import LocalCluster
from harness import backends


def test_local_backend_is_the_local_cluster():
    assert backends.backend_class("local") is LocalCluster
    assert issubclass(backends.backend_class("local"), Cluster)


def test_unknown_backend():
    with pytest.raises(backends.BackendUnavailable) as e:
        backends.backend_class("kubernetes")
    assert str(e.value) == "unknown cluster backend 'kubernetes' (known: local, docker, ssh)"


def test_missing_module(monkeypatch):
    def load():
        import clusters.no_such_backend  # noqa: F401 - the point: this import fails
    monkeypatch.setitem(backends.BACKENDS, "nowhere", load)
    with pytest.raises(backends.BackendUnavailable) as e:
        backends.backend_class("nowhere")
    assert str(e.value) == "cluster backend 'nowhere' is not available: module clusters.no_such_backend is not installed"
