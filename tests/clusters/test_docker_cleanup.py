"""`highwater cleanup` and the Docker backend: containers and networks of a dead run (its harness process
was SIGKILLed) are removed by label; those of a live run (this process) are left alone; `highwater images`
lists the labelled images."""
from __future__ import annotations

import secrets
import subprocess

import pytest

from clusters.docker_hosts import LABEL_RUN, DockerHosts, boot_id, engine
from clusters import docker_leftovers
from clusters.docker_leftovers import owner_alive

pytestmark = pytest.mark.docker


def _ids(kind: str, run_id: str) -> list[str]:
    r = subprocess.run(["docker", kind, "ls", *(["-a"] if kind == "container" else []), "-q",
                        "--filter", f"label={LABEL_RUN}={run_id}"], capture_output=True, text=True, check=True)
    return r.stdout.split()


def test_owner_alive_rules():
    import os
    from clusters.run_registry import proc_start_time
    me = f"{boot_id()}:{os.getpid()}:{proc_start_time(os.getpid())}"
    assert owner_alive(me) is True
    assert owner_alive(f"{boot_id()}:{os.getpid()}:{proc_start_time(os.getpid()) + 1}") is False  # reused pid
    assert owner_alive(f"another-boot:{os.getpid()}:{proc_start_time(os.getpid())}") is False
    assert owner_alive("garbage") is True          # cannot attribute: never removed
    assert owner_alive(None) is True


CREATOR = """
import sys, time
sys.path.insert(0, {repo!r})
from clusters.docker_hosts import DockerHosts, engine
from clusters.docker_image import ensure_node_image
client = engine()
hosts = DockerHosts(client, {run_id!r}, ["c0", "n1"], ensure_node_image(client), __import__("pathlib").Path({ssh!r}))
hosts.create()
print("CREATED", flush=True)
time.sleep(600)
"""


def test_cleanup_removes_a_killed_harness_containers_and_network_only(tmp_path, capsys):
    """A real harness-like process creates a run's containers and is SIGKILLed; `highwater cleanup`
    lists them, docker_leftovers removes them, and a live run's (ours) are left alone."""
    import os
    import signal
    import sys
    from pathlib import Path
    from clusters.docker_image import ensure_node_image
    from harness.cli import main
    client = engine()
    image = ensure_node_image(client)
    repo = str(Path(__file__).resolve().parents[2])
    dead_id = f"dead-{tmp_path.name}-{secrets.token_hex(3)}"
    child = subprocess.Popen([sys.executable, "-c", CREATOR.format(repo=repo, run_id=dead_id,
                                                                   ssh=str(tmp_path / "dead"))],
                             stdout=subprocess.PIPE, text=True)
    live = DockerHosts(client, f"live-{tmp_path.name}-{secrets.token_hex(3)}", ["c0"], image, tmp_path / "live")
    dead = DockerHosts(client, dead_id, ["c0", "n1"], image, tmp_path / "unused")   # names only
    try:
        assert child.stdout.readline().strip() == "CREATED"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        live.create()
        assert len(_ids("container", dead_id)) == 2 and len(_ids("network", dead_id)) == 1
        # the command (dry run: a real cleanup would also touch host firewall chains of other tests)
        assert main(["cleanup", "--dry-run", "--registry", str(tmp_path / "registry")]) == 0
        out = capsys.readouterr().out.splitlines()
        assert f"would remove container {dead.container_name('c0')} (run {dead_id})" in out
        assert f"would remove container {dead.container_name('n1')} (run {dead_id})" in out
        assert f"would remove network {dead.network_name} (run {dead_id})" in out
        assert not any(live.run_id in line for line in out)
        assert len(_ids("container", dead_id)) == 2
        removed, failed = docker_leftovers.clean(client)
        assert failed == []
        assert f"removed container {dead.container_name('n1')} (run {dead_id})" in removed
        assert _ids("container", dead_id) == [] and _ids("network", dead_id) == []
        assert len(_ids("container", live.run_id)) == 1 and len(_ids("network", live.run_id)) == 1
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
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
