"""End to end on real processes: the KIP-966 "last replica standing" loss (`highwater scenario`, real
brokers, real iptables, SIGSTOP and power-loss SIGKILL, reference checker). Without eligible leader
replicas (scenarios/kip-966-unsafe.toml) the four acknowledged acks=all writes m1..m4 are lost in both
truncation modes; with them (scenarios/kip-966.toml) nothing is lost, and the controller's event log shows
why: n2 joined the ELR, n1's unclean restart took it out of the ELR, n2 was elected from it."""
from __future__ import annotations

import pytest

from rundir import formats as runformat
from e2e_helpers import REPO, found_kinds, load_json, run_dir_from_stdout, run_highwater

MODES = ["hw", "leader-epoch"]
# one mode each in the default selection (the other with the nightly marker; suites/nightly.toml replays all four)
LOSS_MODES = ["hw", pytest.param("leader-epoch", marks=pytest.mark.nightly)]
SAFE_MODES = [pytest.param("hw", marks=pytest.mark.nightly), "leader-epoch"]


def _run(tmp_path, name: str, mode: str):
    r = run_highwater("scenario", str(REPO / "scenarios" / f"{name}.toml"), "--truncation", mode,
                      "--results-dir", str(tmp_path), "--checker", "reference", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    timeline = load_json(run_dir / "scenario.json")
    assert timeline["failed"] is None, r.stderr
    assert all(s["outcome"] == "ok" for s in timeline["steps"])
    return r, run_dir, load_json(run_dir / runformat.RESULTS_JSON)


def _controller_events(run_dir, event: str) -> list[dict]:
    out = []
    for line in runformat.iter_jsonl(run_dir / "nodes" / "c0" / "broker.log"):
        if line.obj.get("event") == event:
            out.append(line.obj)
    return out


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("mode", LOSS_MODES)
def test_without_elr_the_last_replica_standing_loses_acknowledged_writes(tmp_path, mode):
    r, run_dir, results = _run(tmp_path, "kip-966-unsafe", mode)
    assert r.returncode == 1, r.stderr
    assert found_kinds(results) == ["lost-write"]
    assert results["anomalies"]["lost-write"]["count"] == 4          # m1..m4; m5 was never acknowledged
    assert "as expected" in r.stderr and "NOT as expected" not in r.stderr
    assert _controller_events(run_dir, "unclean-shutdown") == []      # detection is part of KIP-966


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("mode", SAFE_MODES)
def test_with_elr_nothing_is_lost(tmp_path, mode):
    r, run_dir, results = _run(tmp_path, "kip-966", mode)
    assert r.returncode == 0, r.stderr
    assert results["valid"] is True and found_kinds(results) == []
    [unclean] = _controller_events(run_dir, "unclean-shutdown")
    assert (unclean["broker"], len(unclean["partitions"])) == (1, 1)
    leaders = [(e["leader"], e["isr"], e.get("elr")) for e in _controller_events(run_dir, "leader-change")]
    assert leaders[-2:] == [(None, [], [1, 2]), (2, [2], [])]        # no leader, then n2 from the ELR
