"""The `highwater run` / `highwater scenario` commands' argument handling: bad flags, a bad test file or
a bad scenario give one line on stderr and exit 254 before anything is started."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def highwater(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_bad_flag_value(tmp_path):
    r = highwater("run", "--acks", "7", "--results-dir", str(tmp_path))
    assert r.returncode == 254
    assert r.stderr.strip() == "highwater: --acks: must be 0, 1 or \"all\", got '7'"
    assert list(tmp_path.iterdir()) == []          # nothing was started or written


def test_bad_test_file_names_file_line_key(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('name = "x"\n[broker]\ntruncation = "hw"\nunclean = true\n')
    r = highwater("run", "--test-file", str(f), "--results-dir", str(tmp_path / "res"))
    assert r.returncode == 254
    # the message gained "did you mean" (rundir/settings.py)
    assert r.stderr.strip() == (f"highwater: {f}:4: unknown key 'broker.unclean' "
                                "(did you mean 'broker.unclean_leader_election'?)")


def test_unknown_flag_is_a_usage_error():
    r = highwater("run", "--nodez", "3")
    assert r.returncode == 254
    assert "No such option '--nodez'" in r.stderr


def test_bad_scenario(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[[step]]\ndo = "kill"\n')
    r = highwater("scenario", str(f), "--results-dir", str(tmp_path / "res"))
    assert r.returncode == 254
    assert r.stderr.strip() == f"highwater: {f}:1: step 1 (kill): field 'node' is missing"
