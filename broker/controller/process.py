"""The controller process: `run(config_path) -> exit status`, `main(argv)` for `--config FILE`.

Prints `READY host:port` on stdout once it accepts connections; exits 0 after SIGTERM/SIGINT (the state is
saved on every change, so nothing is left to flush but the event log), 2 on a bad config or an unreadable
state file (one line on stderr naming the file and key), 1 when the state can no longer be saved.
"""
from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from broker.controller.config import ConfigError, load_controller_config
from broker.controller.state import StateError
from broker.controller.store import STATE_FILE

EXIT_OK = 0
EXIT_FATAL = 1
EXIT_BAD_CONFIG = 2
NODE_NAME = "c0"

USAGE = "usage: python -m broker controller --config FILE"


def run(config_path: str) -> int:
    try:
        config = load_controller_config(config_path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_BAD_CONFIG
    from broker.eventlog import EventLog

    try:
        Path(config.data_dir).mkdir(parents=True, exist_ok=True)
        probe = Path(config.data_dir) / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        print(f"{config_path}: key 'data_dir': cannot write {config.data_dir}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_BAD_CONFIG
    try:
        log = EventLog(config.log_file, NODE_NAME)
    except OSError as exc:
        print(f"{config_path}: key 'log_file': cannot open {config.log_file}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_BAD_CONFIG
    return asyncio.run(_serve(config, log))


async def _serve(config, log) -> int:
    from broker.controller.core import ControllerCore
    from broker.controller.server import ControllerServer

    try:
        try:
            core = ControllerCore(config, log)
        except (ConfigError, StateError) as exc:
            where = "" if isinstance(exc, ConfigError) else f"{config.data_dir}/{STATE_FILE}: "
            print(f"{where}{exc}", file=sys.stderr)
            return EXIT_BAD_CONFIG
        server = ControllerServer(core)
        try:
            host, port = await server.start()
        except OSError as exc:
            print(f"controller: cannot listen on {config.host}:{config.port}: {exc.strerror or exc}",
                  file=sys.stderr)
            return EXIT_FATAL
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.stopped.set)
        print(f"READY {host}:{port}", flush=True)
        log.emit("listening", host=host, port=port)
        await server.stopped.wait()
        await server.stop()
        if server.fatal is not None:
            print(f"controller: fatal: {server.fatal}", file=sys.stderr)
            return EXIT_FATAL
        log.emit("stop", version=core.state.version)
        return EXIT_OK
    finally:
        log.sync()
        log.close()


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--config":
        return run(args[1])
    if len(args) == 1 and args[0].startswith("--config="):
        return run(args[0].split("=", 1)[1])
    print(f"python -m broker controller: expected --config FILE\n{USAGE}", file=sys.stderr)
    return EXIT_BAD_CONFIG
