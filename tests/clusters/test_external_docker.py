"""clusters/external_docker.py for real: faults through the Docker engine on an external cluster's existing
containers (`--cluster external --docker-containers ...`).

The test makes a highwater cluster of its own in containers, as a user's docker compose would: a
network, a controller and three brokers, each container's main process the daemon (`python3 -m broker
...`, our code and the crc32c module mounted read-only into a highwater node image). The harness then
gets only the bootstrap address and the container names: kill = docker kill, restart = docker start,
pause = docker pause; a chaos run with kill and pause loses nothing acknowledged.
"""
from __future__ import annotations

import ipaddress
import json
import random
import secrets
import sys
from pathlib import Path

import pytest

from clusters.base import ClusterError, ClusterSpec, capabilities
from clusters.external import ExternalAccess
from clusters.external_docker import ExternalDockerCluster
from harness.backends import external_class
from rundir import formats as runformat
from rundir.exits import EXIT_VALID

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from e2e_helpers import REPO, found_kinds, load_json, run_dir_from_stdout, run_highwater  # noqa: E402

pytestmark = pytest.mark.docker
LABEL = "highwater.test"
CRC32C = Path(__import__("crc32c").__file__).parent      # the module and its dist-info (it reads its version)
CRC32C_DIST = next(CRC32C.parent.glob("crc32c-*.dist-info"))


@pytest.fixture(scope="module")
def compose(tmp_path_factory):
    """{"c0"|"n1".. : container}, the brokers' addresses and the label value; removed afterwards."""
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no Docker engine: {exc}")
    images = [t for i in client.images.list(name="highwater/node") for t in i.tags]
    if not images:
        pytest.skip("no highwater/node image (highwater images --build)")
    tag = f"extdocker-{secrets.token_hex(4)}"
    d = tmp_path_factory.mktemp("compose")
    net = None
    for _ in range(20):
        subnet = ipaddress.ip_network(f"10.214.{random.randrange(256)}.0/24")
        try:
            net = client.networks.create(f"hw-{tag}", driver="bridge", labels={LABEL: tag},
                                         ipam=docker.types.IPAMConfig(pool_configs=[
                                             docker.types.IPAMPool(subnet=str(subnet))]))
            break
        except docker.errors.APIError:
            continue
    assert net is not None, "no free /24 in 10.214.0.0/16"
    hosts = list(subnet.hosts())
    addr = {"c0": str(hosts[1]), **{f"n{b}": str(hosts[1 + b]) for b in (1, 2, 3)}}
    containers = {}
    try:
        for node, ip in addr.items():
            (d / node).mkdir()
            base = {"host": ip, "data_dir": "/cfg/data", "log_file": "/cfg/broker.log"}
            if node == "c0":
                role, cfg = "controller", {**base, "port": 9000, "expected_brokers": 3,
                                           "broker_session_timeout_ms": 2500}
            else:
                role, cfg = "node", {**base, "port": 9092, "node_id": int(node[1:]), "controller_host": addr["c0"],
                                     "controller_port": 9000, "min_insync_replicas": 2,
                                     "replica_lag_time_max_ms": 3000}
            (d / node / "config.json").write_text(json.dumps(cfg))
            c = client.containers.create(
                images[0], ["python3", "-m", "broker", role, "--config", "/cfg/config.json"], name=f"{tag}-{node}",
                hostname=node, labels={LABEL: tag}, init=True, working_dir="/code",
                environment={"PYTHONPATH": "/code:/extra", "PYTHONUNBUFFERED": "1"},
                volumes={str(REPO): {"bind": "/code", "mode": "ro"},
                         str(CRC32C): {"bind": "/extra/crc32c", "mode": "ro"},
                         str(CRC32C_DIST): {"bind": f"/extra/{CRC32C_DIST.name}", "mode": "ro"},
                         str(d / node): {"bind": "/cfg", "mode": "rw"}},
                network=net.name)
            net.disconnect(c)
            net.connect(c, ipv4_address=ip)
            c.start()
            containers[node] = c
        yield containers, addr, tag
    finally:
        for c in client.containers.list(all=True, filters={"label": f"{LABEL}={tag}"}):
            c.remove(force=True)
        net.remove()


def brokers_up(compose) -> str:
    """The bootstrap address once Metadata lists the three brokers (else the containers' output)."""
    from clusters.kafka_metadata import KafkaMetadata
    from clusters.bare import wait_until
    containers, addr, _ = compose
    md = KafkaMetadata(f"{addr['n1']}:9092", timeout_s=2.0)
    try:
        wait_until(lambda: len(_safe(md.brokers)) == 3, 30, "3 brokers in Metadata")
    except TimeoutError as exc:
        logs = {n: (c.reload(), c.status, c.logs()[-300:].decode(errors="replace"))[1:] for n, c in containers.items()}
        raise AssertionError(f"{exc}: {logs}") from None
    return f"{addr['n1']}:9092"


def _safe(f):
    try:
        return f()
    except ClusterError:
        return []


def test_kill_start_pause_unpause_through_docker(compose, tmp_path):
    containers, addr, tag = compose
    bootstrap = brokers_up(compose)
    spec = ClusterSpec("ext", tmp_path, brokers=3,
                       controller_settings={"topics": [{"name": "probe", "partitions": 1, "replication_factor": 3}]})
    access = ExternalAccess(bootstrap, docker_containers=f"{tag}-n1,{tag}-n2=2,{tag}-n3")
    c = external_class(access)(spec, access)             # the class the harness builds for this access
    assert isinstance(c, ExternalDockerCluster) and capabilities(c) == ["Killable", "Pausable"]
    c.prepare()
    assert c.layout()["nodes"]["n2"] == {"host": addr["n2"], "port": 9092, "node_id": 2, "container": f"{tag}-n2"}
    assert c.kill("n2") == f"docker kill n2 (container {tag}-n2)"
    containers["n2"].reload()
    assert containers["n2"].status == "exited" and not c.is_running("n2")
    assert c.restart("n2") == f"docker start n2 (container {tag}-n2)" and c.is_running("n2")
    assert c.restart("n2") == f"n2 already running (container {tag}-n2 running)"
    assert c.pause("n3") == f"docker pause n3 (container {tag}-n3)"
    containers["n3"].reload()
    assert containers["n3"].status == "paused" and c.is_running("n3")
    c.resume("n3")
    containers["n3"].reload()
    assert containers["n3"].status == "running"
    with pytest.raises(ClusterError, match="cannot inject partition"):
        c.check_faults(["partition"])


# nightly: each action is tested above on every run; this is the same actions under a whole chaos run
@pytest.mark.nightly
@pytest.mark.slow
def test_chaos_run_with_docker_kill_and_pause(compose, tmp_path):
    containers, addr, tag = compose
    bootstrap = brokers_up(compose)
    r = run_highwater("run", "--cluster", "external", "--bootstrap", bootstrap, "--docker-containers",
                      ",".join(f"{tag}-n{b}" for b in (1, 2, 3)), "--nemesis", "kill,pause-leader",
                      "--nemesis-interval", "2", "--time-limit", "15", "--seed", "5", "--checker", "reference",
                      "--results-dir", str(tmp_path / "results"), "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    assert r.returncode == EXIT_VALID, r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    assert found_kinds(results) == [] and results["anomalies"]["lost-write"]["count"] == 0
    # replica dumps and event logs are out of this backend's scope: not applicable, not unknown
    assert results["unknown_reasons"] == []
    assert [g["evidence"] for g in results["scope"]["not_applicable"]] == ["replica-dumps", "event-logs"]
    ops = [line.obj for line in runformat.iter_jsonl(run_dir / runformat.NEMESIS)]
    started = [o["value"]["detail"] for o in ops if o["type"] == "info" and o["value"].get("phase") == "start"]
    assert any(d.startswith("docker kill n") for d in started), ops
    assert not [o for o in ops if o.get("error")], ops
    final = load_json(run_dir / runformat.FINAL_JSON)
    assert final["timed_out"] is False and all(p["recovered"] for p in final["partitions"])
    for c in containers.values():
        c.reload()
        assert c.status == "running"
