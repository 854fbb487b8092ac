"""End to end: `highwater run --cluster external --bootstrap host:port` against a highwater cluster that the
test starts itself (broker/server/bare.BareCluster) and hands to the harness only as an opaque
Kafka-compatible cluster: one bootstrap address, nothing else. The run creates its topic with
CreateTopics, drives the workload and the final reads through confluent-kafka, waits for health
through Kafka Metadata, and cannot dump replicas: loss is checked from the history and the final reads,
divergence and the protocol rules are out of the backend's scope: named as not applicable, never as
clean, and the verdict covers the rest (a clean run exits 0). Bad configurations
are refused in one line naming the key before anything is created.
"""
from __future__ import annotations

import pytest

from clusters.bare import BareCluster
from rundir import formats as runformat
from rundir import kinds
from rundir.exits import EXIT_USAGE, EXIT_VALID
from e2e_helpers import found_kinds, load_json, processes_mentioning, run_dir_from_stdout, run_highwater

HOST = "127.0.0.1"
NO_DUMPS = "the external backend has no access to the brokers' disks"
NO_LOGS = "the external backend has no access to the brokers' event logs"
# what the verdict does not cover on this backend, and why (results.json's scope)
OUT_OF_SCOPE = [{"evidence": "replica-dumps", "reason": NO_DUMPS, "kinds": ["divergence"]},
                {"evidence": "event-logs", "reason": NO_LOGS, "kinds": list(kinds.PROTOCOL_NAMES)}]


@pytest.fixture
def opaque_cluster(tmp_path):
    """A real controller and 3 brokers with no topic: the run must create its own."""
    with BareCluster(tmp_path / "cluster", brokers=3, host=HOST,
                      broker_settings={"min_insync_replicas": 2}) as cluster:
        yield cluster


def topic_events(cluster: BareCluster) -> list[dict]:
    log = cluster.workdir / "c0" / "controller.log"
    return [e for e in map(load_json_line, log.read_text().splitlines()) if e and e.get("event") == "topic-created"]


def load_json_line(line: str):
    import json
    try:
        return json.loads(line)
    except ValueError:
        return None


@pytest.mark.slow
def test_workload_only_run_checks_loss_and_names_divergence_out_of_scope(opaque_cluster, tmp_path):
    bootstrap = f"{HOST}:{opaque_cluster.ports[2]}"        # one broker's address, as a user would give it
    test_file = tmp_path / "stamped.toml"                   # the topic's configs go with its CreateTopics
    test_file.write_text('[topic]\nconfigs = {"message.timestamp.type" = "LogAppendTime"}\n')
    r = run_highwater("run", "--test-file", str(test_file), "--cluster", "external", "--bootstrap", bootstrap,
                      "--time-limit", "12",
                      "--rate", "100", "--seed", "3", "--checker", "reference", "--results-dir",
                      str(tmp_path / "results"), "--plain", timeout=300)
    run_dir = run_dir_from_stdout(r.stdout)
    assert r.returncode == EXIT_VALID, r.stderr
    assert (f"highwater: VALID (exit 0): no anomalies · not applicable ({NO_DUMPS}): divergence · not applicable "
            f"({NO_LOGS}): the 21 protocol rules · 3 partitions · checked by reference in ") in r.stderr
    results = load_json(run_dir / runformat.RESULTS_JSON)
    # loss and the other history checks ran and found nothing; divergence (replica dumps) and the protocol
    # rules (node event logs) are out of this backend's scope: not applicable, no unknown
    assert results["valid"] is True and found_kinds(results) == [] and results["unknown_reasons"] == []
    assert results["anomalies"]["lost-write"]["count"] == 0 and results["unseen"]["count"] == 0
    assert results["scope"] == {"not_applicable": OUT_OF_SCOPE, "not_checked": [], "missing": []}
    assert results["anomalies"]["divergence"]["status"] == "not-applicable"
    assert results["anomalies"]["lost-write"]["status"] == "checked"
    assert [(p["partition"], p["recovered"], p["reason"], p["lost"]) for p in results["partitions"]] == \
        [(0, True, None, 0), (1, True, None, 0), (2, True, None, 0)]
    acked = sum(p["acked"] for p in results["partitions"])
    assert acked > 500 and acked == sum(p["committed"] for p in results["partitions"])
    # no access to its internals: no replica dumps, no node logs, no configs written for its nodes
    assert not (run_dir / runformat.REPLICAS_DIR).exists() and not (run_dir / "nodes").exists()
    test = load_json(run_dir / runformat.TEST_JSON)
    assert test["cluster"] == {
        "backend": "external", "bootstrap": bootstrap,
        "nodes": {f"n{b}": {"host": HOST, "port": opaque_cluster.ports[b], "node_id": b} for b in (1, 2, 3)},
        "no_replica_dumps": "the external backend has no access to the brokers' disks"}
    assert test["evidence"] == {"formats": {"history": 1}, "absent": {"replica-dumps": NO_DUMPS, "event-logs": NO_LOGS}}
    assert (test["config"]["client"]["kind"], test["config"]["nemesis"]["faults"]) == ("kafka", [])
    # the final wait went through Kafka Metadata: leaders and ISR, no per-replica state
    final = load_json(run_dir / runformat.FINAL_JSON)
    assert final["timed_out"] is False
    for p in final["partitions"]:
        assert p["recovered"] and p["isr"] == ["n1", "n2", "n3"]
        assert p["replicas"] == {"n1": None, "n2": None, "n3": None} and p["read_to"] == p["hw"]
    # the topic was made by the run's CreateTopics (the cluster started without one), with the run's shape
    # and the test file's topic configs (the groups' __consumer_offsets, made when a consumer looked up
    # its coordinator, is the broker's own)
    assert [(e["topic"], e["partitions"], e["replication_factor"], e.get("configs"))
            for e in topic_events(opaque_cluster) if not e["topic"].startswith("__")] == [
        ("hw", 3, 3, {"message.timestamp.type": "LogAppendTime"})]
    # the report says what was not checked
    html = (run_dir / "report.html").read_text()
    assert "Not applicable to this cluster" in html and "replicas agree" not in html   # none was compared
    assert processes_mentioning(str(run_dir)) == []
    assert all(n.running() for n in opaque_cluster.brokers.values())     # the run left the cluster running


@pytest.mark.slow
def test_an_existing_topic_must_have_the_run_s_shape_and_be_empty(tmp_path):
    """A topic of another shape, or one holding records (an earlier run's), is a set-up error (exit 254)
    naming what is wrong; an empty topic of the right shape is used as it is."""
    with BareCluster(tmp_path / "cluster", brokers=1, host=HOST,
                      topics=[{"name": "hw", "partitions": 1, "replication_factor": 1}]) as cluster:
        where = f"{HOST}:{cluster.ports[1]}"

        def run(*args):
            return run_highwater("run", "--cluster", "external", "--bootstrap", where, "--replication-factor", "1",
                                 "--min-insync-replicas", "1", "--time-limit", "3", "--checker", "reference",
                                 "--results-dir", str(tmp_path / "results"), "--plain", *args, timeout=120)
        r = run()
        assert r.returncode == EXIT_USAGE, r.stderr
        assert (f"highwater: cannot set up the test: Kafka cluster at {where}: topic 'hw' exists with 1 partitions "
                "and replication factor 1, but the run asks for 3 partitions and replication factor 1 (set "
                "topic.partitions / topic.replication_factor to match, or use another topic.name)"
                ) in r.stderr.splitlines()
        r = run("--partitions", "1")
        assert r.returncode == EXIT_VALID, r.stderr           # a clean run: the verdict covers what it checks
        hw = load_json(run_dir_from_stdout(r.stdout) / runformat.FINAL_JSON)["partitions"][0]["hw"]
        assert hw > 50
        r = run("--partitions", "1")
        assert r.returncode == EXIT_USAGE, r.stderr
        assert (f"highwater: cannot set up the test: Kafka cluster at {where}: topic 'hw' exists and holds records "
                f"(end offsets p0={hw}): a run needs an empty topic (set topic.name to a new one)"
                ) in r.stderr.splitlines()


@pytest.mark.parametrize("args, line", [
    (["--cluster", "external"],
     "highwater: command line: key 'cluster.bootstrap' is required by the external backend "
     "(--bootstrap host:port[,host:port])"),
    (["--cluster", "external", "--bootstrap", "127.0.0.1:9092", "--nemesis", "kill"],
     "highwater: --nemesis: key 'nemesis.faults' cannot be injected here: the external backend cannot inject kill: "
     "it has no access to the brokers' hosts (give them in --nodes-file or --docker-containers, or run it "
     "workload-only: --nemesis none)"),
    (["--cluster", "external", "--bootstrap", "127.0.0.1:9092", "--client", "native"],
     "highwater: --client: key 'client.kind' must be \"kafka\" with the external backend (the cluster is reached "
     "only through Kafka clients), got 'native'"),
], ids=["no-bootstrap", "fault-without-hosts", "native-client"])
def test_bad_external_configuration_is_one_line_and_creates_nothing(tmp_path, args, line):
    results = tmp_path / "results"
    r = run_highwater("run", *args, "--results-dir", str(results), timeout=60)
    assert (r.returncode, r.stderr.splitlines(), r.stdout) == (EXIT_USAGE, [line], "")
    assert not results.exists()
