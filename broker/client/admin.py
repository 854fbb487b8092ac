"""Admin: the controller's view of partitions and brokers, plus each replica's own LEO/HW
(DESCRIBE_REPLICAS on every replica broker; None for a broker that cannot be asked)."""
from __future__ import annotations

from broker.client.errors import ClientError, broker_error
from broker.client.metadata import ClientBase
from broker.client.results import PartitionInfo
from broker.protocol import apis


class Admin(ClientBase):
    def brokers(self) -> dict[int, tuple[str, int, bool]]:
        with self._lock:
            return dict(self.refresh_metadata().brokers)

    def describe(self, topic: str) -> list[PartitionInfo]:
        with self._lock:
            md = self.refresh_metadata()
            parts = sorted((pm for (t, _p), pm in md.partitions.items() if t == topic), key=lambda p: p.partition)
            reports: dict[int, dict | None] = {}
            for pm in parts:
                for b in pm.replicas:
                    if b not in reports:
                        reports[b] = self._describe_broker(b)
            out = []
            for pm in parts:
                state = {}
                for b in pm.replicas:
                    rep = reports.get(b)
                    entry = rep.get((topic, pm.partition)) if rep is not None else None
                    state[b] = (int(entry["leo"]), int(entry["hw"])) if entry is not None else None
                out.append(PartitionInfo(pm.partition, pm.leader, pm.leader_epoch, list(pm.isr),
                                         list(pm.replicas), pm.isr_version, state))
            return out

    def replicas(self, broker_id: int) -> dict[tuple[str, int], dict] | None:
        """One broker's DESCRIBE_REPLICAS answer keyed by (topic, partition), or None if unreachable."""
        with self._lock:
            return self._describe_broker(broker_id)

    def _describe_broker(self, broker_id: int) -> dict[tuple[str, int], dict] | None:
        try:
            conn = self.broker_connection(broker_id)
            resp = conn.request(apis.DESCRIBE_REPLICAS, {}, self.timeout_s)
        except ClientError:
            return None
        return {(p["topic"], int(p["partition"])): p for p in resp.get("partitions", [])}

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        with self._lock:
            try:
                resp = self._controller_conn.request(
                    apis.CREATE_TOPICS,
                    {"topics": [{"name": name, "partitions": partitions, "replication_factor": replication_factor}]},
                    self.timeout_s)
            except ClientError as exc:
                raise ClientError("CONTROLLER_NOT_AVAILABLE", exc.definite, str(exc)) from None
            if resp.get("error", "NONE") != "NONE":
                raise broker_error(str(resp["error"]), f"CREATE_TOPICS {name}")
            self.invalidate()
