"""Test-only stand-in for a node process: a real TCP echo server speaking the broker's process contract.

    python echo_server.py <role> --config FILE

Reads `host` and `port` from the JSON config, listens, prints `READY host:port`, echoes every line it
receives, exits 0 on SIGTERM. Used to test clusters/local.py's process control on real processes
without depending on the broker.
"""
import json
import signal
import socket
import sys
import threading


def command(node: str, role: str, config) -> list[str]:
    """A clusters.local CommandFactory that runs this file instead of `python -m broker`."""
    return [sys.executable, __file__, role, "--config", str(config)]


def serve(conn: socket.socket) -> None:
    with conn:
        while True:
            data = conn.recv(4096)
            if not data:
                return
            conn.sendall(data)


def main() -> int:
    config = json.loads(open(sys.argv[sys.argv.index("--config") + 1]).read())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((config["host"], config["port"]))
    srv.listen(64)
    print(f"READY {config['host']}:{config['port']}", flush=True)
    while True:
        conn, _ = srv.accept()
        # the serving thread starts with SIGTERM blocked (a new thread inherits the mask), so the kernel
        # delivers SIGTERM to the main thread: a handler flagged from another thread would wait until
        # accept() returned, and a stop request could go unanswered for as long as no client connects
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


if __name__ == "__main__":
    sys.exit(main())
