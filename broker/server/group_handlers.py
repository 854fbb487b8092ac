"""The Kafka handlers of the classic group protocol: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, ListGroups and DescribeGroups. Each takes a decoded request body
(broker/kafka/messages.py), its version and the request's client id, asks the coordinator
(broker/server/coordinator.py) and builds the response body. Bad input gets Kafka's error code, never
an exception: an empty group id is INVALID_GROUP_ID, a commit for an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, oversized member metadata INVALID_REQUEST. docs/kafka-protocol.md,
"Consumer groups".
"""
from __future__ import annotations

from typing import Any

from broker.groups import membership as gm
from broker.groups.membership import JoinRequest
from broker.kafka import errors as E
from broker.kafka import versions as V

FIND_COORDINATOR_GROUP = 0      # FindCoordinator key type of a group (1 is a transactional id)


def _code(name: str) -> int:
    return E.kafka_code(name)


class GroupHandlers:
    def __init__(self, coordinator):
        self.coordinator = coordinator
        self.apis = {
            V.FIND_COORDINATOR: self.find_coordinator,
            V.JOIN_GROUP: self.join_group,
            V.SYNC_GROUP: self.sync_group,
            V.HEARTBEAT: self.heartbeat,
            V.LEAVE_GROUP: self.leave_group,
            V.OFFSET_COMMIT: self.offset_commit,
            V.OFFSET_FETCH: self.offset_fetch,
            V.LIST_GROUPS: self.list_groups,
            V.DESCRIBE_GROUPS: self.describe_groups,
        }

    # --- FindCoordinator ----------------------------------------------------------------------------
    async def find_coordinator(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        def answer(code: int, node: int = -1, host: str = "", port: int = -1, message: str | None = None):
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "node_id": node,
                    "host": host, "port": port}

        key = body.get("key") or ""
        if body.get("key_type", FIND_COORDINATOR_GROUP) != FIND_COORDINATOR_GROUP:
            return answer(E.COORDINATOR_NOT_AVAILABLE, message="this broker has no transaction coordinator")
        if not key:
            return answer(E.INVALID_GROUP_ID, message="the group id is empty")
        err, node, host, port = await self.coordinator.find(key)
        return answer(_code(err), node, host, port, None if err == gm.NONE else err)

    # --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------
    async def join_group(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        def answer(code: int, member_id: str = "", **fields):
            return {"throttle_time_ms": 0, "error_code": code, "generation_id": fields.get("generation", -1),
                    "protocol_name": fields.get("protocol") or "", "leader": fields.get("leader") or "",
                    "member_id": member_id,
                    "members": [{"member_id": mid, "group_instance_id": iid, "metadata": meta}
                                for mid, iid, meta in fields.get("members", [])]}

        group_id = body["group_id"]
        if not group_id:
            return answer(E.INVALID_GROUP_ID, body.get("member_id", ""))
        req = JoinRequest(member_id=body["member_id"], client_id=client_id or "", client_host="",
                          session_timeout_ms=body["session_timeout_ms"],
                          rebalance_timeout_ms=(body["rebalance_timeout_ms"] if body.get("rebalance_timeout_ms", -1) >= 0
                                                else body["session_timeout_ms"]),
                          protocol_type=body["protocol_type"],
                          protocols=tuple((p["name"], p["metadata"] or b"") for p in body["protocols"]),
                          group_instance_id=body.get("group_instance_id"),
                          require_known_member_id=version >= 4)
        reply = await self.coordinator.join(group_id, req)
        fields = dict(reply.fields)
        member_id = fields.pop("member_id", req.member_id)
        return answer(_code(reply.error), member_id, **fields)

    async def sync_group(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        if not body["group_id"]:
            return {"throttle_time_ms": 0, "error_code": E.INVALID_GROUP_ID, "assignment": b""}
        assignments = {a["member_id"]: a["assignment"] or b"" for a in body.get("assignments") or []}
        reply = await self.coordinator.sync(body["group_id"], body["member_id"], body["generation_id"], assignments)
        return {"throttle_time_ms": 0, "error_code": _code(reply.error),
                "assignment": reply.fields.get("assignment", b"") if reply.error == gm.NONE else b""}

    async def heartbeat(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        if not body["group_id"]:
            return {"throttle_time_ms": 0, "error_code": E.INVALID_GROUP_ID}
        err = self.coordinator.heartbeat(body["group_id"], body["member_id"], body["generation_id"])
        return {"throttle_time_ms": 0, "error_code": _code(err)}

    async def leave_group(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        if not body["group_id"]:
            return {"throttle_time_ms": 0, "error_code": E.INVALID_GROUP_ID}
        err, members = self.coordinator.leave(body["group_id"], [body["member_id"]])
        if err == gm.NONE:
            err = members.get(body["member_id"], gm.NONE)
        return {"throttle_time_ms": 0, "error_code": _code(err)}

    # --- OffsetCommit, OffsetFetch --------------------------------------------------------------------
    async def offset_commit(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        topics = body.get("topics") or []
        wanted = [(t["name"], p["partition_index"], p["committed_offset"], p.get("committed_leader_epoch", -1),
                   p.get("committed_metadata")) for t in topics for p in t.get("partitions") or []]
        if not body["group_id"]:
            codes = {(t, p): "INVALID_GROUP_ID" for t, p, *_ in wanted}
        else:
            codes = await self.coordinator.commit(body["group_id"], body.get("member_id", ""),
                                                  body.get("generation_id_or_member_epoch", -1), wanted)
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"],
                                                "error_code": _code(codes.get((t["name"], p["partition_index"]),
                                                                              "UNKNOWN_SERVER_ERROR"))}
                                               for p in t.get("partitions") or []]} for t in topics]}

    async def offset_fetch(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        topics = body.get("topics")
        wanted = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
        if not body["group_id"]:
            err, found = "INVALID_GROUP_ID", []
        else:
            err, found = self.coordinator.fetch_offsets(body["group_id"], wanted)
        if err != gm.NONE:
            # v2+: the error is the group's; v1 knows only per-partition errors
            found = [(t, p, None) for t, p in (wanted or [])]
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for t, p, c in found:
            by_topic.setdefault(t, []).append({
                "partition_index": p, "committed_offset": c.offset if c is not None else -1,
                "committed_leader_epoch": c.leader_epoch if c is not None else -1,
                "metadata": (c.metadata if c is not None else "") or "",
                "error_code": _code(err) if version < 2 else E.NONE})
        return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                "error_code": _code(err)}

    # --- ListGroups, DescribeGroups --------------------------------------------------------------------
    async def list_groups(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": E.NONE,
                "groups": [{"group_id": g, "protocol_type": pt} for g, pt, _ in self.coordinator.list_groups()]}

    async def describe_groups(self, body: dict[str, Any], version: int, client_id: str | None) -> dict[str, Any]:
        out = []
        for group_id in body.get("groups") or []:
            err, d = self.coordinator.describe(group_id)
            if err != gm.NONE or d is None:
                d = {"state": "Dead", "protocol_type": "", "protocol": "", "members": []}
            out.append({"error_code": _code(err), "group_id": group_id, "group_state": d["state"],
                        "protocol_type": d["protocol_type"], "protocol_data": d["protocol"],
                        "members": [{"member_id": m["member_id"], "group_instance_id": m["instance_id"],
                                     "client_id": m["client_id"], "client_host": m["client_host"],
                                     "member_metadata": m["metadata"], "member_assignment": m["assignment"]}
                                    for m in d["members"]],
                        "authorized_operations": -(2 ** 31)})
        return {"throttle_time_ms": 0, "groups": out}

    # --- a handler that failed ------------------------------------------------------------------------
    @staticmethod
    def error_body(request, code: int) -> dict[str, Any]:
        """The response to a group request whose handler raised: `code` everywhere it fits."""
        body, key = request.body, request.api_key
        if key == V.OFFSET_COMMIT:
            return {"throttle_time_ms": 0, "topics": [
                {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                                   for p in t.get("partitions") or []]}
                for t in body.get("topics") or []]}
        if key == V.OFFSET_FETCH:
            return {"throttle_time_ms": 0, "topics": [], "error_code": code}
        if key == V.DESCRIBE_GROUPS:
            return {"throttle_time_ms": 0, "groups": [
                {"error_code": code, "group_id": g, "group_state": "", "protocol_type": "", "protocol_data": "",
                 "members": [], "authorized_operations": -(2 ** 31)} for g in body.get("groups") or []]}
        if key == V.LIST_GROUPS:
            return {"throttle_time_ms": 0, "error_code": code, "groups": []}
        if key == V.FIND_COORDINATOR:
            return {"throttle_time_ms": 0, "error_code": code, "error_message": E.NAMES.get(code), "node_id": -1,
                    "host": "", "port": -1}
        if key == V.JOIN_GROUP:
            return {"throttle_time_ms": 0, "error_code": code, "generation_id": -1, "protocol_name": "",
                    "leader": "", "member_id": body.get("member_id", ""), "members": []}
        if key == V.SYNC_GROUP:
            return {"throttle_time_ms": 0, "error_code": code, "assignment": b""}
        return {"throttle_time_ms": 0, "error_code": code}      # Heartbeat, LeaveGroup
