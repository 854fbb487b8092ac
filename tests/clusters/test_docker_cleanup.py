"""`highwater cleanup` and the Docker backend: containers and networks of a dead run are removed by label;
those of a live run (this process) are left alone; `highwater images` lists the labelled images."""
from __future__ import annotations

import subprocess

import pytest

from clusters.docker_hosts import LABEL_OWNER, LABEL_RUN, DockerHosts, boot_id, engine
from clusters import docker_leftovers
from clusters.docker_leftovers import owner_alive

pytestmark = pytest.mark.docker


def _ids(kind: str, run_id: str) -> list[str]:
    r = subprocess.run(["docker", kind, "ls", *(["-a"] if kind == "container" else []), "-q",
                        "--filter", f"label={LABEL_RUN}={run_id}"], capture_output=True, text=True, check=True)
    return r.stdout.split()


def test_owner_alive_rules():
    import os
    from clusters.registry import proc_start_time
    me = f"{boot_id()}:{os.getpid()}:{proc_start_time(os.getpid())}"
    assert owner_alive(me) is True
    assert owner_alive(f"{boot_id()}:{os.getpid()}:{proc_start_time(os.getpid()) + 1}") is False  # reused pid
    assert owner_alive(f"another-boot:{os.getpid()}:{proc_start_time(os.getpid())}") is False
    assert owner_alive("garbage") is True          # cannot attribute: never removed
    assert owner_alive(None) is True


def test_cleanup_removes_dead_runs_containers_and_network_only(tmp_path, capsys):
    from clusters.docker_image import ensure_node_image
    from harness.cli import main
    client = engine()
    image = ensure_node_image(client)
    dead = DockerHosts(client, f"dead-{tmp_path.name}", ["c0", "n1"], image, tmp_path / "dead")
    dead.labels[LABEL_OWNER] = f"{boot_id()}:999999999:1"          # no such process: the harness died
    live = DockerHosts(client, f"live-{tmp_path.name}", ["c0"], image, tmp_path / "live")
    try:
        dead.create()
        live.create()
        assert len(_ids("container", dead.run_id)) == 2 and len(_ids("network", dead.run_id)) == 1
        # the command (dry run: a real cleanup would also touch host firewall chains of other tests)
        assert main(["cleanup", "--dry-run", "--registry", str(tmp_path / "registry")]) == 0
        out = capsys.readouterr().out.splitlines()
        assert f"would remove container {dead.container_name('c0')} (run {dead.run_id})" in out
        assert f"would remove container {dead.container_name('n1')} (run {dead.run_id})" in out
        assert f"would remove network {dead.network_name} (run {dead.run_id})" in out
        assert not any(live.run_id in line for line in out)
        assert len(_ids("container", dead.run_id)) == 2
        removed, failed = docker_leftovers.clean(client)
        assert failed == []
        assert f"removed container {dead.container_name('n1')} (run {dead.run_id})" in removed
        assert _ids("container", dead.run_id) == [] and _ids("network", dead.run_id) == []
        assert len(_ids("container", live.run_id)) == 1 and len(_ids("network", live.run_id)) == 1
    finally:
        errors: list[str] = []
        dead.remove(errors)
        live.remove(errors)
        assert errors == []
    assert _ids("container", live.run_id) == [] and _ids("network", live.run_id) == []


def test_images_command_lists_base_and_node_images(capsys):
    from clusters.docker_image import BASE_VERSION, base_tag, ensure_node_image
    from harness.cli import main
    tag = ensure_node_image(engine())
    assert main(["images"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["node-base", base_tag(BASE_VERSION)] for line in out)
    assert any(line.split()[:2] == ["node", tag] for line in out)
