"""harness/suite_expect.py: a configuration's repeats judged against safe / finds, and the suite exit code."""
from __future__ import annotations

from harness.suite_expect import RepeatResult, evaluate, repeat_from_results, suite_exit_code
from harness.suite_file import Expectation

SAFE = Expectation(safe=True)
FINDS = Expectation(finds=("lost-write", "divergence"))


def results(valid, **counts):
    anomalies = {k: {"count": 0, "fails_run": True, "examples": []} for k in ("lost-write", "divergence", "duplicate")}
    for k, n in counts.items():
        anomalies[k.replace("_", "-")]["count"] = n
    return {"valid": valid, "anomalies": anomalies, "unseen": {"count": 0, "partitions": []}}


def rep(i, valid, **counts):
    return repeat_from_results(i, {True: 0, False: 1}.get(valid, 2), results(valid, **counts))


def test_repeat_from_results_keeps_only_counts_above_zero():
    r = repeat_from_results(2, 1, results(False, lost_write=3), run_dir="x/1", seed=7)
    assert r.counts == {"lost-write": 3} and r.found == {"lost-write"} and r.valid is False
    assert (r.index, r.exit_code, r.run_dir, r.seed, r.checked) == (2, 1, "x/1", 7, True)
    doc = results(False, lost_write=3)
    doc["anomalies"]["duplicate"].update(count=2, fails_run=False)
    r2 = repeat_from_results(1, 1, doc)
    assert r2.counts == {"lost-write": 3, "duplicate": 2} and r2.allowed == ["duplicate"]
    unchecked = repeat_from_results(1, 255, None, problems=["run failed: boom"])
    assert unchecked.valid is None and not unchecked.checked and unchecked.counts == {}
    assert RepeatResult.from_json(r.to_json()) == r


def test_safe_holds_when_every_repeat_is_valid():
    assert evaluate(SAFE, [rep(1, True), rep(2, True)]) == ("passed", "safe in 2 of 2 repeats")


def test_safe_is_broken_by_one_lost_write():
    status, msg = evaluate(SAFE, [rep(1, True), rep(2, False, lost_write=1), rep(3, True)])
    assert status == "failed"
    assert msg == "expected safe, but 1 of 3 repeats found anomalies: repeat 2 found lost-write (1)"


def test_safe_with_an_unchecked_or_unknown_repeat_is_inconclusive():
    unknown = repeat_from_results(2, 2, {**results("unknown"), "unseen": {"count": 5, "partitions": [1]}})
    status, msg = evaluate(SAFE, [rep(1, True), unknown])
    assert status == "error"
    assert msg == "expected safe, not shown: repeat 2 verdict unknown (5 acknowledged writes could not be checked)"
    crashed = repeat_from_results(1, 255, None, problems=["run failed: RuntimeError: x"])
    assert evaluate(SAFE, [crashed]) == ("error", "expected safe, not shown: repeat 1 not checked "
                                                  "(exit 255: run failed: RuntimeError: x)")


def test_finds_is_satisfied_by_one_repeat_of_several():
    status, msg = evaluate(FINDS, [rep(1, True), rep(2, False, lost_write=4, divergence=2), rep(3, True)])
    assert (status, msg) == ("passed", "repeat 2 of 3 found lost-write (4), divergence (2)")


def test_finds_needs_every_kind_in_the_same_repeat():
    status, msg = evaluate(FINDS, [rep(1, False, lost_write=4), rep(2, False, divergence=1)])
    assert status == "failed"
    assert msg == ("expected to find lost-write, divergence in one repeat, but none did: "
                   "repeat 1 found lost-write (4); repeat 2 found divergence (1)")


def test_finds_broken_when_nothing_is_found():
    status, msg = evaluate(Expectation(finds=("lost-write",)), [rep(1, True), rep(2, True)])
    assert status == "failed"
    assert msg == ("expected to find lost-write in one repeat, but none did: "
                   "repeat 1 found nothing; repeat 2 found nothing")


def test_finds_not_shown_with_an_unchecked_repeat_is_inconclusive():
    crashed = repeat_from_results(2, 255, None)
    status, msg = evaluate(Expectation(finds=("lost-write",)), [rep(1, True), crashed])
    assert status == "error"
    assert msg.endswith("repeat 1 found nothing; repeat 2 not checked (exit 255)")


def test_no_repeat_is_skipped_and_exit_codes():
    assert evaluate(SAFE, []) == ("skipped", "not run")
    assert suite_exit_code(["passed", "passed"]) == 0
    assert suite_exit_code(["passed", "skipped"]) == 2
    assert suite_exit_code(["error", "passed"]) == 2
    assert suite_exit_code(["skipped", "failed", "error"]) == 1
