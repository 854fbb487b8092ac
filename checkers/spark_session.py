"""Getting a SparkSession for the checker: the shared local driver, a private one, or a real cluster.

- no master (or `service`): a client session of the shared local driver (spark_service.py: a Spark
  Connect server started on demand and stopped when idle), unless HIGHWATER_SPARK_SERVICE=off;
- `local[N]`, or no master with HIGHWATER_SPARK_SERVICE=off: a private in-process driver with these
  settings: `local[2]`, 3 GiB driver heap, few shuffle partitions, adaptive execution, no UI, and the
  install's class-data-sharing archive for a faster JVM start (jvm_archive.py), and the JIT profile for
  the input's size (spark_driver.jvm_profile: C1-only up to 20M rows);
- `spark://...`, `yarn`, `k8s://...`, `local[N]`: the same job on that master (classic Spark);
- `sc://host:port`: Spark Connect (needs the pyspark connect client extras), the job uses DataFrame APIs only.
The driver JVM logs to a file, never to the terminal (spark-log4j2.properties; HIGHWATER_SPARK_LOG,
default `<venv>/var/highwater/spark-driver.log`; the shared driver's is its service directory's
server.log). Environment overrides: HIGHWATER_SPARK_DRIVER_MEMORY, HIGHWATER_SPARK_SHUFFLE_PARTITIONS,
HIGHWATER_SPARK_JAVA_OPTS (driver JVM options), HIGHWATER_SPARK_JVM_PROFILE (c1, tiered or auto),
HIGHWATER_SPARK_SHUFFLE_COMPRESS (local: false by default).
On a cluster the run directory must be readable by the executors (a shared file system).
"""
from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Iterator

from checkers.jvm_archive import SparkSetupError
from checkers.spark_driver import DEFAULT_MASTER, jvm_profile, local_conf, log_path

SERVICE = "service"


MAX_LOG_LINES = 2000


_log_marks: dict[Path, int] = {}


def _driver_logs() -> list[Path]:
    from checkers import spark_service

    return [log_path(), spark_service.directory() / "server.log"]


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError:
        return 0


def mark_driver_logs() -> None:
    """Remember where the driver logs end now: the next driver_log_to() passes on everything after
    this point (a run marks them before it starts the shared driver, so its start-up is included)."""
    for f in _driver_logs():
        _log_marks[f] = _size(f)


@contextlib.contextmanager
def driver_log_to(logger: logging.Logger) -> Iterator[None]:
    """Pass what the local driver JVMs (private or shared) log while the block runs (or since
    mark_driver_logs()) to `logger`, at INFO: a run's harness.log keeps it; a bare `highwater check`
    prints none of it."""
    files = _driver_logs()
    start = {f: _log_marks.pop(f, None) for f in files}
    start = {f: (_size(f) if n is None else n) for f, n in start.items()}
    try:
        yield
    finally:
        for f in files:
            try:
                with f.open("rb") as fh:
                    fh.seek(start[f])
                    lines = fh.read().decode("utf-8", "replace").splitlines()
            except OSError:
                continue
            for line in lines[:MAX_LOG_LINES]:
                if line.strip():
                    logger.info("spark driver: %s", line)
            if len(lines) > MAX_LOG_LINES:
                logger.info("spark driver: ... %d more lines in %s", len(lines) - MAX_LOG_LINES, f)


_leases: dict[int, Any] = {}


def uses_service(master: str | None) -> bool:
    """The checker's default (`master` None or "service") goes to the shared local driver."""
    from checkers import spark_service

    return master == SERVICE or (not master and spark_service.enabled())


_connect_used = False


def _connect_client(master: str):
    global _connect_used
    try:
        import grpc  # noqa: F401 - the Spark Connect client's transport
    except ImportError:
        raise SparkSetupError(f"--spark-master {master}: Spark Connect needs the pyspark connect client "
                              "(pip install 'pyspark[connect]')") from None
    from pyspark.sql import SparkSession

    _connect_used = True
    return SparkSession.builder.remote(master)


def _reachable(master: str, timeout: float = 10.0) -> None:
    """Fail fast on a Spark Connect URL nobody answers at (the client would retry for minutes)."""
    import socket
    from urllib.parse import urlparse

    try:
        url = urlparse(master.split(";", 1)[0])
        host, port = url.hostname, url.port or 15002
    except ValueError as exc:
        raise SparkSetupError(f"--spark-master {master}: not a Spark Connect URL ({exc})") from None
    if not host:
        raise SparkSetupError(f"--spark-master {master}: no host (expected sc://HOST:PORT)")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise SparkSetupError(f"--spark-master {master}: no Spark Connect server answers at {host}:{port} "
                              f"({exc.strerror or exc})") from None


def _classic_allowed(master: str) -> None:
    """PySpark marks a process that made a Spark Connect session as Connect-only (an environment
    variable, which child processes inherit): clear an inherited mark; refuse after our own."""
    if "SPARK_CONNECT_MODE_ENABLED" not in os.environ:
        return
    if _connect_used:
        raise SparkSetupError(f"--spark-master {master}: this process already used Spark Connect, and PySpark "
                              "cannot start a local driver after that; check in a new process")
    del os.environ["SPARK_CONNECT_MODE_ENABLED"]


def get_session(master: str | None = None, app_name: str = "highwater-check", rows: int | None = None) -> Any:
    """A session for `master` (module docstring); give it back with stop(). `rows`, the input's size,
    picks a new private local driver's JIT profile (profile_of tells which one a session has)."""
    from pyspark.sql import SparkSession

    if uses_service(master):
        from checkers import spark_service

        # the lease first: a driver that is being stopped for idleness holds the lease lock until it is
        # gone, so ensure() then starts a new one instead of handing out the dying one
        lease = spark_service.Lease()
        try:
            svc = spark_service.ensure()
        except spark_service.SparkSetupError as exc:
            lease.release()
            raise SparkSetupError(f"the shared Spark driver: {exc}") from None
        try:
            session = _connect_client(svc.url).create()
        except BaseException:
            lease.release()
            raise
        _leases[id(session)] = (lease, svc)
        return session
    if master and master.startswith("sc://"):
        _reachable(master)
        return _connect_client(master).appName(app_name).getOrCreate()
    master = master or DEFAULT_MASTER
    _classic_allowed(master)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver listens on loopback only
    # the Python workers (the protocol rules' mapInArrow) run this environment's Python, as the shared
    # driver's do: left to PySpark they ran `python3` from PATH, which need not have pyarrow
    from checkers.spark_driver import worker_python
    os.environ.setdefault("PYSPARK_PYTHON", worker_python())
    builder = SparkSession.builder.appName(app_name).master(master)
    # elsewhere the executors do the work: the driver keeps the JVM's default
    conf = local_conf(profile=jvm_profile(rows) if master.startswith("local") else "tiered")
    if not master.startswith("local"):
        if not os.environ.get("HIGHWATER_SPARK_DRIVER_MEMORY"):
            conf.pop("spark.driver.memory")   # the cluster's own settings decide, unless told otherwise
        conf.pop("spark.default.parallelism")
        conf.pop("spark.local.dir")
        conf.pop("spark.shuffle.compress")   # shuffles cross the network there
        conf.pop("spark.shuffle.spill.compress")
        conf["spark.sql.shuffle.partitions"] = os.environ.get("HIGHWATER_SPARK_SHUFFLE_PARTITIONS", "64")
    for k, v in conf.items():
        builder = builder.config(k, v)
    _launch_jvm_quietly(conf, master, app_name)
    return builder.getOrCreate()


_jvm_output = None


def _launch_jvm_quietly(conf: dict[str, str], master: str, app_name: str) -> None:
    """Start this process's driver JVM with its stdout and stderr in the driver log (PySpark would let
    it print on the terminal: the JVM's own warnings, the launcher's messages)."""
    global _jvm_output
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    sconf = SparkConf().setAll(list(conf.items())).setMaster(master).setAppName(app_name)
    path = log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    _jvm_output = open(path, "ab")  # noqa: SIM115 - the JVM writes to it for as long as this process lives
    gateway = launch_gateway(sconf, popen_kwargs={"stdout": _jvm_output, "stderr": _jvm_output})
    SparkContext._ensure_initialized(gateway=gateway)


def service_of(session: Any):
    """The spark_service.Service a session is a client of, or None."""
    held = _leases.get(id(session))
    return held[1] if held else None


def describe(session: Any, master: str | None) -> str:
    svc = service_of(session)
    if svc is not None:
        return f"{DEFAULT_MASTER} (shared driver {svc.url})"
    if master and master.startswith("sc://"):
        return master
    try:
        return session.sparkContext.master
    except Exception:  # noqa: BLE001
        return master or DEFAULT_MASTER


def profile_of(session: Any, master: str | None) -> str | None:
    """The JIT profile (spark_driver.PROFILES) the session's driver JVM really runs, read from its
    arguments; None where they cannot be read from here (Spark Connect to a server this project did not
    start, a driver on another machine)."""
    svc = service_of(session)
    try:
        if svc is not None:
            args = Path(f"/proc/{svc.jvm_pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        elif master and master.startswith("sc://"):
            return None
        else:
            bean = session.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
            args = list(bean.getInputArguments())
    except Exception:  # noqa: BLE001 - not knowing it is fine: it is information, not a decision
        return None
    return "c1" if "-XX:TieredStopAtLevel=1" in args else "tiered"


def stop(session: Any) -> None:
    held = _leases.pop(id(session), None)
    try:
        session.stop()
    finally:
        if held is not None:
            held[0].release()
