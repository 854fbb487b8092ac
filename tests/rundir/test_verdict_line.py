"""The one verdict line (rundir/verdict.py verdict_line) that run, check, scenario and suite print."""
from __future__ import annotations

from rundir.verdict import verdict_line


def _results(valid, counts=None, *, allowed=(), reasons=(), partitions=3, engine="spark", elapsed=4.812,
             skipped=0):
    anomalies = {k: {"count": 0, "examples": [], "fails_run": True}
                 for k in ("lost-write", "inconsistent-offset", "nonmonotonic-send", "poll-skip")}
    for k, n in (counts or {}).items():
        anomalies[k] = {"count": n, "examples": [], "fails_run": k not in allowed}
    return {"valid": valid, "anomalies": anomalies, "unknown_reasons": list(reasons),
            "partitions": [{"partition": p} for p in range(partitions)],
            "input": {"skipped_lines": {"history.jsonl": skipped} if skipped else {}},
            "checker": {"engine": engine, "elapsed_s": elapsed}}


def test_invalid_with_counts():
    r = _results(False, {"lost-write": 503, "inconsistent-offset": 175, "nonmonotonic-send": 4})
    assert verdict_line(r) == ("highwater: INVALID (exit 1): lost-write=503 inconsistent-offset=175 "
                               "nonmonotonic-send=4 · 3 partitions · checked by spark in 4.8 s")


def test_valid_and_allowed_kinds():
    assert verdict_line(_results(True, partitions=1, engine="reference", elapsed=0.25)) == (
        "highwater: VALID (exit 0): no anomalies · 1 partition · checked by reference in 0.2 s")
    r = _results(True, {"poll-skip": 2}, allowed=("poll-skip",))
    assert verdict_line(r) == ("highwater: VALID (exit 0): poll-skip=2 (allowed) · 3 partitions · "
                               "checked by spark in 4.8 s")


def test_unknown_counts_reasons_and_names_the_first():
    r = _results("unknown", reasons=[
        {"file": "history.jsonl", "line": 6, "partition": None, "reason": "malformed line skipped"},
        {"file": None, "line": None, "partition": 2, "reason": "not recovered: 7 acknowledged sends not checked"}],
        skipped=1)
    assert verdict_line(r) == ("highwater: UNKNOWN (exit 2): no anomalies · 2 unknown reasons, first: "
                               "history.jsonl:6: malformed line skipped · 3 partitions · 1 malformed line "
                               "skipped · checked by spark in 4.8 s")


def test_not_checked_and_exit_code_overrides():
    assert verdict_line(None, exit_code=2, reasons=["interrupted"]) == (
        "highwater: UNKNOWN (exit 2): not checked · 1 unknown reason: interrupted")
    assert verdict_line(None, exit_code=255, reasons=["run failed: RuntimeError: x"], prefix="") == (
        "INTERNAL ERROR (exit 255): not checked · 1 unknown reason: run failed: RuntimeError: x")
    # a scenario whose step failed: anomalies were found, but the outcome is unknown (exit 2)
    r = _results(False, {"lost-write": 2}, partitions=1)
    assert verdict_line(r, exit_code=2, reasons=["s.toml: step 3 (wait: hw=9) did not play out: timed out"]) == (
        "highwater: UNKNOWN (exit 2): lost-write=2 · 1 unknown reason: s.toml: step 3 (wait: hw=9) did not play "
        "out: timed out · 1 partition · checked by spark in 4.8 s")


def test_older_results_without_optional_fields():
    assert verdict_line({"valid": True, "anomalies": {"lost-write": {"count": 0}}}) == (
        "highwater: VALID (exit 0): no anomalies")


def test_one_verdict_to_exit_code_mapping():
    """rundir/verdict.py verdict_exit_code is the mapping of every command (run, scenario, check, suite
    repeats): a value the checker never writes is the harness's failure, not an unknown verdict."""
    from rundir.verdict import verdict_exit_code

    assert [verdict_exit_code(r) for r in ({"valid": True}, {"valid": False}, {"valid": "unknown"}, None)] == \
        [0, 1, 2, 2]
    assert [verdict_exit_code(r) for r in ({}, {"valid": "yes"}, {"valid": 1})] == [255, 255, 255]
    assert verdict_line({"valid": "maybe"}) == "highwater: INTERNAL ERROR (exit 255): no anomalies"
