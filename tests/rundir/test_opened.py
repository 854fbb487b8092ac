"""A run directory opened once (rundir/opened.py): what OpenedRun reads off test.json, the one-line errors
of a broken document, and a whole check reading test.json once."""
from __future__ import annotations

import json

import pytest

from checkers.check import CheckOptions, check_run
from rundir import formats as rf
from rundir.opened import OpenedRun
from simulated_runs import RunBuilder


def _write(tmp_path, doc) -> None:
    (tmp_path / rf.TEST_JSON).write_text(json.dumps(doc))


def test_what_an_opened_run_reads_off_test_json(tmp_path):
    _write(tmp_path, {"start_wall_ns": 17, "config": {"client": {"acks": "1"}},
                      "cluster": {"backend": "docker", "nodes": {"n2": {}, "c0": {}, "n1": {}}}})
    run = OpenedRun.open(tmp_path)
    assert (run.backend, run.nodes, run.start_wall_ns, run.config) == ("docker", ["c0", "n1", "n2"], 17,
                                                                       {"client": {"acks": "1"}})
    assert run.evidence.declared is False and run.path == tmp_path
    # no test.json (a generated or hand-built run): an empty document
    empty = OpenedRun.open(tmp_path / "nothing")
    assert (empty.test, empty.backend, empty.nodes, empty.start_wall_ns) == ({}, None, [], None)


@pytest.mark.parametrize("doc,error", [
    ([1, 2], "expected a JSON object"),
    ({"config": 5}, "field 'config' must be an object"),
    ({"evidence": {"formats": {"history": 99}}},
     "field 'evidence.formats.history': format 99 is newer than this checker reads (up to 1): upgrade highwater"),
])
def test_a_broken_test_json_is_one_error_naming_the_file(tmp_path, doc, error):
    _write(tmp_path, doc)
    with pytest.raises(rf.FormatError) as e:
        OpenedRun.open(tmp_path)
    assert str(e.value) == f"{tmp_path / rf.TEST_JSON}: {error}"


def test_lenient_reads_a_broken_document_as_empty(tmp_path):
    _write(tmp_path, [1, 2])
    assert OpenedRun.lenient(tmp_path).test == {}
    (tmp_path / rf.TEST_JSON).write_text("{not json")
    assert OpenedRun.lenient(tmp_path).test == {}


def test_a_check_reads_test_json_once(tmp_path, monkeypatch):
    b = RunBuilder(backend="local", start_wall_ns=1_763_765_100_000_000_000)
    b.send(1, 0, 1, offset=0)
    b.final(0, [1], process=9)
    run = b.write(tmp_path / "run")
    reads = []
    real = rf.load_json

    def counting(path, *args, **kwargs):
        reads.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(rf, "load_json", counting)
    res = check_run(run, CheckOptions(engine="reference", write=False))
    assert res["anomalies"]["lost-write"]["count"] == 0     # checked: the history's one write is there
    assert [p for p in reads if p.endswith(rf.TEST_JSON)] == [str(run / rf.TEST_JSON)]
