"""`highwater report RUN_DIR` and `highwater serve` (registered lazily in harness/cli.py).

`report` regenerates RUN_DIR/report.html and, when the run sits in a results directory
(<results>/<test>/<timestamp>), that directory's index.html too (said on stderr; the report's path is the
last line on stdout). `serve` refreshes the index and serves
the results directory over HTTP (127.0.0.1:8000 unless --host / --port say otherwise; port 0 picks one)
until SIGINT (Ctrl-C) or SIGTERM.
"""
from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import click

from rundir.formats import FormatError


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--index/--no-index", default=True, show_default=True,
              help="Also refresh index.html of the results directory the run sits in.")
def report(run_dir: Path, index: bool) -> None:
    """Write RUN_DIR/report.html (and refresh the results index)."""
    from reports.index import write_index
    from reports.render import results_root_of, write_report

    if not run_dir.is_dir():
        raise click.ClickException(f"{run_dir}: no such run directory")
    try:
        out = write_report(run_dir)
    except FormatError as exc:
        raise click.ClickException(str(exc)) from None
    root = results_root_of(run_dir) if index else None
    if root is not None:
        click.echo(f"highwater report: index {write_index(root)}", err=True)
    click.echo(str(out))                 # the report's path last, as every command ends


@click.command("serve")
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="The results directory to serve.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to bind (0: any free port).")
def serve(results_dir: Path, host: str, port: int) -> None:
    """Serve the results directory: index, reports, directory listings and downloads."""
    from reports.index import write_index
    from reports.server import make_server

    if not results_dir.is_dir():
        raise click.ClickException(f"{results_dir}: no such results directory")
    write_index(results_dir)
    try:
        server = make_server(results_dir, host, port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound_host, bound_port = server.server_address[:2]
    click.echo(f"Serving {results_dir.resolve()} at http://{bound_host}:{bound_port}/ (Ctrl-C to stop)")
    sys.stdout.flush()
    previous = _stop_on_signals()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_on_signals() -> dict:
    """SIGINT and SIGTERM end `serve` cleanly (exit 0). Python's own Ctrl-C handling is not enough: a
    process started in the background of a non-interactive shell (`highwater serve &` in a script, a CI
    job) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler at all."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(signum, _frame):
        raise KeyboardInterrupt

    return {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
