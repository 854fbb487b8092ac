"""End to end on a real one-broker cluster (no faults, reference checker): a run says what it is doing
until it ends (one plain line per phase after the workload, then the phase times), prints the same
verdict line as `highwater check` of its run directory, and a scenario whose step did not play out
never says "as expected"."""
from __future__ import annotations

import re

import pytest

from rundir import formats as runformat
from e2e_helpers import (N1_LEADS_THEN_TWO_SENDS, ONE_BROKER_SCENARIO, load_json, run_dir_from_stdout,
                         run_highwater)

SMALL = ["--nodes", "1", "--partitions", "1", "--replication-factor", "1", "--min-insync-replicas", "1",
         "--nemesis", "none", "--checker", "reference", "--rate", "50", "--final-wait", "20"]
SECONDS = r"\d+\.\d s"


@pytest.mark.slow
def test_run_names_each_final_phase_and_prints_the_check_verdict_line(tmp_path):
    r = run_highwater("run", *SMALL, "--time-limit", "3", "--results-dir", str(tmp_path), "--plain", timeout=300)
    assert r.returncode == 0, r.stderr
    run_dir = run_dir_from_stdout(r.stdout)
    lines = r.stderr.splitlines()
    wanted = ["workload", "final wait", "final reads", "collecting replicas", "checking: reading input",
              "checking (reference)", "checking", "writing report"]
    phase_lines = [ln for ln in lines if re.fullmatch(rf"highwater: [a-z ():]+ {SECONDS}", ln)]
    named = [re.sub(rf" {SECONDS}$", "", ln.removeprefix("highwater: ")) for ln in phase_lines]
    assert [n for n in named if n in wanted] == wanted, r.stderr
    summary = [ln for ln in lines if ln.startswith("highwater: phases: ")]
    assert len(summary) == 1 and re.fullmatch(
        rf"highwater: phases: setting up {SECONDS} · provisioning {SECONDS} · workload {SECONDS} · final wait "
        rf"{SECONDS} · final reads {SECONDS} · collecting replicas {SECONDS} · checking {SECONDS} · writing "
        rf"report {SECONDS} \(total {SECONDS}\)", summary[0]), summary
    # the verdict line is the last on stderr, in the format `highwater check` prints for the same directory
    run_line = lines[-1]
    assert re.fullmatch(rf"highwater: VALID \(exit 0\): no anomalies · 1 partition · checked by reference in {SECONDS}",
                        run_line), r.stderr
    c = run_highwater("check", "--engine", "reference", str(run_dir), timeout=300)
    assert c.returncode == 0, c.stderr
    check_line = c.stdout.strip().splitlines()[-1]
    took = re.compile(rf"in {SECONDS}$")
    assert took.sub("", check_line) == took.sub("", run_line)


FAILING_STEP = '\nname = "step-fails"\n' + ONE_BROKER_SCENARIO + """[checker]
engine = "reference"
[expect]
leader-epoch = []

""" + N1_LEADS_THEN_TWO_SENDS + """[[step]]
do = "wait"
partition = 0
hw = 100
timeout = 1
note = "never: only 2 records were sent"
"""


@pytest.mark.slow
def test_a_scenario_whose_step_failed_is_not_as_expected(tmp_path):
    f = tmp_path / "fails.toml"
    f.write_text(FAILING_STEP)
    r = run_highwater("scenario", str(f), "--results-dir", str(tmp_path / "res"), "--plain", timeout=300)
    assert r.returncode == 2, r.stderr
    run_dir = run_dir_from_stdout(r.stdout)
    assert load_json(run_dir / "scenario.json")["failed"].endswith(
        "step 3 (wait: partition=0, hw=100, timeout=1) did not play out: timed out after 1s; last seen: hw 2")
    assert load_json(run_dir / runformat.RESULTS_JSON)["valid"] is True     # the checker found nothing ...
    assert "as expected" not in r.stderr                                     # ... which proves nothing here
    assert ("highwater: scenario expects no anomalies in leader-epoch mode; not judged: a step did not play out"
            in r.stderr.splitlines())
    assert re.fullmatch(r"highwater: UNKNOWN \(exit 2\): no anomalies · 1 unknown reason: .*step 3 \(wait: "
                        rf"partition=0, hw=100, timeout=1\) did not play out: .* · 1 partition · checked by "
                        rf"reference in {SECONDS}", r.stderr.splitlines()[-1]), r.stderr
    assert "highwater: scenario steps: step 3 (wait: partition=0, hw=100, timeout=1) " in r.stderr
