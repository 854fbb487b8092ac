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
    with pytest.raises(backends.ConfigError) as e:
        backends.backend_class("kubernetes")
    assert str(e.value) == "unknown cluster backend 'kubernetes' (known: local, docker, ssh, external)"


def test_a_missing_dependency_makes_the_backend_unavailable(monkeypatch):
    def load():
        import no_such_sdk  # noqa: F401 - the point: this import fails
    monkeypatch.setitem(backends.BACKENDS, "nowhere", load)
    with pytest.raises(backends.ConfigError) as e:
        backends.backend_class("nowhere")
    assert str(e.value) == "cluster backend 'nowhere' is not available: module no_such_sdk is not installed"


def test_a_broken_import_of_our_own_is_a_bug_not_a_missing_backend(monkeypatch):
    def missing_own_module():
        import clusters.no_such_backend  # noqa: F401
    monkeypatch.setitem(backends.BACKENDS, "nowhere", missing_own_module)
    with pytest.raises(ModuleNotFoundError):
        backends.backend_class("nowhere")

    def bad_name():
        from clusters.base import NoSuchClass  # noqa: F401
    monkeypatch.setitem(backends.BACKENDS, "nowhere", bad_name)
    with pytest.raises(backends.ConfigError) as e:
        backends.backend_class("nowhere")
    assert str(e.value).startswith("cluster backend 'nowhere' is not available: cannot import name 'NoSuchClass'")
