"""`python -m broker {controller,node,dump}`: the broker's process entry points.

    python -m broker controller --config controller.json   the controller (broker/controller)
    python -m broker node --config broker.json             a broker node (broker/server)
    python -m broker dump DATA_DIR --out DIR --node NAME   offline replica dump (broker/storage/dump.py)

Each server process prints `READY host:port` once it accepts connections and exits 0 on SIGTERM; a bad
config file is one line on stderr naming the file and key, and exit status 2.
"""
from __future__ import annotations

import sys

USAGE = """usage: python -m broker controller --config FILE
       python -m broker node --config FILE
       python -m broker dump DATA_DIR --out DIR --node NAME"""

EXIT_BAD_CONFIG = 2


def _config_arg(command: str, args: list[str]) -> str:
    if len(args) == 2 and args[0] == "--config":
        return args[1]
    if len(args) == 1 and args[0].startswith("--config="):
        return args[0].split("=", 1)[1]
    print(f"python -m broker {command}: expected --config FILE\n{USAGE}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_CONFIG)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 0 if argv else EXIT_BAD_CONFIG
    command, rest = argv[0], argv[1:]
    if command == "node":
        from broker.server.app import main as node_main

        return node_main(_config_arg(command, rest))
    if command == "controller":
        from broker.controller import main as controller_main

        return controller_main(["--config", _config_arg(command, rest)])
    if command == "dump":
        from broker.storage.dump import main as dump_main

        return dump_main(rest)
    print(f"python -m broker: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return EXIT_BAD_CONFIG


if __name__ == "__main__":
    sys.exit(main())
