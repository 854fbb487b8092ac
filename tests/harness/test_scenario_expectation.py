"""`highwater scenario`'s expectation line: "as expected" only when every step played out and the run
was checked (a failed step used to print "as expected" while the command exited 2)."""
from __future__ import annotations

from harness.scenario_command import expectation_line


def _results(**counts):
    return {"valid": not counts, "anomalies": {k: {"count": counts.get(k, 0), "fails_run": True}
                                               for k in ("lost-write", "divergence")}}


def test_as_expected_only_when_the_steps_played_out():
    assert expectation_line(["lost-write"], "hw", _results(**{"lost-write": 3}), None) == (
        "highwater: scenario expects lost-write in hw mode; found lost-write: as expected")
    assert expectation_line([], "leader-epoch", _results(), None) == (
        "highwater: scenario expects no anomalies in leader-epoch mode; found none: as expected")
    assert expectation_line([], "hw", _results(divergence=1), None) == (
        "highwater: scenario expects no anomalies in hw mode; found divergence: NOT as expected")


def test_a_failed_step_is_never_as_expected():
    failed = "s.toml: step 2 (wait: hw=100) did not play out: timed out after 1s; last seen: hw 1"
    for expected, results in (([], _results()), (["lost-write"], _results(**{"lost-write": 3}))):
        line = expectation_line(expected, "hw", results, failed)
        assert line.endswith("; not judged: a step did not play out"), line
        assert "as expected" not in line
    assert expectation_line([], "hw", None, None) == (
        "highwater: scenario expects no anomalies in hw mode; not judged: the run was not checked")
    assert expectation_line(None, "hw", _results(), failed) is None
