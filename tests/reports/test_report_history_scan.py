"""The streaming history pass: counts, exact percentiles, fault windows, excerpts, torn and bad lines."""
from __future__ import annotations

import json

import pytest
from report_fixtures import make_run

from rundir.formats import FormatError
from reports.process_timeline import ProcessOps
from reports.history_scan import choose_bucket_s, scan_history

S = 1_000_000_000


def write_history(path, ops):
    lines = []
    for i, op in enumerate(ops):
        lines.append(json.dumps({"index": i, **op}))
    path.write_text("\n".join(lines) + "\n")
    return path


def send_pair(t_s, latency_ms, process, type_="ok", value=1):
    inv = {"time": int(t_s * S), "process": process, "type": "invoke", "f": "send",
           "value": {"partition": 0, "value": value}}
    done = {"time": int(t_s * S) + latency_ms * 1_000_000, "process": process, "type": type_, "f": "send",
            "value": {"partition": 0, "value": value}}
    return [inv, done]


def test_fixture_totals_and_fault_windows(tmp_path):
    run = make_run(tmp_path, "invalid")
    h = scan_history(run / "history.jsonl")
    assert h.totals == {"send": {"ok": 18, "info": 1, "fail": 1}, "poll": {"ok": 7}, "final-read": {"ok": 2}}
    assert h.lines == len((run / "history.jsonl").read_text().splitlines())
    assert [(w.fault, w.targets, w.start_s, w.stop_s) for w in h.faults] == [
        ("kill", ["n1"], 3.01, 5.02), ("partition", ["n3"], 6.01, 7.51)]
    assert h.faults[0].detail == "SIGKILL pid 4242"
    assert [fs["partition"] for fs in h.final_states] == [0, 1]
    assert h.duration_s == pytest.approx(8.1)
    assert h.bucket_s == choose_bucket_s(8.1) == 0.05
    # every completion is counted in exactly one bucket
    assert sum(sum(c) for per in h.counts.values() for c in per.values()) == 18 + 1 + 1 + 7 + 2
    # the timeline sample of a small run holds every completion
    assert len(h.points) == h.sampled_from == 29
    assert {p.type for p in h.points} == {"ok", "fail", "info"}
    fail = next(p for p in h.points if p.type == "fail")
    assert fail.error.startswith("NOT_LEADER <script>")
    assert fail.latency_s == pytest.approx(0.1)


def test_exact_nearest_rank_percentiles(tmp_path):
    ops = []
    for k, ms in enumerate([5, 1, 4, 2, 3, 10, 9, 8, 7, 6]):  # ten sends, 1..10 ms
        ops += send_pair(0.1 * k, ms, process=k)
    h = scan_history(write_history(tmp_path / "history.jsonl", ops))
    p50, p95, p99 = h.latency_overall["send"]
    assert (p50, p95, p99) == (0.005, 0.010, 0.010)
    assert h.totals == {"send": {"ok": 10}}


def test_fault_never_stopped_runs_to_the_end(tmp_path):
    ops = [{"time": 1 * S, "process": "nemesis", "type": "invoke", "f": "pause",
            "value": {"fault": "pause", "phase": "start", "id": 9, "targets": ["n2"]}},
           {"time": 1 * S + 5, "process": "nemesis", "type": "info", "f": "pause",
            "value": {"fault": "pause", "phase": "start", "id": 9, "targets": ["n2"]}}]
    ops += send_pair(4.0, 2, process=0)
    h = scan_history(write_history(tmp_path / "history.jsonl", ops))
    (w,) = h.faults
    assert (w.fault, w.start_s, w.stop_s, w.stop_index) == ("pause", 1.000000005, 4.002, None)


def test_excerpt_holds_referenced_lines_their_invokes_and_context(tmp_path):
    ops = []
    for k in range(10):
        ops += send_pair(0.1 * k, 1, process=k % 2)
    # completion 9's invoke is 8; 10 is context (an invoke whose completion 11 is not pulled in)
    h = scan_history(write_history(tmp_path / "history.jsonl", ops), wanted={9}, context=1)
    assert sorted(h.excerpt) == [8, 9, 10]
    assert h.excerpt[9]["type"] == "ok"
    assert h.op_times[9] == pytest.approx(0.401)


def test_excerpt_pulls_in_far_away_invoke_and_completion(tmp_path):
    ops = [{"time": 0, "process": 7, "type": "invoke", "f": "send", "value": {"partition": 0, "value": 1}}]
    for k in range(20):
        ops += send_pair(0.01 * (k + 1), 1, process=k + 100)
    ops.append({"time": 5 * S, "process": 7, "type": "info", "f": "send",
                "value": {"partition": 0, "value": 1}, "error": "timeout"})
    last = len(ops) - 1
    h = scan_history(write_history(tmp_path / "history.jsonl", ops), wanted={last}, context=0)
    assert sorted(h.excerpt) == [0, last]  # the completion and its invoke 40 lines earlier
    h = scan_history(tmp_path / "history.jsonl", wanted={0}, context=0)
    assert sorted(h.excerpt) == [0, last]  # the invoke and its completion


def test_torn_last_line_is_skipped_and_counted(tmp_path):
    path = write_history(tmp_path / "history.jsonl", send_pair(0.1, 2, 0) + send_pair(0.2, 2, 1))
    with path.open("a") as fh:
        fh.write('{"index":4,"time":3000,"proc')
    h = scan_history(path)
    assert h.torn_lines == [5]
    assert h.lines == 4
    assert h.totals == {"send": {"ok": 2}}


def test_bad_line_in_the_middle_names_file_and_line(tmp_path):
    path = tmp_path / "history.jsonl"
    ops = send_pair(0.1, 2, 0)
    path.write_text(json.dumps({"index": 0, **ops[0]}) + "\nnot json at all\n" + json.dumps({"index": 2, **ops[1]}) + "\n")
    with pytest.raises(FormatError, match=r"history.jsonl:2: not valid JSON"):
        scan_history(path)


@pytest.mark.parametrize("drop, message", [("time", "missing field 'time'"), ("type", "missing field 'type'"),
                                           ("process", "missing field 'process'")])
def test_missing_field_is_named(tmp_path, drop, message):
    ops = send_pair(0.1, 2, 0)
    del ops[1][drop]
    path = write_history(tmp_path / "history.jsonl", ops)
    with pytest.raises(FormatError, match=rf"history.jsonl:2: {message}"):
        scan_history(path)


@pytest.mark.parametrize("with_processes", [False, True])
def test_unknown_completion_type_is_rejected(tmp_path, with_processes):
    # with the process timeline too (as a report scans): the line is refused before anything uses it
    ops = send_pair(0.1, 2, 0, type_="maybe")
    with pytest.raises(FormatError, match=r":2: field 'type' must be one of invoke, ok, fail, info, got 'maybe'"):
        scan_history(write_history(tmp_path / "history.jsonl", ops), ops=ProcessOps() if with_processes else None)


def test_missing_history_file(tmp_path):
    with pytest.raises(FormatError, match="history.jsonl: file is missing"):
        scan_history(tmp_path / "history.jsonl")


def test_sample_is_bounded_but_keeps_failures(tmp_path):
    ops = []
    for k in range(3000):
        ops += send_pair(k * 0.01, 1, process=k, type_="fail" if k % 100 == 0 else "ok")
    h = scan_history(write_history(tmp_path / "history.jsonl", ops), max_points=600)
    assert h.sampled_from == 3000
    assert len(h.points) < 900
    assert sum(1 for p in h.points if p.type == "fail") == 30  # every failure is kept
