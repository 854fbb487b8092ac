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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from clusters.base import ClusterError, ClusterSpec, NodeAddress, NodeTimeouts
from clusters.docker_image import code_files, code_hash
from clusters.ssh_cluster import BROKER_PORT, CONTROLLER, CONTROLLER_PORT, RemoteCluster, parallel
from clusters.ssh_control import SshNode, SshTarget
from rundir.settings import Setting, SettingError, declare, header_lines, line_of, parse_table, read_toml

DEFAULT_WORKDIR = "/var/tmp/highwater"
NEEDED_PACKAGES = "python3 python3-msgpack iptables procps"


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


def _check(ok: Callable[[Any], bool], problem: str) -> Callable[[Any], Any]:
    """A conversion that keeps a value `ok` accepts and refuses any other with `problem`."""
    def parse(raw: Any) -> Any:
        if not ok(raw):
            raise ValueError(problem.format(raw=raw))
        return raw
    return parse


def _port(name: str, doc: str, default: int | None) -> Setting:
    return Setting(name, int, default, doc, min=1, max=65535, what="a port number 1..65535")


_text = _check(lambda v: isinstance(v, str) and bool(v), "must be a non-empty string")
# the keys of [controller] and each [[broker]] (also allowed in [defaults])
NODE = declare(
    Setting("host", object, None, "SSH address; also the address the node listens on"),
    _port("port", "SSH port", 22),
    Setting("user", str, "root", "the login", parse=_text),
    Setting("key", object, None, "private key file; without it the SSH agent is used",
            parse=_check(lambda v: isinstance(v, str), "must be a file path")),
    Setting("agent", object, None, "also try the SSH agent (default: true when no key is given)",
            parse=_check(lambda v: isinstance(v, bool), "must be true or false")),
    _port("service_port", "where the daemon listens (controller 9000, brokers 9092)", None),
)
# the top level of a nodes file
TOP = declare(
    Setting("known_hosts", object, None, "host keys are checked against this file",
            parse=_check(lambda v: isinstance(v, str), "must be a file path")),
    Setting("workdir", object, DEFAULT_WORKDIR, "remote base directory (code, runs/<run id>/<node>/)",
            parse=_check(lambda v: isinstance(v, str) and v.startswith("/"), "must be an absolute path, got {raw!r}")),
    Setting("python", object, "python3", "the remote interpreter",
            parse=_check(lambda v: isinstance(v, str) and bool(v), "must be a command name")),
    Setting("defaults", dict, {}, "applied to every node below"),
    Setting("controller", object, None, "the controller node"),
    Setting("broker", object, None, "one [[broker]] per broker: n1, n2, ... in file order"),
)


def _problem(exc: SettingError) -> str:
    return exc.problem if exc.kind == "unknown" else f"field {exc.key!r} {exc.problem}"


def read_nodes_file(path: Path, top: tuple, unknown: str) -> tuple[str, dict]:
    """A nodes file's text and its top-level table checked against `top`; ClusterError names the file."""
    text, data = read_toml(path, ClusterError, cannot_read="nodes file {path}: cannot read: {reason}",
                           not_toml="nodes file {path}: not valid TOML: {reason}")
    try:
        return text, parse_table(data, top, unknown=unknown)
    except SettingError as exc:
        if exc.key == "defaults" and exc.kind == "value":
            raise ClusterError(f"nodes file {path}: [defaults] must be a table") from None
        raise ClusterError(f"nodes file {path}: {_problem(exc)}") from None


def parse_ssh_entry(path: Path, where: str, raw: Any, defaults: dict, fields: tuple,
                    name: str) -> tuple[SshTarget, dict]:
    """One node entry of a nodes file (its [defaults] applied): how to reach it over SSH, and every field's
    value. ClusterError names the file, the entry (`where`) and the field."""
    if not isinstance(raw, dict):
        raise ClusterError(f"nodes file {path}: {where}: must be a table")
    try:
        v = parse_table({**defaults, **raw}, fields, unknown="unknown field {key!r} (known: {known})")
    except SettingError as exc:
        raise ClusterError(f"nodes file {path}: {where}: {_problem(exc)}") from None
    host, key = v["host"], v["key"]
    if not isinstance(host, str) or not host:
        raise ClusterError(f"nodes file {path}: {where}: field 'host' is missing or not a string")
    if key is not None and not Path(key).expanduser().is_file():
        raise ClusterError(f"nodes file {path}: {where}: field 'key': no such file {key}")
    agent = key is None if v["agent"] is None else v["agent"]
    if key is None and not agent:
        raise ClusterError(f"nodes file {path}: {where}: no way to authenticate (give 'key' or agent = true)")
    return SshTarget(name, host, v["port"], v["user"], key, agent), v


def load_nodes_file(path: Path | str) -> NodesFile:
    path = Path(path)
    text, top = read_nodes_file(path, TOP, "unknown key {key!r} (known: {known})")

    def entry(raw, where: str, name: str, default_port: int) -> NodeEntry:
        target, v = parse_ssh_entry(path, where, raw, top["defaults"], NODE, name)
        return NodeEntry(target, default_port if v["service_port"] is None else v["service_port"])

    def at(line: int | None) -> str:
        return f" (line {line})" if line else ""

    if top["controller"] is None:
        raise ClusterError(f"nodes file {path}: missing [controller] table")
    controller = entry(top["controller"], f"[controller]{at(line_of(text, table='controller'))}", CONTROLLER,
                       CONTROLLER_PORT)
    raw_brokers = top["broker"]
    if not isinstance(raw_brokers, list) or not raw_brokers:
        raise ClusterError(f"nodes file {path}: needs at least one [[broker]] entry")
    lines = header_lines(text, "broker")
    brokers = [entry(raw, f"[[broker]] #{i + 1}{at(lines[i] if i < len(lines) else None)}", f"n{i + 1}",
                     BROKER_PORT) for i, raw in enumerate(raw_brokers)]
    known = top["known_hosts"]
    return NodesFile(path, controller, brokers, Path(known).expanduser() if known else None, top["workdir"],
                     top["python"])


class SshCluster(RemoteCluster):
    backend_name = "ssh"

    def __init__(self, spec: ClusterSpec, *, nodes_file: str | Path | None = None,
                 accept_unknown_hosts: bool = False, command_timeout_s: float = 60.0,
                 timeouts: NodeTimeouts = NodeTimeouts()):
        super().__init__(spec, timeouts=timeouts)
        nodes_file = nodes_file or os.environ.get("HIGHWATER_NODES_FILE")
        if not nodes_file:
            raise ClusterError("the ssh backend needs a nodes file (--nodes-file FILE)")
        self.inventory = load_nodes_file(nodes_file)
        if spec.brokers > len(self.inventory.brokers):
            raise ClusterError(f"nodes file {self.inventory.path}: lists {len(self.inventory.brokers)} brokers "
                                 f"but the test needs {spec.brokers}")
        self.python = self.inventory.python
        self.accept_unknown_hosts = accept_unknown_hosts
        self.command_timeout_s = command_timeout_s
        self._code_dir = posixpath.join(self.inventory.workdir, f"code-{code_hash()[:16]}")
        self._need_firewall = False

    def check_faults(self, faults: list[str]) -> None:
        """Partitions and degradation need a working iptables (root or CAP_NET_ADMIN) on every node; that can only be
        checked once connected, so start() checks it on each node and fails naming the node."""
        self._need_firewall = any(f.startswith(("partition", "degrade")) for f in faults)

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
