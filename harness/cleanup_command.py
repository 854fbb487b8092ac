"""`highwater cleanup`: remove what a killed harness left behind (processes, firewall rules, registry entries,
Docker containers and networks of dead runs).

Only runs whose owning harness process is gone are touched; a run in progress is left alone. The logic
lives in clusters/leftovers.py; this module is the command line around it.
"""
from __future__ import annotations

import click

from clusters.leftovers import clean
from clusters.registry import Registry


@click.command("cleanup")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("--registry", "registry_dir", type=click.Path(file_okay=False), default=None,
              help="Run registry directory (default /run/highwater as root, else /tmp/highwater-<uid>).")
def cleanup(dry_run: bool, registry_dir: str | None) -> int:
    """Stop leftover node processes of dead runs, remove highwater firewall chains/tables, stale
    registry entries, and Docker containers/networks labelled with a dead run's id."""
    registry = Registry(registry_dir) if registry_dir else Registry()
    report = clean(registry, dry_run=dry_run)
    # Docker backend leftovers (containers/networks/images labelled with a dead run's id)
    from clusters.docker_leftovers import clean_if_engine
    docker_removed, docker_failed = clean_if_engine(dry_run=dry_run)
    report.removed += docker_removed
    report.failed += docker_failed
    for line in report.removed:
        click.echo(line)
    for line in report.failed:
        click.echo(f"highwater cleanup: could not remove {line}", err=True)
    if not report.removed and not report.failed:
        click.echo("nothing to clean up")
    return 255 if report.failed else 0
