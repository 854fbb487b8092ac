"""librdkafka's own test suite against a real 3-broker highwater cluster: scripts/librdkafka-tests builds
librdkafka's test runner from the vendored source release (cached in .venv/var/highwater/, a few minutes
the first time) and runs its default list of 33, each on a fresh cluster: 17 producer, consumer and
metadata tests and 16 consumer-group tests (0106 is a mock-cluster test, skipped against a real
cluster). At least 31 of them must pass; the script's own summary (one line per test, with the runner's
reason for each failure) is in the assertion message.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "librdkafka-tests"
SOURCE = REPO.parent / "shared" / "vendor" / "librdkafka-2.15.0.tar.gz"
MIN_PASS = 31
TIMEOUT_S = 2400      # a build (about 3 minutes on two cores) and 33 tests (about 10 minutes), with room


@pytest.mark.slow
@pytest.mark.nightly
def test_librdkafka_suite_passes_against_highwater(tmp_path):
    if not SOURCE.exists():
        pytest.skip(f"no librdkafka source release at ../shared/vendor/{SOURCE.name}")
    if os.geteuid() != 0 and not all(shutil.which(t) for t in ("make", "cc", "c++")):
        pytest.skip("no C/C++ toolchain, and not root to install Debian's build-essential")
    results = tmp_path / "results.json"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--source", str(SOURCE), "--min-pass", str(MIN_PASS),
                             "--json", str(results)], cwd=str(REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)          # the script stops its cluster and test runner on SIGTERM
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"scripts/librdkafka-tests took over {TIMEOUT_S} s; its output ended:\n{out[-4000:]}")
    at = out.rfind("tests against highwater")          # the summary's heading, "librdkafka X tests against ..."
    summary = out[out.rfind("\n", 0, at) + 1:] if at >= 0 else out[-4000:]
    m = re.search(r"^(\d+) of (\d+) passed", out, re.M)
    assert m, f"no 'N of M passed' line (exit {proc.returncode}); the output ended:\n{out[-4000:]}"
    passed, total = int(m.group(1)), int(m.group(2))
    assert total == 17, summary
    assert passed >= MIN_PASS, f"{passed} of {total} librdkafka tests passed, fewer than {MIN_PASS}:\n{summary}"
    assert proc.returncode == 0, f"exit {proc.returncode} although {passed} passed:\n{summary}"
