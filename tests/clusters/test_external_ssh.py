"""clusters/external_hosts.py for real: process faults on an external cluster's brokers through SSH.

A real sshd on a loopback port (started by the test as root, with its own host key and client key) is
the "host" of each broker of a highwater cluster the test starts (broker/server/bare.BareCluster);
the harness gets only the bootstrap address and a nodes file with the SSH login, each broker's port and
a restart command. It installs and starts nothing: kill is a SIGKILL of the process listening on the
broker's port, restart the given command, pause/resume SIGSTOP/SIGCONT of that process.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.client import Admin
from clusters.bare import BareCluster, free_port, wait_until
from clusters.base import ClusterError, ClusterSpec, capabilities
from clusters.external import ExternalAccess
from clusters.external_hosts import ExternalHostsCluster, load_hosts_file
from harness.backends import external_class
from rundir import formats as runformat
from rundir.exits import EXIT_VALID

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from e2e_helpers import REPO, found_kinds, load_json, run_dir_from_stdout, run_highwater  # noqa: E402

HOST = "127.0.0.1"
def root(test):
    """Marker `root` (scripts/test's selection), and skipped where root or sshd is missing."""
    return pytest.mark.root(pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists(),
                                               reason="needs root and /usr/sbin/sshd (a loopback sshd)")(test))


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """sshd on 127.0.0.1:<free port> accepting one key for root; yields (port, client key, known_hosts)."""
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    port = free_port(HOST)
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress {HOST}\nHostKey {d / 'host'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        f"PasswordAuthentication no\nPermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
        f"PidFile {d / 'sshd.pid'}\n")
    (d / "known_hosts").write_text(f"[{HOST}]:{port} " + " ".join((d / "host.pub").read_text().split()[:2]) + "\n")
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")])
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout == "":
            assert proc.poll() is None and time.monotonic() < deadline, (d / "sshd.log").read_text()
            time.sleep(0.05)
        yield port, d / "client", d / "known_hosts"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def cluster(tmp_path):
    """A 3-broker highwater cluster; brokers restarted through a nodes file's command write their pid to
    `restarted.pids`, and the test stops them (by pid) at the end."""
    pids = tmp_path / "restarted.pids"
    with BareCluster(tmp_path / "cluster", brokers=3, host=HOST,
                      broker_settings={"min_insync_replicas": 2, "replica_lag_time_max_ms": 3000},
                      controller_settings={"broker_session_timeout_ms": 2500}) as lc:
        # listening is not registered: the external backend checks the cluster's Metadata lists each broker
        admin = Admin(lc.controller_address, timeout_s=2.0)
        wait_until(lambda: sum(alive for _h, _p, alive in admin.brokers().values()) == 3, 30,
                   "all three brokers registered and unfenced")
        admin.close()
        try:
            yield lc, pids
        finally:
            for pid in (int(p) for p in (pids.read_text().split() if pids.exists() else [])):
                try:
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def nodes_file(path: Path, sshd, lc: BareCluster, pids: Path, *, restart: bool = True) -> Path:
    port, key, known = sshd
    lines = [f'known_hosts = "{known}"', "[defaults]", 'user = "root"', f"port = {port}", f'key = "{key}"',
             "agent = false"]
    for b in (1, 2, 3):
        cfg = lc.workdir / f"n{b}" / "broker.json"
        log = lc.workdir / f"n{b}" / "restarted.log"
        command = (f"cd {REPO}; PYTHONUNBUFFERED=1 nohup {sys.executable} -m broker node --config {cfg} "
                   f">> {log} 2>&1 & echo $! >> {pids}")
        lines += ["[[broker]]", f'host = "{HOST}"', f"service_port = {lc.ports[b]}"]
        if restart:
            lines.append(f"restart = {command!r}".replace("'", '"'))
    path.write_text("\n".join(lines) + "\n")
    return path


def listening_pid(port: int) -> int | None:
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    return int(out.split("pid=")[1].split(",")[0]) if "pid=" in out else None


@root
def test_kill_restart_pause_resume_through_ssh(sshd, cluster, tmp_path):
    lc, pids = cluster
    spec = ClusterSpec("ext", tmp_path / "run", brokers=3,
                       controller_settings={"topics": [{"name": "hw", "partitions": 1, "replication_factor": 3}]})
    access = ExternalAccess(f"{HOST}:{lc.ports[1]}", nodes_file=str(nodes_file(tmp_path / "n.toml", sshd, lc, pids)))
    c = external_class(access)(spec, access)             # the class the harness builds for this access
    assert isinstance(c, ExternalHostsCluster)
    assert capabilities(c) == ["Killable", "Pausable"]
    try:
        c.prepare()
        assert c.layout()["nodes"]["n2"] == {"host": HOST, "port": lc.ports[2], "node_id": 2,
                                             "ssh": f"root@{HOST}:{sshd[0]}"}
        old = lc.brokers[2].proc.pid
        assert c.pid("n2") == old and c.is_running("n2")
        assert c.kill("n2") == f"SIGKILL n2 pid {old} on {HOST}"
        assert lc.brokers[2].proc.wait(10) == -signal.SIGKILL and not c.is_running("n2")
        line = c.restart("n2")
        new = int(pids.read_text().split()[-1])
        assert line == f"restarted n2 as pid {new} (`{c._entries['n2'].restart}`)"
        assert listening_pid(lc.ports[2]) == new and c.restart("n2") == f"n2 already running (pid {new})"
        assert c.pause("n3") == f"SIGSTOP n3 pid {lc.brokers[3].proc.pid}"
        assert Path(f"/proc/{lc.brokers[3].proc.pid}/stat").read_text().split(") ")[1][0] == "T"
        assert c.resume("n3") == f"SIGCONT n3 pid {lc.brokers[3].proc.pid}"
        # no longer stopped (it may be running, sleeping, or in an fsync's uninterruptible sleep: D)
        assert Path(f"/proc/{lc.brokers[3].proc.pid}/stat").read_text().split(") ")[1][0] in "SRD"
        with pytest.raises(ClusterError, match="cannot inject partition"):
            c.check_faults(["kill", "partition"])
    finally:
        c.teardown()


def test_nodes_file_errors_name_the_entry_and_field(tmp_path):
    f = tmp_path / "n.toml"
    f.write_text('[defaults]\nagent = true\n[[broker]]\nhost = "10.0.0.2"\nrestrat = "x"\n')
    with pytest.raises(ClusterError) as e:
        load_hosts_file(f)
    assert str(e.value).startswith(f"nodes file {f}: [[broker]] #1 (line 3): unknown field 'restrat'")
    f.write_text('[controller]\nhost = "10.0.0.1"\n')
    with pytest.raises(ClusterError) as e:
        load_hosts_file(f)
    assert str(e.value).startswith(f"nodes file {f}: unknown key 'controller' for the external backend")


@root
# nightly: each action is tested above on every run; this is the same actions under a whole chaos run
@pytest.mark.nightly
@pytest.mark.slow
def test_chaos_run_with_kill_and_pause_on_an_external_cluster(sshd, cluster, tmp_path):
    """`highwater run --cluster external --nodes-file` with kill and pause faults: the nemesis kills and
    restarts brokers through SSH, acks=all in leader-epoch mode loses nothing, divergence is out of scope."""
    lc, pids = cluster
    nodes = nodes_file(tmp_path / "n.toml", sshd, lc, pids)
    r = run_highwater("run", "--cluster", "external", "--bootstrap", f"{HOST}:{lc.ports[1]}", "--nodes-file",
                      str(nodes), "--nemesis", "kill,pause", "--nemesis-interval", "2", "--time-limit", "15",
                      "--seed", "7", "--checker", "reference", "--results-dir", str(tmp_path / "results"),
                      "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    assert r.returncode == EXIT_VALID, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert found_kinds(results) == [] and results["anomalies"]["lost-write"]["count"] == 0
    # replica dumps and event logs are out of this backend's scope: not applicable, not unknown
    assert results["unknown_reasons"] == []
    assert [g["evidence"] for g in results["scope"]["not_applicable"]] == ["replica-dumps", "event-logs"]
    ops = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.NEMESIS)]
    done = [o for o in ops if o["type"] == "info" and o["value"].get("phase") == "start"]
    kills = [o["value"]["detail"] for o in done if o["f"] == "kill"]
    assert kills and all(d.startswith("SIGKILL n") for d in kills), ops
    assert not [o for o in ops if o.get("error")], ops
    final = load_json(run_dir / runformat.FINAL_JSON)
    assert final["timed_out"] is False and all(p["recovered"] for p in final["partitions"])
    assert all(listening_pid(lc.ports[b]) is not None for b in (1, 2, 3))     # every broker is back
