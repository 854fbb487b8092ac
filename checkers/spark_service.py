"""The shared local Spark driver: one Spark Connect server per install, started on demand, stopped when idle.

A cold Spark driver costs a `highwater check` of a small run most of its time (JVM start, class loading,
JIT warm-up of Spark's planner and of the generated code). Runs, scenarios, suites, `highwater check`
and the test suite therefore share one long-lived local driver: a Spark Connect server launched from
the installed pyspark's own jars (`SparkConnectServer`, local[2], the settings of spark_driver.py),
listening on 127.0.0.1 only. Each check is a Connect client session of its own.

Lifecycle (all of it in the service directory, `<venv>/var/highwater/spark-service` unless
HIGHWATER_SPARK_SERVICE_DIR says otherwise):
- `ensure()` starts it if it is not running: a detached supervisor process (`python -m
  checkers.spark_service serve`) launches the JVM (which dies with it), writes `state.json` (pids with
  their start times, port, URL), marks it ready once the server accepts connections, and sends the
  JVM's output to `server.log`. Starters are serialised by
  `start.lock`, so concurrent checks never start two servers.
- a client holds a shared lock on `in-use.lock` for as long as it uses the server (`lease()`);
- the supervisor stops the server once the last use is more than the idle time ago and it can take
  that lock exclusively (it then withdraws `state.json` before stopping, so no new check picks it up) (HIGHWATER_SPARK_SERVICE_IDLE seconds, default 300), or when told to (`stop()`, SIGTERM),
  or when the JVM dies; then it removes `state.json` and exits;
- started ahead of need (a run starts it before its workload; `highwater spark start`), the supervisor
  warms it with a few checks of a small synthetic run (HIGHWATER_SPARK_SERVICE_WARMUP checks, default 3;
  0 for none), so the run's own check finds Spark's planner and generated code compiled; a check that
  comes meanwhile stops the warm-up (it would compete). The JVM runs at niceness 10, so it yields the CPU
  to the cluster under test;
- a server started with other settings (another pyspark, other JVM options) is replaced;
- `highwater spark status|start|stop` and `highwater cleanup` drive it by hand.

HIGHWATER_SPARK_SERVICE=off makes the default checker start a private in-process driver instead.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from checkers import spark_driver
from checkers.jvm_archive import SparkSetupError

ENV_DIR = "HIGHWATER_SPARK_SERVICE_DIR"
ENV_IDLE = "HIGHWATER_SPARK_SERVICE_IDLE"
ENV_SWITCH = "HIGHWATER_SPARK_SERVICE"
ENV_WARMUP = "HIGHWATER_SPARK_SERVICE_WARMUP"
DEFAULT_WARMUP_CHECKS = 3
NICENESS = 10  # the driver yields to the system under test when a run starts it before its workload
DEFAULT_IDLE_S = 300.0
START_TIMEOUT_S = 180.0
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
APP_NAME = "highwater-checker"


@dataclass(frozen=True)
class Service:
    directory: Path
    url: str           # sc://127.0.0.1:PORT
    pid: int           # the supervisor
    jvm_pid: int
    key: str           # what the server was started with (a digest of its command line)
    started: float     # time.time() when it became ready

    @property
    def log(self) -> Path:
        return self.directory / "server.log"


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "on").lower() not in ("off", "0", "false", "no")


def directory() -> Path:
    setting = os.environ.get(ENV_DIR)
    return Path(setting) if setting else Path(sys.prefix) / "var" / "highwater" / "spark-service"


def idle_seconds() -> float:
    raw = os.environ.get(ENV_IDLE, "")
    try:
        return float(raw) if raw else DEFAULT_IDLE_S
    except ValueError:
        raise SparkSetupError(f"{ENV_IDLE}={raw!r}: expected a number of seconds") from None


# --- the server's command line ----------------------------------------------------------------------

def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def command(port: int, d: Path) -> list[str]:
    """spark-submit arguments that start the Connect server with the checker's local settings."""
    conf = spark_driver.local_conf(log=d / "server.log", profile=spark_driver.jvm_profile(None))
    memory = conf.pop("spark.driver.memory")
    java_opts = conf.pop("spark.driver.extraJavaOptions")
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", APP_NAME,
           "--master", spark_driver.DEFAULT_MASTER, "--driver-memory", memory,
           "--driver-java-options", java_opts]
    conf.update({"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
                 "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    for k, v in sorted(conf.items()):
        cmd += ["--conf", f"{k}={v}"]
    return cmd


def expected_key(d: Path) -> str:
    """A digest of everything the server is started with except its port."""
    import pyspark

    cmd = command(0, d)
    return hashlib.sha256(json.dumps([pyspark.__version__, cmd[1:]]).encode()).hexdigest()[:16]


# --- state ------------------------------------------------------------------------------------------

def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot): with the pid, it names one process."""
    f = _stat(pid)
    return int(f[19]) if f and len(f) > 19 else None


def _alive(pid: int, started: int | None = None) -> bool:
    """The process runs (not a zombie) and, if `started` is given, is the one that started then (a pid
    recorded before a crash or a reboot may belong to another process now)."""
    f = _stat(pid)
    if f is None or f[0] == "Z":
        return False
    return started is None or start_time(pid) == started


def _read_state(d: Path) -> dict | None:
    try:
        data = json.loads((d / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def status(d: Path | None = None) -> Service | None:
    """The running service of directory `d`, or None (not started, still starting, or dead)."""
    d = d or directory()
    s = _read_state(d)
    if not s or not s.get("ready"):
        return None
    try:
        svc = Service(d, s["url"], int(s["pid"]), int(s["jvm_pid"]), s["key"], float(s["started"]))
        alive = _alive(svc.pid, s["pid_start"]) and _alive(svc.jvm_pid, s["jvm_start"])
    except (KeyError, TypeError, ValueError):
        return None
    return svc if alive else None


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, mode)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _touch(d: Path) -> None:
    (d / "last-used").touch()


# --- clients ----------------------------------------------------------------------------------------

def ensure(d: Path | None = None, timeout: float = START_TIMEOUT_S, *, warm_up: bool = False) -> Service:
    """The running service, started (and waited for) if there is none or it has other settings.
    `warm_up`: a new one warms itself up (for starts ahead of need: a check waiting for it would only
    compete with its warm-up)."""
    d = d or directory()
    d.mkdir(parents=True, exist_ok=True)
    key = expected_key(d)
    with _flock(d / "start.lock", fcntl.LOCK_EX):
        svc = status(d)
        if svc is not None and svc.key == key:
            _touch(d)
            return svc
        if svc is not None or _read_state(d) is not None:
            stop(d)  # other settings, or a dead or half-started one
        return _start(d, timeout, warm_up)


def _start(d: Path, timeout: float, warm_up: bool) -> Service:
    (d / "state.json").unlink(missing_ok=True)
    _touch(d)
    with open(d / "supervisor.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "checkers.spark_service", "serve", "--dir", str(d),
                                 "--warm-up" if warm_up else "--no-warm-up"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                cwd=str(d), env=_child_env())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        svc = status(d)
        if svc is not None:
            return svc
        if proc.poll() is not None:
            raise SparkSetupError(f"the Spark service stopped while starting (exit {proc.returncode}): "
                               f"{_last_line(d)}; see {d / 'server.log'}")
        time.sleep(0.2)
    stop(d)
    raise SparkSetupError(f"the Spark service did not start within {timeout:.0f} s; see {d / 'server.log'}")


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", spark_driver.worker_python())   # Python workers run in this env
    env["SPARK_HOME"] = str(spark_home())
    for mark in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):  # PySpark's, of this process
        env.pop(mark, None)
    return env


def _last_line(d: Path) -> str:
    for name in ("supervisor.log", "server.log"):
        try:
            lines = [ln for ln in (d / name).read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            continue
        if lines:
            return lines[-1][-300:]
    return "no output"


@contextlib.contextmanager
def lease(d: Path | None = None) -> Iterator[None]:
    """Hold the service in use (it is not stopped for idleness meanwhile)."""
    d = d or directory()
    d.mkdir(parents=True, exist_ok=True)
    _touch(d)
    with _flock(d / "in-use.lock", fcntl.LOCK_SH):
        try:
            yield
        finally:
            _touch(d)


class Lease:
    """A lease that is taken now and given back by `release()` (for sessions that outlive a `with`)."""

    def __init__(self, d: Path | None = None):
        self._cm = lease(d)
        self._cm.__enter__()
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._cm.__exit__(None, None, None)


def stop(d: Path | None = None, timeout: float = 30.0) -> bool:
    """Stop the service of directory `d` (whatever its state); True if something was running."""
    d = d or directory()
    s = _read_state(d) or {}
    procs = [(s.get(k), s.get(k + "_start")) for k in ("pid", "jvm_pid")]
    running = [(p, t) for p, t in procs if isinstance(p, int) and isinstance(t, int) and _alive(p, t)]
    for p, _t in running[:1]:  # the supervisor if it runs (it stops the JVM), else the JVM itself
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_alive(p, t) for p, t in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p, t in running:  # what did not stop in time
        if _alive(p, t):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)
    (d / "state.json").unlink(missing_ok=True)
    return bool(running)


def clean(d: Path | None = None, *, dry_run: bool = False) -> list[str]:
    """`highwater cleanup`'s part: stop the service unless a check is using it; say what was done."""
    d = d or directory()
    s = _read_state(d)
    if s is None:
        return []
    what = f"shared Spark driver {s.get('url', '?')} (supervisor pid {s.get('pid')}, JVM pid {s.get('jvm_pid')})"
    d.mkdir(parents=True, exist_ok=True)
    held = _hold_unused(d)
    if held is None:
        return [f"left {what}: a check is using it"]
    try:  # held while stopping: a check that comes meanwhile waits, then starts a new driver
        if dry_run:
            return [f"would stop {what}"]
        return [f"stopped {what}" if stop(d) else f"removed the state of a dead {what}"]
    finally:
        held.close()


# --- the supervisor ---------------------------------------------------------------------------------

def _child_setup() -> None:
    """In a child of the supervisor, before exec: lower priority, and die with the supervisor."""
    os.nice(NICENESS)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _write_state(d: Path, state: dict) -> None:
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, d / "state.json")


def _idle_for(d: Path) -> float:
    try:
        return time.time() - (d / "last-used").stat().st_mtime
    except OSError:
        return float("inf")


def _hold_unused(d: Path):
    """The in-use lock taken exclusively (an open file; closing it releases it), or None if a check
    holds the service."""
    fh = open(d / "in-use.lock", "a+")  # noqa: SIM115 - returned open, closed by the caller
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    return fh


def _unused(d: Path) -> bool:
    """No client holds the service (tried without waiting)."""
    held = _hold_unused(d)
    if held is None:
        return False
    held.close()
    return True


class _Supervisor:
    """The supervisor's state (`serve`): its service directory and idle time, the JVM once launched, the
    warm-up checks while they run, the in-use lock once it stops for idleness (held until the end, so no
    check takes the server meanwhile), and whether a SIGTERM or SIGINT asked it to stop."""

    def __init__(self, d: Path, idle: float):
        self.d, self.idle = d, idle
        self.jvm: subprocess.Popen | None = None
        self.warmer: subprocess.Popen | None = None
        self.held = None
        self.stopping = False

    def on_signal(self, _sig, _frame) -> None:
        self.stopping = True

    def wait_listening(self, port: int) -> str | None:
        """Wait until the server accepts connections on `port`; None once it does, else why not."""
        jvm = self.jvm
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.stopping and jvm.poll() is None and not _accepts(port):
            if time.monotonic() > deadline:
                return f"server did not listen on port {port} within {START_TIMEOUT_S:.0f} s"
            time.sleep(0.2)
        if self.stopping or jvm.poll() is not None:
            return f"server exited while starting (exit {jvm.returncode})"
        return None

    def watch(self) -> None:
        """Until told to stop, the JVM dies, or the server was idle for the idle time with no check holding
        it: see the warm-up through (stopped when a check comes: it goes first)."""
        d = self.d
        while not self.stopping and self.jvm.poll() is None:
            if self.warmer is not None and self.warmer.poll() is not None:
                print(f"warm-up done (exit {self.warmer.returncode})", flush=True)
                self.warmer = None
            elif self.warmer is not None and not _unused(d):  # a check wants the driver: it goes first
                self.warmer.kill()
                self.warmer.wait()
                print("warm-up stopped: a check is using the driver", flush=True)
                self.warmer = None
            if _idle_for(d) > self.idle:
                self.held = _hold_unused(d)
                if self.held is not None:  # no check holds it, and none can take it until it is gone
                    (d / "state.json").unlink(missing_ok=True)
                    print(f"idle for {self.idle:.0f} s: stopping", flush=True)
                    break
            time.sleep(1.0)

    def shut_down(self) -> None:
        """Stop the warm-up and the JVM, withdraw this supervisor's state.json, release the lock."""
        if self.warmer is not None and self.warmer.poll() is None:
            self.warmer.kill()
            self.warmer.wait()
        s = _read_state(self.d)
        if s is not None and s.get("pid") == os.getpid():
            (self.d / "state.json").unlink(missing_ok=True)
        _stop_jvm(self.jvm)
        if self.held is not None:
            self.held.close()  # releases the lock


def serve(d: Path, warm_up: bool = False) -> int:
    """The supervisor's main loop (runs detached, in its own session)."""
    idle = idle_seconds()
    sup = _Supervisor(d, idle)
    signal.signal(signal.SIGTERM, sup.on_signal)
    signal.signal(signal.SIGINT, sup.on_signal)
    port = _free_port()
    cmd = command(port, d)
    state = {"pid": os.getpid(), "port": port, "url": f"sc://127.0.0.1:{port}", "key": expected_key(d),
             "idle_s": idle, "ready": False}
    with open(d / "server.log", "ab") as log:
        sup.jvm = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(d),
                                   preexec_fn=_child_setup)
    jvm = sup.jvm
    try:
        state.update(jvm_pid=jvm.pid, pid_start=start_time(os.getpid()), jvm_start=start_time(jvm.pid))
        _write_state(d, state)
        failed = sup.wait_listening(port)
        if failed is not None:
            print(failed, flush=True)
            return 1
        state.update(ready=True, started=time.time())
        _write_state(d, state)
        _touch(d)
        print(f"serving {state['url']} (JVM pid {jvm.pid}, idle stop after {idle:.0f} s)", flush=True)
        sup.warmer = _warm_up(d, state["url"]) if warm_up else None
        sup.watch()
        return 0
    finally:
        sup.shut_down()


_WARM_UP = r"""
import sys
from pathlib import Path
from checkers import synthetic
from checkers.check import CheckOptions, check_run

work, url, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
if not (work / "columnar" / "manifest.json").is_file():  # written last: a cut-off generation is redone
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    synthetic.generate(work, sends=20000, partitions=2, k=1, seed=3)
for _ in range(n):
    check_run(work, CheckOptions(spark_master=url, write=False))
"""


def _warm_up(d: Path, url: str) -> subprocess.Popen | None:
    """Start the warm-up checks (a child process, a plain client of the server); None if switched off."""
    try:
        n = int(os.environ.get(ENV_WARMUP, DEFAULT_WARMUP_CHECKS))
    except ValueError:
        n = DEFAULT_WARMUP_CHECKS
    if n <= 0:
        return None
    with open(d / "supervisor.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-c", _WARM_UP, str(d / "warm-up-run"), url, str(n)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(d),
                                env=_child_env(), preexec_fn=_child_setup)


def _stop_jvm(jvm: subprocess.Popen) -> None:
    if jvm.poll() is not None:
        return
    jvm.terminate()
    try:
        jvm.wait(timeout=15)
    except subprocess.TimeoutExpired:
        jvm.kill()
        jvm.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checkers.spark_service")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve", help="run the supervisor in the foreground (ensure() starts it detached)")
    p.add_argument("--dir", type=Path, default=None)
    p.add_argument("--warm-up", action=argparse.BooleanOptionalAction, default=False,
                   help="warm the server up with a few small checks once it is up")
    args = parser.parse_args(argv)
    d = args.dir or directory()
    d.mkdir(parents=True, exist_ok=True)
    return serve(d, args.warm_up)


if __name__ == "__main__":
    sys.exit(main())
