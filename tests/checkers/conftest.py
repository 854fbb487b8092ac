"""Checker test fixtures: one SparkSession shared by every Spark test of the session."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from checkers import spark_session

    session = spark_session.get_session()
    yield session
    spark_session.stop(session)
