"""A scenario's consumer-group steps: join, poll, commit, committed, freeze and leave (harness/scenario.py).

Each member a scenario names is a `workloads.wire_group.WireGroupMember`, one history process of its own
(a new one after an `info`), and its steps are written as the group workload's operations
(docs/formats.md "Group operations"), so the checker's `groups` family judges a scenario as it judges a
run of the group workload:

- join: the join itself is not an operation (the library workloads record none either); what the member
  was given is: a `group-assign` of its generation and partitions whose ok carries what OffsetFetch
  answered for them, and one `assign` per partition at the member's start (the committed offset, else
  0);
- poll: one `poll` of the group per partition that returned records, read with the native consumer
  from the member's position;
- commit: a `commit` (mode "sync") with the member's id and generation from its last join, ok, fail (a
  refusal before any write) or info (unknown: the write may have happened);
- committed: a `committed` read from a fresh member that never joins, like the final phase's.

A commit with `wait = false` runs in its own thread (`BackgroundCommit`), awaited like a background
produce step.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from broker.client import ClientError
from workloads.decode import decode_value
from workloads.wire_group import WireGroupMember


def _kind(err: ClientError | None) -> str:
    if err is None:
        return "ok"
    return "fail" if err.definite else "info"


class GroupSteps:
    """The members of one scenario run and their steps."""

    def __init__(self, history, bootstrap, topic: str, partitions: int, make_consumer, failed):
        """`bootstrap()` gives the brokers' client listeners, asked when the first member starts;
        `make_consumer()` a consumer for the poll steps (broker.client.Consumer's `fetch`); `failed(text)`
        the exception a step that did not play out raises (the runner's StepFailed)."""
        self.history, self._bootstrap, self.topic, self.step_failed = history, bootstrap, topic, failed
        self.make_consumer = make_consumer
        self.positions: dict[str, dict[int, int]] = {}
        self.partitions = list(range(partitions))
        self.members: dict[str, WireGroupMember] = {}
        self.processes: dict[str, int] = {}
        self.owned: dict[str, list[int]] = {}

    @property
    def bootstrap(self) -> list[str]:
        return self._bootstrap()

    def _member(self, name: str) -> WireGroupMember:
        return self.members[name]

    def _check(self, want: str, got: str, what: str) -> None:
        if want != "any" and got != want:
            raise self.step_failed(f"expected {what} to be {want}, got {got}")

    # --- steps -------------------------------------------------------------------------------------
    def join(self, a: dict[str, Any]) -> str:
        name, timeout = a["member"], float(a["timeout"])
        m = self.members.get(name)
        if m is None:
            m = self.members[name] = WireGroupMember(self.bootstrap, group=a["group"], topic=self.topic,
                                                     partitions=self.partitions,
                                                     session_timeout_ms=a["session_timeout_ms"], timeout_s=timeout)
            self.processes[name] = self.history.new_process()
        elif m.group != a["group"]:
            raise self.step_failed(f"member {name!r} is in group {m.group!r}, not {a['group']!r}")
        deadline = time.monotonic() + timeout
        try:
            joined = m.join(deadline)
        except ClientError as exc:
            self._check(a["expect"], "fail" if exc.definite else "info", f"the join of {name}")
            return f"{name} did not join: {exc.code} ({exc})"
        self.owned[name] = joined.partitions
        value = {"group": m.group, "member": joined.member_id, "generation": joined.generation,
                 "partitions": joined.partitions}
        process = self.processes[name]
        self.history.invoke(process, "group-assign", value)
        err = None
        try:
            got = m.committed(joined.partitions, deadline)
        except ClientError as exc:
            err = exc
        if err is None:
            self.history.complete(process, "ok", "group-assign",
                                  {**value, "committed": [[p, o] for p, o in sorted(got.items())]})
            self.positions[name] = {p: max(o, 0) for p, o in got.items()}
            for p, o in sorted(self.positions[name].items()):
                start = {"partition": p, "offset": o}
                self.history.invoke(process, "assign", start)
                self.history.complete(process, "ok", "assign", dict(start))
        else:
            self.history.complete(process, _kind(err), "group-assign", value, error=err.code)
            self.positions[name] = {}
        self._check(a["expect"], _kind(err), f"the join of {name}")
        led = " (leader)" if joined.leader else ""
        return (f"{name} joined {m.group} as {joined.member_id}{led}, generation {joined.generation}, "
                f"partitions {joined.partitions} at n{joined.coordinator}; committed "
                + (str(got) if err is None else f"not read: {err.code}"))

    def poll(self, a: dict[str, Any]) -> str:
        """Read each partition the member owns from its position, up to `count` records, recording one
        `poll` of the group per partition that returned some."""
        name, m = a["member"], self._member(a["member"])
        consumer = self.make_consumer()
        read = {}
        try:
            for p, at in sorted(self.positions.get(name, {}).items()):
                process = self.processes[name]
                invoke = {"partition": p, "offset": at, "group": m.group, "generation": m.generation}
                try:
                    got = consumer.fetch(self.topic, p, at, max_records=int(a["count"]))
                except ClientError as exc:
                    read[p] = f"{exc.code}"
                    continue
                if not got.records:
                    read[p] = 0
                    continue
                self.history.invoke(process, "poll", invoke)
                self.history.complete(process, "ok", "poll", dict(
                    invoke, records=[[int(o), decode_value(v), int(e)] for o, e, v in got.records], hw=got.hw,
                    epoch=got.epoch))
                self.positions[name][p] = got.records[-1][0] + 1
                read[p] = len(got.records)
        finally:
            consumer.close()
        return f"{name} read {read} (records by partition); now at {self.positions.get(name)}"

    def commit_value(self, a: dict[str, Any]) -> tuple[WireGroupMember, dict[str, Any], dict[int, int]]:
        m = self._member(a["member"])
        parts = [a["partition"]] if "partition" in a else self.owned.get(a["member"], [])
        if not parts:
            raise self.step_failed(f"member {a['member']!r} owns no partition to commit (give 'partition')")
        offsets = {p: int(a["offset"]) for p in parts}
        value = {"group": m.group, "member": m.member_id, "generation": m.generation,
                 "offsets": [[p, o] for p, o in sorted(offsets.items())], "mode": "sync"}
        return m, value, offsets

    def commit(self, a: dict[str, Any]) -> str:
        m, value, offsets = self.commit_value(a)
        kind, detail = self.run_commit(a["member"], m, value, offsets, float(a["timeout"]))
        self._check(a["expect"], kind, f"the commit of {a['member']}")
        return detail

    def run_commit(self, name: str, m: WireGroupMember, value: dict[str, Any], offsets: dict[int, int],
                   timeout: float, invoked: threading.Event | None = None) -> tuple[str, str]:
        process = self.processes[name]
        self.history.invoke(process, "commit", value)
        if invoked is not None:
            invoked.set()
        m.timeout_s = timeout
        err = None
        try:
            m.commit(offsets, time.monotonic() + timeout)
        except ClientError as exc:
            err = exc
        kind = _kind(err)
        self.history.complete(process, kind, "commit", value, error=None if err is None else err.code)
        if kind == "info":
            self.processes[name] = self.history.new_process()
        what = f"{name} (generation {value['generation']}) committed {offsets}"
        return kind, (f"{what}: ok" if err is None else f"{what}: {kind} {err.code} ({err})")

    def committed(self, a: dict[str, Any]) -> str:
        reader = WireGroupMember(self.bootstrap, group=a["group"], topic=self.topic, partitions=self.partitions,
                                 timeout_s=float(a["timeout"]))
        process = self.history.new_process()
        value = {"group": a["group"], "partitions": self.partitions}
        self.history.invoke(process, "committed", value)
        err = None
        try:
            got = reader.committed(self.partitions, time.monotonic() + float(a["timeout"]))
        except ClientError as exc:
            err = exc
        finally:
            reader.close()
        if err is None:
            self.history.complete(process, "ok", "committed",
                                  {**value, "offsets": [[p, o] for p, o in sorted(got.items())]})
        else:
            self.history.complete(process, _kind(err), "committed", value, error=err.code)
        self._check(a["expect"], _kind(err), f"the committed read of {a['group']}")
        return f"{a['group']} committed: {got}" if err is None else f"not read: {err.code} ({err})"

    def freeze(self, a: dict[str, Any]) -> str:
        m = self._member(a["member"])
        m.freeze()
        return f"{a['member']} ({m.member_id}, generation {m.generation}) stopped heartbeating"

    def leave(self, a: dict[str, Any]) -> str:
        m = self.members.pop(a["member"])
        m.close()
        return f"{a['member']} ({m.member_id}) left {m.group}"

    def close(self) -> None:
        """Every member closed (a frozen one without a LeaveGroup). Never raises."""
        for m in self.members.values():
            try:
                m.close()
            except Exception:  # noqa: BLE001
                pass
        self.members.clear()


class BackgroundCommit(threading.Thread):
    """A commit step with wait = false: `invoked` once its invoke is in the history, `outcome` ok / fail /
    info when it ends (the interface of a background produce's sends, harness/scenario_runner.py)."""

    def __init__(self, steps: GroupSteps, a: dict[str, Any], *, name: str):
        super().__init__(name=name, daemon=True)
        self.steps, self.a = steps, a
        self.member, self.value, self.offsets = steps.commit_value(a)
        self.timeout_s = float(a["timeout"])
        self.what = f"the commit of {a['member']} ({self.offsets})"
        self.invoked = threading.Event()
        self.outcome: str | None = None
        self.detail = ""

    def run(self) -> None:
        try:
            self.outcome, self.detail = self.steps.run_commit(self.a["member"], self.member, self.value,
                                                              self.offsets, self.timeout_s, self.invoked)
        except Exception as exc:  # noqa: BLE001 - the history itself failed
            self.outcome = f"error: {type(exc).__name__}"
        finally:
            self.invoked.set()
