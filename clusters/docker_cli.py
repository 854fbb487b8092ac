"""`highwater images`: build, list or remove the Docker node images (clusters/docker_image.py).

    highwater images                      # list highwater images
    highwater images --build              # build what is missing (base via debootstrap, then code layer)
    highwater images --build --rebuild-base
    highwater images --build --base-image debian-with-python:12   # use an existing base image instead
    highwater images --remove [--all]     # remove code images (and the base images with --all)
"""
from __future__ import annotations

import time

import click

from clusters.base import ClusterError


@click.command("images", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--build", is_flag=True, help="Build the base image (if missing) and the node image for this code.")
@click.option("--rebuild-base", is_flag=True, help="With --build: debootstrap the base again even if cached.")
@click.option("--base-image", default=None, metavar="NAME",
              help="Use this existing image (python3, python3-msgpack, sshd, iptables) as the base.")
@click.option("--remove", "remove", is_flag=True, help="Remove the node (code) images.")
@click.option("--all", "remove_all", is_flag=True, help="With --remove: remove the base images too.")
def images(build: bool, rebuild_base: bool, base_image: str | None, remove: bool, remove_all: bool) -> int:
    """Build, list or remove highwater's Docker node images."""
    from clusters import docker_image
    from clusters.docker_hosts import engine
    if build and remove:
        click.echo("highwater images: --build and --remove exclude each other", err=True)
        return 254
    try:
        client = engine()
        if build:
            started = time.monotonic()
            if rebuild_base and not base_image:
                docker_image.ensure_base_image(client, rebuild=True, log=click.echo)
            tag = docker_image.ensure_node_image(client, base_image=base_image, log=click.echo)
            click.echo(f"{tag} ready in {time.monotonic() - started:.1f}s")
        elif remove:
            removed = docker_image.remove_images(client, include_base=remove_all)
            for tag in removed:
                click.echo(f"removed {tag}")
            if not removed:
                click.echo("no highwater images to remove")
            return 0
        rows = docker_image.list_images(client)
        if not rows:
            click.echo("no highwater images (build them with `highwater images --build`)")
        for row in rows:
            click.echo(f"{row['kind']:<10} {', '.join(row['tags']) or '<untagged>':<40} {row['id']:<20} "
                       f"{row['size_mb']:>7.1f} MB  {row['created']}")
        return 0
    except ClusterError as exc:
        click.echo(f"highwater images: {exc}", err=True)
        return 255
