"""What a Kafka-compatible cluster says about itself through the Kafka protocol: brokers, a topic's
partitions (leader, leader epoch, replicas, ISR) and their high watermarks, and creating the test topic.

The external backend (clusters/external.py) reaches its cluster only as a Kafka client would, so the
harness's health checks (every partition has a leader before the workload; the final phase's wait for
a healthy cluster) ask `KafkaMetadata.describe`, which answers like the native `Admin.describe`
(broker/client) except that the replicas' own LEO and HW cannot be known: `replica_state` is None and
`hw` is the leader's high watermark (ListOffsets "latest"). It uses confluent-kafka's AdminClient
(librdkafka): Metadata for brokers and partitions, ListOffsets for the HW and leader epoch, CreateTopics
for the topic. Its log lines go to the `clusters.kafka` logger (harness.log), never to stderr.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from clusters.base import ClusterError

log = logging.getLogger("clusters.kafka")


@dataclass
class KafkaPartitionInfo:
    """One partition as Kafka Metadata and ListOffsets describe it (the native PartitionInfo's fields)."""
    partition: int
    leader: int | None            # None: no leader (Metadata's -1)
    epoch: int                    # the leader epoch ListOffsets answered with, -1 when unknown
    isr: list[int]
    replicas: list[int]
    hw: int | None                # the high watermark (ListOffsets latest), None when it could not be asked
    replica_state: None = None    # the replicas' own (LEO, HW): not available to a Kafka client


@dataclass(frozen=True)
class KafkaBroker:
    node_id: int
    host: str
    port: int


class KafkaMetadata:
    """A small admin client over confluent-kafka's AdminClient; one per user (not shared by threads)."""

    def __init__(self, bootstrap: str, *, timeout_s: float = 5.0, client_id: str = "highwater-metadata"):
        from confluent_kafka.admin import AdminClient
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        ms = str(max(100, int(timeout_s * 1000)))
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id,
                                   "socket.timeout.ms": ms, "logger": log,
                                   "reconnect.backoff.max.ms": "1000"})

    def close(self) -> None:
        self._admin = None

    def _fail(self, what: str, exc: BaseException) -> ClusterError:
        err = exc.args[0] if exc.args else exc
        detail = (f"{err.name()}: {err.str()}" if hasattr(err, "name") and hasattr(err, "str")
                  else f"{type(exc).__name__}: {exc}")
        return ClusterError(f"Kafka cluster at {self.bootstrap}: {what}: {detail}")

    def _metadata(self):
        try:
            return self._admin.list_topics(timeout=self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - KafkaException: no broker answered in time
            raise self._fail("Metadata", exc) from None

    def brokers(self) -> list[KafkaBroker]:
        """The brokers the cluster's Metadata lists (Kafka lists the live ones), by node id."""
        md = self._metadata()
        return sorted((KafkaBroker(b.id, b.host, b.port) for b in md.brokers.values()), key=lambda b: b.node_id)

    def topic_shape(self, topic: str) -> tuple[int, set[int]] | None:
        """(partitions, the replication factors its partitions have) of an existing topic, or None."""
        t = self._metadata().topics.get(topic)
        if t is None or (t.error is not None and t.error.code() == _unknown_topic()):
            return None
        if t.error is not None:
            raise ClusterError(f"Kafka cluster at {self.bootstrap}: topic {topic!r}: {t.error.str()}")
        return len(t.partitions), {len(p.replicas) for p in t.partitions.values()}

    def ensure_topic(self, topic: str, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None) -> str:
        """Create the topic (CreateTopics, with `configs` as its topic configs) unless it exists; an existing
        topic must have this shape (its configs are not compared: a Kafka-compatible cluster need not
        answer DescribeConfigs). Returns a one-line description of what was done; raises ClusterError
        otherwise."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic
        shape = self.topic_shape(topic)
        created = False
        if shape is None:
            futures = self._admin.create_topics([NewTopic(topic, partitions, replication_factor,
                                                          config=dict(configs or {}))],
                                                operation_timeout=self.timeout_s, request_timeout=self.timeout_s)
            try:
                futures[topic].result(timeout=self.timeout_s + 5)
                created = True
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise self._fail(f"creating topic {topic!r} ({partitions} partitions, replication factor "
                                     f"{replication_factor})", exc) from None
            except Exception as exc:  # noqa: BLE001 - a future that timed out
                raise self._fail(f"creating topic {topic!r}", exc) from None
            if created:
                extra = "".join(f", {k} = {v}" for k, v in sorted((configs or {}).items()))
                return (f"created topic {topic!r}: {partitions} partitions, replication factor "
                        f"{replication_factor}{extra}")
            shape = self.topic_shape(topic)
            if shape is None:
                raise ClusterError(f"Kafka cluster at {self.bootstrap}: topic {topic!r} exists by "
                                         "CreateTopics but not in Metadata")
        have_parts, have_rf = shape
        if have_parts != partitions or have_rf != {replication_factor}:
            rf = "/".join(str(r) for r in sorted(have_rf)) or "?"
            raise ClusterError(
                f"Kafka cluster at {self.bootstrap}: topic {topic!r} exists with {have_parts} partitions and "
                f"replication factor {rf}, but the run asks for {partitions} partitions and replication factor "
                f"{replication_factor} (set topic.partitions / topic.replication_factor to match, or use "
                "another topic.name)")
        self._require_empty(topic, partitions)
        return f"topic {topic!r} exists, empty: {have_parts} partitions, replication factor {replication_factor}"

    def _require_empty(self, topic: str, partitions: int, attempts: int = 5) -> None:
        """An existing topic must hold no record: the final reads start at offset 0 and the checker knows
        only the values this run sent (a previous run's values would pass for this run's)."""
        import time
        latest: dict[int, tuple[int, int]] = {}
        for attempt in range(attempts):
            latest = self._latest(topic, list(range(partitions)))
            if len(latest) == partitions:
                break
            time.sleep(0.5)
        unknown = sorted(set(range(partitions)) - set(latest))
        if unknown:
            raise ClusterError(f"Kafka cluster at {self.bootstrap}: topic {topic!r} exists, and whether it "
                                     f"is empty cannot be told (no ListOffsets answer for partitions {unknown})")
        used = {p: hw for p, (hw, _) in sorted(latest.items()) if hw > 0}
        if used:
            raise ClusterError(
                f"Kafka cluster at {self.bootstrap}: topic {topic!r} exists and holds records (end offsets "
                f"{', '.join(f'p{p}={hw}' for p, hw in used.items())}): a run needs an empty topic (set "
                "topic.name to a new one)")

    def describe(self, topic: str) -> list[KafkaPartitionInfo]:
        """Every partition of `topic` (Metadata), with its HW and leader epoch (ListOffsets latest) where
        the leader answered. Raises ClusterError when the topic is unknown or nobody answers."""
        md = self._metadata()
        t = md.topics.get(topic)
        if t is None:
            raise ClusterError(f"Kafka cluster at {self.bootstrap}: no topic {topic!r}")
        if t.error is not None:
            raise ClusterError(f"Kafka cluster at {self.bootstrap}: topic {topic!r}: {t.error.str()}")
        parts = sorted(t.partitions.values(), key=lambda p: p.id)
        offsets = self._latest(topic, [p.id for p in parts if p.leader >= 0 and p.error is None])
        out = []
        for p in parts:
            hw, epoch = offsets.get(p.id, (None, -1))
            out.append(KafkaPartitionInfo(p.id, p.leader if p.leader >= 0 else None, epoch, sorted(p.isrs),
                                          sorted(p.replicas), hw))
        return out

    def _latest(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """partition -> (high watermark, leader epoch or -1) from ListOffsets latest; a partition whose
        leader did not answer is left out."""
        if not partitions:
            return {}
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec
        try:
            futures = self._admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                                               isolation_level=IsolationLevel.READ_UNCOMMITTED,
                                               request_timeout=self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - the request could not be made: no HW known this time
            log.info("ListOffsets on %s failed: %s", self.bootstrap, exc)
            return {}
        out: dict[int, tuple[int, int]] = {}
        for tp, fut in futures.items():
            try:
                info = fut.result(timeout=self.timeout_s + 5)
            except Exception as exc:  # noqa: BLE001 - that leader did not answer: its HW is unknown
                log.info("ListOffsets of %s/%s on %s failed: %s", topic, tp.partition, self.bootstrap, exc)
                continue
            epoch = info.leader_epoch if isinstance(info.leader_epoch, int) and info.leader_epoch >= 0 else -1
            out[tp.partition] = (int(info.offset), epoch)
        return out


def _unknown_topic() -> int:
    from confluent_kafka import KafkaError
    return KafkaError.UNKNOWN_TOPIC_OR_PART
