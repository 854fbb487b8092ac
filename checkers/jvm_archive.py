"""The checker JVM's options: its base ones and its class-data-sharing (CDS) archive, made once per install
and used by every local check.

A Spark driver loads and verifies some 20,000 classes before and during its first queries; on this
project's 2-core machines that is ~4 s of every `highwater check` (session start 6.3 -> 4.0 s, first
trivial job 3.3 -> 1.7 s). Java's dynamic CDS archive keeps those classes parsed and verified in a
memory-mapped file. It is made by running a small check with `-XX:ArchiveClassesAtExit` (the archive
holds the classes that check loaded) and is then passed to every local driver JVM.

The archive lives in the virtualenv (`<prefix>/share/highwater/`), since it belongs to exactly that
install's Spark jars and Java. If the jars or the JVM change, the JVM finds the archive stale and
starts without it (silently, and no slower than with no archive); `highwater jvm-archive` remakes it.
HIGHWATER_SPARK_CDS=off disables it, HIGHWATER_SPARK_CDS=PATH uses another file.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rundir.exits import HighwaterError

FILE_NAME = "spark-driver-classes.jsa"
ENV = "HIGHWATER_SPARK_CDS"
DEFAULT_JAVA_OPTS = "-XX:+UseParallelGC -XX:ParallelGCThreads=2"


def base_java_options() -> str:
    """The driver JVM's options before the class archive's are added (HIGHWATER_SPARK_JAVA_OPTS)."""
    return os.environ.get("HIGHWATER_SPARK_JAVA_OPTS", DEFAULT_JAVA_OPTS)


def default_path() -> Path:
    return Path(sys.prefix) / "share" / "highwater" / FILE_NAME


def path() -> Path | None:
    """The archive to use, or None (disabled)."""
    setting = os.environ.get(ENV, "")
    if setting.lower() == "off":
        return None
    return Path(setting) if setting else default_path()


def java_options() -> list[str]:
    """Driver JVM options that use the archive, if there is one. A stale archive is skipped by the JVM
    (-Xshare:auto, the default); the log options keep it from saying so on every run. A missing file
    would disable the JDK's own archive too, so the option is only given for a file that exists."""
    p = path()
    if p is None or not _intact(p):
        return []
    return [f"-XX:SharedArchiveFile={p}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def _stamp(p: Path) -> Path:
    return p.with_name(p.name + ".json")


def _intact(p: Path) -> bool:
    """The archive is whole: the JVM crashes (SIGBUS) on a truncated one instead of skipping it, so
    an archive is only used at the size its build recorded."""
    try:
        return json.loads(_stamp(p).read_text())["size"] == p.stat().st_size
    except (OSError, ValueError, KeyError, TypeError):
        return False


# run in a child Python: the archive is written when the driver JVM exits, which this waits for
_BUILDER = r"""
import sys
from pathlib import Path
from checkers import spark_session, synthetic
from checkers.check import CheckOptions, check_run

work = Path(sys.argv[1])
synthetic.generate(work / "run", sends=50000, k=2, seed=7)
spark = spark_session.get_session(spark_session.DEFAULT_MASTER)
gateway = spark.sparkContext._gateway
check_run(work / "run", CheckOptions(spark=spark, write=False))
spark.stop()
proc = getattr(gateway, "proc", None)
gateway.shutdown()
if proc is not None:
    proc.stdin.close()
    proc.wait(timeout=300)
"""


_PROBE = """
from checkers import spark_session
s = spark_session.get_session(spark_session.DEFAULT_MASTER)
print(s.range(1000).count())
s.stop()
"""


class SparkSetupError(HighwaterError, RuntimeError):
    """Spark cannot be set up here: the JVM archive could not be made, the driver service could not be
    started or reached (checkers/spark_service.py), or the requested master cannot be used from here
    (checkers/spark_session.py). The message says why and what to do."""


def _child(script: str, archive: str, java_opts: list[str]) -> subprocess.CompletedProcess:
    """`script` in a child Python with this checkout importable, HIGHWATER_SPARK_CDS=`archive` and these
    driver JVM options, run in (and given) a scratch directory: a JVM that crashes leaves its hs_err log there."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, **{ENV: archive, "HIGHWATER_SPARK_JAVA_OPTS": " ".join(java_opts)},
               PYTHONPATH=os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p))
    with tempfile.TemporaryDirectory(prefix="highwater-cds-") as work:
        return subprocess.run([sys.executable, "-c", script, work], env=env, capture_output=True,
                              text=True, cwd=work)


def _java_opts() -> list[str]:
    return [o for o in base_java_options().split()
            if not o.startswith(("-XX:SharedArchiveFile", "-Xshare", "-Xlog:cds"))]


def probe(archive: Path) -> str | None:
    """Start a Spark driver that must map `archive` (-Xshare:on makes failing to map it fatal) and run
    one job: None if that works, else what went wrong."""
    proc = _child(_PROBE, str(archive), _java_opts() + ["-Xshare:on"])
    if proc.returncode == 0 and proc.stdout.split()[-1:] == ["1000"]:
        return None
    return f"exit {proc.returncode}: " + " | ".join(proc.stderr.strip().splitlines()[-3:])


def build(target: Path | None = None) -> Path:
    """Make the archive by running a small synthetic check in a child process; returns its path."""
    target = target or path() or default_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    proc = _child(_BUILDER, "off", _java_opts() + [f"-XX:ArchiveClassesAtExit={partial}"])
    if proc.returncode != 0 or not partial.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        partial.unlink(missing_ok=True)
        raise SparkSetupError(f"making the JVM class archive failed (exit {proc.returncode}): {last}")
    # published only once a driver has mapped it
    _stamp(partial).write_text(json.dumps({"size": partial.stat().st_size}))
    failure = probe(partial)
    if failure is not None:
        partial.unlink(missing_ok=True)
        _stamp(partial).unlink(missing_ok=True)
        raise SparkSetupError(f"the made JVM class archive does not load ({failure}); not using it")
    os.replace(_stamp(partial), _stamp(target))
    os.replace(partial, target)
    return target
