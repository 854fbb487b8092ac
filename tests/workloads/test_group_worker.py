"""The group workload's worker (workloads/group.py) against a fake group consumer, and its registry entry.

The fake plays a coordinator's part as the real clients report it (an assign event, partitions paused
until started; records from the started position; commits answered, refused or unknown; auto-commits
reported), so these tests pin what the history gets; tests/workloads/test_tansu_group_clients.py and
tests/harness/test_tansu_group_run.py hold the real clients and a real run to the same lines.
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from broker.client import ClientError
from rundir import formats as runformat
from rundir.history import History
from workloads.final_read import final_committed
from workloads.group import GroupWorker, error_name
from workloads.kafka_client import CommitReport, GroupEvent, _confluent_generation
from workloads.workload import KINDS, SETTINGS, Run, Workload


class FakeGroupClient:
    """One member: partitions `assign`ed on its first poll, `records` per partition (offset = index)."""

    def __init__(self, mode, assign=(0, 1), committed=None, log_len=5, commit_error=None, member="m-1", gen=3):
        self.mode, self.member, self.gen = mode, member, gen
        self._events = [GroupEvent("assign", list(assign))]
        self.committed_map = dict(committed or {})
        self.log_len = log_len
        self.commit_error = commit_error
        self.positions: dict[int, int] = {}
        self.commits: list[dict] = []
        self.reports: list[CommitReport] = []
        self.closed = False

    def membership(self):
        return self.member, self.gen

    def poll(self, max_records, timeout_s):
        time.sleep(0.005)
        out = {}
        for p, pos in list(self.positions.items()):
            if pos < self.log_len:
                out[p] = [(o, 0, str(100 * p + o).encode()) for o in range(pos, self.log_len)]
                self.positions[p] = self.log_len
                if self.mode == "auto":
                    self.reports.append(CommitReport("auto", {p: self.log_len}, None))
        return out

    def events(self):
        out, self._events = self._events, []
        return out

    def commit_reports(self):
        out, self.reports = self.reports, []
        return out

    def committed(self, partitions):
        return {p: self.committed_map.get(p, -1) for p in partitions}

    def low_watermark(self, p):
        return 0

    def hw(self, p):
        return self.log_len

    def start(self, positions):
        self.positions.update(positions)

    def commit_sync(self, offsets):
        self.commits.append(dict(offsets))
        if self.commit_error is not None:
            raise self.commit_error

    def commit_async(self, offsets):
        self.commits.append(dict(offsets))
        self.reports.append(CommitReport("async", dict(offsets), self.commit_error))

    def close(self):
        self.closed = True


def _run(tmp_path, make, commit="sync", churn=0.0, seconds=0.3, seed=1):
    h = History(tmp_path / "h.jsonl")
    stop = threading.Event()
    w = GroupWorker(history=h, make_client=make, topic="hw", group="g", commit=commit, churn_s=churn, stop=stop,
                    seed=seed, index=0)
    w.start()
    time.sleep(seconds)
    stop.set()
    w.join(5)
    assert not w.is_alive() and w.error is None
    h.close()
    return [line.obj for line in runformat.iter_jsonl(tmp_path / "h.jsonl")], w


def _ops(lines, f, type_=None):
    return [o for o in lines if o["f"] == f and (type_ is None or o["type"] == type_)]


def test_a_member_records_its_assignment_its_starts_its_polls_and_its_sync_commits(tmp_path):
    clients = []

    def make(mode):
        clients.append(FakeGroupClient(mode, committed={1: 2}))
        return clients[-1]
    lines, w = _run(tmp_path, make)
    ga = _ops(lines, "group-assign")
    assert [o["type"] for o in ga] == ["invoke", "ok"]
    assert ga[0]["value"] == {"group": "g", "member": "m-1", "generation": 3, "partitions": [0, 1]}
    assert ga[1]["value"]["committed"] == [[0, -1], [1, 2]]
    # one assign per partition: the committed offset, or the log start where none is committed
    assert [o["value"] for o in _ops(lines, "assign", "ok")] == [{"partition": 0, "offset": 0},
                                                                  {"partition": 1, "offset": 2}]
    polls = _ops(lines, "poll", "ok")
    assert [(o["value"]["partition"], o["value"]["offset"]) for o in polls] == [(0, 0), (1, 2)]
    assert polls[1]["value"]["records"] == [[2, 102, 0], [3, 103, 0], [4, 104, 0]]
    assert polls[1]["value"]["group"] == "g" and polls[1]["value"]["generation"] == 3 and polls[1]["value"]["hw"] == 5
    commits = _ops(lines, "commit")
    assert [o["type"] for o in commits] == ["invoke", "ok"]       # nothing new to commit after the first
    assert commits[1]["value"] == {"group": "g", "member": "m-1", "generation": 3, "offsets": [[0, 5], [1, 5]],
                                   "mode": "sync"}
    # stopping: the member's partitions revoked, its client closed
    assert _ops(lines, "group-revoke", "ok")[-1]["value"]["partitions"] == [0, 1]
    assert clients[0].closed
    assert all(o["process"] == lines[0]["process"] for o in lines)


@pytest.mark.parametrize("error, kind, name", [
    (ClientError("ILLEGAL_GENERATION", True, "x"), "fail", "ILLEGAL_GENERATION"),
    (ClientError("REBALANCE_IN_PROGRESS", True, "x"), "fail", "REBALANCE_IN_PROGRESS"),
    (ClientError("_TIMED_OUT", False, "x"), "info", "timeout"),
    (ClientError("COORDINATOR_NOT_AVAILABLE", False, "x"), "info", "COORDINATOR_NOT_AVAILABLE"),
])
def test_a_refused_or_unknown_commit_is_a_fail_or_an_info_and_an_info_makes_a_new_process(tmp_path, error, kind, name):
    lines, w = _run(tmp_path, lambda mode: FakeGroupClient(mode, commit_error=error), seconds=0.6)
    done = [o for o in _ops(lines, "commit") if o["type"] != "invoke"]
    assert done and {o["type"] for o in done} == {kind} and {o["error"] for o in done} == {name}
    assert len(done) >= 2            # not committed: the same offsets are committed again
    processes = {o["process"] for o in done}
    assert (len(processes) > 1) == (kind == "info")


def test_an_async_commit_is_completed_when_the_client_answers_one_at_a_time(tmp_path):
    lines, w = _run(tmp_path, lambda mode: FakeGroupClient(mode), commit="async")
    commits = _ops(lines, "commit")
    assert [o["type"] for o in commits[:2]] == ["invoke", "ok"] and commits[0]["value"]["mode"] == "async"
    assert commits[0]["process"] == commits[1]["process"] == _ops(lines, "poll")[0]["process"]


def test_auto_commits_the_client_reports_are_written_as_invoke_and_completion(tmp_path):
    lines, w = _run(tmp_path, lambda mode: FakeGroupClient(mode), commit="auto")
    commits = _ops(lines, "commit")
    assert len(commits) == 4 and [o["type"] for o in commits] == ["invoke", "ok"] * 2
    assert {o["value"]["mode"] for o in commits} == {"auto"}
    assert sorted(o["value"]["offsets"][0][0] for o in commits if o["type"] == "ok") == [0, 1]


def test_members_churn_each_a_new_client_and_a_new_process(tmp_path):
    made = []

    def make(mode):
        made.append(FakeGroupClient(mode, member=f"m-{len(made)}"))
        return made[-1]
    lines, w = _run(tmp_path, make, commit="mixed", churn=0.05, seconds=1.0)
    assert len(made) >= 3 and all(c.closed for c in made)
    members = [o["value"]["member"] for o in _ops(lines, "group-assign", "ok")]
    assert members == sorted(set(members), key=members.index) and len(members) >= 3
    by_member = {}
    for o in _ops(lines, "group-assign", "ok"):
        by_member.setdefault(o["process"], set()).add(o["value"]["member"])
    assert all(len(v) == 1 for v in by_member.values())      # one member per process
    # each member leaves: its partitions revoked before the next member's assignment
    kinds = [o["f"] for o in lines if o["f"] in ("group-assign", "group-revoke") and o["type"] == "ok"]
    assert kinds[:4] == ["group-assign", "group-revoke", "group-assign", "group-revoke"]
    # the seeded mix: the modes members drew are recorded in their commits
    assert {o["value"]["mode"] for o in _ops(lines, "commit")} <= {"sync", "async", "auto"}


def test_a_failed_offset_fetch_is_a_failed_group_assign_retried(tmp_path):
    class Flaky(FakeGroupClient):
        calls = 0

        def committed(self, partitions):
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise ClientError("COORDINATOR_LOAD_IN_PROGRESS", True, "loading")
            return super().committed(partitions)
    lines, w = _run(tmp_path, lambda mode: Flaky(mode), seconds=0.6)
    ga = _ops(lines, "group-assign")
    assert [o["type"] for o in ga] == ["invoke", "fail", "invoke", "ok"]
    assert ga[1]["error"] == "COORDINATOR_LOAD_IN_PROGRESS"
    assert len(_ops(lines, "assign", "ok")) == 2


def test_the_final_committed_read_records_one_op(tmp_path):
    h = History(tmp_path / "h.jsonl")

    class Reader:
        tries = 0

        def committed(self, group, topic, partitions):
            Reader.tries += 1
            if Reader.tries == 1:
                raise ClientError("COORDINATOR_NOT_AVAILABLE", False, "x")
            return {0: 7, 2: 3}

        def close(self):
            pass
    got = final_committed(h, Reader, "g", "hw", [2, 0, 1])
    h.close()
    assert got == {0: 7, 1: -1, 2: 3}
    lines = [line.obj for line in runformat.iter_jsonl(tmp_path / "h.jsonl")]
    assert [(o["type"], o["f"]) for o in lines] == [("invoke", "committed"), ("info", "committed"),
                                                    ("invoke", "committed"), ("ok", "committed")]
    assert lines[1]["process"] != lines[2]["process"]
    assert lines[3]["value"] == {"group": "g", "partitions": [0, 1, 2], "offsets": [[0, 7], [1, -1], [2, 3]]}


def test_the_group_kind_and_its_settings():
    kind = KINDS["group"]
    assert kind.fields == ("group", "generation") and kind.final_records == ("committed",)
    assert set(kind.records) == {"send", "group-assign", "group-revoke", "assign", "poll", "commit"}
    assert SETTINGS["commit"].choices == ("mixed", "sync", "async", "auto")
    with pytest.raises(Exception, match="printable"):
        SETTINGS["group_id"].convert("")


def test_the_group_workload_records_what_it_declares(tmp_path):
    from broker.client import SendResult

    class Producer:
        n = 0

        def send(self, topic, partition, values):
            Producer.n += 1
            return SendResult([Producer.n], 0)

        def close(self):
            pass
    h = History(tmp_path / "h.jsonl")
    run = Run(h, "hw", 3, 1, make_producer=lambda i: Producer(),
              make_group_consumer=lambda i, group, mode: FakeGroupClient(mode, assign=[i]))
    settings = SimpleNamespace(rate=200.0, concurrency=2, group_consumers=2, group_id="g", commit="sync",
                               group_churn=0.1)
    wl = Workload("group", run, settings)
    wl.start()
    time.sleep(0.5)
    assert wl.stop() == [] and wl.errors() == []
    h.close()
    fs = {line.obj["f"] for line in runformat.iter_jsonl(tmp_path / "h.jsonl")}
    assert fs == set(KINDS["group"].records)
    assert "group-0" in wl.client_names() and "group-1" in wl.gates


def test_the_fake_and_both_library_members_have_the_group_client_protocol():
    from workloads.clients import GroupConsumerClient
    from workloads.kafka_client import ConfluentGroupConsumer, KafkaPythonGroupConsumer
    assert isinstance(FakeGroupClient("sync"), GroupConsumerClient)
    for cls in (ConfluentGroupConsumer, KafkaPythonGroupConsumer):
        missing = [m for m in GroupConsumerClient.__dict__ if not m.startswith("_") and not hasattr(cls, m)]
        assert missing == [], (cls, missing)


@pytest.mark.parametrize("flag, value, problem", [
    ("commit", "sometimes", "key 'workload.commit' must be one of"),
    ("members", "0", "key 'workload.group_consumers' must be at least 1, got 0"),
    ("churn", "-1", "--churn: must be a non-negative number, got '-1'"),
    ("group", "", "--group: must be 1 to 255 printable characters, got ''"),
])
def test_a_bad_group_flag_is_one_line_naming_the_key(flag, value, problem):
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--workload", "group", f"--{flag}", value,
                        "--nemesis", "none"], capture_output=True, text=True, cwd=repo, timeout=60,
                       env={"PYTHONPATH": str(repo)})
    assert r.returncode == 254 and problem in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_error_names_and_librdkafkas_generation():
    assert error_name(ClientError("KafkaTimeoutError", False, "")) == "timeout"
    assert error_name(ClientError("UNKNOWN_MEMBER_ID", True, "")) == "UNKNOWN_MEMBER_ID"
    import sys
    raw = b"CGMDv2:" + (5).to_bytes(4, sys.byteorder) + b"g\x00m\x00\x01"
    assert _confluent_generation(raw) == 5 and _confluent_generation(b"other") == -1
