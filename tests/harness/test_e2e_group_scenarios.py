"""End to end on real processes: the consumer-group bugs' scenarios (issue 43), each a pair of files with the
same steps: the planted bug is found (exit 1, committed-regression), the fixed coordinator passes (exit 0).
Its own file, so that a second test worker can take it beside tests/harness/test_e2e_scenarios.py."""
from __future__ import annotations

import pytest

from rundir import formats as runformat
from e2e_helpers import REPO, found_kinds, load_json, run_dir_from_stdout, run_highwater


# the consumer-group bugs (issue 43), each a pair of files: the planted bug (exit 1, committed-regression)
# and the same steps on the fixed coordinator (exit 0); the nightly suite replays both modes of each
GROUP_PAIRS = (("kafka-20634", "kafka-20634-unresigned"),
               ("group-zombie-commit", "group-zombie-commit-unchecked"),
               ("group-offset-fetch-during-load", "group-offset-fetch-during-load-unwaited"))
GROUP_CASES = [pytest.param(name, planted, mode, marks=() if mode == "leader-epoch" else (pytest.mark.nightly,),
                            id=f"{name if not planted else bug}-{mode}")
               for fixed, bug in GROUP_PAIRS for name, planted in ((fixed, False), (bug, True))
               for mode in ("leader-epoch", "hw")]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("name, planted, mode", GROUP_CASES)
def test_group_scenario(tmp_path, name, planted, mode):
    r = run_highwater("scenario", str(REPO / "scenarios" / f"{name}.toml"), "--truncation", mode,
                      "--results-dir", str(tmp_path), "--checker", "reference", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    timeline = load_json(run_dir / "scenario.json")
    assert timeline["failed"] is None, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    history = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.HISTORY)]
    commits = [op for op in history if op["f"] == "commit" and op["type"] != "invoke"]
    reads = [op["value"]["offsets"] for op in history if op["f"] == "committed" and op["type"] == "ok"]
    assert commits and reads, "the scenario's group steps are in the history"
    if planted:
        assert r.returncode == 1, r.stderr
        assert found_kinds(results) == ["committed-regression"]
        [first, *_] = results["anomalies"]["committed-regression"]["examples"]
        assert first["group"] == "g" and first["offset"] < first["previous"]["offset"]
    else:
        assert r.returncode == 0, r.stderr
        assert results["valid"] is True and found_kinds(results) == []
        # the acknowledged commits hold: the final read is the highest acknowledged commit of g
        acked = [o for op in commits if op["type"] == "ok" and op["value"]["group"] == "g"
                 for _p, o in op["value"]["offsets"]]
        assert reads[-1] == [[0, max(acked)]]
