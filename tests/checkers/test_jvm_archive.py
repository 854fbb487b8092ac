"""The checker JVM's class archive: when it is used, that `highwater jvm-archive` publishes only an archive
that maps, and that a freshly made one really loads."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkers import jvm_archive, spark_driver


def test_no_options_without_an_archive(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.ENV, str(tmp_path / "missing.jsa"))
    assert jvm_archive.java_options() == []
    assert "SharedArchiveFile" not in spark_driver.local_conf()["spark.driver.extraJavaOptions"]


def test_options_name_an_existing_archive(tmp_path, monkeypatch):
    f = tmp_path / "classes.jsa"
    f.write_bytes(b"x")
    (tmp_path / "classes.jsa.json").write_text('{"size": 1}')
    monkeypatch.setenv(jvm_archive.ENV, str(f))
    opts = jvm_archive.java_options()
    assert opts[0] == f"-XX:SharedArchiveFile={f}"
    java = spark_driver.local_conf(profile="tiered")["spark.driver.extraJavaOptions"]
    assert java.startswith(jvm_archive.DEFAULT_JAVA_OPTS) and java.endswith(" ".join(opts))
    monkeypatch.setenv("HIGHWATER_SPARK_JAVA_OPTS", "-Xss4m")
    logs = spark_driver.log_options(spark_driver.log_path())
    assert spark_driver.local_conf()["spark.driver.extraJavaOptions"] == " ".join(
        ["-Xss4m", *logs, *opts, *spark_driver.PROFILES["c1"]])


def test_off_disables_it(monkeypatch):
    monkeypatch.setenv(jvm_archive.ENV, "off")
    assert jvm_archive.path() is None and jvm_archive.java_options() == []


def _builder_writes_the_archive(calls: list):
    """Stands in for jvm_archive._child running the builder: the JVM writes the archive it was told to
    (-XX:ArchiveClassesAtExit) when it exits."""
    def child(script, archive, java_opts):
        calls.append(java_opts)
        [target] = [o.split("=", 1)[1] for o in java_opts if o.startswith("-XX:ArchiveClassesAtExit=")]
        Path(target).write_bytes(b"c" * 4096)
        return subprocess.CompletedProcess([], 0, "", "")
    return child


@pytest.mark.parametrize("maps", [True, False], ids=["maps", "does-not-map"])
def test_jvm_archive_command_publishes_only_an_archive_that_maps(tmp_path, monkeypatch, capsys, maps):
    """`highwater jvm-archive --output PATH` as scripts/bootstrap runs it, without the JVMs (the slow test
    below maps a real one): exit 0 and the path on stdout once the probe mapped it, the archive and its
    stamp under PATH and nothing else; a probe failure publishes nothing and exits 255 saying why."""
    from harness.cli import main

    calls: list = []
    monkeypatch.setattr(jvm_archive, "_child", _builder_writes_the_archive(calls))
    probed: list = []
    monkeypatch.setattr(jvm_archive, "probe", lambda p: probed.append(p) or (None if maps else "exit 1: no map"))
    target = tmp_path / "classes.jsa"
    code = main(["jvm-archive", "--output", str(target)])
    out, err = capsys.readouterr()
    assert len(calls) == 1 and probed == [target.with_name("classes.jsa.partial")]
    if maps:
        assert code == 0, err
        assert out.strip().splitlines()[-1] == str(target)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["classes.jsa", "classes.jsa.json"]
        monkeypatch.setenv(jvm_archive.ENV, str(target))
        assert jvm_archive.java_options()[0] == f"-XX:SharedArchiveFile={target}"
    else:
        assert code == 255 and out == ""
        assert err.strip() == ("highwater jvm-archive: the made JVM class archive does not load (exit 1: no map); "
                               "not using it")
        assert list(tmp_path.iterdir()) == []


def _installed_archive() -> Path | None:
    """The archive scripts/bootstrap made with `highwater jvm-archive` (jvm_archive.build, as above), when it
    is whole and younger than the code that makes it: on a fresh clone (CI) it was made minutes before the
    tests, by this checkout."""
    made = jvm_archive.default_path()
    if not jvm_archive._intact(made):
        return None
    return made if made.stat().st_mtime > Path(jvm_archive.__file__).stat().st_mtime else None


@pytest.mark.slow
@pytest.mark.spark
def test_a_made_archive_maps_into_the_spark_driver(tmp_path, monkeypatch):
    made = _installed_archive()
    if made is None:
        # none from scripts/bootstrap (or an older one): made here, as bootstrap makes it (about a minute)
        out = subprocess.run([sys.executable, "-m", "harness.cli", "jvm-archive", "--output", str(tmp_path / "classes.jsa")],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        made = tmp_path / "classes.jsa"
        assert out.stdout.strip().splitlines()[-1] == str(made)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["classes.jsa", "classes.jsa.json"]
    assert made.stat().st_size > 10_000_000
    monkeypatch.setenv(jvm_archive.ENV, str(made))
    assert jvm_archive.java_options()[0] == f"-XX:SharedArchiveFile={made}"
    # -Xshare:on makes an archive the JVM cannot map fatal, so the driver only starts if it maps
    assert jvm_archive.probe(made) is None
    # the JVM crashes on a truncated archive rather than skipping it: such a file is never handed to it
    cut = tmp_path / "cut.jsa"
    cut.write_bytes(made.read_bytes()[:4096])
    (tmp_path / "cut.jsa.json").write_text(made.with_name(made.name + ".json").read_text())
    monkeypatch.setenv(jvm_archive.ENV, str(cut))
    assert jvm_archive.java_options() == []
    # and the probe that guards publishing does fail on such a file
    (tmp_path / "cut.jsa.json").write_text('{"size": 4096}')
    assert jvm_archive.probe(cut) is not None
