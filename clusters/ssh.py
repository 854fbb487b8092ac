"""The SSH backend: the controller and brokers on machines reached over SSH, listed in a nodes file.

    highwater run --cluster ssh --nodes-file nodes.toml [--ssh-accept-unknown-hosts]

Nodes file (TOML):

    known_hosts = "~/.ssh/known_hosts"   # optional: host keys are checked against this file
    workdir = "/var/tmp/highwater"       # optional: remote base directory (code, runs/<run id>/<node>/)
    python = "python3"                   # optional: the remote interpreter

    [defaults]                           # optional: applied to every node below
    user = "root"                        # default "root"
    port = 22                            # SSH port, default 22
    key = "~/.ssh/id_ed25519"            # private key file; without it the SSH agent is used
    agent = true                         # also try the SSH agent (default: true when no key is given)

    [controller]
    host = "10.0.0.1"                    # SSH address; also the address the node listens on
    service_port = 9000                  # optional (controller default 9000, brokers 9092)

    [[broker]]                           # one per broker: n1, n2, ... in file order
    host = "10.0.0.2"

What a node needs: Debian (or similar) with python3 and the python3-msgpack module, iptables for
partitions, procps, and a writable workdir. When something is missing and the login is root with apt-get,
`apt-get install -y python3 python3-msgpack iptables procps` is run; otherwise the start fails naming the
node and what is missing. Our code (the `broker/` package) is uploaded over SFTP to
`<workdir>/code-<hash>/` (reused while the code is unchanged). Partitions need root (or CAP_NET_ADMIN) on
every node. Teardown stops the daemons, removes the run's iptables chain and `<workdir>/runs/<run id>`.
"""
from __future__ import annotations

import os
import posixpath
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from clusters.base import ClusterError, ClusterSpec, NodeAddress
from clusters.docker_image import code_files, code_hash
from clusters.ssh_cluster import BROKER_PORT, CONTROLLER, CONTROLLER_PORT, RemoteCluster, parallel
from clusters.ssh_control import SshNode, SshTarget

NODE_KEYS = {"host", "port", "user", "key", "agent", "service_port"}
TOP_KEYS = {"known_hosts", "workdir", "python", "defaults", "controller", "broker"}
DEFAULT_WORKDIR = "/var/tmp/highwater"
NEEDED_PACKAGES = "python3 python3-msgpack iptables procps"


class NodesFileError(ClusterError):
    """A bad nodes file; the one-line message names the file, the entry (and line) and the field."""


@dataclass
class NodeEntry:
    target: SshTarget
    service_port: int


@dataclass
class NodesFile:
    path: Path
    controller: NodeEntry
    brokers: list[NodeEntry]
    known_hosts: Path | None
    workdir: str
    python: str


def _entry_line(text: str, header: str, index: int) -> int | None:
    seen = -1
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip() == header:
            seen += 1
            if seen == index:
                return i
    return None


def load_nodes_file(path: Path | str) -> NodesFile:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise NodesFileError(f"nodes file {path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise NodesFileError(f"nodes file {path}: not valid TOML: {exc}") from None
    for key in data:
        if key not in TOP_KEYS:
            raise NodesFileError(f"nodes file {path}: unknown key {key!r} (known: {', '.join(sorted(TOP_KEYS))})")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise NodesFileError(f"nodes file {path}: [defaults] must be a table")

    def entry(raw, where: str, name: str, default_port: int) -> NodeEntry:
        if not isinstance(raw, dict):
            raise NodesFileError(f"nodes file {path}: {where}: must be a table")
        merged = {**defaults, **raw}
        for key in merged:
            if key not in NODE_KEYS:
                raise NodesFileError(f"nodes file {path}: {where}: unknown field {key!r} "
                                     f"(known: {', '.join(sorted(NODE_KEYS))})")
        host = merged.get("host")
        if not isinstance(host, str) or not host:
            raise NodesFileError(f"nodes file {path}: {where}: field 'host' is missing or not a string")
        for field_name, default in (("port", 22), ("service_port", default_port)):
            value = merged.get(field_name, default)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
                raise NodesFileError(f"nodes file {path}: {where}: field {field_name!r} must be a port "
                                     f"number 1..65535, got {value!r}")
        user = merged.get("user", "root")
        if not isinstance(user, str) or not user:
            raise NodesFileError(f"nodes file {path}: {where}: field 'user' must be a non-empty string")
        key = merged.get("key")
        if key is not None:
            if not isinstance(key, str):
                raise NodesFileError(f"nodes file {path}: {where}: field 'key' must be a file path")
            if not Path(key).expanduser().is_file():
                raise NodesFileError(f"nodes file {path}: {where}: field 'key': no such file {key}")
        agent = merged.get("agent", key is None)
        if not isinstance(agent, bool):
            raise NodesFileError(f"nodes file {path}: {where}: field 'agent' must be true or false")
        if key is None and not agent:
            raise NodesFileError(f"nodes file {path}: {where}: no way to authenticate (give 'key' or agent = true)")
        return NodeEntry(SshTarget(name, host, merged.get("port", 22), user, key, agent),
                         merged.get("service_port", default_port))

    if "controller" not in data:
        raise NodesFileError(f"nodes file {path}: missing [controller] table")
    line = _entry_line(text, "[controller]", 0)
    controller = entry(data["controller"], f"[controller]{f' (line {line})' if line else ''}", CONTROLLER,
                       CONTROLLER_PORT)
    raw_brokers = data.get("broker")
    if not isinstance(raw_brokers, list) or not raw_brokers:
        raise NodesFileError(f"nodes file {path}: needs at least one [[broker]] entry")
    brokers = []
    for i, raw in enumerate(raw_brokers):
        line = _entry_line(text, "[[broker]]", i)
        brokers.append(entry(raw, f"[[broker]] #{i + 1}{f' (line {line})' if line else ''}", f"n{i + 1}",
                             BROKER_PORT))
    known = data.get("known_hosts")
    if known is not None and not isinstance(known, str):
        raise NodesFileError(f"nodes file {path}: field 'known_hosts' must be a file path")
    workdir = data.get("workdir", DEFAULT_WORKDIR)
    if not isinstance(workdir, str) or not workdir.startswith("/"):
        raise NodesFileError(f"nodes file {path}: field 'workdir' must be an absolute path, got {workdir!r}")
    python = data.get("python", "python3")
    if not isinstance(python, str) or not python:
        raise NodesFileError(f"nodes file {path}: field 'python' must be a command name")
    return NodesFile(path, controller, brokers, Path(known).expanduser() if known else None, workdir, python)


class SshCluster(RemoteCluster):
    backend_name = "ssh"

    def __init__(self, spec: ClusterSpec, *, nodes_file: str | Path | None = None,
                 accept_unknown_hosts: bool = False, command_timeout_s: float = 60.0,
                 ready_timeout_s: float = 30.0, stop_grace_s: float = 10.0):
        super().__init__(spec, ready_timeout_s=ready_timeout_s, stop_grace_s=stop_grace_s)
        nodes_file = nodes_file or os.environ.get("HIGHWATER_NODES_FILE")
        if not nodes_file:
            raise ClusterError("the ssh backend needs a nodes file (--nodes-file FILE)")
        self.inventory = load_nodes_file(nodes_file)
        if spec.brokers > len(self.inventory.brokers):
            raise NodesFileError(f"nodes file {self.inventory.path}: lists {len(self.inventory.brokers)} brokers "
                                 f"but the test needs {spec.brokers}")
        self.python = self.inventory.python
        self.accept_unknown_hosts = accept_unknown_hosts
        self.command_timeout_s = command_timeout_s
        self._code_dir = posixpath.join(self.inventory.workdir, f"code-{code_hash()[:16]}")
        self._need_firewall = False

    def check_faults(self, faults: list[str]) -> None:
        """Partitions need a working iptables (root or CAP_NET_ADMIN) on every node; that can only be
        checked once connected, so start() checks it on each node and fails naming the node."""
        self._need_firewall = any(f.startswith("partition") for f in faults)

    def _entries(self) -> dict[str, NodeEntry]:
        return {CONTROLLER: self.inventory.controller,
                **{f"n{i}": self.inventory.brokers[i - 1] for i in range(1, self.spec.brokers + 1)}}

    def workdir(self, node: str) -> str:
        return self.inventory.workdir

    def code_dir(self, node: str) -> str:
        return self._code_dir

    def _provision(self) -> None:
        for node, e in self._entries().items():
            self._addresses[node] = NodeAddress(node, e.target.host, e.service_port)
            self._ssh[node] = SshNode(e.target, known_hosts=self.inventory.known_hosts,
                                      accept_unknown_hosts=self.accept_unknown_hosts,
                                      command_timeout_s=self.command_timeout_s)
        parallel(self._setup_node, self._names(), what="setting up nodes")

    def _setup_node(self, node: str) -> None:
        ssh = self._ssh[node]
        ssh.connect()
        py = shlex.quote(self.python)
        probe = (f"missing=''; command -v {py} >/dev/null || missing=\"$missing python3\"; "
                 f"{py} -c 'import msgpack' 2>/dev/null || missing=\"$missing python3-msgpack\"; "
                 "command -v iptables >/dev/null || [ -x /usr/sbin/iptables ] || missing=\"$missing iptables\"; "
                 "echo \"$missing\"")
        missing = ssh.run(probe).stdout.strip()
        if missing:
            can = ssh.run("[ \"$(id -u)\" = 0 ] && command -v apt-get >/dev/null", check=False).exit_status == 0
            if not can:
                raise ClusterError(f"{ssh.target.where()}: missing {missing}; install them "
                                   f"(Debian: apt-get install {NEEDED_PACKAGES}) or log in as root with apt-get")
            ssh.run(f"DEBIAN_FRONTEND=noninteractive apt-get update -q && "
                    f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q {NEEDED_PACKAGES}", timeout_s=900)
        if self._need_firewall:
            self._firewall(node)._pick_tool()    # raises naming the node when iptables cannot be used
        self._upload_code(ssh)

    def _upload_code(self, ssh: SshNode) -> None:
        d = shlex.quote(self._code_dir)
        if ssh.run(f"test -f {d}/.complete", check=False).exit_status == 0:
            return
        staging = f"{self._code_dir}.part-{self.spec.run_id}"
        ssh.run(f"rm -rf {shlex.quote(staging)}")
        ssh.upload(code_files(), staging)
        ssh.run(f"touch {shlex.quote(staging)}/.complete && "
                f"(mv -T {shlex.quote(staging)} {d} 2>/dev/null || rm -rf {shlex.quote(staging)}); test -f {d}/.complete")

    def _deprovision(self, errors: list[str]) -> None:
        def clean(node: str) -> None:
            ssh = self._ssh[node]
            ssh.run(f"rm -rf {shlex.quote(posixpath.join(self.inventory.workdir, 'runs', self.spec.run_id))}")
        for node in list(self._ssh):
            try:
                if node in self._started or self._ssh[node].connected():
                    clean(node)
            except Exception as exc:  # noqa: BLE001 - reported by teardown
                errors.append(f"removing the run directory on {node}: {exc}")
