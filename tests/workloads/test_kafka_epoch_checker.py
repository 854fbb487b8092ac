"""Epoch -1 (a Kafka client that cannot tell the leader epoch, workloads/kafka_client.py) is unknown to
the hw-regression check: observations with it are never "the same epoch", in both checker engines, while
a real epoch keeps its same-epoch check (known answers)."""
from __future__ import annotations

import pytest

from checkers import ingest, reference
from simulated_runs import RunBuilder


def _run(tmp_path):
    b = RunBuilder()
    for k in range(10):
        b.send(1, 0, k, offset=k, epoch=-1)                     # sends of a Kafka client: epoch -1
    b.poll(2, 0, 0, [], hw=5, epoch=-1)
    b.poll(3, 0, 0, [], hw=3, epoch=-1)                         # lower HW after a completed one: cross-epoch only
    b.final(0, list(range(10)), process=9)
    for k in range(10):
        b.send(11, 1, 100 + k, offset=k, epoch=4)               # the native client's epochs: still checked
    b.poll(12, 1, 0, [], hw=6, epoch=4)
    b.poll(13, 1, 0, [], hw=2, epoch=4)
    b.final(1, [100 + k for k in range(10)], epoch=4, process=19)
    b.write(tmp_path)
    return ingest.ingest(tmp_path).columnar_dir


def _counts(findings):
    a = findings["anomalies"]
    return ({e["partition"] for e in a["hw-regression"]["examples"]},
            {e["partition"] for e in a["hw-regression-cross-epoch"]["examples"]},
            a["hw-regression"]["count"], a["hw-regression-cross-epoch"]["count"], a["lost-write"]["count"])


def test_reference_engine_treats_epoch_minus_one_as_unknown(tmp_path):
    assert _counts(reference.analyze(_run(tmp_path))) == ({1}, {0}, 1, 1, 0)


@pytest.mark.spark
def test_spark_engine_treats_epoch_minus_one_as_unknown(tmp_path):
    from checkers import spark_session
    from checkers.anomalies import engine

    session = spark_session.get_session()
    try:
        assert _counts(engine.analyze(session, _run(tmp_path))) == ({1}, {0}, 1, 1, 0)
    finally:
        spark_session.stop(session)
