"""The fault executor: every fault window the nemesis starts and stops, and its history.

Whatever decides on a fault, `FaultWindows` carries it out against the cluster: it asks the backend for
the capability the operation needs (nemesis/operations.py NEEDS), gives the window its id, records its
start and stop as nemesis operations (process "nemesis", docs/formats.md) and undoes what is still open.
Two kinds of generator feed it:

- the random and scheduled nemesis (nemesis/driver.py, its packages and schedule files): `open_window`
  starts a window of a fault kind on one or more targets, `close_window` stops it (restart, resume, heal
  and re-drop the other partitions' links, restore; an elect window undoes nothing). An action that fails
  is recorded with `error` (the messages) and the window stays open until its stop.
- a scenario's node and network steps (harness/scenario_runner.py; simulator exports are scenarios):
  `play(do, args)` runs one step. A kill / power-loss / stop opens a window on that node that the
  matching restart closes, pause / resume likewise, partition / heal likewise, degrade / restore likewise
  (fault "degrade"); a corrupt step is one instant window (its start and its stop one after the other).
  `undo_all` closes every window still open (heal, restore, resume, restart), so each `start` has its
  `stop`. A step that fails is recorded with `error` (the exception's type) and raises again; one the
  state does not allow (a second fault on a node that has one open, a corrupt of a running node) raises
  broker.errors.StateError.

A partial heal (`heal` with pairs) or restore removes only those one-way links. Each window it touches
ends (its `stop`, with `healed`: the pairs of that window it removed); where some of the window's pairs
are still in force, a new window starts at once with the rest (its `start` has f "heal" / "restore",
`drop` / `links` the remaining pairs and `rest_of` the id it continues). So windows stay paired and each
one's pairs are exactly what was in force during it; a window is split, never stopped twice.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any

from broker.errors import StateError
from clusters.base import (ClusterError, Corruptible, Degradable, DiskFillable, Killable, Partitionable, Pausable,
                           Stoppable, require)
from nemesis.operations import NEEDS, START_F, STOP_F
from rundir import formats as runformat

log = logging.getLogger("highwater.nemesis")

# the operations `play` takes: the scenario steps that are node or network faults
FAULT_STEPS = ("kill", "power-loss", "stop", "restart", "start", "pause", "resume", "partition", "heal",
               "degrade", "restore", "corrupt")


@dataclass
class Window:
    """An active fault window of the random or scheduled nemesis (open_window / close_window)."""
    id: int
    step: Any           # the schedule Step it plays (nemesis/schedule.py): its fault name and seed
    kind: str
    targets: list[str]
    value: dict[str, Any]
    ends_at: float      # math.inf: a package's step, stopped by the package (or by stop())
    label: str = ""


def _act_on_each(action, targets, details: list[str], errors: list[str]) -> None:
    """Run `action` on every target, adding its detail; a target's ClusterError is noted and the rest still run."""
    for t in targets:
        try:
            details.append(action(t))
        except ClusterError as exc:
            errors.append(f"{t}: {exc}")


class FaultWindows:
    """The one executor of a run's faults (module docstring)."""

    def __init__(self, cluster, history):
        self.cluster = cluster
        self.history = history
        self._ids = itertools.count(1)
        self.open: dict[str, tuple[str, int]] = {}      # node -> (fault, id) for kill/power-loss/stop/pause
        self.partitions: list[tuple[int, list[tuple[str, str]]]] = []
        self.degraded: list[tuple[int, list[tuple[str, str]]]] = []
        self.installed: set[str] = set()    # "partition"/"degrade" once such a step ran: undo_all undoes it
        self.active: list[Window] = []      # the nemesis's windows (open_window), each stopped by close_window

    # --- windows of the random and scheduled nemesis (nemesis/driver.py) ----------------------------
    def open_window(self, step, kind: str, targets: list[str], extra: dict[str, Any], note: str,
                    ends_at: float, label: str, *, elect=None) -> tuple[Window, list[str]]:
        """Start one fault window of `kind` on `targets` (a fault of nemesis/schedule.py FAULTS; `step`
        names it and seeds a corrupt one): record the start, act on every target, keep it active even if
        an action failed (its stop must still be recorded). `elect(partition, node)` moves a leader for an
        elect window. Returns the window and the errors of its actions (each also in the record)."""
        fid = next(self._ids)
        value = {"fault": kind, "phase": "start", "id": fid, "targets": targets, "name": step.fault, **extra}
        f = START_F[kind]
        self.history.invoke(runformat.NEMESIS_PROCESS, f, value)
        completion = value
        details, errors = [note] if note else [], []
        try:
            if kind == "partition":
                net = require(self.cluster, Partitionable, step.fault)
                details.append(net.drop([tuple(d) for d in extra["drops"]]))
            elif kind == "degrade":
                deg = require(self.cluster, Degradable, step.fault)
                details.append(deg.degrade([tuple(x) for x in extra["links"]], delay_ms=extra["delay_ms"],
                                           jitter_ms=extra["jitter_ms"], loss_pct=extra["loss_pct"]))
            elif kind == "corrupt":
                killer = require(self.cluster, Killable, step.fault)
                storage = require(self.cluster, Corruptible, step.fault)

                damage: list[dict[str, Any]] = []

                def kill_and_corrupt(node: str) -> str:
                    killed = killer.kill(node)
                    fault = storage.corrupt(node, extra["how"], partition=extra["partition"], seed=step.seed)
                    damage.append(fault.history_entry(node))
                    return f"{killed}; {fault.detail}"
                _act_on_each(kill_and_corrupt, targets, details, errors)
                completion = {**value, "damage": damage}   # the start's completion says what it damaged
            elif kind == "elect":
                details.append(elect(extra["partition"], targets[0]))
            elif kind == "disk-full":
                _act_on_each(require(self.cluster, DiskFillable, step.fault).fill_disk, targets, details, errors)
            else:
                action = (require(self.cluster, Pausable, step.fault).pause if kind == "pause"
                          else require(self.cluster, Killable, step.fault).kill)
                _act_on_each(action, targets, details, errors)
        except ClusterError as exc:
            errors.append(str(exc))
        window = Window(fid, step, kind, targets, value, ends_at, label.replace("  ", " "))
        self.active.append(window)  # active even if the action failed: its stop must still be recorded
        self._complete(f, completion, details, errors)
        return window, errors

    def close_window(self, fault: Window, note: str = "") -> list[str]:
        """Stop an active window: record the stop, undo what its start did (restart, resume, heal, restore;
        an elect window undoes nothing). Returns the errors of its actions."""
        value = {**fault.value, "phase": "stop"}
        f = STOP_F[fault.kind]
        self.history.invoke(runformat.NEMESIS_PROCESS, f, value)
        details, errors = [note] if note else [], []
        try:
            if fault.kind == "partition":
                net = require(self.cluster, Partitionable, fault.step.fault)
                details.append(net.heal())
                others = [d for a in self.active if a.kind == "partition" and a is not fault
                          for d in a.value["drops"]]
                if others:  # heal removes every drop rule: put back those of other active partitions
                    details.append("kept: " + net.drop([tuple(d) for d in others]))
            elif fault.kind == "degrade":
                deg = require(self.cluster, Degradable, fault.step.fault)
                details.append(deg.restore([tuple(x) for x in fault.value["links"]]))
            elif fault.kind == "elect":
                pass            # a leadership move is not undone
            elif fault.kind == "disk-full":
                _act_on_each(require(self.cluster, DiskFillable, fault.step.fault).free_disk, fault.targets,
                             details, errors)
            else:   # kill, power-loss and corrupt end with a restart
                action = (require(self.cluster, Pausable, fault.step.fault).resume if fault.kind == "pause"
                          else require(self.cluster, Killable, fault.step.fault).restart)
                _act_on_each(action, fault.targets, details, errors)
        except ClusterError as exc:
            errors.append(str(exc))
        self.active.remove(fault)
        self._complete(f, value, details, errors)
        return errors

    def _complete(self, f: str, value: dict, details: list[str], errors: list[str]) -> None:
        done = {**value, "detail": "; ".join(d for d in details if d)}
        if errors:
            log.warning("nemesis %s %s: %s", f, value.get("targets"), "; ".join(errors))
        self.history.complete(runformat.NEMESIS_PROCESS, "info", f, done, error="; ".join(errors) if errors else None)


    # --- a scenario's steps, one operation at a time ------------------------------------------------

    def play(self, do: str, a: dict[str, Any]) -> str:
        """Play one node or network operation (`do`, one of FAULT_STEPS, with its arguments `a` as a
        scenario step has them) and return its detail. The backend is asked for the capability the
        operation needs first (nemesis/operations.py NEEDS): a backend without it raises ClusterError."""
        c = require(self.cluster, NEEDS[do], do)
        if do == "kill":
            return self._open(a["node"], "kill", "kill", lambda: c.kill(a["node"]))
        if do == "power-loss":
            return self._open(a["node"], "power-loss", "power-loss", lambda: c.kill(a["node"]))
        if do == "stop":
            return self._open(a["node"], "kill", "stop", lambda: self._stop_node(a["node"]))
        if do in ("restart", "start"):
            node = a["node"]
            if node in self.open and self.open[node][0] != "pause":
                return self._close(node, "restart", lambda: c.restart(node))
            return c.restart(node)
        if do == "pause":
            return self._open(a["node"], "pause", "pause", lambda: c.pause(a["node"]))
        if do == "resume":
            node = a["node"]
            if node in self.open and self.open[node][0] == "pause":
                return self._close(node, "resume", lambda: c.resume(node))
            return c.resume(node)
        if do == "partition":
            pairs = a["drop"]
            fid = next(self._ids)
            targets = sorted({n for p in pairs for n in p})
            # the window is open before the action runs: if it fails partway (some rules in), the run's
            # heal (or close_faults) still stops it and removes what went in
            self.partitions.append((fid, pairs))
            self.installed.add("partition")
            return self._record("partition", "partition", "start", fid, targets, lambda: c.drop(pairs),
                                drop=[list(p) for p in pairs])
        if do == "heal":
            return self._heal(a.get("drop"))
        if do == "degrade":
            pairs = a["drop"]
            fid = next(self._ids)
            settings = {k: a[k] for k in ("delay_ms", "jitter_ms", "loss_pct")}
            self.degraded.append((fid, pairs))      # open before the action: as for partition above
            self.installed.add("degrade")
            return self._record("degrade", "degrade", "start", fid, _targets(pairs),
                                lambda: c.degrade(pairs, **settings), links=[list(p) for p in pairs], **settings)
        if do == "restore":
            return self._restore(a.get("drop"))
        if do == "corrupt":
            return self._corrupt(c, a)
        raise KeyError(do)

    def _record(self, f: str, fault: str, phase: str, fid: int, targets: list[str], action, **extra) -> str:
        """Record a fault window's start or stop around `action`, which returns the detail, or the detail and
        more fields for the completion (a corrupt start's `damage`)."""
        value = {"fault": fault, "phase": phase, "id": fid, "targets": targets, **extra}
        self.history.invoke(runformat.NEMESIS_PROCESS, f, value)
        try:
            detail = action()
        except Exception as exc:
            self.history.complete(runformat.NEMESIS_PROCESS, "info", f, {**value, "detail": f"failed: {exc}"},
                                  error=type(exc).__name__)
            raise
        detail, more = detail if isinstance(detail, tuple) else (detail, {})
        self.history.complete(runformat.NEMESIS_PROCESS, "info", f, {**value, **more, "detail": detail})
        return detail

    def _open(self, node: str, fault: str, f: str, action) -> str:
        if node in self.open and self.open[node][0] == "pause" and fault != "pause":
            # killing a stopped process ends its pause window (the restarted process runs)
            self._close(node, "resume", lambda: f"pause of {node} ends: it is being killed while stopped")
        if node in self.open:
            raise StateError(f"{node} already has an open {self.open[node][0]} fault; restart/resume it first")
        fid = next(self._ids)
        detail = self._record(f, fault, "start", fid, [node], action)
        self.open[node] = (fault, fid)
        return detail

    def _close(self, node: str, f: str, action) -> str:
        fault, fid = self.open.pop(node)
        return self._record(f, fault, "stop", fid, [node], action)


    def _stop_node(self, node: str) -> str:
        """SIGTERM (a clean shutdown), SIGKILL after the backend's stop grace: the backend's Stoppable."""
        return require(self.cluster, Stoppable, "stop").stop(node)

    def _heal(self, pairs: list[tuple[str, str]] | None = None) -> str:
        """Every drop (pairs None) or only those one-way drops (a partial heal; module docstring)."""
        if pairs is None:
            if not self.partitions:
                return self.cluster.heal()
            details = []
            for i, (fid, window) in enumerate(self.partitions):
                action = self.cluster.heal if i == 0 else (lambda: "healed with the first")
                details.append(self._record("heal", "partition", "stop", fid, _targets(window), action))
            self.partitions = []
            return details[0]
        self.partitions, detail = self._lift("heal", "partition", "drop", self.partitions, pairs,
                                             lambda: self.cluster.heal(pairs))
        return detail

    def _restore(self, pairs: list[tuple[str, str]] | None = None) -> str:
        """Every degraded link (pairs None) or only those (module docstring)."""
        c = require(self.cluster, Degradable, "restore")
        if pairs is None:
            if not self.degraded:
                return c.restore(None)
            details = []
            for i, (fid, window) in enumerate(self.degraded):
                action = (lambda: c.restore(None)) if i == 0 else (lambda: "restored with the first")
                details.append(self._record("restore", "degrade", "stop", fid, _targets(window), action))
            self.degraded = []
            return details[0]
        self.degraded, detail = self._lift("restore", "degrade", "links", self.degraded, pairs,
                                           lambda: c.restore(pairs))
        return detail

    def _lift(self, f: str, fault: str, key: str, windows: list, pairs: list[tuple[str, str]], action):
        """Remove `pairs` from the open `windows` of `fault`: each window touched stops, and what is left
        of it starts again as a new window (`rest_of`). Returns (the open windows now, the detail)."""
        lifted = set(pairs)
        done = "healed" if f == "heal" else "restored"
        touched = [(fid, w) for fid, w in windows if lifted & set(w)]
        if not touched:
            return windows, action()        # nothing of it was in force: no window changes
        detail = ""
        for i, (fid, w) in enumerate(touched):
            step_action = action if i == 0 else (lambda: f"{done} with the first")
            d = self._record(f, fault, "stop", fid, _targets(w), step_action,
                             **{done: [list(p) for p in w if p in lifted]})
            detail = detail or d
        still = [(fid, w) for fid, w in windows if (fid, w) not in touched]
        for fid, w in touched:
            rest = [p for p in w if p not in lifted]
            if rest:
                nfid = next(self._ids)
                text = f"still in force: {', '.join(f'{s}->{d}' for s, d in rest)} (rest of window {fid})"
                self._record(f, fault, "start", nfid, _targets(rest), lambda t=text: t,
                             **{key: [list(p) for p in rest]}, rest_of=fid)
                still.append((nfid, rest))
                detail += f"; {text}"
        return still, detail

    def _corrupt(self, c, a: dict[str, Any]) -> str:
        node = a["node"]
        if self.cluster.is_running(node):
            raise StateError(f"{node} is running: a corrupt step needs its node down (kill, stop or power-loss it)")
        fid = next(self._ids)
        extra = {"how": a["how"], "partition": a.get("partition"), "seed": a["seed"]}
        def corrupt() -> tuple[str, dict[str, Any]]:
            fault = c.corrupt(node, a["how"], partition=a.get("partition"), seed=a["seed"])
            return fault.detail, {"damage": [fault.history_entry(node)]}
        detail = self._record("corrupt", "corrupt", "start", fid, [node], corrupt, **extra)
        self._record("corrupt", "corrupt", "stop", fid, [node], lambda: "instant fault", **extra)
        return detail

    def undo_all(self, problem) -> None:
        """Heal, restore, resume and restart whatever is still open, recording each stop; a failure goes to
        `problem(what, exc)`. Never raises."""
        try:
            if self.partitions or "partition" in self.installed:   # no window open: heal(None) all the same
                self._heal()
        except Exception as exc:  # noqa: BLE001
            problem("heal failed", exc)
        try:
            if self.degraded or "degrade" in self.installed:       # likewise restore(None)
                self._restore()
        except Exception as exc:  # noqa: BLE001
            problem("restore failed", exc)
        for node in list(self.open):
            fault = self.open[node][0]
            try:
                if fault == "pause":
                    self._close(node, "resume", lambda n=node: self.cluster.resume(n))
                else:
                    self._close(node, "restart", lambda n=node: self.cluster.restart(n))
            except Exception as exc:  # noqa: BLE001
                problem(f"could not undo {fault} of {node}", exc)


def _targets(pairs: list[tuple[str, str]]) -> list[str]:
    return sorted({n for p in pairs for n in p})
