"""A run holds the shared Spark driver in use from the moment it prepares the checker until its check is
done, so that `highwater cleanup` (or the idle timer) cannot stop it under a live run, which would cost
the check a cold start of about 25 s (issue 28). The lease is the service's own in-use lock; starting the
driver itself is replaced here (the real start, lease and cleanup are tests/checkers/test_spark_service.py
and every real run's check)."""
from __future__ import annotations

import pytest

from checkers import check, spark_service


@pytest.fixture
def service_dir(tmp_path, monkeypatch):
    d = tmp_path / "spark-service"
    monkeypatch.setenv(spark_service.ENV_DIR, str(d))
    monkeypatch.setattr(spark_service, "ensure", lambda **kw: None)   # no JVM: only the lease is looked at
    yield d
    check.release_prepared()


def _in_use(d) -> bool:
    held = spark_service._hold_unused(d)
    if held is None:
        return True
    held.close()
    return False


def test_prepare_holds_the_driver_until_released(service_dir):
    thread = check.prepare(engine="spark")
    thread.join(30)
    assert _in_use(service_dir)
    check.prepare(engine="spark").join(30)              # a second run in the same process: still one lease
    check.release_prepared()
    assert not _in_use(service_dir)
    check.release_prepared()                            # twice: a no-op


def test_the_reference_engine_holds_nothing(service_dir):
    service_dir.mkdir(parents=True)
    assert check.prepare(engine="reference") is None
    assert not _in_use(service_dir)


def test_the_harness_pair_takes_and_gives_back_the_lease(service_dir):
    """harness/verdict.py's prepare_checker / release_checker, which the run lifecycle calls at
    provisioning and after its check (or at its end, when it never got there)."""
    from harness import verdict
    verdict.prepare_checker(engine="spark")
    assert _in_use(service_dir)
    verdict.release_checker()
    assert not _in_use(service_dir)
