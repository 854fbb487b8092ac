"""What a workload asks of its clients: two small protocols, each with three implementations.

A producer worker (workloads/producer.py) and the scenario runner's produce steps send through a
`ProducerClient`; a consumer worker (workloads/consumer.py) and the final reads fetch through a
`ConsumerClient`. Either client is made by a factory per worker and closed when the worker ends.

    ProducerClient.send(topic, partition, values) -> SendResult(offsets, epoch)
        raises broker.client.ClientError: `definite` says whether the write certainly did not happen
    ConsumerClient.fetch(topic, partition, offset, max_records=1000, max_wait_ms=0)
        -> FetchResult(records [(offset, value)], hw, epoch)

Implementations: the native client (broker/client: `Producer`, `Consumer`), confluent-kafka and
kafka-python (workloads/kafka_client.py: `ConfluentProducer`, `KafkaPythonProducer`, `ConfluentConsumer`,
`KafkaPythonConsumer`). tests/workloads/test_clients.py holds every one to its protocol. One more producer
serves scenarios only: workloads/kafka_wire.py `WireProducer`, an idempotent producer that keeps its batches
so that a scenario's resend step can send them again.
"""
from __future__ import annotations

from typing import Iterable, Protocol, runtime_checkable

from broker.client import FetchResult, SendResult


@runtime_checkable
class ProducerClient(Protocol):
    def send(self, topic: str, partition: int, values: Iterable[bytes]) -> SendResult: ...

    def close(self) -> None: ...


@runtime_checkable
class ConsumerClient(Protocol):
    def fetch(self, topic: str, partition: int, offset: int, max_records: int = 1000,
              max_wait_ms: int = 0) -> FetchResult: ...

    def close(self) -> None: ...
