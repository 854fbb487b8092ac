"""`highwater spark status|start|stop`: the shared local Spark driver (spark_service.py) by hand.

Checks start it themselves when they need it and it stops itself when idle; these commands are for
warming it ahead of a batch of work, seeing where it is and what it logs, and stopping it now.
"""
from __future__ import annotations

import time

import click

from rundir.exits import EXIT_INTERNAL
from checkers import spark_service


def _describe(svc: spark_service.Service) -> str:
    up = time.time() - svc.started
    return (f"running at {svc.url} (supervisor pid {svc.pid}, JVM pid {svc.jvm_pid}, up {up:.0f} s, "
            f"stops after {spark_service.idle_seconds():.0f} s idle); log {svc.log}")


@click.group("spark")
def spark() -> None:
    """The shared local Spark driver that checks use (started on demand, stopped when idle)."""


@spark.command("status")
def status() -> int:
    """Say whether the shared driver is running, where, and where it logs. Exit 0 running, 3 not."""
    svc = spark_service.status()
    if svc is None:
        click.echo(f"not running (directory {spark_service.directory()})")
        return 3
    click.echo(_describe(svc))
    return 0


@spark.command("start")
def start() -> int:
    """Start the shared driver now (a no-op if it runs) and wait until it accepts checks; it then warms
    itself up with a few small checks in the background."""
    try:
        svc = spark_service.ensure(warm_up=True)
    except spark_service.SparkSetupError as exc:
        click.echo(f"highwater spark start: {exc}", err=True)
        return EXIT_INTERNAL
    click.echo(_describe(svc))
    return 0


@spark.command("stop")
def stop() -> None:
    """Stop the shared driver now, even while a check uses it (that check then fails)."""
    click.echo("stopped" if spark_service.stop() else "not running")
