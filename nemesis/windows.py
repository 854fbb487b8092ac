"""The fault executor: every fault window a run opens and closes, in one store, through one recorder.

Whatever decides on a fault, `FaultWindows` carries it out with the kind's own actions (nemesis/faults.py
KINDS): it asks the backend for the capability, gives the window its id, records its start and stop as
nemesis operations (process "nemesis", docs/formats.md) and undoes what is still open. Two kinds of
generator feed it, and their windows are the same objects in the same store:

- the random and scheduled nemesis (nemesis/driver.py, its packages and schedule files): `open_window`
  starts a window on one or more targets, `close_window` stops it. An action that fails is recorded with
  `error` (the messages) and the window stays open until its stop.
- a scenario's node and network steps (harness/scenario_runner.py; simulator exports are scenarios):
  `play(do, args)` plays one step (nemesis/faults.py VERBS). A kill / power-loss / stop opens a window on
  that node that the matching restart closes, pause / resume likewise, partition / heal likewise,
  degrade / restore likewise; a corrupt step is one instant window (its start and its stop one after the
  other). `undo_all` closes every window still open (heal, restore, resume, restart), so each `start` has
  its `stop`. A step that fails is recorded with `error` (the exception's type) and raises again; one the
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
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from broker.errors import StateError
from clusters.base import ClusterError, Stoppable, backend_name, has, require
from nemesis.faults import KINDS, VERBS, Act, Kind, Verb
from rundir import formats as runformat

log = logging.getLogger("highwater.nemesis")

# the operations `play` takes: the scenario steps that are node or network faults
FAULT_STEPS = tuple(VERBS)


@dataclass(eq=False)
class Window:
    """An open fault window. Its opener gives kind, targets and the value's fields (`extra`); the executor
    gives it its id and the `value` it records."""
    kind: str
    targets: list[str]
    extra: dict[str, Any] = field(default_factory=dict)
    step: Any = None                    # the schedule Step it plays (nemesis/schedule.py); None: a scenario's
    ends_at: float = math.inf           # math.inf: stopped by its package, a scenario step or stop()
    label: str = ""
    pairs: list[tuple[str, str]] | None = None      # links windows: the one-way pairs in force
    seed: int = 0                       # for the choices its actions make (which byte a corrupt flips)
    id: int = 0
    value: dict[str, Any] = field(default_factory=dict)
    damage: list[dict[str, Any]] = field(default_factory=list)   # a corrupt window's damaged records
    opening: dict[str, Any] = field(default_factory=dict)   # fields its start records and its stop does not
    instant: bool = False               # its stop follows its start at once (a scenario's corrupt step)


class FaultWindows:
    """The one executor of a run's faults (module docstring)."""

    def __init__(self, cluster, history, elect: Callable[[int, str], str] | None = None,
                 clients: Callable[[], Any] | None = None):
        self.cluster = cluster
        self.history = history
        self.elect = elect              # (partition, node): a leadership move, for elect windows
        self.clients = clients          # () -> the workload's clients (a ClientPausable), for client faults
        self._ids = itertools.count(1)
        self.active: list[Window] = []  # every open window, in the order they opened
        self.installed: set[str] = set()    # links kinds a scenario step used: undo_all clears them

    def pairs_of(self, kind: str) -> list[tuple[int, list[tuple[str, str]]]]:
        """(id, pairs) of the open windows of a links kind."""
        return [(w.id, w.pairs) for w in self.active if w.kind == kind]

    # --- the one recorder -------------------------------------------------------------------------
    def _record(self, f: str, value: dict[str, Any], act: Callable[[], tuple[str, list[str], dict]],
                strict: bool = False) -> str:
        """Record one operation of a window around `act`, which returns (detail, errors, more fields for
        the completion). `strict` (a scenario's): an exception is recorded (detail "failed: ...", error its
        type) and raised again; otherwise the errors act collected go in `error`."""
        self.history.invoke(runformat.NEMESIS_PROCESS, f, value)
        try:
            detail, errors, more = act()
        except Exception as exc:
            if strict:
                self.history.complete(runformat.NEMESIS_PROCESS, "info", f, {**value, "detail": f"failed: {exc}"},
                                      error=type(exc).__name__)
            raise
        if errors:
            log.warning("nemesis %s %s: %s", f, value.get("targets"), "; ".join(errors))
        self.history.complete(runformat.NEMESIS_PROCESS, "info", f, {**value, **more, "detail": detail},
                              error="; ".join(errors) if errors else None)
        return detail

    def _value(self, w: Window, phase: str) -> dict[str, Any]:
        name = {"name": w.step.fault} if w.step is not None else {}
        opening = w.opening if phase == "start" else {}
        return {"fault": w.kind, "phase": phase, "id": w.id, "targets": w.targets, **name, **w.extra, **opening}

    def _act(self, w: Window, note: str, run: Callable[[Kind, Act, list[str]], list[str]],
             errors: list[str], *, starting: bool) -> Callable[[], tuple[str, list[str], dict]]:
        """The nemesis's way to act: the kind's capabilities asked for, then `run`'s details, each
        ClusterError noted in `errors` (not raised); a corrupt start's completion has its `damage`."""
        kind = KINDS[w.kind]

        def act() -> tuple[str, list[str], dict]:
            details, asked = [note] if note else [], False
            try:
                a = Act(self.cluster, w, self.elect, self.clients() if self.clients is not None else None)
                for need in kind.needs:
                    require(a.party(kind), need, w.step.fault if w.step is not None else w.kind)
                asked = True
                details += run(kind, a, errors)
            except ClusterError as exc:
                errors.append(str(exc))
            more = {"damage": w.damage} if starting and asked and kind.damages else {}
            return "; ".join(d for d in details if d), errors, more
        return act

    # --- windows of the random and scheduled nemesis (nemesis/driver.py) ----------------------------
    def open_window(self, w: Window, note: str = "") -> list[str]:
        """Start window `w` (its kind, targets, extra fields, step): record the start, act (each target's
        failure noted, the others still act), and keep it open even if an action failed (its stop must
        still be recorded). Returns the errors of its actions (each also in the record)."""
        w.id = next(self._ids)
        w.value = self._value(w, "start")
        errors: list[str] = []

        def run(kind: Kind, act: Act, errs: list[str]) -> list[str]:
            if kind.on == "links":
                return [kind.start(act, w.pairs)]
            return _each(lambda t: kind.start(act, t), w.targets if kind.on == "nodes" else w.targets[:1], errs,
                         named=kind.on == "nodes")
        try:
            self._record(KINDS[w.kind].start_f, w.value, self._act(w, note, run, errors, starting=True))
        finally:
            self.active.append(w)   # active even if the action failed: its stop must still be recorded
        return errors

    def close_window(self, w: Window, note: str = "") -> list[str]:
        """Stop an open window: record the stop and undo what its start did (the kind's stop: restart,
        resume, heal and put back the other partitions' drops, restore; an elect window undoes nothing).
        Returns the errors of its actions."""
        errors: list[str] = []

        def run(kind: Kind, act: Act, errs: list[str]) -> list[str]:
            if kind.on != "links":
                return _each(lambda t: kind.stop(act, t), w.targets, errs, named=kind.on == "nodes")
            if not kind.stop_whole:
                return [kind.stop(act, w.pairs)]
            out = [kind.stop(act, None)]
            others = [p for o in self.active if o.kind == w.kind and o is not w for p in o.pairs]
            if others:      # its stop removed every window of the kind: put back those still open
                out.append("kept: " + kind.start(act, others))
            return out
        try:
            self._record(KINDS[w.kind].stop_f, {**w.value, "phase": "stop"},
                         self._act(w, note, run, errors, starting=False))
        finally:
            self.active.remove(w)
        return errors

    # --- a scenario's steps, one operation at a time ------------------------------------------------
    def play(self, do: str, a: dict[str, Any]) -> str:
        """Play one node or network operation (`do`, one of FAULT_STEPS, with its arguments `a` as a
        scenario step has them) and return its detail. The backend is asked for the capability the
        operation needs first (nemesis/faults.py VERBS): a backend without it raises ClusterError."""
        verb = VERBS[do]
        c = require(self.cluster, verb.needs, do)
        kind = KINDS[verb.kind]
        if kind.on == "links":
            return (self._open_links if verb.plays == "opens" else self._lift)(verb, kind, c, a)
        return {"opens": self._open_node, "closes": self._close_node, "instant": self._instant}[verb.plays](
            verb, kind, c, a["node"], a)

    def _strict(self, f: str, w: Window, phase: str, action: Callable[[], str], **more) -> str:
        """Record a scenario window's start or stop around `action` (raises what it raises)."""
        value = {**self._value(w, phase), **more}
        return self._record(f, value, lambda: (action(), [], {"damage": w.damage} if w.damage else {}),
                            strict=True)

    def _on(self, node: str) -> Window | None:
        return next((w for w in self.active if KINDS[w.kind].on == "nodes" and node in w.targets), None)

    def _open_node(self, verb: Verb, kind: Kind, c, node: str, a: dict[str, Any]) -> str:
        open_ = self._on(node)
        if open_ is not None and KINDS[open_.kind].ends_when_killed and kind.name != open_.kind:
            # killing a stopped process ends its pause window (the restarted process runs)
            self._close(open_, "resume", lambda: f"pause of {node} ends: it is being killed while stopped")
        open_ = self._on(node)
        if open_ is not None:
            raise StateError(f"{node} already has an open {open_.kind} fault; restart/resume it first")
        w = Window(kind.name, [node], id=next(self._ids))
        act = Act(c, w)
        detail = self._strict(verb.f, w, "start", lambda: verb.action(c, node) if verb.action else kind.start(act, node))
        self.active.append(w)
        return detail

    def _close_node(self, verb: Verb, kind: Kind, c, node: str, a: dict[str, Any]) -> str:
        """Close the node's window whose stop is this verb's (restart: a kill, power-loss or stop; resume: a
        pause); with none open, only act."""
        open_ = self._on(node)
        if open_ is not None and KINDS[open_.kind].stop_f == verb.f:
            return self._close(open_, verb.f, lambda: verb.action(c, node))
        return verb.action(c, node)

    def _close(self, w: Window, f: str, action: Callable[[], str], **more) -> str:
        self.active.remove(w)
        return self._strict(f, w, "stop", action, **more)

    def _instant(self, verb: Verb, kind: Kind, c, node: str, a: dict[str, Any]) -> str:
        """A corrupt step: one window, its start and its stop at once, on a node that is down."""
        if self.cluster.is_running(node):
            raise StateError(f"{node} is running: a corrupt step needs its node down (kill, stop or power-loss it)")
        w = Window(kind.name, [node], {"how": a["how"], "partition": a.get("partition"), "seed": a["seed"]},
                   seed=a["seed"], id=next(self._ids), instant=True)
        w.value = self._value(w, "start")
        detail = self._strict(verb.f, w, "start", lambda: kind.start(Act(c, w), node))
        w.damage = []
        self._strict(verb.f, w, "stop", lambda: "instant fault")
        return detail

    def _open_links(self, verb: Verb, kind: Kind, c, a: dict[str, Any]) -> str:
        pairs = a["drop"]
        w = Window(kind.name, _targets(pairs), pairs=pairs, id=next(self._ids),
                   opening={kind.pairs_field: [list(p) for p in pairs], **{k: a[k] for k in kind.params}})
        w.value = self._value(w, "start")
        # the window is open before the action runs: if it fails partway (some rules in), the run's heal
        # (or undo_all) still stops it and removes what went in
        self.active.append(w)
        self.installed.add(kind.name)
        return self._strict(verb.f, w, "start", lambda: kind.start(Act(c, w), pairs))

    def _lift(self, verb: Verb, kind: Kind, c, a: dict[str, Any]) -> str:
        """Remove every pair of the kind (no `drop`), or only `drop` (module docstring): each window touched
        stops, and what is left of it starts again as a new window (`rest_of`)."""
        pairs = a.get("drop")
        windows = [w for w in self.active if w.kind == kind.name]
        done = "healed" if verb.f == "heal" else "restored"
        lifted = set(pairs) if pairs is not None else None
        touched = [w for w in windows if lifted is None or lifted & set(w.pairs)]
        if not touched:
            return kind.stop(Act(c, None), pairs)      # nothing of it was in force: no window changes
        detail = ""
        for i, w in enumerate(touched):
            action = (lambda: kind.stop(Act(c, w), pairs)) if i == 0 else (lambda: f"{done} with the first")
            more = {done: [list(p) for p in w.pairs if p in lifted]} if lifted is not None else {}
            d = self._close(w, verb.f, action, **more)
            detail = d if i == 0 else detail
        for w in touched if lifted is not None else ():
            rest = [p for p in w.pairs if p not in lifted]
            if rest:
                text = f"still in force: {', '.join(f'{s}->{d}' for s, d in rest)} (rest of window {w.id})"
                nw = Window(kind.name, _targets(rest), pairs=rest, id=next(self._ids),
                            opening={kind.pairs_field: [list(p) for p in rest]})
                self._strict(verb.f, nw, "start", lambda t=text: t, rest_of=w.id)
                self.active.append(nw)
                detail += f"; {text}"
        return detail

    def undo_all(self, problem) -> None:
        """Heal, restore, resume and restart whatever is still open, recording each stop; a failure goes to
        `problem(what, exc)`. Never raises."""
        for verb in (v for v in VERBS.values() if KINDS[v.kind].on == "links" and v.plays == "closes"):
            kind = KINDS[verb.kind]
            try:        # with no window open, but a step of the kind played: clear it all the same
                if kind.name in self.installed or any(w.kind == kind.name for w in self.active):
                    self._lift(verb, kind, self.cluster, {})
            except Exception as exc:  # noqa: BLE001
                problem(f"{verb.name} failed", exc)
        for w in [w for w in self.active if KINDS[w.kind].on == "nodes"]:
            kind = KINDS[w.kind]
            node = w.targets[0]
            try:
                self._close(w, kind.stop_f, lambda k=kind, n=node, x=w: k.stop(Act(self.cluster, x), n))
            except Exception as exc:  # noqa: BLE001
                problem(f"could not undo {w.kind} of {node}", exc)

    def recover(self, problem) -> None:
        """The final heal, after every window is closed: heal every drop rule, resume every running node
        and restart every node that is down, whatever the nemesis knew. A node found down had no open
        window (a broker that died by itself, or a fault whose undo failed): its restart is recorded as a
        harness operation (f `final-heal`, docs/formats.md). A failure goes to `problem(what, exc)`; never
        raises."""
        c = self.cluster
        try:
            if has(c, KINDS["partition"].needs[0]):
                KINDS["partition"].stop(Act(c, None), None)
        except Exception as exc:  # noqa: BLE001
            problem("heal failed", exc)
        try:
            nodes = c.nodes()
        except Exception as exc:  # noqa: BLE001
            problem("cluster has no nodes to heal", exc)
            return
        pause, kill = KINDS["pause"], KINDS["kill"]
        for node in nodes:
            try:
                if c.is_running(node):
                    if has(c, pause.needs[0]):
                        pause.stop(Act(c, None), node)
                elif has(c, kill.needs[0]) or has(c, Stoppable):
                    detail = kill.stop(Act(c, None), node)
                    log.info("final heal: %s", detail)
                    self.history.complete(runformat.HARNESS_PROCESS, "info", runformat.FINAL_HEAL_F,
                                          {"node": node, "action": kill.stop_f, "why": "down at the final heal",
                                           "detail": detail})
                else:
                    problem(f"could not bring {node} back",
                            ClusterError(f"the {backend_name(c)} backend cannot restart a node"))
            except Exception as exc:  # noqa: BLE001
                problem(f"could not bring {node} back", exc)


def _each(action, targets, errors: list[str], named: bool = True) -> list[str]:
    """Run `action` on every target and return its details; a target's ClusterError is noted (with the
    target's name when `named`) and the rest still run."""
    details = []
    for t in targets:
        try:
            details.append(action(t))
        except ClusterError as exc:
            errors.append(f"{t}: {exc}" if named else str(exc))
    return details


def _targets(pairs: list[tuple[str, str]]) -> list[str]:
    return sorted({n for p in pairs for n in p})
