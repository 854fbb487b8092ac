"""The local Spark driver's settings: its master, its JVM's log file, the Python its workers run, and
`local_conf`, the configuration every local driver starts with (a private in-process one of
spark_session.py, or the shared service of spark_service.py), and `jvm_profile`, the JIT profile a driver
gets for the size of its input. The class archive's options are jvm_archive.py's. Nothing here starts
anything.

The JIT profile. A check's JVM runs a few seconds of generated code per input table; on small inputs the
C2 compiler's work never pays back, and the C1-only profile (`-XX:TieredStopAtLevel=1`) is faster. On
large ones C2's code wins. Measured on this project's 2-core machine, C1-only against tiered, alternating:
a 60 s run's check 0.57x the time, the 6.9k-line demo run 0.72x (private driver, cold), 1M sends 0.88x,
10M sends 1.20x. So a local driver gets `c1` up to C1_MAX_ROWS input rows (every table's Parquet rows:
about 5 per send) and `tiered` above; the shared driver, which mostly serves small runs and must be
started before the input is known, always gets `c1`. HIGHWATER_SPARK_JVM_PROFILE=c1|tiered|auto overrides.
C1-only keeps tiered's 240 MiB code cache (the JVM's default for C1-only is 48 MiB, which a 10M-send
check fills, after which the JVM stops compiling)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from checkers import jvm_archive
from checkers.jvm_archive import SparkSetupError

DEFAULT_MASTER = "local[2]"
LOG_CONFIG = Path(__file__).resolve().with_name("spark-log4j2.properties")

PROFILE_ENV = "HIGHWATER_SPARK_JVM_PROFILE"
PROFILES = {
    "c1": ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"],
    "tiered": [],   # the JVM's default
}
C1_MAX_ROWS = 20_000_000


def jvm_profile(rows: int | None) -> str:
    """The JIT profile (a key of PROFILES) of a local driver that will check `rows` input rows; None for
    a driver started before its input is known (the shared one). See the module docstring."""
    raw = os.environ.get(PROFILE_ENV, "")
    setting = raw.strip().lower()
    if setting in PROFILES:
        return setting
    if setting not in ("", "auto"):
        raise SparkSetupError(f"{PROFILE_ENV}={raw!r}: expected auto, c1 or tiered")
    return "c1" if rows is None or rows <= C1_MAX_ROWS else "tiered"


def log_path() -> Path:
    """Where a private driver JVM started by this process logs."""
    setting = os.environ.get("HIGHWATER_SPARK_LOG")
    return Path(setting) if setting else Path(sys.prefix) / "var" / "highwater" / "spark-driver.log"


def log_options(path: Path) -> list[str]:
    """JVM options that send the driver's log4j output to `path` (and nothing to the terminal)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return [f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}", f"-Dhighwater.spark.log={path}"]


def worker_python() -> str:
    """The Python the executors' workers run: PYSPARK_PYTHON, else this environment's `bin/python`. One
    path for every entry point (the `highwater` script runs .venv/bin/python3.11, `python -m` runs
    .venv/bin/python), since the shared driver's key includes it: two names would replace each other's
    driver in the middle of a check."""
    env = os.environ.get("PYSPARK_PYTHON")
    if env:
        return env
    here = Path(sys.prefix) / "bin" / "python"
    return str(here) if here.exists() else sys.executable


def local_conf(log: Path | None = None, profile: str = "c1") -> dict[str, str]:
    """The Spark settings of a local driver on this project's machines (2 cores), its JVM logging to `log`
    (default log_path()) and compiling with JIT `profile` (jvm_profile); environment overrides as
    spark_session.py's docstring lists."""
    return {
        "spark.driver.memory": os.environ.get("HIGHWATER_SPARK_DRIVER_MEMORY", "3g"),
        # many small shuffle partitions keep every aggregation's hash map in memory; adaptive execution
        # coalesces them back to a few for small inputs
        "spark.sql.shuffle.partitions": os.environ.get("HIGHWATER_SPARK_SHUFFLE_PARTITIONS", "48"),
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(32 * 1024 * 1024),
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.files.maxPartitionBytes": str(256 * 1024 * 1024),
        # local shuffle files stay on this machine's disk (page cache): compressing them cost ~10% of the
        # CPU at 10M sends (157 -> 143 CPU s) for no I/O saving; 100M sends may write ~10-20 GB to spark.local.dir
        "spark.shuffle.compress": os.environ.get("HIGHWATER_SPARK_SHUFFLE_COMPRESS", "false"),
        "spark.shuffle.spill.compress": os.environ.get("HIGHWATER_SPARK_SHUFFLE_COMPRESS", "false"),
        "spark.sql.autoBroadcastJoinThreshold": str(32 * 1024 * 1024),
        "spark.driver.extraJavaOptions": " ".join([jvm_archive.base_java_options(), *log_options(log or log_path()),
                                                   *jvm_archive.java_options(), *PROFILES[profile]]),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.constraintPropagation.enabled": "false",
        "spark.sql.ansi.enabled": "false",
        "spark.memory.fraction": "0.7",
        "spark.local.dir": os.environ.get("HIGHWATER_SPARK_LOCAL_DIR", "/tmp"),
        # the protocol rules run as Python on the executors (checkers/anomalies/protocol.py): this
        # environment's interpreter, which has pyarrow and the project, not whatever `python3` is first
        "spark.pyspark.python": worker_python(),
    }
