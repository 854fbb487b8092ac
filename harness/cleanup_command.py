"""`highwater cleanup`: remove what a killed harness left behind (processes, firewall rules, registry
entries of the local backend; containers, networks and run images of the Docker backend).

Only runs whose owning harness process is gone are touched; a run in progress is left alone. The logic
lives in clusters/leftovers.py (local) and clusters/docker_leftovers.py (Docker); this module is the
command line around them.
"""
from __future__ import annotations

import click

from clusters.leftovers import clean
from clusters.run_registry import Registry


def _docker_leftovers(dry_run: bool) -> tuple[list[str], list[str]]:
    try:
        from clusters.docker_leftovers import clean_if_engine
    except ImportError:  # the Docker backend (or its SDK) is not installed: nothing of it to remove
        return [], []
    return clean_if_engine(dry_run=dry_run)


@click.command("cleanup")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("--registry", "registry_dir", type=click.Path(file_okay=False), default=None,
              help="Run registry directory (default /run/highwater as root, else /tmp/highwater-<uid>).")
@click.option("--no-docker", is_flag=True, help="Skip Docker containers, networks and images.")
@click.option("--keep-spark", is_flag=True, help="Leave the shared Spark driver running.")
def cleanup(dry_run: bool, registry_dir: str | None, no_docker: bool, keep_spark: bool) -> int:
    """Stop leftover node processes of dead runs, remove highwater firewall chains/tables, stale registry
    entries, (unless --no-docker) Docker objects of dead runs and (unless --keep-spark) the shared Spark
    driver when no check is using it."""
    registry = Registry(registry_dir) if registry_dir else Registry()
    report = clean(registry, dry_run=dry_run)
    removed, failed = list(report.removed), list(report.failed)
    if not no_docker:
        d_removed, d_failed = _docker_leftovers(dry_run)
        removed += d_removed
        failed += d_failed
    if not keep_spark:
        from checkers import spark_service

        removed += spark_service.clean(dry_run=dry_run)
    for line in removed:
        click.echo(line)
    for line in failed:
        click.echo(f"highwater cleanup: could not remove {line}", err=True)
    if not removed and not failed:
        click.echo("nothing to clean up")
    return 255 if failed else 0
