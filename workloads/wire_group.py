"""A consumer-group member that speaks the Kafka protocol itself, for scenarios that stage a group's life.

The client libraries decide on their own when a member joins, heartbeats, commits and rejoins; a scenario
that stages a zombie, or a commit in flight while the coordinator moves, needs to decide it. A
`WireGroupMember` does each of those only when told, through broker/kafka's codecs and one raw
connection per broker (workloads/kafka_wire.py `KafkaConnection`):

    m = WireGroupMember(["127.0.0.1:9101"], group="g", topic="hw", partitions=[0, 1])
    joined = m.join(deadline)        # FindCoordinator, JoinGroup (KIP-394), SyncGroup: Joined(...)
    m.committed([0, 1], deadline)    # OffsetFetch: {0: 3, 1: -1}
    m.commit({0: 5}, deadline)       # OffsetCommit with the member's id and generation
    m.freeze()                       # no more heartbeats: a zombie that still thinks it is a member
    m.close()                        # LeaveGroup (unless frozen), connections closed

The leader assigns the topic's partitions round-robin over the members, in member-id order, with the
classic consumer protocol's encoding (ConsumerProtocolSubscription / Assignment v0), so that admin tools
read the group as any other. A heartbeat thread keeps the member alive between steps until it is frozen
or closed; it never rejoins by itself, it only notes what the coordinator said (`rejoin_needed`).

Errors are `broker.client.ClientError`s named by Kafka's error names. `definite` is true only for a
refusal the coordinator gives before it writes anything (REFUSED); a commit that timed out or whose
coordinator moved may still be in the offsets topic, so it is unknown.
"""
from __future__ import annotations

import struct
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from broker.client import ClientError
from broker.kafka import errors as E
from broker.kafka import versions as V
from workloads.kafka_wire import KafkaConnection, _host_port

FIND_VERSION, JOIN_VERSION, SYNC_VERSION, HEARTBEAT_VERSION = 2, 5, 3, 3
LEAVE_VERSION, COMMIT_VERSION, FETCH_VERSION = 1, 7, 5
RETRY_S = 0.2
FIND_TIMEOUT_S = 2.0     # per bootstrap server: a paused broker accepts the connection and never answers
CLIENT_ID = "highwater-wire-group"
# the coordinator is elsewhere or not ready: find it again and retry (until the caller's deadline)
RETRIABLE = (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR)
# refused before anything was written (broker/server/coordinator.py answers these up front)
REFUSED = (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.REBALANCE_IN_PROGRESS, E.INVALID_GROUP_ID,
           E.OFFSET_METADATA_TOO_LARGE, E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_LOAD_IN_PROGRESS)


def error_name(code: int) -> str:
    return E.NAMES.get(code, f"KAFKA_ERROR_{code}")


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (empty)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t.encode())) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0 with one topic: version, [(topic, [partition])], user data (empty)."""
    t = topic.encode()
    return (struct.pack(">hih", 0, 1, len(t)) + t + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1))


def assigned_partitions(data: bytes, topic: str) -> list[int]:
    """The partitions of `topic` in a ConsumerProtocolAssignment (an empty one: none)."""
    if len(data) < 6:
        return []
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: list[int] = []
    for _ in range(max(n, 0)):
        (size,) = struct.unpack_from(">h", data, pos)
        name = data[pos + 2:pos + 2 + size].decode()
        pos += 2 + size
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        ps = list(struct.unpack_from(f">{max(count, 0)}i", data, pos))
        pos += 4 * max(count, 0)
        if name == topic:
            out += ps
    return sorted(out)


@dataclass(frozen=True)
class Joined:
    """A completed join: the generation, this member's id, whether it led, and its partitions."""
    member_id: str
    generation: int
    leader: bool
    partitions: list[int]
    coordinator: int


class WireGroupMember:
    """One member of a consumer group, driven step by step (module docstring)."""

    def __init__(self, bootstrap: Iterable[str] | str, *, group: str, topic: str, partitions: list[int],
                 session_timeout_ms: int = 6000, timeout_s: float = 5.0):
        servers = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
        self.bootstrap = [_host_port(s) for s in servers for s in s.split(",") if s.strip()]
        self.group, self.topic, self.partitions = group, topic, sorted(partitions)
        self.session_timeout_ms, self.timeout_s = int(session_timeout_ms), float(timeout_s)
        self.member_id, self.generation = "", -1
        self.coordinator: int | None = None
        self._coordinator_address: tuple[str, int] | None = None    # until a request says it moved
        self._first = 0                  # the bootstrap server to ask first: the last one that answered
        self.addresses: dict[int, tuple[str, int]] = {}
        self.rejoin_needed: str | None = None       # the heartbeat's last refusal, by name
        self._conns: dict[tuple[str, int], KafkaConnection] = {}
        self._lock = threading.Lock()                # one request at a time on a connection
        self._frozen = threading.Event()
        self._closed = threading.Event()
        self._heartbeat: threading.Thread | None = None

    # --- the coordinator ----------------------------------------------------------------------------
    def _ask(self, address: tuple[str, int], api: int, version: int, body: dict,
             timeout_s: float | None = None) -> dict:
        wait = self.timeout_s if timeout_s is None else timeout_s
        with self._lock:
            conn = self._conns.get(address)
            try:
                if conn is None:
                    conn = self._conns[address] = KafkaConnection(address, wait, CLIENT_ID)
                conn.sock.settimeout(wait)
                return conn.request(api, version, body)
            except (OSError, ConnectionError) as exc:
                dropped = self._conns.pop(address, None)
                if dropped is not None:
                    dropped.close()
                raise ClientError("_TRANSPORT", conn is None, f"{address[0]}:{address[1]}: {exc}") from None

    def _find(self) -> tuple[str, int]:
        """The group's coordinator's address: the one found last, else FindCoordinator to each bootstrap
        server in turn (a short wait each), starting from the last one that answered."""
        if self._coordinator_address is not None:
            return self._coordinator_address
        problems = []
        n = len(self.bootstrap)
        for i in range(n):
            k = (self._first + i) % n
            address = self.bootstrap[k]
            try:
                r = self._ask(address, V.FIND_COORDINATOR, FIND_VERSION, {"key": self.group, "key_type": 0},
                              min(FIND_TIMEOUT_S, self.timeout_s))
            except ClientError as exc:
                problems.append(str(exc))
                continue
            if r["error_code"] == E.NONE:
                self._first = k
                self.coordinator = r["node_id"]
                self.addresses[r["node_id"]] = self._coordinator_address = (r["host"], r["port"])
                return self._coordinator_address
            problems.append(f"FindCoordinator: {error_name(r['error_code'])}")
        raise ClientError("COORDINATOR_NOT_AVAILABLE", True, "; ".join(problems) or "no bootstrap server")

    def _coordinator_request(self, api: int, version: int, body: dict, deadline: float, *,
                             code_of, retry_refused: bool = True) -> dict:
        """A request to the group's coordinator, found again and retried while it is elsewhere or not
        ready (RETRIABLE), until `deadline`; `code_of(answer)` is the answer's error code."""
        last = "no answer"
        while True:
            try:
                address = self._find()
                answer = self._ask(address, api, version, body)
                code = code_of(answer)
                if code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
                    self._coordinator_address = None        # find it again next time
                if code not in RETRIABLE or not retry_refused:
                    return answer
                last = error_name(code)
            except ClientError as exc:
                self._coordinator_address = None
                if exc.code == "_TRANSPORT" and not exc.definite:
                    raise                       # the request may have been served: not retried blindly
                last = f"{exc.code}: {exc}"
            if time.monotonic() >= deadline:
                raise ClientError("_TIMED_OUT", False, f"group {self.group}: {last} until the deadline")
            time.sleep(RETRY_S)

    # --- join --------------------------------------------------------------------------------------------
    def join(self, deadline: float) -> Joined:
        """Join (or rejoin) the group: JoinGroup until a generation is formed, then SyncGroup; the heartbeat
        thread starts (again) unless the member is frozen."""
        self.rejoin_needed = None
        while True:
            body = {"group_id": self.group, "session_timeout_ms": self.session_timeout_ms,
                    "rebalance_timeout_ms": self.session_timeout_ms, "member_id": self.member_id,
                    "group_instance_id": None, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": subscription([self.topic])}]}
            r = self._coordinator_request(V.JOIN_GROUP, JOIN_VERSION, body, deadline,
                                          code_of=lambda a: a["error_code"])
            code = r["error_code"]
            if code == E.MEMBER_ID_REQUIRED:
                self.member_id = r["member_id"]
                continue
            if code == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if code != E.NONE:
                raise ClientError(error_name(code), code in REFUSED, f"JoinGroup of {self.group}")
            self.member_id, self.generation = r["member_id"], r["generation_id"]
            leader = r["leader"] == self.member_id
            assignments = []
            if leader:
                members = sorted(m["member_id"] for m in r["members"])
                shares = {m: [p for i, p in enumerate(self.partitions) if i % len(members) == k]
                          for k, m in enumerate(members)}
                assignments = [{"member_id": m, "assignment": assignment(self.topic, ps)} for m, ps in shares.items()]
            s = self._coordinator_request(V.SYNC_GROUP, SYNC_VERSION, {
                "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": None, "assignments": assignments}, deadline, code_of=lambda a: a["error_code"])
            if s["error_code"] == E.REBALANCE_IN_PROGRESS:
                continue
            if s["error_code"] != E.NONE:
                raise ClientError(error_name(s["error_code"]), s["error_code"] in REFUSED, f"SyncGroup of {self.group}")
            mine = assigned_partitions(s["assignment"] or b"", self.topic)
            self._start_heartbeat()
            return Joined(self.member_id, self.generation, leader, mine, self.coordinator)

    def _start_heartbeat(self) -> None:
        if self._frozen.is_set() or (self._heartbeat is not None and self._heartbeat.is_alive()):
            return
        self._heartbeat = threading.Thread(target=self._beat, name=f"wire-group-{self.group}-heartbeat", daemon=True)
        self._heartbeat.start()

    def _beat(self) -> None:
        every = max(0.1, self.session_timeout_ms / 3000.0)
        while not (self._frozen.wait(every) or self._closed.is_set()):
            try:
                r = self._ask(self._find(), V.HEARTBEAT, HEARTBEAT_VERSION, {
                    "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
                    "group_instance_id": None})
            except ClientError:
                self._coordinator_address = None
                continue
            if r["error_code"] in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
                self._coordinator_address = None
            elif r["error_code"] not in (E.NONE,) + RETRIABLE:
                self.rejoin_needed = error_name(r["error_code"])

    def freeze(self) -> None:
        """Stop heartbeating but keep the member id and generation: a member that stalled (a long pause
        on its side) and will speak again as if nothing happened."""
        self._frozen.set()

    # --- offsets ------------------------------------------------------------------------------------------
    def commit(self, offsets: dict[int, int], deadline: float) -> None:
        """OffsetCommit of `offsets` with this member's id and generation; raises ClientError unless every
        partition's answer is NONE (retried while the coordinator is not ready: nothing was written)."""
        body = {"group_id": self.group, "generation_id_or_member_epoch": self.generation, "member_id": self.member_id,
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": self.topic, "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                     "committed_metadata": None} for p, o in sorted(offsets.items())]}]}

        def code_of(answer: dict) -> int:
            codes = {p["error_code"] for t in answer["topics"] for p in t["partitions"]}
            return next(iter(codes)) if len(codes) == 1 else next(c for c in sorted(codes) if c != E.NONE)

        # retried only on an answer given before any write (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR
        # up front); the coordinator maps a failed append to COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR
        # too, so those end the commit with an unknown outcome
        r = self._coordinator_request(V.OFFSET_COMMIT, COMMIT_VERSION, body, deadline, code_of=code_of,
                                      retry_refused=False)
        code = code_of(r)
        if code == E.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
            time.sleep(RETRY_S)
            return self.commit(offsets, deadline)
        if code != E.NONE:
            raise ClientError(error_name(code), code in REFUSED, f"OffsetCommit of {self.group}")

    def committed(self, partitions: list[int], deadline: float) -> dict[int, int]:
        """OffsetFetch: the committed offset of each partition, -1 where none is (retried while the
        coordinator is not ready)."""
        r = self._coordinator_request(V.OFFSET_FETCH, FETCH_VERSION, {
            "group_id": self.group, "topics": [{"name": self.topic, "partition_indexes": sorted(partitions)}]},
            deadline, code_of=lambda a: a["error_code"])
        if r["error_code"] != E.NONE:
            raise ClientError(error_name(r["error_code"]), True, f"OffsetFetch of {self.group}")
        out = {p: -1 for p in partitions}
        for t in r["topics"]:
            for p in t["partitions"]:
                if t["name"] == self.topic and p["partition_index"] in out:
                    if p["error_code"] != E.NONE:
                        raise ClientError(error_name(p["error_code"]), True, f"OffsetFetch of {self.group}")
                    out[p["partition_index"]] = p["committed_offset"] if p["committed_offset"] >= 0 else -1
        return out

    # --- the end -----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Leave the group (unless frozen: a zombie never says goodbye) and close the connections."""
        self._closed.set()
        frozen = self._frozen.is_set()
        self._frozen.set()
        if self._heartbeat is not None:
            self._heartbeat.join(2.0)
        if not frozen and self.member_id:
            try:
                self._ask(self._find(), V.LEAVE_GROUP, LEAVE_VERSION,
                          {"group_id": self.group, "member_id": self.member_id})
            except (ClientError, KeyError):
                pass
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
