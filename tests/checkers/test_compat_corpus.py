"""The compatibility corpus: run directories written by earlier formats of this project, each re-checked by
today's checker to the verdict it had when it was written (tests/checkers/compat_corpus/README.md).

Every entry keeps the files its run wrote, the results.json its own checker wrote (original-results.json)
and corpus.json: the commit that wrote it and its original verdict. Both engines must give that verdict,
and fail on the same kinds; what today's checker cannot judge in an older format is named as not checked,
never found."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from checkers.check import CheckOptions, check_run
from rundir import formats as rf

CORPUS = Path(__file__).resolve().parent / "compat_corpus"
ENTRIES = sorted(p.parent for p in CORPUS.glob("*/corpus.json"))


def test_the_corpus_has_an_entry_of_every_format():
    notes = [json.loads((e / "corpus.json").read_text()) for e in ENTRIES]
    assert len(ENTRIES) >= 3
    assert any(not (e / rf.TEST_JSON).read_text().count('"evidence"') for e in ENTRIES)   # undeclared runs
    assert all({"commit", "written", "command", "valid", "failed_kinds"} <= set(n) for n in notes)


@pytest.mark.parametrize("engine", ["reference", pytest.param("spark", marks=pytest.mark.spark)])
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_an_old_run_checks_to_its_original_verdict(tmp_path, entry, engine, request):
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    run = tmp_path / entry.name
    shutil.copytree(entry, run, ignore=shutil.ignore_patterns("corpus.json", "original-results.json"))
    note = json.loads((entry / "corpus.json").read_text())
    res = check_run(run, CheckOptions(engine=engine, spark=spark))
    assert (res["valid"], res["failed_kinds"]) == (note["valid"], note["failed_kinds"]), (
        f"{entry.name}, written by {note['commit'][:12]} on {note['written']}: now {res['valid']} "
        f"{res['failed_kinds']}; unknown reasons {res['unknown_reasons']}; scope {res['scope']}")
    # the kinds the original checker judged and today's checks too find what they found then
    original = json.loads((entry / "original-results.json").read_text())
    for kind, a in original["anomalies"].items():
        if res["anomalies"][kind]["status"] == "checked":
            assert res["anomalies"][kind]["count"] == a["count"], kind
