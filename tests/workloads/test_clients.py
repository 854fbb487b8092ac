"""Every workload client has its protocol's methods with the protocol's signature (workloads/clients.py):
the native client and both Kafka libraries' wrappers, producers and consumers alike. Each is driven
against real brokers elsewhere (tests/workloads, tests/harness); this holds them to one shape."""
from __future__ import annotations

import inspect

import pytest

from broker.client import Consumer, Producer
from workloads import kafka_client
from workloads.clients import ConsumerClient, ProducerClient


def _params(fn) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("cls", [Producer, kafka_client.ConfluentProducer, kafka_client.KafkaPythonProducer])
def test_every_producer_client_sends_as_the_protocol_says(cls):
    assert _params(cls.send) == _params(ProducerClient.send)
    assert _params(cls.close) == _params(ProducerClient.close)


@pytest.mark.parametrize("cls", [Consumer, kafka_client.ConfluentConsumer, kafka_client.KafkaPythonConsumer])
def test_every_consumer_client_fetches_as_the_protocol_says(cls):
    assert _params(cls.fetch) == _params(ConsumerClient.fetch)
    assert _params(cls.close) == _params(ConsumerClient.close)


def test_a_native_producer_is_a_producer_client_and_not_a_consumer_client():
    p = Producer(controller=("127.0.0.1", 1), timeout_s=0.1)
    try:
        assert isinstance(p, ProducerClient) and not isinstance(p, ConsumerClient)
    finally:
        p.close()
