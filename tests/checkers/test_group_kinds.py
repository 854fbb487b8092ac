"""The groups family (rundir/kinds.py GROUP_KINDS): not exercised without a consumer group, checked with
one; the clean group history fails nothing; the false alarms it must not raise, each on its own."""
from __future__ import annotations

import pytest

from checkers.check import CheckOptions, check_run
from rundir import kinds
from rundir.verdict import verdict_line
from simulated_runs import RunBuilder

import checker_scenarios as sc
import group_ops as g

GROUP_NAMES = [k.name for k in kinds.GROUP_KINDS]


def _check(tmp_path, b):
    b.write(tmp_path)
    return check_run(tmp_path, CheckOptions(engine="reference"))


@pytest.mark.parametrize("grouped", [False, True])
def test_group_kinds_need_a_group(tmp_path, grouped):
    """Without group operations every group kind is not-exercised (its reason said, out of the scope and
    the verdict line); with them each is checked, and the clean group history is valid (its re-read is
    counted, allowed)."""
    b = RunBuilder()
    (sc.group_clean if grouped else sc.clean)(b, 0)
    res = _check(tmp_path, b)
    assert res["valid"] is True
    for name in GROUP_NAMES:
        a = res["anomalies"][name]
        if grouped:
            assert a["status"] == "checked", name
        else:
            assert (a["status"], a["status_reason"], a["count"]) == (
                "not-exercised", kinds.GROUP_REREAD.needs.missing, 0), name
            assert not any(name in grp["kinds"] for gs in res["scope"].values() for grp in gs)
            assert name not in verdict_line(res)
    assert res["anomalies"]["group-reread"]["count"] == (1 if grouped else 0)


def _member_reads(b, p, G, proc, member, gen, committed, frm, hi):
    g.group_assign(b, proc, G, member, gen, {p: committed})
    b.assign(proc, p, frm)
    return g.group_poll(b, proc, G, gen, p, frm, [(o, 10 + o) for o in range(frm, hi)], hw=4)


def test_an_info_commit_explains_the_resume_point_it_names_only(tmp_path):
    """A commit of 3 whose outcome is unknown may have been applied: the next member resuming at 3 is no
    mismatch (E is 2); one resuming at 1 is, though a commit was in flight (it cannot have moved the
    committed offset to 1)."""
    b = RunBuilder()
    for k in range(4):
        b.send(1, 0, 10 + k, offset=k)
    G = "g"
    _member_reads(b, 0, G, 2, "a", 1, -1, 0, 3)
    g.commit(b, 2, G, "a", 1, {0: 2})
    g.commit(b, 2, G, "a", 1, {0: 3}, outcome="info")
    g.group_revoke(b, 2, G, "a", 1, [0])
    _member_reads(b, 0, G, 3, "b", 2, 3, 3, 4)            # resumes at the info commit's 3: explained
    g.group_revoke(b, 3, G, "b", 2, [0])
    poll = _member_reads(b, 0, G, 4, "c", 3, 3, 1, 4)     # resumes at 1: neither 2 nor 3
    b.final(0, [10, 11, 12, 13], process=9)
    res = _check(tmp_path, b)
    a = res["anomalies"]["group-resume-mismatch"]
    assert a["count"] == 1 and a["examples"][0]["index"] == poll and a["examples"][0]["expected"] == 2
    assert res["anomalies"]["committed-regression"]["count"] == 0


def test_a_commit_acknowledged_after_the_read_is_no_regression(tmp_path):
    """The committed read was invoked before the commit's acknowledgement arrived: it may answer the older
    offset. An OffsetFetch answering none where nothing was acknowledged is no regression either."""
    b = RunBuilder()
    for k in range(3):
        b.send(1, 0, 10 + k, offset=k)
    G = "g"
    g.committed(b, 8, G, {0: -1})
    _member_reads(b, 0, G, 2, "a", 1, -1, 0, 3)
    value = g.commit_value(G, "a", 1, {0: 3})
    b.op(2, "invoke", "commit", value)
    b.op(8, "invoke", "committed", {"group": G, "partitions": [0]})
    g.complete(b, 2, "commit", value)
    b.op(8, "ok", "committed", {"group": G, "partitions": [0], "offsets": [[0, 2]]})
    b.final(0, [10, 11, 12], process=9)
    res = _check(tmp_path, b)
    assert {n: res["anomalies"][n]["count"] for n in GROUP_NAMES} == {n: 0 for n in GROUP_NAMES}


def test_failed_commits_count_for_nothing(tmp_path):
    """A commit that failed (ILLEGAL_GENERATION) above the log and above the final committed offset is no
    commit-beyond-log, no regression and no in-flight commit."""
    b = RunBuilder()
    for k in range(2):
        b.send(1, 0, 10 + k, offset=k)
    G = "g"
    _member_reads(b, 0, G, 2, "a", 1, -1, 0, 2)
    g.commit(b, 2, G, "a", 1, {0: 2})
    g.commit(b, 7, G, "z", 0, {0: 9}, outcome="fail", error="ILLEGAL_GENERATION")
    g.committed(b, 8, G, {0: 2})
    b.final(0, [10, 11], process=9)
    res = _check(tmp_path, b)
    assert {n: res["anomalies"][n]["count"] for n in GROUP_NAMES} == {n: 0 for n in GROUP_NAMES}


def test_the_assigned_members_own_auto_commit_explains_nothing(tmp_path):
    """Member b resumes at 3 where the acknowledged commit says 2: its own auto-commit of 3, reported after
    its assign, cannot have set the offset it was given."""
    b = RunBuilder()
    for k in range(4):
        b.send(1, 0, 10 + k, offset=k)
    G = "g"
    _member_reads(b, 0, G, 2, "a", 1, -1, 0, 2)
    g.commit(b, 2, G, "a", 1, {0: 2})
    g.group_revoke(b, 2, G, "a", 1, [0])
    g.group_assign(b, 3, G, "b", 2, {0: 3})
    g.commit(b, 3, G, "b", 2, {0: 3}, mode="auto")
    b.assign(3, 0, 3)
    g.group_poll(b, 3, G, 2, 0, 3, [(3, 13)], hw=4)
    b.final(0, [10, 11, 12, 13], process=9)
    res = _check(tmp_path, b)
    assert res["anomalies"]["group-resume-mismatch"]["count"] == 1
