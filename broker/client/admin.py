"""Admin: the controller's view of partitions and brokers, plus each replica's own LEO/HW
(DESCRIBE_REPLICAS on every replica broker; None for a broker that cannot be asked).

`describe` asks the replica brokers in parallel, each under its own deadline (`broker_timeout_s`,
default the client's timeout_s), so a paused or partitioned broker costs one deadline, not one per broker,
and the answer is partial (None for that broker) rather than an error.

Two admin actions: `elect_leader` (the controller's ELECT_LEADER: make a given replica leader, or elect
again, unclean once if asked) and `flush` (a broker's FLUSH: fsync its logs now). Both return a one-line
description of what happened and raise ClientError (code = the refusal's error code, message = why).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from broker.client.errors import DEFINITE_BROKER_ERRORS, ClientError, broker_error
from broker.client.metadata import ClientBase
from broker.client.results import PartitionInfo
from broker.protocol import apis


class Admin(ClientBase):
    def brokers(self) -> dict[int, tuple[str, int, bool]]:
        with self._lock:
            return dict(self.refresh_metadata().brokers)

    def describe(self, topic: str, broker_timeout_s: float | None = None) -> list[PartitionInfo]:
        with self._lock:
            md = self.refresh_metadata()
            parts = sorted((pm for (t, _p), pm in md.partitions.items() if t == topic), key=lambda p: p.partition)
            wanted = sorted({b for pm in parts for b in pm.replicas})
            reports = self._describe_brokers(wanted, self.timeout_s if broker_timeout_s is None else broker_timeout_s)
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

    def _describe_brokers(self, broker_ids: list[int], timeout_s: float) -> dict[int, dict | None]:
        """DESCRIBE_REPLICAS on every broker at once (each thread uses only its own broker's connection)."""
        conns: dict[int, object] = {}
        for b in broker_ids:
            try:
                conns[b] = self.broker_connection(b)
            except ClientError:
                conns[b] = None
        asked = [b for b in broker_ids if conns[b] is not None]
        out: dict[int, dict | None] = {b: None for b in broker_ids}
        if len(asked) == 1:
            out[asked[0]] = _ask(conns[asked[0]], timeout_s)
        elif asked:
            with ThreadPoolExecutor(max_workers=len(asked), thread_name_prefix="describe") as pool:
                futures = {b: pool.submit(_ask, conns[b], timeout_s) for b in asked}
                out.update({b: f.result() for b, f in futures.items()})
        return out

    def _describe_broker(self, broker_id: int) -> dict[tuple[str, int], dict] | None:
        try:
            conn = self.broker_connection(broker_id)
        except ClientError:
            return None
        return _ask(conn, self.timeout_s)

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


    def elect_leader(self, topic: str, partition: int, broker: int | None = None, unclean: bool = False) -> str:
        """ELECT_LEADER: with `broker`, make it leader if it is live and eligible (ISR, ELR with KIP-966 on,
        any live replica with unclean=True); without, elect again if the leader is missing or fenced (unclean
        election allowed for this one election with unclean=True). Returns the controller's one-line account;
        a refusal raises ClientError (INELIGIBLE_REPLICA, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_PARTITION)."""
        what = f"ELECT_LEADER {topic}/{partition}" + (f" broker {broker}" if broker is not None else "") + \
            (" unclean" if unclean else "")
        with self._lock:
            try:
                resp = self._controller_conn.request(
                    apis.ELECT_LEADER, {"topic": topic, "partition": partition, "broker": broker,
                                        "unclean": bool(unclean)}, self.timeout_s)
            except ClientError as exc:
                raise ClientError("CONTROLLER_NOT_AVAILABLE", exc.definite, f"{what}: {exc}") from None
            self.invalidate()
            error = str(resp.get("error", "INVALID_RESPONSE"))
            if error != "NONE":
                raise ClientError(error, True, f"{what}: refused: {resp.get('message', error)}")
            return str(resp.get("message", ""))

    def flush(self, broker_id: int, topic: str | None = None, partition: int | None = None) -> str:
        """FLUSH on one broker: fsync its logs now (all, every partition of `topic`, or one partition).
        Returns e.g. "broker 2 flushed t/0 to offset 7 (was 4)"; errors raise ClientError."""
        what = f"FLUSH on broker {broker_id}" + (f" {topic}" if topic is not None else "") + \
            (f"/{partition}" if partition is not None else "")
        with self._lock:
            conn = self.broker_connection(broker_id)
            resp = conn.request(apis.FLUSH, {"topic": topic, "partition": partition}, self.timeout_s)
            error = str(resp.get("error", "INVALID_RESPONSE"))
            if error != "NONE":
                raise ClientError(error, error in DEFINITE_BROKER_ERRORS, f"{what}: {resp.get('message', error)}")
            parts = resp.get("partitions", [])
            if not parts:
                return f"broker {broker_id} flushed nothing (it holds no replica)"
            return f"broker {broker_id} flushed " + ", ".join(
                f"{p['topic']}/{p['partition']} to offset {p['flushed_offset']} (was {p['was']})" for p in parts)


def _ask(conn, timeout_s: float) -> dict[tuple[str, int], dict] | None:
    """One broker's DESCRIBE_REPLICAS keyed by (topic, partition); None if it does not answer in time."""
    try:
        resp = conn.request(apis.DESCRIBE_REPLICAS, {}, timeout_s)
        return {(p["topic"], int(p["partition"])): p for p in resp.get("partitions", [])}
    except (ClientError, KeyError, TypeError, ValueError):
        return None
