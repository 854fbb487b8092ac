"""Malformed input: one-line errors naming file, line and field; --lenient counts; torn tails; the cache."""
from __future__ import annotations

import json

import pytest

from rundir import formats as rf
from rundir.formats import FormatError
from checkers import ingest
from checkers.check import CheckOptions, check_run
from simulated_runs import RunBuilder

import checker_scenarios as sc


def _run(tmp_path, scenario=sc.clean):
    b = RunBuilder()
    scenario(b, 0)
    b.write(tmp_path)
    return tmp_path


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def test_bad_json_line_names_file_and_line(tmp_path):
    run = _run(tmp_path)
    lines = _lines(run / rf.HISTORY)
    lines[2] = '{"index": 2, "time": \n'
    (run / rf.HISTORY).write_text("".join(lines))
    with pytest.raises(FormatError) as e:
        ingest.ingest(run)
    assert str(e.value).startswith(f"{run / rf.HISTORY}:3: not valid JSON")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("mutate,message", [
    (lambda o: o.pop("time"), "missing field 'time'"),
    (lambda o: o["value"].pop("offset"), "missing field 'value.offset'"),
    (lambda o: o["value"].__setitem__("offset", "seven"), "field 'value.offset' must be an integer, got 'seven'"),
    (lambda o: o.__setitem__("type", "done"), "field 'type' must be one of invoke, ok, fail, info, got 'done'"),
    (lambda o: o.__setitem__("index", 9), "field 'index' is 9, expected 1 (indexes are dense)"),
])
def test_bad_field_names_line_and_field(tmp_path, mutate, message):
    run = _run(tmp_path)
    lines = _lines(run / rf.HISTORY)
    op = json.loads(lines[1])            # the ok completion of the first send
    mutate(op)
    lines[1] = json.dumps(op) + "\n"
    (run / rf.HISTORY).write_text("".join(lines))
    with pytest.raises(FormatError) as e:
        ingest.ingest(run)
    assert str(e.value) == f"{run / rf.HISTORY}:2: {message}"


def test_completion_without_invoke(tmp_path):
    run = _run(tmp_path)
    lines = _lines(run / rf.HISTORY)
    del lines[0]
    fixed = [json.dumps(dict(json.loads(l), index=i)) + "\n" for i, l in enumerate(lines)]
    (run / rf.HISTORY).write_text("".join(fixed))
    with pytest.raises(FormatError, match=r"history.jsonl:1: 'ok' completion of process 1 without a pending invoke"):
        ingest.ingest(run)


def test_reused_value_is_rejected(tmp_path):
    b = RunBuilder()
    b.send(1, 0, 5, offset=0)
    b.send(1, 0, 5, offset=1)
    b.write(tmp_path)
    with pytest.raises(FormatError, match=r"history.jsonl:3: field 'value.value' 5 was already sent to partition 0 at line 1"):
        ingest.ingest(tmp_path)


def test_missing_replica_dump(tmp_path):
    run = _run(tmp_path)
    (run / "replicas" / "n2" / "p0.jsonl").unlink()
    # what a run killed during replica collection leaves: checked without it (issue 16 item 8), in both modes
    for lenient in (False, True):
        r = check_run(run, CheckOptions(engine="reference", lenient=lenient))
        assert r["input"]["missing_dumps"] == ["replicas/n2/p0.jsonl"], lenient
        assert r["valid"] == "unknown", lenient


def test_bad_replica_dump_line(tmp_path):
    run = _run(tmp_path)
    path = run / "replicas" / "n3" / "p0.jsonl"
    lines = _lines(path)
    rec = json.loads(lines[2])
    del rec["epoch"]
    lines[2] = json.dumps(rec) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(FormatError, match=r"replicas/n3/p0.jsonl:3: missing field 'epoch'"):
        ingest.ingest(run)


def test_lenient_counts_skipped_lines_and_torn_tail(tmp_path):
    run = _run(tmp_path)
    lines = _lines(run / rf.HISTORY)
    lines.insert(3, "garbage\n")
    lines.append('{"index": 99, "ti')                 # torn last line, no newline: always skipped
    (run / rf.HISTORY).write_text("".join(lines))
    with pytest.raises(FormatError, match=r"history.jsonl:4: not valid JSON"):
        ingest.ingest(run)
    r = check_run(run, CheckOptions(engine="reference", lenient=True))
    assert r["input"]["skipped_lines"] == {"history.jsonl": 1}
    assert r["input"]["torn_lines"] == {"history.jsonl": 1}
    assert r["input"]["problems"] == [
        {"file": "history.jsonl", "line": 4, "kind": "skipped",
         "message": "malformed line skipped: not valid JSON (unexpected character, expected a JSON value)"},
        {"file": "history.jsonl", "line": len(lines), "kind": "torn",
         "message": "torn last line ignored (no newline at the end, not valid JSON)"}]
    assert r["valid"] == "unknown"                     # skipped input is never valid
    assert r["stats"]["ops"]["send"] == {"ok": 3, "fail": 0, "info": 0}


def test_columnar_cache_is_reused_and_refreshed(tmp_path):
    run = _run(tmp_path)
    assert ingest.ingest(run).converted is True
    assert ingest.ingest(run).converted is False
    with (run / rf.HISTORY).open("a") as fh:
        fh.write(json.dumps({"index": len(_lines(run / rf.HISTORY)), "time": 10**12, "process": 77, "type": "invoke",
                             "f": "send", "value": {"partition": 0, "value": 999}}) + "\n")
    assert ingest.ingest(run).converted is True


def test_missing_history(tmp_path):
    with pytest.raises(FormatError, match="history.jsonl: file is missing"):
        ingest.ingest(tmp_path)
