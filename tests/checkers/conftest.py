"""Checker test fixtures: one Spark session shared by every Spark test of the test run (a client of the
run's shared driver, tests/conftest.py)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from checkers import spark_session

    session = spark_session.get_session()
    yield session
    spark_session.stop(session)
