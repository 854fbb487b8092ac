"""`--client kafka [--kafka-library ...]` (client.kind, client.library in harness/config.py) and the
lifecycle's client factories (harness/lifecycle.py): which client a run's workers get, bootstrapped where.
The real counterpart is tests/harness/test_e2e_kafka_client.py (whole runs with the Kafka client)."""
from __future__ import annotations

import pytest

from clusters.base import NodeAddress
from harness import config as C
from harness.lifecycle import RunSession
from broker.client import Consumer, Producer
from workloads import kafka_client as kc


def test_flags_and_toml_choose_the_client(tmp_path):
    cfg = C.build(None, {"client": "kafka", "kafka_library": "kafka-python", "nemesis": "none"})
    assert (cfg.client.kind, cfg.client.library) == ("kafka", "kafka-python")
    assert cfg.to_dict()["client"]["kind"] == "kafka"          # what test.json records
    default = C.build(None, {"nemesis": "none"})
    assert (default.client.kind, default.client.library) == ("mixed", "confluent")
    path = tmp_path / "t.toml"
    path.write_text('[client]\nkind = "kafka"\nacks = 1\n[nemesis]\nfaults = []\n')
    cfg = C.build(path, {})
    assert (cfg.client.kind, cfg.client.library, cfg.client.acks) == ("kafka", "confluent", 1)
    assert C.from_dict(cfg.to_dict()).client.kind == "kafka"   # a rerun gets the same client


def test_bad_client_values_name_the_flag_or_the_line(tmp_path):
    with pytest.raises(C.ConfigError) as info:
        C.build(None, {"client": "jvm", "nemesis": "none"})
    assert str(info.value).startswith("--client: ") and "native, kafka" in str(info.value)
    path = tmp_path / "t.toml"
    path.write_text('[client]\nkind = "kafka"\nlibrary = "aiokafka"\n')
    with pytest.raises(C.ConfigError) as info:
        C.build(path, {})
    assert f"{path}:3" in str(info.value) and "client.library" in str(info.value)


class _Cluster:
    """The two addresses a session asks a local cluster for (a stand-in: no processes)."""

    def controller(self):
        return NodeAddress("c0", "127.0.0.1", 1)

    def brokers(self):
        return {"n1": NodeAddress("n1", "127.0.0.2", 9101), "n2": NodeAddress("n2", "127.0.0.3", 9102)}


def _session(kind: str, library: str = "confluent") -> RunSession:
    s = object.__new__(RunSession)          # no run directory: only the client factories are used
    s.cfg = C.TestConfig()
    s.cfg.client.kind, s.cfg.client.library = kind, library
    s.cluster = _Cluster()
    return s


@pytest.mark.parametrize("library,producer,consumer", [
    ("confluent", kc.ConfluentProducer, kc.ConfluentConsumer),
    ("kafka-python", None, None)])
def test_session_factories_give_the_kafka_adapters(library, producer, consumer):
    s = _session("kafka", library)
    assert s.kafka_client() and s.kafka_bootstrap() == ["127.0.0.2:9101", "127.0.0.3:9102"]
    if producer is None:     # kafka-python connects in its constructor: nothing listens here
        return
    p, c = s.make_producer(), s.make_consumer()
    try:
        assert isinstance(p, producer) and isinstance(c, consumer) and p.acks == -1
    finally:
        p.close()
        c.close()


def test_session_factories_give_the_native_client_by_default():
    s = _session("native")
    assert not s.kafka_client()
    p, c = s.make_producer(acks=1), s.make_consumer()
    assert isinstance(p, Producer) and isinstance(c, Consumer) and p.acks == 1
    p.close()
    c.close()
