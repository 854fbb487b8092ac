"""What a workload asks of its clients: two small protocols, each with three implementations.

A producer worker (workloads/producer.py) and the scenario runner's produce steps send through a
`ProducerClient`; a consumer worker (workloads/consumer.py) and the final reads fetch through a
`ConsumerClient`. Either client is made by a factory per worker and closed when the worker ends.

    ProducerClient.send(topic, partition, values) -> SendResult(offsets, epoch)
        raises broker.client.ClientError: `definite` says whether the write certainly did not happen
    ConsumerClient.fetch(topic, partition, offset, max_records=1000, max_wait_ms=0)
        -> FetchResult(records [(offset, value)], hw, epoch)

The group workload's members (workloads/group.py) use a third, `GroupConsumerClient`: a member
subscribed to one topic in one group, made per member by workloads/kafka_client.py make_group_consumer
(confluent-kafka or kafka-python only: the native client has no group API).

    GroupConsumerClient.poll(max_records, timeout_s) -> {partition: [(offset, epoch, value)]}
    .events() -> [GroupEvent("assign" | "revoke", partitions, lost)]   the rebalances since the last call
    .committed(partitions) -> {p: offset or -1}; .low_watermark(p); .hw(p); .start({p: offset})
    .commit_sync(offsets) raises ClientError; .commit_async(offsets); .commit_reports() -> [CommitReport]
    .membership() -> (member id, generation or -1)

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


@runtime_checkable
class GroupConsumerClient(Protocol):
    def poll(self, max_records: int, timeout_s: float) -> dict: ...

    def events(self) -> list: ...

    def committed(self, partitions: list[int]) -> dict[int, int]: ...

    def low_watermark(self, partition: int) -> int: ...

    def hw(self, partition: int) -> int: ...

    def start(self, positions: dict[int, int]) -> None: ...

    def commit_sync(self, offsets: dict[int, int]) -> None: ...

    def commit_async(self, offsets: dict[int, int]) -> None: ...

    def commit_reports(self) -> list: ...

    def membership(self) -> tuple[str, int]: ...

    def close(self) -> None: ...
