"""The stories of the group kinds (reports/story.py): what each example says, with the data partition's
faults and leader changes between the operations it compares (the run of tests/reports/test_story.py)."""
from __future__ import annotations

import pytest

from reports.story import load_timeline, tell
from test_story import make_story_run

S = 1_000_000_000


@pytest.fixture
def timeline(tmp_path):
    return load_timeline(make_story_run(tmp_path))


BETWEEN = " In between ran a partition n1 | c0, n2, n3 (2.00–5.00 s), and n2 became leader in epoch 1 at 3.00 s."


def test_committed_regression_story(timeline):
    ex = {"partition": 0, "group": "g1", "offset": -1, "f": "committed", "index": 50, "time": int(3.5 * S),
          "invoke_index": 49, "process": "8", "previous": {"offset": 3, "index": 30, "time": int(2.5 * S),
                                                           "process": "5", "member": "m-a", "generation": 1}}
    assert tell("committed-regression", ex, timeline).text == (
        "On partition 0, group g1's commit of offset 3 by member m-a (generation 1) was acknowledged at 2.500 s; "
        "the group's committed offsets, read after that (answered at 3.500 s), said none." + BETWEEN)


def test_group_resume_mismatch_story(timeline):
    ex = {"partition": 0, "group": "g1", "member": "m-b", "generation": 2, "offset": 5, "expected": 3,
          "index": 40, "time": int(3.5 * S), "process": "6",
          "assign": {"index": 30, "time": int(2.5 * S), "invoke_index": 29, "committed": 3}}
    assert tell("group-resume-mismatch", ex, timeline).text == (
        "Member m-b (generation 2) of group g1 was assigned partition 0 at 2.500 s; the group's highest "
        "acknowledged commit was offset 3, and the assignment came with committed offset 3. Its first records "
        "came from offset 5 at 3.500 s: 2 records skipped." + BETWEEN)


def test_lost_by_group_and_commit_beyond_log_stories(timeline):
    lost = {"partition": 0, "group": "G", "offset": 2, "value": 12, "committed": 4, "index": 60,
            "time": int(6 * S)}
    assert tell("lost-by-group", lost, timeline).text == (
        "Group G's final committed offset for partition 0 is 4 (read at 6.000 s), yet the final log's record "
        "at offset 2 (value 12), below it, was never returned to any member of the group.")
    beyond = {"partition": 0, "group": "G", "offset": 9, "hw": 3, "f": "commit", "index": 20, "time": int(3.5 * S),
              "process": "5", "member": "m-a", "generation": 1}
    text = tell("commit-beyond-log", beyond, timeline).text
    assert text.startswith("On partition 0, group G's commit of offset 9 by member m-a (generation 1) was "
                           "acknowledged at 3.500 s, above the partition's final high watermark 3: the group "
                           "claims records the log does not hold.")


def test_assignment_overlap_and_reread_stories(timeline):
    overlap = {"partition": 0, "group": "g1", "generation": 4, "members": ["a", "b"], "member": "b", "index": 31,
               "time": int(3.5 * S), "process": "6", "first": {"member": "a", "index": 30, "time": int(2.5 * S),
                                                               "process": "5"}}
    assert tell("assignment-overlap", overlap, timeline).text == (
        "In generation 4 of group g1, member a was assigned partition 0 at 2.500 s, and member b was assigned it "
        "too at 3.500 s." + BETWEEN)
    reread = {"partition": 0, "group": "g1", "value": 15, "offset": 5, "reads": 2, "index": 40,
              "time": int(3.5 * S), "process": "6",
              "first": {"index": 30, "time": int(2.5 * S), "process": "5", "offset": 5}}
    assert tell("group-reread", reread, timeline).text == (
        "The members of group g1 read value 15 (offset 5 of partition 0) 2 times, first at 2.500 s by process 5, "
        "last at 3.500 s by process 6 (at-least-once: counted, allowed)." + BETWEEN)


def test_history_scan_pairs_an_async_commit_apart_from_the_polls(tmp_path):
    """An async commit answered while its member polls on: the poll's latency is its own, the commit's
    from its own invoke; a group operation still open at the end counts as unfinished."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkers"))
    import group_ops as g
    from reports.history_scan import scan_history
    from simulated_runs import RunBuilder

    b = RunBuilder()
    b.send(1, 0, 10, offset=0)
    g.commit(b, 5, "g", "m", 1, {0: 1}, outcome=None, mode="async")
    b.op(5, "invoke", "poll", {"partition": 0, "offset": 1, "group": "g", "generation": 1}, dt=1_000_000)
    b.op(5, "ok", "poll", {"partition": 0, "offset": 1, "group": "g", "generation": 1, "records": [], "hw": 1,
                           "epoch": 1}, dt=1_000_000)
    g.complete(b, 5, "commit", g.commit_value("g", "m", 1, {0: 1}, "async"))
    g.commit(b, 5, "g", "m", 1, {0: 1}, outcome=None, mode="async")
    b.write(tmp_path)
    summary = scan_history(tmp_path / "history.jsonl")
    lat = {p.f: p.latency_s for p in summary.points}
    assert lat == {"send": 0.001, "poll": 0.001, "commit": 0.003}
    assert summary.unfinished == 1
