"""The Docker node image: a Debian base built locally with debootstrap, plus a thin layer with our code.

No container registry is needed. The base image `highwater/node-base:<BASE_VERSION>` is a debootstrap
(minbase) root filesystem with python3, python3-msgpack, openssh-server, iptables, procps and iproute2,
cached as a tarball under the cache directory (`/var/cache/highwater` as root, else
`~/.cache/highwater`; `HIGHWATER_CACHE_DIR` overrides) and imported with the Docker SDK. It is reused
whenever the tag exists; bump BASE_VERSION whenever BASE_PACKAGES or the rootfs tweaks change. Where a
registry is reachable a user may name any Debian-like image with those packages instead (`base_image`).

The node image `highwater/node:<code hash>` adds the `broker/` package (all `python -m broker` needs on
a node) under /opt/highwater, built with the SDK from an in-memory tar context; the tag is a hash of the
code and the base image id, so unchanged code reuses it. Every image carries the label
`highwater.kind` (`node-base` or `node`).

    from clusters.docker_image import ensure_node_image
    tag = ensure_node_image(docker.from_env())          # builds what is missing, returns the node tag

A Docker cluster is told how to build it with an `ImageBuild` (its base image, where progress goes).
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from clusters.base import ClusterError
from clusters.run_registry import machine_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
BASE_REPO = "highwater/node-base"
NODE_REPO = "highwater/node"
BASE_VERSION = "2"
SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-msgpack", "openssh-server", "iptables", "procps", "iproute2")
FALLBACK_MIRROR = "http://deb.debian.org/debian"
CODE_DIR = "/opt/highwater"          # where the node image holds broker/
KIND_LABEL = "highwater.kind"
SOURCES_FILE = Path("/etc/apt/sources.list.d/debian.sources")

# sshd: key-only root login, no DNS lookups (fast logins on a network without DNS)
SSHD_CONFIG = """\
# highwater node: key-only root login
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PrintMotd no
MaxStartups 100:30:200
MaxSessions 100
"""


def base_tag(version: str = BASE_VERSION) -> str:
    return f"{BASE_REPO}:{version}"


def cache_dir() -> Path:
    return machine_dir("HIGHWATER_CACHE_DIR", "/var/cache/highwater", Path.home() / ".cache" / "highwater")


def debian_mirror(sources: Path = SOURCES_FILE) -> str:
    """The first `URIs:` of a deb822 stanza whose Suites name the base suite, else the fallback."""
    try:
        text = sources.read_text()
    except OSError:
        return FALLBACK_MIRROR
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if ":" in line and not line.lstrip().startswith("#"):
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if SUITE in fields.get("suites", "").split() and fields.get("uris"):
            return fields["uris"].split()[0]
    return FALLBACK_MIRROR


def _tidy_rootfs(root: Path) -> None:
    """Make the debootstrap tree a node root: sshd config, no baked host keys, no caches or docs."""
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()                      # each container gets its own host keys at creation
    (root / "etc/ssh/sshd_config.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/ssh/sshd_config.d/highwater.conf").write_text(SSHD_CONFIG)
    (root / "run/sshd").mkdir(parents=True, exist_ok=True)
    (root / "root/.ssh").mkdir(mode=0o700, parents=True, exist_ok=True)
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                "usr/share/locale", "usr/share/info"):
        target = root / sub
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                elif child.name != "lock":
                    child.unlink(missing_ok=True)


def build_rootfs_tarball(dest: Path, *, mirror: str | None = None, log=print) -> Path:
    """debootstrap a minbase root filesystem and pack it as `dest` (an uncompressed tar)."""
    if shutil.which("debootstrap") is None:
        raise ClusterError("building the node base image needs debootstrap (Debian package 'debootstrap'), "
                           "or pass --base-image NAME to use an existing image")
    if os.geteuid() != 0:
        raise ClusterError(f"building the node base image with debootstrap needs root (uid {os.geteuid()}); "
                           "or pass --base-image NAME to use an existing image")
    mirror = mirror or debian_mirror()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rootfs-", dir=dest.parent) as tmp:
        root = Path(tmp) / "root"
        argv = ["debootstrap", "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES), SUITE,
                str(root), mirror]
        log(f"debootstrap {SUITE} from {mirror} (packages {', '.join(BASE_PACKAGES)})")
        r = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-3:]
            raise ClusterError(f"debootstrap failed (exit {r.returncode}): {' | '.join(tail)}")
        _tidy_rootfs(root)
        part = dest.with_suffix(".part")
        r = subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(part), "."],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise ClusterError(f"packing the root filesystem failed: {r.stderr.strip()}")
        os.replace(part, dest)
    return dest


def image_exists(client, tag: str) -> bool:
    import docker.errors
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_base_image(client, *, version: str = BASE_VERSION, rebuild: bool = False, log=print) -> str:
    """The base image tag, importing (and if needed debootstrapping) it when missing. Concurrent
    callers on one machine wait for each other (a lock file in the cache directory) instead of
    building twice."""
    tag = base_tag(version)
    if image_exists(client, tag) and not rebuild:
        return tag
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"node-base-{version}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if image_exists(client, tag) and not rebuild:
            return tag                      # another process built it while we waited
        return _import_base(client, tag, version, rebuild, log)


def _import_base(client, tag: str, version: str, rebuild: bool, log) -> str:
    tarball = cache_dir() / f"node-base-{SUITE}-{version}.tar"
    if rebuild or not tarball.exists():
        started = time.monotonic()
        build_rootfs_tarball(tarball, log=log)
        log(f"root filesystem {tarball} built in {time.monotonic() - started:.1f}s")
    repo, tagname = tag.split(":")
    changes = [f"LABEL {KIND_LABEL}=node-base highwater.base_version={version}",
               'ENV LANG=C.UTF-8', 'CMD ["/usr/sbin/sshd", "-D", "-e"]']
    client.api.import_image_from_file(str(tarball), repository=repo, tag=tagname, changes=changes)
    if not image_exists(client, tag):
        raise ClusterError(f"importing {tarball} as {tag} did not produce the image")
    log(f"imported {tag}")
    return tag


def code_files(root: Path = REPO_ROOT) -> list[tuple[str, Path]]:
    """(path in the image relative to CODE_DIR, local file) for every file the node needs."""
    out = []
    for path in sorted((root / "broker").rglob("*.py")):
        if "__pycache__" not in path.parts:
            out.append((str(path.relative_to(root)), path))
    return out


def code_hash(root: Path = REPO_ROOT) -> str:
    h = hashlib.sha256()
    for rel, path in code_files(root):
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _context_tar(base: str, digest: str) -> io.BytesIO:
    dockerfile = (f"FROM {base}\n"
                  f"COPY broker {CODE_DIR}/broker\n"
                  f"ENV PYTHONPATH={CODE_DIR} PYTHONUNBUFFERED=1\n"
                  f"LABEL {KIND_LABEL}=node highwater.code={digest}\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
        for rel, path in code_files():
            info = tarfile.TarInfo(rel)
            content = path.read_bytes()
            info.size, info.mtime, info.mode = len(content), 0, 0o644
            tar.addfile(info, io.BytesIO(content))
    buf.seek(0)
    return buf


def node_tag(client, base: str) -> str:
    base_id = client.images.get(base).id
    digest = hashlib.sha256((code_hash() + base_id).encode()).hexdigest()
    return f"{NODE_REPO}:{digest[:16]}"


@dataclass(frozen=True)
class ImageBuild:
    """How a Docker cluster gets its node image when it is given none (clusters/docker.py): built on
    `base_image` (an existing image, pulled if missing) or on the debootstrap base when None; `log` is
    told the build's progress, a line a call (None: nothing is said)."""
    base_image: str | None = None
    log: Callable[[str], None] | None = None


def ensure_node_image(client, *, base_image: str | None = None, log=print) -> str:
    """The node image tag for the current code, building the base and the code layer when missing.
    `base_image` names an existing image to use instead of the debootstrap base."""
    import docker.errors
    if base_image:
        if not image_exists(client, base_image):
            try:
                client.images.pull(base_image)
            except docker.errors.APIError as exc:
                raise ClusterError(f"base image {base_image!r} is not present and could not be pulled: "
                                   f"{exc.explanation or exc}") from None
        base = base_image
    else:
        base = ensure_base_image(client, log=log)
    tag = node_tag(client, base)
    if image_exists(client, tag):
        return tag
    digest = tag.split(":")[1]
    try:
        client.images.build(fileobj=_context_tar(base, digest), custom_context=True, tag=tag, rm=True,
                            forcerm=True, pull=False, labels={KIND_LABEL: "node", "highwater.code": digest})
    except docker.errors.BuildError as exc:
        raise ClusterError(f"building {tag} from {base} failed: {exc.msg}") from None
    log(f"built {tag} on {base}")
    return tag


def list_images(client) -> list[dict]:
    """Every highwater image: [{"tags": [...], "id": ..., "kind": ..., "size_mb": ..., "created": ...}]."""
    out = []
    for img in client.images.list(filters={"label": KIND_LABEL}):
        out.append({"tags": list(img.tags), "id": img.short_id, "kind": img.labels.get(KIND_LABEL, "?"),
                    "size_mb": round(img.attrs.get("Size", 0) / 1e6, 1), "created": img.attrs.get("Created")})
    return sorted(out, key=lambda i: (i["kind"], i["tags"]))


def remove_images(client, *, include_base: bool = False) -> list[str]:
    """Remove node (code) images, and the base images too when asked; returns the tags removed."""
    import docker.errors
    removed = []
    for kind in (["node", "node-base"] if include_base else ["node"]):
        for img in client.images.list(filters={"label": f"{KIND_LABEL}={kind}"}):
            for tag in img.tags or [img.id]:
                try:
                    client.images.remove(tag, force=False)
                    removed.append(tag)
                except docker.errors.NotFound:
                    pass
    return removed
