"""Run a Python module with every outgoing loopback TCP connection bound to one source address.

    python -m clusters.source_bind 127.71.0.3 broker node --config broker.json

Partitions of the local backend are kernel drops matched on (source, destination) addresses. A process
that connects to 127.71.0.2 without binding first gets the source address 127.0.0.1 (the loopback
route's preferred source), so nothing would tell node n2's packets from anyone else's. This launcher
makes each node's connections leave from the node's own address, as they would from a separate
machine: before `connect()` of an unbound IPv4 socket to a 127.0.0.0/8 destination, it binds the socket
to (source, 0). Sockets the program binds itself are left alone. Then it runs the module as `__main__`
with the remaining arguments, in this same process (same pid, same signals).
"""
from __future__ import annotations

import runpy
import socket
import sys

_original_connect = socket.socket.connect
_original_connect_ex = socket.socket.connect_ex


def install(source: str) -> None:
    def bind_first(sock: socket.socket, address) -> None:
        if sock.family != socket.AF_INET or not isinstance(address, tuple) or not str(address[0]).startswith("127."):
            return
        try:
            if sock.getsockname()[1] == 0:
                sock.bind((source, 0))
        except OSError:
            pass  # already bound or connected: leave it to connect() to report

    def connect(self, address):
        bind_first(self, address)
        return _original_connect(self, address)

    def connect_ex(self, address):
        bind_first(self, address)
        return _original_connect_ex(self, address)

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        print("usage: python -m clusters.source_bind SOURCE_ADDRESS MODULE [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    source, module, rest = argv[0], argv[1], argv[2:]
    install(source)
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
