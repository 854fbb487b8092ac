"""Getting a SparkSession for the checker: local mode tuned for a small machine, or a real cluster.

- no master: `local[2]`, 3 GiB driver heap, few shuffle partitions, adaptive execution, no UI, and the
  install's class-data-sharing archive for a faster JVM start (jvm_archive.py);
- `spark://...`, `yarn`, `k8s://...`, `local[N]`: the same job on that master (classic Spark);
- `sc://host:port`: Spark Connect (needs the pyspark connect client extras), the job uses DataFrame APIs only.
Environment overrides: HIGHWATER_SPARK_DRIVER_MEMORY, HIGHWATER_SPARK_SHUFFLE_PARTITIONS,
HIGHWATER_SPARK_JAVA_OPTS (driver JVM options), HIGHWATER_SPARK_SHUFFLE_COMPRESS (local: false by default).
On a cluster the run directory must be readable by the executors (a shared file system).
"""
from __future__ import annotations

import os
from typing import Any

from checkers import jvm_archive

DEFAULT_MASTER = "local[2]"
DEFAULT_JAVA_OPTS = "-XX:+UseParallelGC -XX:ParallelGCThreads=2 -Dlog4j2.level=error"


class SparkSetupError(ValueError):
    """The requested Spark master cannot be used from here; the message says why and what to do."""


def base_java_options() -> str:
    """The driver JVM's options before the class archive's (jvm_archive.py) are added."""
    return os.environ.get("HIGHWATER_SPARK_JAVA_OPTS", DEFAULT_JAVA_OPTS)


def local_conf() -> dict[str, str]:
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
        "spark.driver.extraJavaOptions": " ".join([base_java_options()] + jvm_archive.java_options()),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.constraintPropagation.enabled": "false",
        "spark.sql.ansi.enabled": "false",
        "spark.memory.fraction": "0.7",
        "spark.local.dir": os.environ.get("HIGHWATER_SPARK_LOCAL_DIR", "/tmp"),
    }


def get_session(master: str | None = None, app_name: str = "highwater-check") -> Any:
    from pyspark.sql import SparkSession

    if master and master.startswith("sc://"):
        try:
            import grpc  # noqa: F401 - the Spark Connect client's transport
        except ImportError:
            raise SparkSetupError(f"--spark-master {master}: Spark Connect needs the pyspark connect client "
                                  "(pip install 'pyspark[connect]')") from None
        return SparkSession.builder.remote(master).appName(app_name).getOrCreate()
    builder = SparkSession.builder.appName(app_name).master(master or DEFAULT_MASTER)
    conf = local_conf()
    if master and not master.startswith("local"):
        conf.pop("spark.driver.memory")       # the cluster's own settings decide
        conf.pop("spark.default.parallelism")
        conf.pop("spark.local.dir")
        conf.pop("spark.shuffle.compress")   # shuffles cross the network there
        conf.pop("spark.shuffle.spill.compress")
        conf["spark.sql.shuffle.partitions"] = os.environ.get("HIGHWATER_SPARK_SHUFFLE_PARTITIONS", "64")
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    try:
        session.sparkContext.setLogLevel("ERROR")
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no SparkContext
        pass
    return session


def describe(session: Any, master: str | None) -> str:
    if master and master.startswith("sc://"):
        return master
    try:
        return session.sparkContext.master
    except Exception:  # noqa: BLE001
        return master or DEFAULT_MASTER


def stop(session: Any) -> None:
    session.stop()
