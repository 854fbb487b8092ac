"""The checker JVM's class archive: when it is used, and that a freshly made one really loads."""
from __future__ import annotations

import subprocess
import sys

import pytest

from checkers import jvm_archive, spark_session


def test_no_options_without_an_archive(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.ENV, str(tmp_path / "missing.jsa"))
    assert jvm_archive.java_options() == []
    assert "SharedArchiveFile" not in spark_session.local_conf()["spark.driver.extraJavaOptions"]


def test_options_name_an_existing_archive(tmp_path, monkeypatch):
    f = tmp_path / "classes.jsa"
    f.write_bytes(b"x")
    (tmp_path / "classes.jsa.json").write_text('{"size": 1}')
    monkeypatch.setenv(jvm_archive.ENV, str(f))
    opts = jvm_archive.java_options()
    assert opts[0] == f"-XX:SharedArchiveFile={f}"
    java = spark_session.local_conf()["spark.driver.extraJavaOptions"]
    assert java.startswith(spark_session.DEFAULT_JAVA_OPTS) and java.endswith(" ".join(opts))
    monkeypatch.setenv("HIGHWATER_SPARK_JAVA_OPTS", "-Xss4m")
    logs = spark_session.log_options(spark_session.log_path())
    assert spark_session.local_conf()["spark.driver.extraJavaOptions"] == " ".join(["-Xss4m", *logs, *opts])


def test_off_disables_it(monkeypatch):
    monkeypatch.setenv(jvm_archive.ENV, "off")
    assert jvm_archive.path() is None and jvm_archive.java_options() == []


@pytest.mark.slow
@pytest.mark.spark
def test_a_made_archive_maps_into_the_spark_driver(tmp_path, monkeypatch):
    # made as scripts/bootstrap makes it: `highwater jvm-archive`, exit 0, the archive's path on stdout
    out = subprocess.run([sys.executable, "-m", "harness.cli", "jvm-archive", "--output", str(tmp_path / "classes.jsa")],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    made = tmp_path / "classes.jsa"
    assert out.stdout.strip().splitlines()[-1] == str(made) and made.stat().st_size > 10_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classes.jsa", "classes.jsa.json"]
    monkeypatch.setenv(jvm_archive.ENV, str(made))
    assert jvm_archive.java_options()[0] == f"-XX:SharedArchiveFile={made}"
    # -Xshare:on makes an archive the JVM cannot map fatal, so the driver only starts if it maps
    assert jvm_archive.probe(made) is None
    # the JVM crashes on a truncated archive rather than skipping it: such a file is never handed to it
    cut = tmp_path / "cut.jsa"
    cut.write_bytes(made.read_bytes()[:4096])
    (tmp_path / "cut.jsa.json").write_text((tmp_path / "classes.jsa.json").read_text())
    monkeypatch.setenv(jvm_archive.ENV, str(cut))
    assert jvm_archive.java_options() == []
    # and the probe that guards publishing does fail on such a file
    (tmp_path / "cut.jsa.json").write_text('{"size": 4096}')
    assert jvm_archive.probe(cut) is not None
