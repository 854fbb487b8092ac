"""The checker JVM's class-data-sharing (CDS) archive: made once per install, used by every local check.

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

FILE_NAME = "spark-driver-classes.jsa"
ENV = "HIGHWATER_SPARK_CDS"


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
from checkers.check import check_run

work = Path(sys.argv[1])
synthetic.generate(work / "run", sends=50000, k=2, seed=7)
spark = spark_session.get_session()
gateway = spark.sparkContext._gateway
check_run(work / "run", spark=spark, write=False)
spark.stop()
proc = getattr(gateway, "proc", None)
gateway.shutdown()
if proc is not None:
    proc.stdin.close()
    proc.wait(timeout=300)
"""


_PROBE = """
from checkers import spark_session
s = spark_session.get_session()
print(s.range(1000).count())
s.stop()
"""


class ArchiveError(RuntimeError):
    """The archive could not be made; the message says why."""


def build(target: Path | None = None) -> Path:
    """Make the archive by running a small synthetic check in a child process; returns its path."""
    target = target or path() or default_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    from checkers import spark_session

    opts = spark_session.local_conf()["spark.driver.extraJavaOptions"].split()
    opts = [o for o in opts if not o.startswith(("-XX:SharedArchiveFile", "-Xshare", "-Xlog:cds"))]
    env = dict(os.environ, **{ENV: "off",
                              "HIGHWATER_SPARK_JAVA_OPTS": " ".join(opts + [f"-XX:ArchiveClassesAtExit={partial}"])})
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="highwater-cds-") as work:
        proc = subprocess.run([sys.executable, "-c", _BUILDER, work], env=env, capture_output=True, text=True,
                              cwd=work)
    if proc.returncode != 0 or not partial.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        partial.unlink(missing_ok=True)
        raise ArchiveError(f"making the JVM class archive failed (exit {proc.returncode}): {last}")
    # a session that must map the archive (-Xshare:on) before it is published
    env = dict(os.environ, **{ENV: str(partial), "HIGHWATER_SPARK_JAVA_OPTS": " ".join(opts + ["-Xshare:on"])},
               PYTHONPATH=env["PYTHONPATH"])
    _stamp(partial).write_text(json.dumps({"size": partial.stat().st_size}))
    with tempfile.TemporaryDirectory(prefix="highwater-cds-") as work:
        ok = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, cwd=work)
    if ok.returncode != 0 or ok.stdout.split()[-1:] != ["1000"]:
        partial.unlink(missing_ok=True)
        _stamp(partial).unlink(missing_ok=True)
        raise ArchiveError("the made JVM class archive does not load; not using it")
    os.replace(_stamp(partial), _stamp(target))
    os.replace(partial, target)
    return target
