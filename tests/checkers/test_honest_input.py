"""Honest input handling: what could not be checked is named, and never turns into a valid verdict.

Skipped lines (--lenient), torn last lines, a missing replicas/ directory: the verdict is unknown (or
invalid when anomalies were found anyway) and results.json's `unknown_reasons` names file and line. An
acknowledged send whose invoke line was lost is still checked for loss. Poll-skip examples name the
skipped offsets with their final values, and `unseen` names the acknowledged values it could not check.
Known answers throughout; the engine-side parts run on the reference and on Spark.
"""
from __future__ import annotations

import json
import shutil

import pytest

from rundir import formats as rf
from rundir.formats import FormatError
from checkers import ingest
from checkers.check import CheckOptions, check_run
from rundir.verdict import verdict_line
from simulated_runs import RunBuilder

import checker_scenarios as sc
from checker_scenarios import T

COMPARED = ("valid", "anomalies", "time_axis", "unseen", "partitions", "stats", "unknown_reasons")


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def _write_lines(path, lines):
    path.write_text("".join(lines))


def _clean_run(tmp_path):
    b = RunBuilder()
    sc.clean(b, 0)
    return b.write(tmp_path), b


def _reason(file, line, reason, partition=None):
    return {"file": file, "line": line, "partition": partition, "reason": reason}


# --- skipped history lines ------------------------------------------------------------------------

def test_lenient_skipped_history_line_is_unknown_and_named(tmp_path):
    run, b = _clean_run(tmp_path)
    lines = _lines(run / rf.HISTORY)
    last_poll = max(o["index"] for o in b.ops if o["f"] == "poll")   # the consumer's last poll completion
    lines[last_poll] = lines[last_poll].replace('"type": "ok"', '"type": "okay"')
    _write_lines(run / rf.HISTORY, lines)
    with pytest.raises(FormatError, match=rf"history.jsonl:{last_poll + 1}: field 'type' must be one of"):
        check_run(run, CheckOptions(engine="reference"))
    res = check_run(run, CheckOptions(engine="reference", lenient=True))
    message = "malformed line skipped: field 'type' must be one of invoke, ok, fail, info, got 'okay'"
    assert res["valid"] == "unknown"
    assert res["unknown_reasons"] == [_reason("history.jsonl", last_poll + 1, message)]
    assert res["input"]["problems"] == [{"file": "history.jsonl", "line": last_poll + 1, "kind": "skipped",
                                         "message": message}]
    assert all(a["count"] == 0 for a in res["anomalies"].values())
    assert verdict_line(res).startswith(f"highwater: UNKNOWN (exit 2): no anomalies · 1 unknown reason: "
                                        f"history.jsonl:{last_poll + 1}: {message} · ")
    # a strict check does not reuse the tables the lenient one converted: it stops at the line again
    with pytest.raises(FormatError, match=rf"history.jsonl:{last_poll + 1}: "):
        check_run(run, CheckOptions(engine="reference"))


def test_lenient_lost_history_lines_are_named(tmp_path):
    """A line missing altogether (indexes jump) is named at the line after the gap."""
    run, b = _clean_run(tmp_path)
    lines = _lines(run / rf.HISTORY)
    last_poll = max(o["index"] for o in b.ops if o["f"] == "poll")
    del lines[last_poll]
    _write_lines(run / rf.HISTORY, lines)
    with pytest.raises(FormatError, match=rf"history.jsonl:{last_poll + 1}: field 'index' is {last_poll + 1}, "
                                          rf"expected {last_poll}"):
        check_run(run, CheckOptions(engine="reference"))
    res = check_run(run, CheckOptions(engine="reference", lenient=True))
    assert res["valid"] == "unknown"
    assert res["unknown_reasons"] == [_reason("history.jsonl", last_poll + 1, f"index {last_poll} is missing from "
                                              f"the history (lines lost before this one)")]


def _lost_write(b: RunBuilder) -> int:
    """v2 is acknowledged at offset 1 but the final log holds only v1: a lost write. Returns the index
    of v2's ok completion."""
    b.send(1, 0, 1, offset=0)
    s2 = b.send(1, 0, 2, offset=1)
    b.final(0, [1], process=9)
    return s2


def _tear(run, index):
    """Cut the history line of operation `index` in half (a torn line in the middle of the file)."""
    lines = _lines(run / rf.HISTORY)
    lines[index] = lines[index][: len(lines[index]) // 2] + "\n"
    _write_lines(run / rf.HISTORY, lines)


def _torn_invoke_run(tmp_path):
    b = RunBuilder()
    s2 = _lost_write(b)
    run = b.write(tmp_path)
    _tear(run, s2 - 1)                             # the invoke of v2; its ok completion follows
    return run, s2


def _torn_invoke_expected(s2):
    lost = {"partition": 0, "value": 2, "offset": 1, "epoch": 1, "index": s2, "time": T(s2), "process": "1",
            "invoke_index": None, "final_values_at_offset": [],
            "replicas": {n: {"value_at": None, "at_offset": None} for n in ("n1", "n2", "n3")}}
    reasons = [_reason("history.jsonl", s2, "malformed line skipped: not valid JSON (unexpected end of data)"),
               _reason("history.jsonl", s2 + 1, "'ok' send completion of process 1 has no invoke (kept without it)")]
    return lost, reasons


def test_torn_send_invoke_ack_is_still_checked_for_loss(tmp_path):
    run, s2 = _torn_invoke_run(tmp_path)
    with pytest.raises(FormatError, match=rf"history.jsonl:{s2}: not valid JSON"):
        check_run(run, CheckOptions(engine="reference"))
    res = check_run(run, CheckOptions(engine="reference", lenient=True))
    lost, reasons = _torn_invoke_expected(s2)
    assert res["anomalies"]["lost-write"]["count"] == 1
    assert res["anomalies"]["lost-write"]["examples"] == [lost]
    assert res["valid"] is False                   # the loss is real, whatever else could not be checked
    assert res["unknown_reasons"] == reasons
    assert res["stats"]["ops"]["send"] == {"ok": 2, "fail": 0, "info": 0}
    assert res["partitions"][0]["acked"] == 2 and res["partitions"][0]["lost"] == 1


def test_completion_without_invoke_other_than_send_is_skipped(tmp_path):
    """Only sends are kept without their invoke (their loss matters); other completions are skipped."""
    run, b = _clean_run(tmp_path)
    last_poll = max(o["index"] for o in b.ops if o["f"] == "poll")   # an empty poll: no records lost
    _tear(run, last_poll - 1)
    res = check_run(run, CheckOptions(engine="reference", lenient=True))
    assert res["valid"] == "unknown"
    assert [r["line"] for r in res["unknown_reasons"]] == [last_poll, last_poll + 1]
    assert res["unknown_reasons"][1]["reason"] == ("malformed line skipped: 'ok' completion of process 2 without "
                                                   "a pending invoke")


def _open_invokes_run(tmp_path):
    """A clean run whose history ends with a send and a poll invoked but never completed (an interrupted
    or killed harness). Returns the run and the send and poll counts without them."""
    run, b = _clean_run(tmp_path)
    ops = [json.loads(line) for line in _lines(run / rf.HISTORY)]
    base = check_run(run, CheckOptions(engine="reference", write=False))["stats"]["ops"]
    shutil.rmtree(run / rf.COLUMNAR_DIR, ignore_errors=True)
    n, t = len(ops), ops[-1]["time"]
    extra = [{"index": n, "time": t + 5, "process": 7, "type": "invoke", "f": "send",
              "value": {"partition": 0, "value": 9001}},
             {"index": n + 1, "time": t + 9, "process": 8, "type": "invoke", "f": "poll",
              "value": {"partition": 0, "offset": 0}}]
    with (run / rf.HISTORY).open("a") as fh:
        fh.writelines(json.dumps(o) + "\n" for o in extra)
    return run, base["send"], base["poll"]


def test_open_invokes_at_the_end_count_as_info(tmp_path):
    run, send, poll = _open_invokes_run(tmp_path)
    res = check_run(run, CheckOptions(engine="reference"))
    assert res["stats"]["ops"]["send"] == {**send, "info": send["info"] + 1}
    assert res["stats"]["ops"]["poll"] == {**poll, "info": poll["info"] + 1}
    assert res["valid"] is True and res["unknown_reasons"] == []   # an indeterminate op is no problem
    assert all(a["count"] == 0 for a in res["anomalies"].values())


# --- replica dumps --------------------------------------------------------------------------------

NO_REPLICAS = _reason("replicas/", None, "directory is missing: no replica dump was checked (divergence, "
                                         "replica details)")


def test_missing_replicas_dir_is_unknown_not_valid(tmp_path):
    run, _ = _clean_run(tmp_path)
    shutil.rmtree(run / rf.REPLICAS_DIR)
    for lenient in (False, True):
        res = check_run(run, CheckOptions(engine="reference", lenient=lenient))
        assert res["valid"] == "unknown", lenient
        assert res["unknown_reasons"] == [NO_REPLICAS], lenient
        assert all(a["count"] == 0 for a in res["anomalies"].values())


@pytest.mark.parametrize("lenient", [False, True])
def test_missing_replica_dump_is_unknown(tmp_path, lenient):
    """A run killed during replica collection (issue 16 item 8): not an error, unknown, with loss checked."""
    run, b = _clean_run(tmp_path)
    (run / "replicas" / "n2" / "p0.jsonl").unlink()
    line = len(b.ops)                              # the final-state is the last line
    res = check_run(run, CheckOptions(engine="reference", lenient=lenient))
    assert res["valid"] == "unknown"
    assert res["unknown_reasons"] == [_reason("replicas/n2/p0.jsonl", None, "replica dump is missing (final-state "
                                              f"of partition 0 at history.jsonl:{line} lists replica n2): not checked")]


# --- torn last lines ------------------------------------------------------------------------------

TORN = "torn last line ignored (no newline at the end, not valid JSON)"


@pytest.mark.parametrize("scenario,valid", [(sc.clean, "unknown"), (sc.lost_write, False)],
                         ids=["clean", "lost_write"])
def test_torn_last_line_is_never_valid(tmp_path, scenario, valid):
    b = RunBuilder()
    scenario(b, 0)
    run = b.write(tmp_path)
    with (run / rf.HISTORY).open("a") as fh:
        fh.write('{"index": 999, "time": 5, "pro')   # what a writer killed mid-line leaves
    res = check_run(run, CheckOptions(engine="reference"))       # not even --lenient: a torn tail is always skipped
    assert res["valid"] == valid
    assert res["unknown_reasons"] == [_reason("history.jsonl", len(b.ops) + 1, TORN)]
    assert res["input"]["torn_lines"] == {"history.jsonl": 1}


def test_torn_replica_dump_is_unknown(tmp_path):
    run, _ = _clean_run(tmp_path)
    path = run / "replicas" / "n3" / "p0.jsonl"
    n = len(_lines(path))
    with path.open("a") as fh:
        fh.write('{"kind": "record", "offs')
    res = check_run(run, CheckOptions(engine="reference"))
    assert res["valid"] == "unknown"
    assert res["unknown_reasons"] == [_reason("replicas/n3/p0.jsonl", n + 1, TORN)]


# --- damaged replica dumps (issue 28 item 3) --------------------------------------------------------

DAMAGED = "replica dump damaged, this replica was not compared in full: "


def _record(offset, value, crc_ok=True):
    return json.dumps({"kind": "record", "offset": offset, "epoch": 1, "value": value, "key": None,
                       "timestamp": 0, "crc_ok": crc_ok}) + "\n"


def _damage(lines, how):
    """The clean dump of n1 (meta, then offsets 0, 1, 2 with values 10, 11, 12), damaged `how`."""
    if how == "gap":
        del lines[2]                                   # offset 1
    elif how == "negative":
        lines.insert(2, _record(-5, 99))
    elif how == "swapped":
        lines[2], lines[3] = lines[3], lines[2]
    elif how == "duplicated":
        lines.insert(3, _record(1, 77))                # a second offset 1, another value
    elif how == "past-leo":
        lines.append(_record(3, 13))
    elif how == "tail-missing":
        del lines[3]
    elif how == "crc-not-at-leo":
        lines.insert(2, _record(0, 55, crc_ok=False))
    return lines


DAMAGE = {
    "gap": (3, "line 3: offsets 1 missing"),
    "negative": (3, "line 3: negative offset -5"),
    "swapped": (3, "line 3: offsets 1 missing; line 4: offset 1 repeated or out of order (after 2)"),
    "duplicated": (4, "line 4: offset 1 repeated or out of order (after 1)"),
    "past-leo": (5, "line 5: offset 3 at or past the dump's leo 3"),
    "tail-missing": (3, "line 3: offsets 2 missing at the end (leo 3)"),
    "crc-not-at-leo": (3, "line 3: a record failing its CRC at offset 0, not at leo 3"),
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_a_damaged_replica_dump_is_named_and_never_valid(tmp_path, how, lenient):
    """A dump with an offset missing, negative, swapped, repeated or past leo was checked as if whole
    (VALID): each is now a `dump-damaged` problem naming file, line and offsets, and the verdict unknown."""
    run, _ = _clean_run(tmp_path)
    path = run / "replicas" / "n1" / "p0.jsonl"
    _write_lines(path, _damage(_lines(path), how))
    line, what = DAMAGE[how]
    res = check_run(run, CheckOptions(engine="reference", lenient=lenient))
    assert res["valid"] == "unknown"
    assert res["unknown_reasons"] == [_reason("replicas/n1/p0.jsonl", line, DAMAGED + what)]
    assert res["anomalies"]["divergence"]["count"] == 0     # the damaged lines are left out, not compared


def test_a_damaged_dump_keeps_the_findings_of_the_rest(tmp_path):
    """Real divergence between two whole replicas is still found beside a damaged third: invalid."""
    b = RunBuilder()
    sc.divergence_committed(b, 0)                 # n3 holds 7 at offset 1, where n1 and n2 hold 1
    run = b.write(tmp_path)
    path = run / "replicas" / "n1" / "p0.jsonl"
    lines = _lines(path)
    _write_lines(path, lines[:1] + lines[2:])      # n1's offset 0 gone
    res = check_run(run, CheckOptions(engine="reference"))
    assert res["valid"] is False
    assert res["anomalies"]["divergence"]["count"] == 1
    assert res["unknown_reasons"] == [_reason("replicas/n1/p0.jsonl", 2, DAMAGED + "line 2: offsets 0 missing")]


def test_a_whole_dump_with_a_torn_crc_record_at_leo_is_fine(tmp_path):
    """What `python -m broker dump` writes for a torn tail: a record failing its CRC at leo, no problem."""
    run, _ = _clean_run(tmp_path)
    path = run / "replicas" / "n1" / "p0.jsonl"
    with path.open("a") as fh:
        fh.write(_record(3, 13, crc_ok=False))
    res = check_run(run, CheckOptions(engine="reference"))
    assert res["valid"] is True and res["unknown_reasons"] == []


def _cli(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))


def test_check_of_a_gapped_dump_exits_2_and_a_directory_in_place_of_a_file_254(tmp_path):
    """The command line: a dump with line 5 deleted is UNKNOWN (exit 2) naming it; history.jsonl (for
    check) or results.json (for report) being a directory is a one-line error, exit 254, not 255."""
    b = RunBuilder()
    for k in range(6):
        b.send(1, 0, k, offset=k)
    b.final(0, list(range(6)), process=9)
    run = b.write(tmp_path / "gap")
    path = run / "replicas" / "n1" / "p0.jsonl"
    lines = _lines(path)
    del lines[4]                                   # line 5: offset 3
    _write_lines(path, lines)
    r = _cli("check", "--engine", "reference", str(run))
    assert r.returncode == 2, r.stderr
    assert "replicas/n1/p0.jsonl:5: replica dump damaged" in r.stdout and "offsets 3 missing" in r.stdout

    (run / rf.RESULTS_JSON).unlink()
    (run / rf.RESULTS_JSON).mkdir()
    r = _cli("report", str(run))
    assert r.returncode == 254, r.stderr
    assert r.stderr.strip().splitlines() == [f"highwater: {run / rf.RESULTS_JSON}: cannot read: Is a directory"]

    (run / rf.HISTORY).unlink()
    (run / rf.HISTORY).mkdir()
    r = _cli("check", "--engine", "reference", str(run))
    assert r.returncode == 254, r.stderr
    assert r.stderr.strip().endswith(f"{run / rf.HISTORY}: cannot read: Is a directory")
    assert "internal error" not in r.stderr


# --- poll-skip `skipped` and unseen values (engine-side) -------------------------------------------

def _skips_and_unseen(b: RunBuilder) -> dict:
    """Partition 0 (recovered): a poll jumps from offset 0 to 12 (gap 11: the first 10 skipped offsets
    are named with their final values). Partition 1 (not recovered): a poll skips offset 1 (no final
    log: value null); its 12 acknowledged values are unseen (the first 10 named)."""
    for k in range(13):
        b.send(1, 0, 100 + k, offset=k)
    b.assign(2, 0, 0)
    r1 = b.poll(2, 0, 0, [(0, 100)], hw=13)
    r2 = b.poll(2, 0, 1, [(12, 112)], hw=13)
    b.final(0, [100 + k for k in range(13)], process=9)
    for k in range(12):
        b.send(11, 1, 200 + k, offset=k)
    q1 = b.poll(12, 1, 0, [(0, 200)], hw=12)
    q2 = b.poll(12, 1, 1, [(2, 202)], hw=12)
    b.final(1, [200 + k for k in range(12)], recovered=False, process=19)
    return {"poll-skip": [
        {"partition": 0, "process": "2", "index": r2, "time": T(r2), "offset": 12, "value": 112, "gap": 11,
         "previous": {"kind": "read", "index": r1, "time": T(r1), "offset": 0, "value": 100},
         "skipped": [{"offset": o, "value": 100 + o} for o in range(1, 11)]},
        {"partition": 1, "process": "12", "index": q2, "time": T(q2), "offset": 2, "value": 202, "gap": 1,
         "previous": {"kind": "read", "index": q1, "time": T(q1), "offset": 0, "value": 200},
         "skipped": [{"offset": 1, "value": None}]}],
        "unseen": {"count": 12, "partitions": [1],
                   "values": [{"partition": 1, "value": 200 + k} for k in range(10)],
                   "details": [{"partition": 1, "reason": "not recovered", "acked": 12,
                                "values": [200 + k for k in range(10)]}]}}


def _assert_skips_and_unseen(res, want):
    assert res["anomalies"]["poll-skip"]["count"] == 2
    assert res["anomalies"]["poll-skip"]["examples"] == want["poll-skip"]
    assert {k for k, a in res["anomalies"].items() if a["count"]} == {"poll-skip"}
    assert res["unseen"] == want["unseen"]
    assert res["unknown_reasons"] == [_reason(None, None, "not recovered: 12 acknowledged sends not checked", 1)]
    assert res["valid"] is False


def test_poll_skip_names_skipped_offsets_and_unseen_values_reference(tmp_path):
    b = RunBuilder()
    want = _skips_and_unseen(b)
    res = check_run(b.write(tmp_path), CheckOptions(engine="reference"))
    _assert_skips_and_unseen(res, want)


# --- the same on Spark ----------------------------------------------------------------------------

@pytest.mark.spark
def test_poll_skip_names_skipped_offsets_and_unseen_values_spark(tmp_path, spark):
    b = RunBuilder()
    want = _skips_and_unseen(b)
    run = b.write(tmp_path)
    res = check_run(run, CheckOptions(engine="spark", spark=spark))
    _assert_skips_and_unseen(res, want)
    ref = check_run(run, CheckOptions(engine="reference", write=False))
    for key in COMPARED:
        assert res[key] == ref[key], key


def _spark_case(tmp_path, case):
    if case == "torn-invoke":
        run, s2 = _torn_invoke_run(tmp_path)
        lost, reasons = _torn_invoke_expected(s2)
        return run, True, False, reasons, {"lost-write": [lost]}
    if case == "open-invokes":
        run, _send, _poll = _open_invokes_run(tmp_path)
        return run, False, True, [], {}
    if case == "damaged-dump":
        run, _ = _clean_run(tmp_path)
        path = run / "replicas" / "n2" / "p0.jsonl"
        _write_lines(path, _damage(_lines(path), "swapped"))
        return run, False, "unknown", [_reason("replicas/n2/p0.jsonl", 3, DAMAGED + DAMAGE["swapped"][1])], {}
    if case == "no-replicas":
        b = RunBuilder()
        sc.clean(b, 0)
        run = b.write(tmp_path)
        shutil.rmtree(run / rf.REPLICAS_DIR)
        return run, False, "unknown", [NO_REPLICAS], {}
    raise AssertionError(case)


@pytest.mark.spark
@pytest.mark.parametrize("case", ["torn-invoke", "no-replicas", "open-invokes", "damaged-dump"])
def test_spark_damaged_input_agrees_with_reference(tmp_path, spark, case):
    run, lenient, valid, reasons, examples = _spark_case(tmp_path, case)
    res = check_run(run, CheckOptions(engine="spark", spark=spark, lenient=lenient))
    assert res["valid"] == valid
    assert res["unknown_reasons"] == reasons
    for kind, exs in examples.items():
        assert res["anomalies"][kind]["examples"] == exs, kind
    ref = check_run(run, CheckOptions(engine="reference", lenient=lenient, write=False))
    for key in COMPARED:
        assert res[key] == ref[key], key
    assert json.loads((run / rf.RESULTS_JSON).read_text())["unknown_reasons"] == reasons
    assert ingest.ingest(run, lenient=lenient).converted is False   # the tables were reused


def test_missing_replica_dump_still_checks_loss(tmp_path):
    """Loss is checked from the history's final reads, so a missing dump never hides it (issue 16 item 8)."""
    b = RunBuilder()
    sc.lost_write(b, 0)
    run = b.write(tmp_path)
    (run / "replicas" / "n2" / "p0.jsonl").unlink()
    res = check_run(run, CheckOptions(engine="reference"))
    assert res["valid"] is False
    assert res["anomalies"]["lost-write"]["count"] == 1
    assert res["input"]["missing_dumps"] == ["replicas/n2/p0.jsonl"]
