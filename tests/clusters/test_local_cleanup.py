"""`highwater cleanup` against what a SIGKILLed harness really leaves behind: processes, a chain, a registry entry."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import echo_server
from clusters import local_firewall
from clusters.base import ClusterSpec
from clusters.leftovers import clean
from clusters.local import LocalCluster
from clusters.run_registry import (ProcessRecord, Registry, RunEntry, proc_start_time, proc_state, same_process,
                               this_process_identity)

REPO = Path(__file__).resolve().parents[2]

OWNER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    import echo_server
    from pathlib import Path
    from clusters.base import ClusterSpec
    from clusters.local import LocalCluster
    from clusters.run_registry import Registry
    c = LocalCluster(ClusterSpec({run_id!r}, Path({run_dir!r}), brokers=3), registry=Registry({reg!r}),
                     command=echo_server.command)
    c.start()
    if {partition!r}:
        c.drop([("n1", "n2"), ("n2", "n1")])
    c.pause("n3")
    print("UP", " ".join(str(c.pid(n)) for n in c.nodes()), flush=True)
    time.sleep(300)
""")

pytestmark = pytest.mark.leftovers  # every test here plants or sweeps dead owners' leftovers


def _spawn_owner(tmp_path: Path, run_id: str, partition: bool) -> tuple[subprocess.Popen, list[int]]:
    script = OWNER.format(tests=str(Path(echo_server.__file__).parent), run_id=run_id,
                          run_dir=str(tmp_path / "run"), reg=str(tmp_path / "registry"), partition=partition)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    line = owner.stdout.readline()
    assert line.startswith("UP "), f"owner did not start: {line!r}"
    return owner, [int(x) for x in line.split()[1:]]


def _cli_cleanup(registry: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "cleanup", "--no-docker", "--keep-spark", "--registry", str(registry),
                           *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.fixture
def owner_killed(tmp_path, request):
    partition = request.param if hasattr(request, "param") else False
    run_id = f"leftover-{os.getpid()}-{time.monotonic_ns() % 100000}"
    owner, pids = _spawn_owner(tmp_path, run_id, partition)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    yield run_id, pids
    # whatever the test did, nothing may survive it
    for pid in pids:
        if proc_state(pid) not in (None, "Z"):
            os.kill(pid, signal.SIGKILL)
    if partition:
        local_firewall.remove_iptables_chain(f"HW-{local_firewall.short_id(run_id)}")


def _alive(pids):
    return [p for p in pids if proc_state(p) not in (None, "Z")]


@pytest.mark.root
@pytest.mark.parametrize("owner_killed", [True], indirect=True)
def test_cleanup_removes_processes_chain_and_registry_entry_of_a_sigkilled_owner(tmp_path, owner_killed):
    run_id, pids = owner_killed
    chain = f"HW-{local_firewall.short_id(run_id)}"
    assert len(_alive(pids)) == 4, "the node processes outlive their killed owner"
    assert chain in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout

    dry = _cli_cleanup(tmp_path / "registry", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would remove iptables chain {chain}" in dry.stdout
    assert dry.stdout.count("would remove process") == 4
    assert len(_alive(pids)) == 4 and Registry(tmp_path / "registry").get(run_id) is not None

    r = _cli_cleanup(tmp_path / "registry")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for node, pid in zip(["c0", "n1", "n2", "n3"], pids):
        assert any(line.startswith(f"process {node} pid {pid} (run {run_id}): ") for line in lines), r.stdout
    assert f"removed iptables chain {chain}" in lines
    assert any(line.startswith(f"removed registry entry {run_id} ") for line in lines)
    assert _alive(pids) == []
    saved = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    assert chain not in saved and f"highwater:{run_id}" not in saved
    assert Registry(tmp_path / "registry").get(run_id) is None
    # a second run finds nothing of this run
    again = _cli_cleanup(tmp_path / "registry")
    assert run_id not in again.stdout


def test_cleanup_without_partition_stops_even_a_paused_leftover(tmp_path, owner_killed):
    run_id, pids = owner_killed
    assert proc_state(pids[3]) == "T"
    report = clean(Registry(tmp_path / "registry"))
    assert report.failed == []
    assert sum(line.startswith("process ") for line in report.removed) == 4
    assert _alive(pids) == []
    assert Registry(tmp_path / "registry").get(run_id) is None


def test_cleanup_leaves_a_live_run_alone(tmp_path):
    reg = Registry(tmp_path / "registry")
    c = LocalCluster(ClusterSpec("alive-run", tmp_path / "run", brokers=1), registry=reg, command=echo_server.command)
    with c:
        c.start()
        pids = [c.pid(n) for n in c.nodes()]
        report = clean(reg)
        assert not any("alive-run" in line for line in report.removed)
        assert all(c.is_running(n) for n in c.nodes())
        assert reg.get("alive-run") is not None
    assert _alive(pids) == []


def test_cleanup_never_kills_a_reused_pid(tmp_path):
    """A dead run's record names a pid that now belongs to another process (other start time)."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        reg = Registry(tmp_path / "registry")
        dead_owner = subprocess.Popen([sys.executable, "-c", "pass"])
        dead_owner.wait()
        with reg.locked():
            reg.put(RunEntry(run_id="ghost", owner_pid=dead_owner.pid, owner_start_time=1, prefix="127.99.99",
                             ports=[29990, 29991],
                             processes=[ProcessRecord("n1", bystander.pid,
                                                      proc_start_time(bystander.pid) - 1, ["x"])]))
        report = clean(reg)
        assert report.removed == ["removed registry entry ghost (owner pid "
                                  f"{dead_owner.pid} is gone; addresses 127.99.99.x)"]
        assert same_process(bystander.pid, proc_start_time(bystander.pid))
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_cleanup_removes_an_unreadable_registry_file_and_reports_nothing_when_clean(tmp_path):
    reg = Registry(tmp_path / "registry")
    reg.dir.mkdir(parents=True)
    torn = reg.dir / "run-torn.json"
    torn.write_text('{"run_id": "torn", "owner_')
    r = _cli_cleanup(reg.dir)
    assert r.returncode == 0
    assert r.stdout.splitlines() == [f"removed unreadable registry file {torn}"] or \
        f"removed unreadable registry file {torn}" in r.stdout.splitlines()
    assert not torn.exists()
    r = _cli_cleanup(tmp_path / "empty-registry")
    assert r.returncode == 0
    # a fresh registry may still see highwater chains of other dead runs; ours has nothing of its own
    assert "registry entry" not in r.stdout


@pytest.mark.root
def test_cleanup_of_one_registry_keeps_the_chain_of_a_live_run_in_the_default_registry(tmp_path):
    live = LocalCluster(ClusterSpec(f"live-default-{os.getpid()}", tmp_path / "run", brokers=1),
                        command=echo_server.command)   # the default registry, as a real run
    with live:
        live.start()
        live.drop([("n1", "c0")])
        chain = live.firewall().describe()["chain"]
        for reg in (Registry(tmp_path / "other-registry"), live.registry):
            report = clean(reg)
            assert not any(chain in line for line in report.removed), report.removed
            assert chain in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
            assert live.is_running("n1")
    assert chain not in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout


@pytest.mark.root
def test_cleanup_keeps_the_chain_of_a_live_run_in_a_registry_it_does_not_know(tmp_path):
    # a real run owner registered under its own HIGHWATER_REGISTRY_DIR-style directory (tmp_path/registry),
    # with a partition in place; cleanup of another registry must neither list nor remove its chain
    run_id = f"live-elsewhere-{os.getpid()}-{time.monotonic_ns() % 100000}"
    owner, pids = _spawn_owner(tmp_path, run_id, partition=True)
    chain = f"HW-{local_firewall.short_id(run_id)}"
    try:
        try:
            for extra in (("--dry-run",), ()):
                r = _cli_cleanup(tmp_path / "another-registry", *extra)
                assert r.returncode == 0, r.stderr
                assert chain not in r.stdout, r.stdout
                saved = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
                assert f"-A {chain} -s" in saved and f"highwater:{run_id} owner={owner.pid}:" in saved
                assert _alive(pids) == pids
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait()
        # the owner is gone: now the same cleanup removes the chain
        r = _cli_cleanup(tmp_path / "another-registry")
        assert f"removed iptables chain {chain}" in r.stdout, r.stdout
        assert chain not in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    finally:
        clean(Registry(tmp_path / "registry"))       # its processes (and chain), even when an assertion failed
    assert _alive(pids) == []


@pytest.mark.root
@pytest.mark.nfqueue(flushes=True)
@pytest.mark.skipif(not shutil.which("nft"), reason="needs nft")
def test_cleanup_keeps_the_nft_table_of_a_live_owner_and_removes_a_dead_ones(tmp_path):
    live = local_firewall.NftFirewall(f"nft-live-{os.getpid()}-{time.monotonic_ns() % 100000}")
    dead_id = f"nft-dead-{os.getpid()}-{time.monotonic_ns() % 100000}"
    dead = local_firewall.NftFirewall(dead_id)
    live.install()                                  # owned by this (live) test process, in no registry
    try:
        subprocess.run([sys.executable, "-c", "import sys; from clusters.local_firewall import NftFirewall; "
                        "NftFirewall(sys.argv[1]).install()", dead_id],
                       check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})  # its owner exits
        listed = {o["table"]: o for o in local_firewall.find_leftovers() if o["kind"] == "nft"}
        assert listed[live.table]["owner"] == list(this_process_identity())
        report = clean(Registry(tmp_path / "registry"))
        assert f"removed nft table inet {dead.table}" in report.removed, report.removed
        assert not any(live.table in line for line in report.removed), report.removed
        tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
        assert live.table in tables and dead.table not in tables
    finally:
        live.remove()
        dead.remove()
