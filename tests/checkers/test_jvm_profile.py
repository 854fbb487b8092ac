"""The Spark driver's JIT profile by input size (checkers/spark_driver.jvm_profile): the rule, its
override, the shared driver's command line, and that a real private driver JVM runs the profile chosen."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkers import spark_driver, spark_service
from checkers.jvm_archive import SparkSetupError

REPO = Path(__file__).resolve().parents[2]
C1 = spark_driver.PROFILES["c1"]


def test_small_inputs_and_unknown_ones_get_c1_large_ones_tiered(monkeypatch):
    monkeypatch.delenv(spark_driver.PROFILE_ENV, raising=False)
    assert spark_driver.jvm_profile(None) == "c1"          # the shared driver: started before any input
    assert spark_driver.jvm_profile(0) == "c1"
    assert spark_driver.jvm_profile(spark_driver.C1_MAX_ROWS) == "c1"
    assert spark_driver.jvm_profile(spark_driver.C1_MAX_ROWS + 1) == "tiered"


@pytest.mark.parametrize("setting,small,large", [("c1", "c1", "c1"), ("Tiered", "tiered", "tiered"),
                                                 ("auto", "c1", "tiered"), ("", "c1", "tiered")])
def test_the_environment_overrides_the_rule(monkeypatch, setting, small, large):
    monkeypatch.setenv(spark_driver.PROFILE_ENV, setting)
    assert spark_driver.jvm_profile(10) == small
    assert spark_driver.jvm_profile(10 * spark_driver.C1_MAX_ROWS) == large


def test_a_bad_setting_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(spark_driver.PROFILE_ENV, "c2")
    with pytest.raises(SparkSetupError, match=r"HIGHWATER_SPARK_JVM_PROFILE='c2': expected auto, c1 or tiered"):
        spark_driver.jvm_profile(10)


def test_options_of_each_profile(monkeypatch):
    monkeypatch.delenv(spark_driver.PROFILE_ENV, raising=False)
    c1 = spark_driver.local_conf(profile="c1")["spark.driver.extraJavaOptions"].split()
    tiered = spark_driver.local_conf(profile="tiered")["spark.driver.extraJavaOptions"].split()
    assert c1[-2:] == ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
    assert not any(o.startswith(("-XX:TieredStopAtLevel", "-XX:ReservedCodeCacheSize")) for o in tiered)
    assert c1[:-2] == tiered


def test_shared_driver_command_follows_the_setting(tmp_path, monkeypatch):
    """The shared driver runs C1-only unless told otherwise; a changed setting changes its key, so a
    driver started with the other profile is replaced rather than reused."""
    monkeypatch.delenv(spark_driver.PROFILE_ENV, raising=False)
    default = spark_service.command(4040, tmp_path)
    java = default[default.index("--driver-java-options") + 1].split()
    assert java[-2:] == C1
    key = spark_service.expected_key(tmp_path)
    monkeypatch.setenv(spark_driver.PROFILE_ENV, "tiered")
    tiered = spark_service.command(4040, tmp_path)
    assert "-XX:TieredStopAtLevel=1" not in tiered[tiered.index("--driver-java-options") + 1].split()
    assert spark_service.expected_key(tmp_path) != key


_PROBE = """
import sys
from checkers import spark_session
s = spark_session.get_session("local[1]", rows=int(sys.argv[1]))
print(spark_session.profile_of(s, "local[1]"), s.range(5).count())
spark_session.stop(s)
"""


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("rows,profile", [
    pytest.param(1_000, "c1", marks=pytest.mark.nightly),     # every private-driver run asserts c1 too
    (spark_driver.C1_MAX_ROWS + 1, "tiered")])
def test_a_private_driver_jvm_runs_the_profile_for_its_input(rows, profile):
    """A real driver JVM per size, its profile read back from the JVM's own input arguments."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(spark_driver.PROFILE_ENV, None)
    r = subprocess.run([sys.executable, "-c", _PROBE, str(rows)], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-2:] == [profile, "5"], json.dumps(r.stdout[-500:])
