"""Controlling one node over SSH (paramiko): commands, file transfer, broker daemons, firewall rules.

Shared by the SSH backend (clusters/ssh.py) and the Docker backend (clusters/docker.py), so both drive
nodes the same way.

- Host keys are checked against a known_hosts file; a host not in it is rejected unless the explicit
  `accept_unknown_hosts` flag is given (then its key is accepted for this session only). A changed key
  is always rejected.
- Authentication with a private key file and/or the SSH agent.
- Connection set-up and transient failures (refused, reset, no route, session channel not opening) are
  retried with tenacity for up to `connect_retry_s`; authentication and host-key failures are not.
- Every remote command has a timeout. Every final error is an `ClusterError` naming the node, its address and
  the command.

Daemons run under `nohup` with their pid and start time in a pid file (so a reused pid is never
mistaken for them); readiness is the `READY host:port` line the broker prints. Packet drops use the same rule model as the local backend (clusters/local_firewall.py):
a chain `HW-<8 hex>` owned by the run, jumped to from the top of INPUT with the comment
`highwater:<run id>`, holding one `-s SRC/32 -j DROP` per dropped source; heal flushes it, a partial
heal (`heal_from`) deletes the rules of the named sources only.
"""
from __future__ import annotations

import posixpath
import shlex
import socket
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from clusters.base import ClusterError
from clusters.local_firewall import COMMENT_PREFIX, short_id


class HostKeyRejected(ClusterError):
    """The node's host key is unknown (and accepting unknown keys was not asked for) or has changed."""


@dataclass
class SshTarget:
    """Where and how to reach one node."""
    name: str                        # "c0", "n1", ...
    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None      # private key; None: agent only
    agent: bool = True

    def where(self) -> str:
        return f"{self.name} ({self.user}@{self.host}:{self.port})"


@dataclass
class RemoteResult:
    command: str
    exit_status: int
    stdout: str
    stderr: str


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, (paramiko.AuthenticationException, paramiko.BadHostKeyException, HostKeyRejected)):
        return False
    return isinstance(exc, (OSError, EOFError, paramiko.SSHException))


class _AcceptUnknownForSession(paramiko.MissingHostKeyPolicy):
    """Accept a key not in known_hosts for this connection only (never written back to the file)."""
    def missing_host_key(self, client, hostname, key):
        client.get_host_keys().add(hostname, key.get_name(), key)


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client, hostname, key):
        raise HostKeyRejected(f"host key of {hostname} ({key.get_name()}) is not in known_hosts")


@dataclass
class SshNode:
    target: SshTarget
    known_hosts: Path | None = None          # None: ~/.ssh/known_hosts
    accept_unknown_hosts: bool = False
    connect_timeout_s: float = 10.0
    connect_retry_s: float = 20.0
    command_timeout_s: float = 60.0
    _client: paramiko.SSHClient | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    # --- connection ------------------------------------------------------------------------------------
    def _known_hosts_path(self) -> Path:
        return Path(self.known_hosts).expanduser() if self.known_hosts else Path("~/.ssh/known_hosts").expanduser()

    def _new_client(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        path = self._known_hosts_path()
        if path.exists():
            client.load_host_keys(str(path))
        client.set_missing_host_key_policy(_AcceptUnknownForSession() if self.accept_unknown_hosts
                                           else _RejectUnknown())
        t = self.target
        key = str(Path(t.key_file).expanduser()) if t.key_file else None
        try:
            client.connect(t.host, port=t.port, username=t.user, key_filename=key, allow_agent=t.agent,
                           look_for_keys=False, timeout=self.connect_timeout_s,
                           banner_timeout=self.connect_timeout_s, auth_timeout=self.connect_timeout_s)
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        transport.set_keepalive(5)
        return client

    def connect(self) -> "SshNode":
        """Open the connection (retrying transient failures); idempotent."""
        with self._lock:
            self._ensure_connected("connect")
        return self

    def _ensure_connected(self, what: str) -> paramiko.SSHClient:
        if self._client is not None and self._client.get_transport() is not None \
                and self._client.get_transport().is_active():
            return self._client
        self._drop_client()
        try:
            for attempt in Retrying(retry=retry_if_exception(_transient), reraise=True,
                                    stop=stop_after_delay(self.connect_retry_s),
                                    wait=wait_exponential(multiplier=0.1, max=2.0)):
                with attempt:
                    self._client = self._new_client()
        except HostKeyRejected as exc:
            raise HostKeyRejected(f"{self.target.where()}: {what}: {exc}; refusing to connect (add the key to "
                                  f"{self._known_hosts_path()} or pass --ssh-accept-unknown-hosts)") from None
        except paramiko.BadHostKeyException as exc:
            raise HostKeyRejected(f"{self.target.where()}: {what}: host key CHANGED ({exc.key.get_name()} "
                                  f"does not match {self._known_hosts_path()}); refusing to connect") from None
        except paramiko.AuthenticationException as exc:
            raise ClusterError(f"{self.target.where()}: {what}: authentication failed "
                           f"({'key ' + self.target.key_file if self.target.key_file else 'agent'}): {exc}") from None
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ClusterError(f"{self.target.where()}: {what}: cannot connect after "
                           f"{self.connect_retry_s:.0f}s: {type(exc).__name__}: {exc}") from None
        return self._client

    def _drop_client(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - closing a dead connection
                pass
            self._client = None

    def close(self) -> None:
        with self._lock:
            self._drop_client()

    def connected(self) -> bool:
        c = self._client
        return c is not None and c.get_transport() is not None and c.get_transport().is_active()

    # --- commands ---------------------------------------------------------------------------------------
    def _open_session(self, command: str) -> paramiko.Channel:
        """A session channel, reconnecting (with retries) when the connection is gone. Nothing has been
        sent to the node when this fails, so retrying is safe for any command."""
        def attempt_open():
            with self._lock:
                client = self._ensure_connected(f"`{command}`")
                try:
                    return client.get_transport().open_session(timeout=self.connect_timeout_s)
                except (paramiko.SSHException, OSError, EOFError):
                    self._drop_client()
                    raise
        try:
            for attempt in Retrying(retry=retry_if_exception(_transient), reraise=True,
                                    stop=stop_after_delay(self.connect_retry_s),
                                    wait=wait_exponential(multiplier=0.1, max=2.0)):
                with attempt:
                    return attempt_open()
        except (paramiko.SSHException, OSError, EOFError) as exc:     # still failing when the retries ran out
            raise ClusterError(f"{self.target.where()}: `{command}`: cannot open a session: {exc}") from None
        raise AssertionError("unreachable")

    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True,
            stdin: bytes | None = None) -> RemoteResult:
        """Run `command` with /bin/sh on the node; raise ClusterError on a non-zero exit (when `check`), a
        timeout or a lost connection."""
        timeout = timeout_s if timeout_s is not None else self.command_timeout_s
        chan = self._open_session(command)
        out, err = bytearray(), bytearray()
        try:
            chan.settimeout(0.2)
            chan.exec_command(command)
            if stdin is not None:
                chan.sendall(stdin)
            chan.shutdown_write()
            deadline = time.monotonic() + timeout
            while True:
                progressed = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    progressed = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    progressed = True
                # done once the exit status is in and the channel's EOF too: sshd may send the exit
                # status before the last stderr bytes, and the EOF comes after all of the data
                if (chan.exit_status_ready() and (chan.eof_received or chan.closed)
                        and not chan.recv_ready() and not chan.recv_stderr_ready()):
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(f"{self.target.where()}: `{command}`: timed out after {timeout:.0f}s")
                if chan.closed and not chan.exit_status_ready():
                    raise ClusterError(f"{self.target.where()}: `{command}`: connection lost before exit")
                if not progressed:
                    try:
                        chunk = chan.recv(65536)
                        if chunk:
                            out += chunk
                        else:
                            time.sleep(0.005)     # stdout at EOF, exit status not here yet
                    except socket.timeout:
                        pass
            status = chan.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ClusterError(f"{self.target.where()}: `{command}`: {type(exc).__name__}: {exc}") from None
        finally:
            chan.close()
        result = RemoteResult(command, status, out.decode(errors="replace"), err.decode(errors="replace"))
        if check and status != 0:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise ClusterError(f"{self.target.where()}: `{command}` exited {status}: {detail[0]}")
        return result

    # --- files -------------------------------------------------------------------------------------------
    def _sftp(self, what: str) -> paramiko.SFTPClient:
        chan_client = None
        with self._lock:
            client = self._ensure_connected(what)
            try:
                chan_client = client.open_sftp()
                chan_client.get_channel().settimeout(self.command_timeout_s)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise ClusterError(f"{self.target.where()}: {what}: cannot open SFTP: {exc}") from None
        return chan_client

    def write_file(self, remote: str, data: bytes, mode: int = 0o644) -> None:
        sftp = self._sftp(f"write {remote}")
        try:
            with sftp.open(remote, "wb") as fh:
                fh.write(data)
            sftp.chmod(remote, mode)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ClusterError(f"{self.target.where()}: write {remote}: {exc}") from None
        finally:
            sftp.close()

    def read_file(self, remote: str) -> bytes:
        sftp = self._sftp(f"read {remote}")
        try:
            with sftp.open(remote, "rb") as fh:
                return fh.read()
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ClusterError(f"{self.target.where()}: read {remote}: {exc}") from None
        finally:
            sftp.close()

    def upload(self, files: list[tuple[str, Path]], remote_root: str) -> int:
        """Copy (relative path, local file) pairs under remote_root over SFTP; returns bytes sent."""
        self.run(f"mkdir -p {shlex.quote(remote_root)}")
        sftp = self._sftp(f"upload to {remote_root}")
        sent = 0
        made: set[str] = {remote_root}
        try:
            for rel, local in files:
                dest = posixpath.join(remote_root, rel)
                parent = posixpath.dirname(dest)
                chain = []
                while parent not in made and parent not in ("", "/"):
                    chain.append(parent)
                    parent = posixpath.dirname(parent)
                for d in reversed(chain):
                    try:
                        sftp.mkdir(d)
                    except OSError:
                        pass  # exists
                    made.add(d)
                sftp.put(str(local), dest)
                sent += Path(local).stat().st_size
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ClusterError(f"{self.target.where()}: upload to {remote_root}: {exc}") from None
        finally:
            sftp.close()
        return sent

    def download_tree(self, remote_dir: str, local_dir: Path) -> list[Path]:
        """Copy every file under remote_dir (recursively) into local_dir; returns the local files."""
        sftp = self._sftp(f"download {remote_dir}")
        got: list[Path] = []

        def walk(rdir: str, ldir: Path) -> None:
            ldir.mkdir(parents=True, exist_ok=True)
            for entry in sftp.listdir_attr(rdir):
                rpath = posixpath.join(rdir, entry.filename)
                if stat.S_ISDIR(entry.st_mode):
                    walk(rpath, ldir / entry.filename)
                elif stat.S_ISREG(entry.st_mode):
                    sftp.get(rpath, str(ldir / entry.filename))
                    got.append(ldir / entry.filename)
        try:
            walk(remote_dir, Path(local_dir))
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ClusterError(f"{self.target.where()}: download {remote_dir}: {exc}") from None
        finally:
            sftp.close()
        return got

    # --- daemons -----------------------------------------------------------------------------------------
    # A pid file holds "<pid> <start time>" (field 22 of /proc/<pid>/stat): a pid reused by another
    # process (certain after a container restart, where pids start again from 1) never matches.
    @staticmethod
    def _ident(pidfile: str) -> str:
        """Shell test setting $p to the daemon's pid when the pid file names a live process (not a zombie)
        with the recorded start time."""
        q = shlex.quote(pidfile)
        return (f"read p t < {q} 2>/dev/null && [ -n \"$t\" ] && "
                f"[ \"$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f20)\" = \"$t\" ] && "
                f"[ \"$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f1)\" != Z ]")

    def start_daemon(self, argv: list[str], *, cwd: str, env: dict[str, str], stdout: str, pidfile: str) -> int:
        """Start argv in the background (nohup, detached from the session); returns its pid."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        q = shlex.quote(pidfile)
        cmd = (f"cd {shlex.quote(cwd)} && rm -f {q} && "
               f"(env {exports} nohup {' '.join(shlex.quote(a) for a in argv)} "
               f"> {shlex.quote(stdout)} 2>&1 < /dev/null & p=$!; "
               f"echo \"$p $(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f20)\" > {q}) && cat {q}")
        r = self.run(cmd)
        try:
            return int(r.stdout.split()[0])
        except (ValueError, IndexError):
            raise ClusterError(f"{self.target.where()}: `{cmd}`: no pid printed (got {r.stdout!r})") from None

    def wait_ready(self, *, stdout: str, pidfile: str, timeout_s: float) -> str:
        """Wait (on the node, one command) for the daemon's READY line; returns it. Raises naming the
        node with the daemon's last output when it exits or does not become ready in time."""
        steps = max(1, int(timeout_s / 0.05))
        q_out = shlex.quote(stdout)
        cmd = (f"i=0; while [ $i -lt {steps} ]; do "
               f"if grep -m1 '^READY ' {q_out} 2>/dev/null; then exit 0; fi; "
               f"{self._ident(pidfile)} || exit 3; sleep 0.05; i=$((i+1)); done; exit 4")
        r = self.run(cmd, timeout_s=timeout_s + 15, check=False)
        if r.exit_status == 0:
            return r.stdout.strip().splitlines()[0]
        tail = self.run(f"tail -n 5 {q_out} 2>/dev/null", check=False).stdout.strip().replace("\n", " | ")
        why = "exited before READY" if r.exit_status == 3 else f"not READY within {timeout_s:.0f}s"
        raise ClusterError(f"{self.target.where()}: daemon {why}; last output: {tail or '(none)'}")

    def pid_of(self, pidfile: str) -> int | None:
        """The daemon's pid if it is alive (a zombie or a reused pid counts as gone), else None."""
        r = self.run(f"{self._ident(pidfile)} && echo $p", check=False)
        out = r.stdout.strip()
        return int(out) if r.exit_status == 0 and out.isdigit() else None

    def process_state(self, pidfile: str) -> str | None:
        """Kernel state letter of the daemon (T = stopped), None when not running."""
        r = self.run(f"{self._ident(pidfile)} && sed 's/.*) //' /proc/$p/stat | cut -d' ' -f1", check=False)
        s = r.stdout.strip()
        return s if r.exit_status == 0 and s else None

    def signal(self, pidfile: str, sig: str) -> int:
        """Send SIG (e.g. "KILL", "STOP", "CONT", "TERM") to the daemon; returns its pid."""
        r = self.run(f"{self._ident(pidfile)} || exit 9; kill -{sig} $p && echo $p", check=False)
        if r.exit_status == 9:
            raise ClusterError(f"{self.target.where()}: kill -{sig}: daemon not running (pid file {pidfile})")
        if r.exit_status != 0:
            raise ClusterError(f"{self.target.where()}: kill -{sig}: exited {r.exit_status}: {r.stderr.strip()}")
        return int(r.stdout.strip())

    def stop_daemon(self, pidfile: str, *, grace_s: float = 10.0) -> str:
        """SIGTERM (and SIGCONT, in case it is stopped), then SIGKILL after the grace; waits for exit."""
        pid = self.pid_of(pidfile)
        if pid is None:
            return "not running"
        steps = max(1, int(grace_s / 0.05))
        alive = self._ident(pidfile)
        r = self.run(f"kill -TERM {pid}; kill -CONT {pid}; i=0; while [ $i -lt {steps} ]; do "
                     f"{alive} || exit 0; sleep 0.05; i=$((i+1)); done; kill -KILL {pid}; "
                     f"j=0; while [ $j -lt 100 ]; do {alive} || exit 5; sleep 0.05; j=$((j+1)); done; exit 6",
                     timeout_s=grace_s + 20, check=False)
        return {0: f"pid {pid} stopped by SIGTERM", 5: f"pid {pid} killed by SIGKILL after {grace_s:.0f}s"}.get(
            r.exit_status, f"pid {pid} still alive after SIGKILL (exit {r.exit_status})")


class RemoteFirewall:
    """One run's packet-drop chain on one node (see the module docstring for the rule model)."""

    def __init__(self, node: SshNode, run_id: str):
        self.node = node
        self.run_id = run_id
        self.chain = f"HW-{short_id(run_id)}"
        self.comment = f"{COMMENT_PREFIX}{run_id}"[:250]
        self.tool: str | None = None
        self.installed = False
        self.sources: list[str] = []       # addresses currently dropped (so a rebooted node can get them back)

    def _pick_tool(self) -> str:
        if self.tool is None:
            r = self.node.run("PATH=$PATH:/usr/sbin:/sbin; for t in iptables iptables-legacy; do command -v $t >/dev/null && "
                              "$t -w -n -L INPUT >/dev/null 2>&1 && { command -v $t; exit 0; }; done; exit 1",
                              check=False)
            if r.exit_status != 0:
                raise ClusterError(f"{self.node.target.where()}: no working iptables (tried iptables, "
                               "iptables-legacy; the node needs the 'iptables' package and root or NET_ADMIN)")
            self.tool = r.stdout.strip()        # absolute path: later commands need no PATH
        return self.tool

    def _tool_chain_jump(self) -> tuple[str, str, str]:
        """(the iptables binary, the quoted chain, the INPUT rule that jumps to it) for shell commands."""
        t, c = self._pick_tool(), shlex.quote(self.chain)
        return t, c, f"INPUT -m comment --comment {shlex.quote(self.comment)} -j {c}"

    def install(self) -> None:
        t, c, jump = self._tool_chain_jump()
        self.node.run(f"{t} -w -n -L {c} >/dev/null 2>&1 || {t} -w -N {c}; "
                      f"{t} -w -C {jump} 2>/dev/null || {t} -w -I {jump.replace('INPUT', 'INPUT 1', 1)}")
        self.installed = True

    def drop_from(self, sources: list[str]) -> None:
        if not sources:
            return
        if not self.installed:
            self.install()
        t, c = self._pick_tool(), shlex.quote(self.chain)
        self.node.run(" && ".join(f"{t} -w -A {c} -s {shlex.quote(s)}/32 -j DROP" for s in sources))
        self.sources += sources

    def heal(self) -> None:
        if self.installed:
            self.node.run(f"{self._pick_tool()} -w -F {shlex.quote(self.chain)}")
        self.sources = []

    def heal_from(self, sources: list[str]) -> None:
        """Delete the drops of these sources only (every copy of each rule)."""
        if self.installed and sources:
            t, c = self._pick_tool(), shlex.quote(self.chain)
            self.node.run("; ".join(f"while {t} -w -D {c} -s {shlex.quote(s)}/32 -j DROP 2>/dev/null; do :; done"
                                    for s in sources) + "; true")
        self.sources = [s for s in self.sources if s not in sources]

    def rules(self) -> list[str]:
        r = self.node.run(f"{self._pick_tool()} -w -S {shlex.quote(self.chain)}", check=False)
        return [line for line in r.stdout.splitlines() if line.startswith("-A ")]

    def remove(self) -> None:
        """Delete the INPUT jump(s) and the chain. Idempotent."""
        t, c, jump = self._tool_chain_jump()
        self.node.run(f"while {t} -w -D {jump} 2>/dev/null; do :; done; "
                      f"{t} -w -F {c} 2>/dev/null; {t} -w -X {c} 2>/dev/null; true")
        self.installed = False
        self.sources = []


class RemoteDegradation:
    """One run's degraded links INTO one node (delay, jitter, loss; clusters/local_netem.py's model applied on
    the receiving node): the mangle chain `HWN-<8 hex>` jumped to from the top of PREROUTING with the comment
    `highwater:<run id>`, holding per degraded source `-s SRC/32 [-m statistic ... -j DROP]` and
    `-s SRC/32 -j NFQUEUE --queue-num Q --queue-bypass`, and one delayer daemon per delay setting
    (clusters/netem_delayer.py, copied to the node's run directory, run by its python3 with a pid file)."""

    def __init__(self, node: SshNode, run_id: str, rdir: str, python: str = "python3"):
        self.node, self.run_id, self.rdir, self.python = node, run_id, rdir, python
        self.chain = f"HWN-{short_id(run_id)}"
        self.comment = f"{COMMENT_PREFIX}{run_id}"[:250]
        self.tool: str | None = None
        self.installed = False
        # source address -> (delay, jitter, loss, queue its rules send to): rules are deleted by the queue
        # they were made with, also after a dead delayer was replaced by one on another queue
        self.links: dict[str, tuple[float, float, float, int]] = {}
        self.delayers: dict[tuple[float, float], tuple[int, str]] = {}   # (delay, jitter) -> (queue, pid file)
        self._uploaded = False

    def _ipt(self) -> str:
        if self.tool is None:
            fw = RemoteFirewall(self.node, self.run_id)
            self.tool = f"{fw._pick_tool()} -w -t mangle"
        return self.tool

    def install(self) -> None:
        t, c = self._ipt(), shlex.quote(self.chain)
        jump = f"PREROUTING -m comment --comment {shlex.quote(self.comment)} -j {c}"
        self.node.run(f"{t} -n -L {c} >/dev/null 2>&1 || {t} -N {c}; "
                      f"{t} -C {jump} 2>/dev/null || {t} -I {jump.replace('PREROUTING', 'PREROUTING 1', 1)}")
        self.installed = True

    def _delayer(self, delay_ms: float, jitter_ms: float, seed: int) -> int:
        key = (float(delay_ms), float(jitter_ms))
        if key in self.delayers and self.node.pid_of(self.delayers[key][1]) is not None:
            return self.delayers[key][0]
        script = posixpath.join(self.rdir, "netem_delayer.py")
        if not self._uploaded:
            self.node.run(f"mkdir -p {shlex.quote(self.rdir)}")
            self.node.write_file(script, (Path(__file__).resolve().parent / "netem_delayer.py").read_bytes())
            self._uploaded = True
        k = len(self.delayers)
        while any(p.endswith(f"delay-{k}.pid") for _, p in self.delayers.values()):
            k += 1
        pidfile, out = posixpath.join(self.rdir, f"delay-{k}.pid"), posixpath.join(self.rdir, f"delay-{k}.out")
        self.node.start_daemon([self.python, script, "--run-id", self.run_id, "--setting", str(k),
                                "--delay-ms", repr(key[0]), "--jitter-ms", repr(key[1]), "--seed", str(seed)],
                               cwd=self.rdir, env={"PYTHONUNBUFFERED": "1"}, stdout=out, pidfile=pidfile)
        r = self.node.run(f"i=0; while [ $i -lt 200 ]; do grep -m1 '^QUEUE ' {shlex.quote(out)} && exit 0; "
                          f"sleep 0.05; i=$((i+1)); done; tail -n 3 {shlex.quote(out)}; exit 4", check=False)
        if r.exit_status != 0:
            raise ClusterError(f"{self.node.target.where()}: the delayer did not start: "
                           f"{r.stdout.strip().replace(chr(10), ' | ') or 'no output'}")
        queue = int(r.stdout.split()[1])
        self.delayers[key] = (queue, pidfile)
        return queue

    @staticmethod
    def _rules(src: str, link: tuple[float, ...], queue: int) -> list[str]:
        m = f"-s {shlex.quote(src)}/32"
        out = [f"{m} -m statistic --mode random --probability {link[2] / 100:.6f} -j DROP"] if link[2] > 0 else []
        return out + [f"{m} -j NFQUEUE --queue-num {queue} --queue-bypass"]

    def degrade(self, sources: list[str], delay_ms: float, jitter_ms: float, loss_pct: float, seed: int) -> None:
        if not self.installed:
            self.install()
        queue = self._delayer(delay_ms, jitter_ms, seed)
        key = (float(delay_ms), float(jitter_ms))
        # links of the same setting still sending to a replaced (dead) delayer's queue move to the new one
        moved = {src: link for src, link in self.links.items()
                 if src not in sources and link[:2] == key and link[3] != queue}
        self._unlink([*sources, *moved])
        t, c = self._ipt(), shlex.quote(self.chain)
        wanted = {**{src: (key[0], key[1], link[2], queue) for src, link in moved.items()},
                  **{src: (key[0], key[1], float(loss_pct), queue) for src in sources}}
        self.node.run(" && ".join(f"{t} -A {c} {rule}" for src, link in wanted.items()
                                  for rule in self._rules(src, link, queue)))
        self.links.update(wanted)
        self._stop_unused()

    def _unlink(self, sources: list[str]) -> None:
        t, c = self._ipt(), shlex.quote(self.chain)
        cmds = []
        for s in sources:
            link = self.links.pop(s, None)
            if link is not None:
                cmds += [f"{t} -D {c} {rule} 2>/dev/null" for rule in self._rules(s, link, link[3])]
        if cmds:
            self.node.run("; ".join(cmds) + "; true")

    def restore(self, sources: list[str] | None = None) -> None:
        if sources is None:
            if self.installed:
                self.node.run(f"{self._ipt()} -F {shlex.quote(self.chain)}")
            self.links.clear()
        else:
            self._unlink(sources)
        self._stop_unused()

    def _stop_unused(self) -> None:
        used = {link[:2] for link in self.links.values()}
        for key in [k for k in self.delayers if k not in used]:
            _, pidfile = self.delayers.pop(key)
            self.node.stop_daemon(pidfile, grace_s=5)

    def rules(self) -> list[str]:
        r = self.node.run(f"{self._ipt()} -S {shlex.quote(self.chain)}", check=False)
        return [line for line in r.stdout.splitlines() if line.startswith("-A ")]

    def remove(self) -> None:
        """Stop every delayer, delete the PREROUTING jump(s) and the chain. Idempotent."""
        self.links.clear()
        self._stop_unused()
        if self.installed:
            t, c = self._ipt(), shlex.quote(self.chain)
            jump = f"PREROUTING -m comment --comment {shlex.quote(self.comment)} -j {c}"
            self.node.run(f"while {t} -D {jump} 2>/dev/null; do :; done; {t} -F {c} 2>/dev/null; "
                          f"{t} -X {c} 2>/dev/null; true")
            self.installed = False
