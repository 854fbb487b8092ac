"""clusters/external.py and the harness's seams for it, without a cluster: the bootstrap value, the
config rules (a Kafka client, no faults without hosts), and the final wait's rule when the cluster
cannot report each replica's LEO/HW (leader, full ISR, HW settled). The real counterparts run in
tests/harness/test_e2e_external.py against a highwater cluster treated as an opaque Kafka cluster."""
from __future__ import annotations

import pytest

from clusters.base import ClusterError, ClusterSpec, capabilities
from clusters.external import NO_REPLICA_DUMPS, ExternalCluster, parse_bootstrap
from clusters.external_docker import parse_containers
from clusters.kafka_metadata import KafkaPartitionInfo
from harness import backends, final_phase
from harness import config as config_mod


@pytest.mark.parametrize("raw, want", [
    ("127.0.0.5:9092", [("127.0.0.5", 9092)]),
    ("a.example:9092, b.example:19092", [("a.example", 9092), ("b.example", 19092)]),
    ("[::1]:9092", [("::1", 9092)]),
])
def test_bootstrap_parses(raw, want):
    assert parse_bootstrap(raw) == want


@pytest.mark.parametrize("raw, problem", [
    ("", "must be host:port[,host:port], got nothing"),
    ("kafka", "entry 'kafka' must be host:port with a port 1..65535"),
    ("kafka:0", "entry 'kafka:0' must be host:port with a port 1..65535"),
    ("a:9092,:9093", "entry ':9093' must be host:port with a port 1..65535"),
    ("a:http", "entry 'a:http' must be host:port with a port 1..65535"),
])
def test_bad_bootstrap_says_which_entry(raw, problem):
    with pytest.raises(ClusterError) as e:
        parse_bootstrap(raw)
    assert str(e.value) == problem


def test_containers_parse():
    assert parse_containers("kafka-1, kafka-2=2") == [("kafka-1", None), ("kafka-2", 2)]
    for raw in ("", "a,,b", "a=x", "=3"):
        with pytest.raises(ClusterError):
            parse_containers(raw)


def test_the_backend_before_start(tmp_path):
    c = backends.make_cluster("external", ClusterSpec("r", tmp_path), cluster_cfg=config_mod.ClusterConfig(
        backend="external", bootstrap="10.1.2.3:9092,[::1]:9093"))
    assert isinstance(c, ExternalCluster) and backends.kafka_reached(c)
    assert c.bootstrap_servers() == "10.1.2.3:9092,[::1]:9093"
    assert capabilities(c) == []          # no fault capability: nothing to kill, pause or partition
    with pytest.raises(ClusterError, match="has no controller node"):
        c.controller()
    assert c.layout() == {"backend": "external", "bootstrap": "10.1.2.3:9092,[::1]:9093", "nodes": {},
                          "no_replica_dumps": NO_REPLICA_DUMPS}
    with pytest.raises(ClusterError, match=r"cannot inject faults \(kill\)"):
        c.check_faults(["kill"])
    c.check_faults([])
    c.stop_all(), c.teardown(), c.collect(tmp_path)    # leave an external cluster alone
    assert list(tmp_path.iterdir()) == []


def build(**flags):
    return config_mod.build(None, {k: v for k, v in flags.items()})


def test_config_defaults_for_external():
    cfg = build(backend="external", bootstrap="127.0.0.1:9092")
    assert (cfg.client.kind, cfg.nemesis.faults) == ("kafka", [])
    # the replication factor is the cluster's business, not cluster.nodes'
    assert build(backend="external", bootstrap="127.0.0.1:9092", replication_factor=5).topic.replication_factor == 5


@pytest.mark.parametrize("flags, line", [
    ({"backend": "external"},
     "command line: key 'cluster.bootstrap' is required by the external backend (--bootstrap host:port[,host:port])"),
    ({"backend": "external", "bootstrap": "kafka"},
     "--bootstrap: key 'cluster.bootstrap' entry 'kafka' must be host:port with a port 1..65535"),
    ({"backend": "external", "bootstrap": "127.0.0.1:9092", "nemesis": "kill,partition"},
     "--nemesis: key 'nemesis.faults' cannot be injected here: the external backend cannot inject kill, partition: "
     "it has no access to the brokers' hosts (give them in --nodes-file or --docker-containers, or run it "
     "workload-only: --nemesis none)"),
    ({"backend": "external", "bootstrap": "127.0.0.1:9092", "client": "native"},
     "--client: key 'client.kind' must be \"kafka\" with the external backend (the cluster is reached only through "
     "Kafka clients), got 'native'"),
    ({"backend": "external", "bootstrap": "127.0.0.1:9092", "docker_containers": "k1,k2", "nodes_file": "n.toml"},
     "--docker-containers: key 'cluster.docker_containers' and cluster.nodes_file exclude each other (faults go "
     "through SSH or through Docker)"),
    ({"backend": "external", "bootstrap": "127.0.0.1:9092", "docker_containers": "k1", "nemesis": "partition"},
     "--nemesis: key 'nemesis.faults' cannot be injected here: the external backend cannot inject partition (with "
     "Docker containers it offers kill, kill-leader, pause, pause-leader)"),
    ({"backend": "local", "bootstrap": "127.0.0.1:9092"},
     "--bootstrap: key 'cluster.bootstrap' is only for the external backend (cluster.backend is 'local')"),
])
def test_config_errors_name_the_key(flags, line):
    with pytest.raises(config_mod.ConfigError) as e:
        build(**flags)
    assert str(e.value) == line


def test_a_test_file_asking_for_a_fault_or_the_native_client(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('[cluster]\nbackend = "external"\nbootstrap = "127.0.0.1:9092"\n[nemesis]\nfaults = ["pause"]\n')
    with pytest.raises(config_mod.ConfigError) as e:
        config_mod.build(f, {})
    assert str(e.value).startswith(f"{f}:5: key 'nemesis.faults' cannot be injected here: the external backend "
                                   "cannot inject pause")
    f.write_text('[cluster]\nbackend = "external"\nbootstrap = "127.0.0.1:9092"\n[client]\nkind = "native"\n')
    with pytest.raises(config_mod.ConfigError) as e:
        config_mod.build(f, {})
    assert str(e.value).startswith(f"{f}:5: key 'client.kind' must be \"kafka\"")


def kinfo(p, leader, isr, hw, replicas=(1, 2, 3), epoch=2):
    return KafkaPartitionInfo(p, leader, epoch, list(isr), list(replicas), hw)


def test_without_replica_states_a_partition_is_healthy_once_its_hw_settled():
    """Leader, full ISR, HW answered and unchanged for HW_STABLE_S; a moving HW restarts the count."""
    answers = [[kinfo(0, None, [1], None)], [kinfo(0, 1, [1, 2], 5)], [kinfo(0, 1, [1, 2, 3], 7)],
               [kinfo(0, 1, [1, 2, 3], 9)], [kinfo(0, 1, [1, 2, 3], 9)], [kinfo(0, 1, [1, 2, 3], 9)],
               [kinfo(0, 1, [1, 2, 3], 9)], [kinfo(0, 1, [1, 2, 3], 9)]]
    t = [0.0]
    seen = []

    def describe():
        a = answers.pop(0)
        seen.append(a)
        return a
    out = final_phase.wait_recovered(describe, [0], final_phase.Polling(10, clock=lambda: t[0],
                                                                     sleep=lambda s: t.__setitem__(0, t[0] + s)))
    # HW 9 first seen at 0.75 s; settled 1.0 s later
    assert (out.timed_out, out.waited_s, len(seen)) == (False, 1.75, 8)
    s = out.states[0]
    assert (s.healthy, s.hw, s.replica_state) == (True, 9, None)
    v = final_phase.final_state_value(0, s, read_to=9, read_covered=True)
    assert v == {"partition": 0, "recovered": True, "hw": 9, "leader": "n1", "epoch": 2, "isr": ["n1", "n2", "n3"],
                 "replicas": {"n1": None, "n2": None, "n3": None}, "read_to": 9}


def test_without_replica_states_the_problems_say_why():
    s = final_phase.from_info(kinfo(0, 1, [1, 2, 3], None))
    assert (s.healthy, s.hw, s.problem()) == (False, -1, "no HW from the leader")
    s = final_phase.from_info(kinfo(0, 1, [1, 2, 3], 4))
    s.stable_s = 0.5
    assert (s.healthy, s.problem()) == (False, "HW 4 settled for 0.5s of 1.0s")
    s = final_phase.from_info(kinfo(0, 1, [1, 3], 4))
    s.stable_s = 5.0
    assert (s.healthy, s.problem()) == (False, "not in ISR: n2")


def test_the_plain_external_class_refuses_hosts_or_containers(tmp_path):
    """With a nodes file or containers the cluster must be the class that injects faults (harness/backends
    external_class picks it): the plain class would take them and silently inject none."""
    from clusters.base import ClusterError
    from clusters.external import ExternalAccess
    from harness.backends import external_class

    spec = ClusterSpec("ext", tmp_path, brokers=3)
    with pytest.raises(ClusterError, match="Docker containers is ExternalDockerCluster"):
        ExternalCluster(spec, ExternalAccess("127.0.0.1:9092", docker_containers="a,b,c"))
    with pytest.raises(ClusterError, match="a nodes file is ExternalHostsCluster"):
        ExternalCluster(spec, ExternalAccess("127.0.0.1:9092", nodes_file="n.toml"))
    assert external_class(ExternalAccess("127.0.0.1:9092")) is ExternalCluster
    assert external_class(None) is ExternalCluster
    assert external_class(ExternalAccess(docker_containers="a")).__name__ == "ExternalDockerCluster"
    assert external_class(ExternalAccess(nodes_file="n.toml")).__name__ == "ExternalHostsCluster"
