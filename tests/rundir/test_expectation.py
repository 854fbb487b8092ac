"""rundir/expectation.py: a run's expectation (test.json "expect") judged against its results, the same
way for the terminal, the report and the index: as expected only for a checked run with a definite
verdict that played out."""
from __future__ import annotations

from rundir.expectation import AS_EXPECTED, NOT_JUDGED, UNEXPECTED, found_kinds, judge, record


def _results(valid, **counts):
    return {"valid": valid, "anomalies": {k: {"count": n, "fails_run": not k.startswith("soft")}
                                          for k, n in counts.items()}}


LOSS = record(["lost-write"], by="scenario", mode="hw")
SAFE = record([], by="suite", mode="leader-epoch")


def test_a_record_is_sorted_and_says_who_expects_it():
    assert record(("divergence", "lost-write", "divergence"), by="suite") == {
        "by": "suite", "kinds": ["divergence", "lost-write"]}
    assert LOSS == {"by": "scenario", "kinds": ["lost-write"], "mode": "hw"}


def test_found_kinds_are_the_failing_ones_with_a_count():
    assert found_kinds(_results(False, **{"lost-write": 3, "divergence": 0, "soft-kind": 2})) == ["lost-write"]
    assert found_kinds(None) == []


def test_the_expected_anomaly_found_is_as_expected():
    j = judge(LOSS, _results(False, **{"lost-write": 5, "divergence": 1}))
    assert (j.state, j.found, j.phrase()) == (AS_EXPECTED, ("divergence", "lost-write"), "as expected in hw mode")


def test_the_expected_anomaly_missing_is_not_as_expected():
    j = judge(LOSS, _results(True))
    assert j.state == UNEXPECTED
    assert j.phrase() == "NOT as expected in hw mode (expected lost-write; found none)"


def test_a_safe_expectation_needs_a_valid_run():
    assert judge(SAFE, _results(True, **{"soft-kind": 4})).state == AS_EXPECTED     # allowed kinds do not count
    j = judge(SAFE, _results(False, **{"divergence": 2}))
    assert (j.state, j.phrase()) == (UNEXPECTED, "NOT as expected in leader-epoch mode (expected no anomalies; "
                                                 "found divergence)")


def test_nothing_unchecked_unknown_or_unplayed_is_judged():
    assert judge(LOSS, None).phrase() == "expectation (lost-write in hw mode) not judged: the run was not checked"
    assert judge(SAFE, _results("unknown")).state == NOT_JUDGED
    j = judge(LOSS, _results(False, **{"lost-write": 5}), not_played="a step did not play out")
    assert (j.state, j.reason) == (NOT_JUDGED, "a step did not play out")


def test_no_expectation_is_none():
    assert judge(None, _results(True)) is None
    assert judge({"by": "suite"}, _results(True)) is None
