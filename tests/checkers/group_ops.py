"""The group workload's history operations written through tests/simulated_runs.py's RunBuilder, as
docs/formats.md ("Client operations") describes them: group-assign, group-revoke, commit, committed and
a group member's poll. Each helper writes the invoke and its completion one after the other, unless
`complete=False` (then only the invoke: the caller completes it later with `complete`)."""
from __future__ import annotations

from typing import Any


def _pairs(offsets: dict[int, int]) -> list[list[int]]:
    return [[p, o] for p, o in sorted(offsets.items())]


def group_assign(b, process: Any, group: str, member: str, generation: int, committed: dict[int, int],
                 outcome: str = "ok") -> int:
    """A group-assign of `committed`'s partitions; ok answers their committed offsets (-1: none)."""
    inv = {"group": group, "member": member, "generation": generation, "partitions": sorted(committed)}
    b.op(process, "invoke", "group-assign", inv)
    if outcome != "ok":
        return b.op(process, outcome, "group-assign", inv, error="timeout")
    return b.op(process, "ok", "group-assign", dict(inv, committed=_pairs(committed)))


def group_revoke(b, process: Any, group: str, member: str, generation: int, partitions: list[int],
                 lost: bool = False) -> int:
    inv = {"group": group, "member": member, "generation": generation, "partitions": sorted(partitions)}
    b.op(process, "invoke", "group-revoke", inv)
    return b.op(process, "ok", "group-revoke", dict(inv, lost=True) if lost else inv)


def commit(b, process: Any, group: str, member: str, generation: int, offsets: dict[int, int],
           outcome: str | None = "ok", mode: str = "sync", error: str | None = None) -> int:
    """A commit; outcome None: only its invoke (complete it with `complete`)."""
    inv = {"group": group, "member": member, "generation": generation, "offsets": _pairs(offsets), "mode": mode}
    at = b.op(process, "invoke", "commit", inv)
    if outcome is None:
        return at
    return complete(b, process, "commit", inv, outcome, error)


def commit_value(group: str, member: str, generation: int, offsets: dict[int, int], mode: str = "sync") -> dict:
    return {"group": group, "member": member, "generation": generation, "offsets": _pairs(offsets), "mode": mode}


def complete(b, process: Any, f: str, value: dict, outcome: str = "ok", error: str | None = None) -> int:
    if outcome == "ok":
        return b.op(process, "ok", f, value)
    return b.op(process, outcome, f, value, error=error or ("timeout" if outcome == "info" else "ILLEGAL_GENERATION"))


def committed(b, process: Any, group: str, offsets: dict[int, int]) -> int:
    """An OffsetFetch of the group's committed offsets (the final phase's, from a client outside the group)."""
    inv = {"group": group, "partitions": sorted(offsets)}
    b.op(process, "invoke", "committed", inv)
    return b.op(process, "ok", "committed", dict(inv, offsets=_pairs(offsets)))


def group_poll(b, process: Any, group: str, generation: int, partition: int, frm: int,
               records: list[tuple[int, Any]], hw: int, epoch: int = 1) -> int:
    inv = {"partition": partition, "offset": frm, "group": group, "generation": generation}
    b.op(process, "invoke", "poll", inv)
    return b.op(process, "ok", "poll", dict(inv, records=[list(r) for r in records], hw=hw, epoch=epoch))
