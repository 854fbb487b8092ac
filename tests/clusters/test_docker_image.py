"""clusters/docker_image.py: mirror discovery, code hashing, and the real images (labels, contents)."""
from __future__ import annotations

import subprocess

import pytest

from clusters import docker_image
from clusters.docker_image import (BASE_VERSION, FALLBACK_MIRROR, KIND_LABEL, base_tag, code_files, code_hash,
                                   debian_mirror)

SOURCES = """\
Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
# a comment: line
URIs: http://mirror.example/debian http://second.example/debian
Suites: bookworm bookworm-updates
Components: main
"""


def test_mirror_is_read_from_the_bookworm_stanza(tmp_path):
    f = tmp_path / "debian.sources"
    f.write_text(SOURCES)
    assert debian_mirror(f) == "http://mirror.example/debian"


def test_mirror_falls_back_when_absent_or_unusable(tmp_path):
    assert debian_mirror(tmp_path / "missing.sources") == FALLBACK_MIRROR
    f = tmp_path / "other.sources"
    f.write_text("Types: deb\nURIs: http://x/ubuntu\nSuites: noble\n")
    assert debian_mirror(f) == FALLBACK_MIRROR


def test_code_hash_follows_the_broker_sources(tmp_path):
    (tmp_path / "broker" / "sub").mkdir(parents=True)
    (tmp_path / "broker" / "__init__.py").write_text("")
    (tmp_path / "broker" / "sub" / "m.py").write_text("X = 1\n")
    (tmp_path / "broker" / "sub" / "notes.md").write_text("not code")
    assert [rel for rel, _ in code_files(tmp_path)] == ["broker/__init__.py", "broker/sub/m.py"]
    before = code_hash(tmp_path)
    assert code_hash(tmp_path) == before
    (tmp_path / "broker" / "sub" / "notes.md").write_text("changed, still not code")
    assert code_hash(tmp_path) == before
    (tmp_path / "broker" / "sub" / "m.py").write_text("X = 2\n")
    assert code_hash(tmp_path) != before


def test_cache_dir_override(monkeypatch, tmp_path):
    monkeypatch.setenv("HIGHWATER_CACHE_DIR", str(tmp_path))
    assert docker_image.cache_dir() == tmp_path


@pytest.mark.docker
def test_node_image_has_labels_code_and_packages():
    from clusters.docker_hosts import engine
    client = engine()
    tag = docker_image.ensure_node_image(client)
    assert docker_image.ensure_node_image(client) == tag          # unchanged code: same image, no rebuild
    base = client.images.get(base_tag(BASE_VERSION))
    assert base.labels[KIND_LABEL] == "node-base" and base.labels["highwater.base_version"] == BASE_VERSION
    node = client.images.get(tag)
    assert node.labels[KIND_LABEL] == "node"
    assert tag.split(":")[1] == node.labels["highwater.code"][:16]
    r = subprocess.run(["docker", "run", "--rm", "--network", "none", tag, "sh", "-c",
                        "python3 -c 'import broker, msgpack; print(broker.__file__)' && "
                        "for c in sshd iptables ps ip; do command -v $c || exit 9; done; ls /etc/ssh/ssh_host_* 2>/dev/null | wc -l"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[0] == "/opt/highwater/broker/__init__.py"
    assert [p.rsplit("/", 1)[1] for p in lines[1:5]] == ["sshd", "iptables", "ps", "ip"]
    assert lines[5] == "0"                      # no host keys baked in: each container gets its own
