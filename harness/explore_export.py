"""A found (and shrunk) simulated schedule as a scenario file that `highwater scenario` replays on real brokers.

`to_scenario(settings, finding)` returns the TOML text (harness/scenario.py language). The schedule is
replayed in the simulator (simulator/world.py) in the finding's truncation mode and, in lockstep, in the
other mode; the file's steps and the waits between them come from those replays, so the real cluster is
at the simulated point before the next step. Every simulated event is written as a comment with its
story line (`# sim 3: ...`), followed by its real steps, if it has any.

The mapping:

- settings -> [cluster] nodes = replicas; [topic] one partition, replication factor = replicas;
  [broker] min_insync_replicas, unclean_leader_election, flush, fetch_fencing, eligible_leader_replicas,
  session_timeout_ms; replica_lag_time_max_ms = 60000 and long-polling fetches (10 s) so that the real
  brokers neither shrink the ISR nor learn a HW on their own while the schedule plays; [client] acks;
  [checker] the reference engine. [expect]: the finding's invariant as a checker kind in its mode
  (no-acked-loss -> lost-write, committed-prefix-agreement -> divergence; the other invariants have no
  checker kind: []), and in the other mode the kind if the simulated replay there fails the same
  invariant, else [].
- fetch gating: the simulated followers fetch only when the schedule says so, the real ones all the
  time. So after the first wait every broker-to-broker link is cut, and a delivered fetch (or
  OffsetsForLeaderEpoch) answer from L to F becomes: heal F<->L, wait until F's LEO and HW are the
  simulated ones, cut F<->L again. The follower's HW then lags the leader's by one round, as in the
  simulation (its next fetch is parked at the leader, which learns its LEO from it).
- produce -> produce (count 1, the settings' acks; expect ok if the simulation acknowledged it, fail if
  refused), then a wait on the leader's LEO (not its HW: when the real leader advances it is not pinned
  down by the schedule). An acks=all write that waits for the HW while the schedule goes on is a
  produce with `wait = false` (timeout PARKED_TIMEOUT) expecting what the simulation answered it later
  (ok, fail; any for an unknown outcome or none); one `await` step after the last event (before the
  end-of-schedule restarts) checks them.
- crash -> kill; power-loss -> power-loss; restart -> restart; flush -> flush;
  damage -> corrupt (how "torn-last": the down broker's last record cut in half, which its recovery cuts);
  elect -> elect (node, unclean = arg), then a wait on leader and ISR.
- cut / heal involving the controller c0 -> partition / heal (a one-way drop, a partial heal).
  Between brokers the links are gated anyway: a simulated cut keeps a gate shut when it would open.
- expire: the simulation fences the brokers whose heartbeats it did not deliver; the real brokers
  heartbeat on their own, so each fenced broker that is up is cut from the controller (a one-way drop
  towards c0), `wait fenced`, then a wait on the new leader / ISR; the drop is healed when the
  simulation delivers that broker's next heartbeat or registration (`wait alive`). A crashed broker
  is fenced by the real controller on its own (`wait fenced`).
- a delivered registration or ISR proposal that changes the controller's state: the real controller
  gets it on its own; a wait on the new leader / ISR.
- message-level events without a real step (a follower's send, a request reaching the leader, a
  dropped or duplicated message, heartbeats, metadata pushes, the ISR-shrink timer, HW checkpoints,
  clock advances) are comments: `# sim: <event> has no real-process step (...)`.

Nodes still down at the end are restarted while the links are still gated, and the controller's new
leader is waited for (the simulation's settle() registers them before any fetch; the final phase would
heal first, and a restarted old leader would serve from its stored metadata until it registers).
Waits whose values differ between the modes are written twice, with `mode = "hw"` and `mode =
"leader-epoch"`; from the event where the other mode's replay stops (an action not enabled there)
only the finding's mode is waited for. The final phase of `highwater scenario` heals and restarts
everything, as the simulation's `settle()` does before the no-acked-loss check.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from broker.config_keys import sim_keys
from rundir import kinds
from simulator import actions as A
from simulator.shrink import apply_tracked
from simulator.world import World, SimError

KINDS = {"no-acked-loss": kinds.LOST_WRITE.name, "committed-prefix-agreement": kinds.DIVERGENCE.name}
MODES = ("hw", "leader-epoch")
WAIT_TIMEOUT = 20
REAL_LAG_MS = 60000
REAL_FETCH_WAIT_MS = 10000
PARKED_TIMEOUT = 25            # s: the client timeout of a produce that does not wait (below the await's)
AWAIT_TIMEOUT = 30

_NO_STEP = {
    A.SEND: "the real follower sends its fetches on its own, gated by the partitions",
    A.DROP: "a lost message; the real links are cut around it by the fetch gating",
    A.DUPLICATE: "a duplicated message",
    A.HEARTBEAT: "the real brokers heartbeat on their own",
    A.METADATA: "the real controller pushes metadata on its own",
    A.ALTER_ISR: "the real leader shrinks the ISR after replica_lag_time_max_ms (60 s here)",
    A.ADVANCE: "real time passes; the waits cover the timers",
    A.CHECKPOINT: "the real brokers checkpoint the HW every hw_checkpoint_interval_ms (100 ms)",
}


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(value)                       # pragma: no cover


def _step(do: str, **fields: Any) -> list[str]:
    lines = ["[[step]]", f"do = {_toml(do)}"]
    lines += [f"{k} = {_toml(v)}" for k, v in fields.items() if v is not None]
    return lines + [""]


def _state(world: World) -> dict[str, Any]:
    ps = world.partition_state()
    nodes = {name: (n.log.leo(), n.replica.hw) if n.up and n.replica is not None else None
             for name, n in world.nodes.items()}
    return {"leader": world.leader() or "none", "isr": sorted(f"n{b}" for b in ps.isr), "nodes": nodes}


def other_mode(settings) -> str:
    return "leader-epoch" if settings.truncation == "hw" else "hw"


class _Lockstep:
    """The schedule applied to the finding's World and, while it stays valid, to the other mode's."""

    def __init__(self, settings):
        self.main = World(settings)
        self.other: World | None = World(dataclasses.replace(settings, truncation=other_mode(settings)))
        self.ids: dict[tuple, int] = {}             # message origin -> id in the other world
        self.origin: dict[int, tuple] = {}          # id in the main world -> origin
        self.other_stopped_at: int | None = None

    def apply(self, j: int, action) -> Any:
        for key, mid in apply_tracked(self.main, j, action):
            self.origin[mid] = key
        done = self.main.history[-1]
        if self.other is not None:
            twin = action
            if action.msg is not None:
                key = self.origin.get(action.msg)
                twin = dataclasses.replace(action, msg=self.ids.get(key, -1), text="")
            try:
                if not self.other.is_enabled(twin):
                    raise SimError("not enabled")
                for key, mid in apply_tracked(self.other, j, twin):
                    self.ids[key] = mid
            except SimError:
                self.other, self.other_stopped_at = None, j
        return done


def _expect(settings, finding, replay) -> tuple[dict[str, list[str]], list[str]]:
    kind = KINDS.get(finding.invariant)
    notes = []
    if kind is None:
        notes.append(f"# the invariant {finding.invariant} has no checker anomaly kind: nothing is expected")
    mine = [kind] if kind else []
    other = other_mode(settings)
    other_settings = dataclasses.replace(settings, truncation=other)
    renumbered = renumbered_for(settings, finding.actions, other_settings)
    got = replay(other_settings, renumbered) if renumbered is not None else None
    if renumbered is None:
        notes.append(f"# the schedule is not playable in {other} mode in the simulation: nothing expected there")
        theirs: list[str] = []
    elif got is not None and got.invariant == finding.invariant:
        theirs = mine
        notes.append(f"# in {other} mode the simulation fails {finding.invariant} as well")
    else:
        theirs = []
        notes.append(f"# in {other} mode the simulated replay of the same schedule holds "
                     f"{finding.invariant}" + (f" (it fails {got.invariant})" if got is not None else ""))
    return {settings.truncation: mine, other: theirs}, notes


def renumbered_for(settings, actions, other_settings) -> list | None:
    """`actions` (a schedule under `settings`) as the same events under `other_settings` (the other
    truncation mode): deliver / drop / duplicate renumbered to the ids their messages have there.
    None when an event is not possible there."""
    step = _Lockstep(settings)
    step.other = World(other_settings)
    out = []
    for j, a in enumerate(actions):
        before = len(step.other.history) if step.other is not None else 0
        step.apply(j, dataclasses.replace(a, text=""))
        if step.other is None:
            return None
        out.append(step.other.history[before] if len(step.other.history) > before else a)
    return [dataclasses.replace(a, text="") for a in out]


def write_outcomes(settings, actions) -> dict[int, tuple[str, str, int | None]]:
    """For each produce event (its index in `actions`): (value, what the simulation answered the client,
    the index of the event that answered it). A write never answered within the schedule has outcome
    "waiting" and no index. An event that cannot be applied ends the replay."""
    world = World(settings)
    produced: dict[str, int] = {}
    out: dict[int, tuple[str, str, int | None]] = {}
    for j, a in enumerate(actions):
        seen = len(world.outcomes)
        if a.kind == A.PRODUCE:
            produced[f"v{world.next_value}"] = j
        try:
            world.apply(dataclasses.replace(a, text=""))
        except SimError:
            break
        for value, outcome in world.outcomes[seen:]:
            if value in produced:
                out[produced[value]] = (value, outcome, j)
    for value, j in produced.items():
        out.setdefault(j, (value, "waiting", None))
    return out


def _expect_of(outcome: str) -> str:
    return "ok" if outcome == "acked" else "fail" if outcome.startswith("failed") else "any"


def replay_gaps(settings, actions) -> list[str]:
    """Where the real replay of `actions` cannot follow the simulation: a produce at a node that is not
    the controller's leader of the current epoch (a stale leader the simulation kept uninformed; the
    real client sends to the controller's leader, and real brokers learn the metadata within
    milliseconds), and an acks=all write still waiting for the HW when the schedule ends (the
    simulation's settle() may acknowledge it; the scenario awaits it before its final phase heals, so
    the real one times out). An acks=all write answered later in the schedule is no gap: it is a
    produce with `wait = false`. Empty: every produce plays as simulated. Each entry names the event."""
    world = World(settings)
    gaps = []
    for j, a in enumerate(actions):
        if a.kind == A.PRODUCE:
            ps = world.partition_state()
            r = world.nodes[a.node].replica
            if world.leader() != a.node or r is None or r.leader_epoch != ps.leader_epoch:
                gaps.append(f"event {j + 1}: {a.node} takes a write as leader of epoch "
                            f"{r.leader_epoch if r else '?'} while the controller's leader is "
                            f"{world.leader() or 'none'} (epoch {ps.leader_epoch})")
        try:
            world.apply(dataclasses.replace(a, text=""))
        except SimError as exc:
            gaps.append(f"event {j + 1}: {exc}")
            return gaps
    for j, (value, outcome, _at) in sorted(write_outcomes(settings, actions).items()):
        if outcome == "waiting" and settings.acks == "all":
            gaps.append(f"event {j + 1}: the acks=all write {value} still waits for the HW when the schedule "
                        f"ends (the simulation's settle() may answer it; the real one is awaited before the "
                        f"final phase heals and times out)")
    return gaps


def _default_replay(settings, actions):
    from simulator.explore import replay
    return replay(settings, actions)


def _broker_lines(settings) -> list[str]:
    """The scenario's [broker] section: every setting the simulation had (broker/config_keys.py keys
    the simulator models; the truncation mode is the scenario's [expect]), with the real-time ones
    the replay needs instead of the simulated ones."""
    real = {"session_timeout_ms": max(settings.session_timeout_ms, 3000), "replica_lag_time_max_ms": REAL_LAG_MS,
            "replica_fetch_wait_max_ms": REAL_FETCH_WAIT_MS, "hw_checkpoint_interval_ms": 100}
    lines = [f"{k.test} = {_toml(real.get(k.test, getattr(settings, k.sim_name)))}"
             for k in sim_keys() if k.test and k.test != "truncation"]
    return lines + [f"{key} = {_toml(value)}" for key, value in real.items()
                    if not any(k.test == key for k in sim_keys())]


def to_scenario(settings, finding, *, name: str | None = None, replay=None) -> str:
    """The scenario file's text for `finding` (a Finding of simulator.explore) under `settings`."""
    if settings.truncation not in MODES:
        raise ValueError(f"explore export: truncation {settings.truncation!r} has no real-process mode "
                         "(hw, leader-epoch)")
    actions = [dataclasses.replace(a, text="") for a in finding.actions]
    out = _header(settings, finding, actions, name=name, replay=replay or _default_replay)
    export = _Export(settings, actions)
    out += _opening(export.brokers)
    for j, action in enumerate(actions):
        out += export.event(j, action)
    return "\n".join(out + export.ending()).rstrip() + "\n"


def _header(settings, finding, actions, *, name: str | None, replay) -> list[str]:
    """The file's comments on where the schedule comes from and where the replay cannot follow it, its
    name, and the [cluster] .. [expect] sections."""
    mode = settings.truncation
    name = name or f"explore-{finding.invariant}-{finding.seed}-{finding.index}".replace(":", "-")
    expect, expect_notes = _expect(settings, finding, replay)
    gaps = replay_gaps(settings, actions)
    out: list[str] = [
        f"# Found by highwater explore (seed {finding.seed!r}, schedule {finding.index}) in {mode} mode and shrunk "
        f"to {len(actions)} events.",
        f"# Invariant {finding.invariant}: {finding.text}",
        "# Written by harness/explore_export.py: each simulated event is a comment '# sim N: ...' followed by",
        "# its real steps; the waits hold the real cluster at the simulated state (docs/running.md, 'Exploring').",
        *[f"# NOT FAITHFUL: {g}" for g in gaps],
        f"name = {_toml(name)}",
        f"description = {_toml(f'A shrunk schedule of highwater explore: {finding.invariant} in {mode} mode ({finding.text}).')}",
        "final_wait = 30",
        "",
        "[cluster]", f"nodes = {settings.replicas}", "",
        "[topic]", "partitions = 1", f"replication_factor = {settings.replicas}", "",
        "[broker]", *_broker_lines(settings), "",
        "[client]", f"acks = {_toml(settings.acks)}", "timeout = 2.0", "",
        "[checker]", 'engine = "reference"', "",
        *expect_notes,
        "[expect]",
        *[f"{m} = {_toml(expect[m])}" for m in MODES], "",
    ]
    if not settings.isr_join_requires_epoch_start:
        out.insert(4, "# sim: isr_join_requires_epoch_start = false has no broker setting: the real brokers keep the rule")
    return out


def _opening(brokers: list[str]) -> list[str]:
    """The first steps: the simulation's starting point, then every broker-to-broker link cut (the gating)."""
    gates = sorted((a, b) for a in brokers for b in brokers if a != b)
    out = ["# the simulation starts with n1 leading epoch 0 and every replica in the ISR", *_step(
        "wait", leader="n1", isr=brokers, timeout=30, note="n1 leads epoch 0")]
    return out + _step("partition", drop=[list(p) for p in gates],
                       note="fetch gating: brokers exchange fetches only where the simulation delivers an answer")


@dataclass
class _Played:
    """One simulated event as the lockstep applied it: the action, the message it delivers (None when it
    delivers none), the main world's state before and each replayed mode's after, how many outcomes the
    main world had before, the brokers it fenced, and the nodes whose LEO and HW it has waited for."""
    action: Any
    msg: Any
    done: str
    before: dict[str, Any]
    after: dict[str, dict]
    outcomes_before: int
    fenced_now: list[str]
    other_stopped: bool                       # the other mode's replay stopped at this event
    waited: set[str] = field(default_factory=set)


class _Export:
    """The real steps of a schedule, event by event: the lockstep replay and what the real cluster has been
    told so far (the links cut, the LEO and HW last waited for, the writes that do not wait)."""

    def __init__(self, settings, actions):
        self.mode, self.other = settings.truncation, other_mode(settings)
        self.brokers = [f"n{i}" for i in range(1, settings.replicas + 1)]
        self.sim_cuts: set[tuple[str, str]] = set()
        self.c0_cuts: set[tuple[str, str]] = set()      # one-way drops towards / from the controller in force
        self.fence_cuts: set[str] = set()                # brokers cut from c0 here only to be fenced (see EXPIRE)
        self.lock = _Lockstep(settings)
        self.answers = write_outcomes(settings, actions)
        self.background: list[str] = []                  # values of the produce steps that do not wait
        self.last: dict[tuple[str, str], Any] = {}       # (mode, node) -> the (LEO, HW) last waited for
        for m, world in ((self.mode, self.lock.main), (self.other, self.lock.other)):
            for node, st in _state(world)["nodes"].items():
                self.last[(m, node)] = st

    def event(self, j: int, action) -> list[str]:
        """The comment and the real steps of event `j`, then the waits for what it changed."""
        ev = self._play(j, action)
        out = [f"# sim {j + 1}: {ev.done}"]
        if ev.other_stopped:
            out.append(f"# ({self.other} mode: this event is not possible in the simulation; from here on only "
                       f"{self.mode} mode is waited for)")
        out += self._steps(j, ev)
        return out + self._follow_waits(ev) + [""]

    def ending(self) -> list[str]:
        """After the last event: the await of the writes that did not wait, the settle restarts."""
        out: list[str] = []
        if self.background:
            out += _step("await", timeout=AWAIT_TIMEOUT,
                         note=f"the acks=all writes that did not wait ({', '.join(self.background)}) have their answers")
            out.append("")
        out += _restarts_before_heal(self.lock, self.mode, self.other)
        out.append("# the final phase heals every link and restarts every node (the simulation's settle())")
        return out

    def _play(self, j: int, action) -> _Played:
        main = self.lock.main
        before = _state(main)
        msg = main.in_flight.get(action.msg) if action.msg is not None else None
        outcomes_before = len(main.outcomes)
        fenced_before = {b for b, st in main.controller.brokers.items() if st.fenced}
        other_before = self.lock.other
        done = self.lock.apply(j, action)
        after = {self.mode: _state(main)}
        if self.lock.other is not None:
            after[self.other] = _state(self.lock.other)
        fenced_now = sorted(f"n{b}" for b, st in main.controller.brokers.items()
                            if st.fenced and b not in fenced_before)
        return _Played(action, msg, done, before, after, outcomes_before, fenced_now,
                       other_stopped=other_before is not None and self.lock.other is None)

    def _steps(self, j: int, ev: _Played) -> list[str]:
        """The real steps of the event itself (module docstring, "The mapping")."""
        action, msg, k = ev.action, ev.msg, ev.action.kind
        if k == A.PRODUCE:
            return self._produce(j, ev)
        if k == A.DELIVER and msg is not None and msg.kind in ("fetch-answer", "epoch-answer"):
            return self._fetch_answer(ev)
        if k == A.CRASH:
            return _step("kill", node=action.node)
        if k == A.POWER_LOSS:
            return _step("power-loss", node=action.node)
        if k == A.RESTART:
            return _step("restart", node=action.node, note="it registers with the controller on its own")
        if k == A.FLUSH:
            return _step("flush", node=action.node)
        if k == A.DAMAGE:
            return _step("corrupt", node=action.node, how="torn-last", partition=0)
        if k == A.ELECT:
            return _step("elect", node=action.node, unclean=bool(action.arg))
        if k in (A.CUT, A.HEAL):
            return self._cut_or_heal(ev)
        if k == A.EXPIRE:
            return self._expire(ev)
        if k == A.DELIVER and msg is not None and msg.kind in ("heartbeat", "register") and msg.src in self.fence_cuts:
            return self._fence_lifted(ev)
        if k == A.DELIVER:
            return self._delivered(ev)
        return [f"# sim: {k} has no real-process step: {_NO_STEP.get(k, 'no counterpart')}"]

    def _produce(self, j: int, ev: _Played) -> list[str]:
        """A produce the client waits for, or (acks=all still waiting for the HW) one sent in the background."""
        main, action, out = self.lock.main, ev.action, []
        outcome = main.outcomes[ev.outcomes_before][1] if len(main.outcomes) > ev.outcomes_before else "pending"
        if action.node != ev.before["leader"]:
            out.append(f"# sim: {action.node} believes it leads; the real client sends to the controller's "
                       f"leader {ev.before['leader']}")
        if outcome == "pending":
            value, final, at = self.answers.get(j, ("?", "waiting", None))
            out.append(f"# sim: {value} waits for the HW; "
                       + (f"sim {at + 1} answers it: {final}" if at is not None
                          else "no event of the schedule answers it"))
            out += _step("produce", count=1, expect=_expect_of(final), wait=False, timeout=PARKED_TIMEOUT)
            self.background.append(value)
        else:
            out += _step("produce", count=1, expect=_expect_of(outcome))
        out += _node_waits(ev.after, action.node, self.mode, self.last, hw=False)
        ev.waited.add(action.node)
        return out

    def _fetch_answer(self, ev: _Played) -> list[str]:
        """A fetch (or OffsetsForLeaderEpoch) answer from the leader: the gate opens until the follower is
        where the simulation has it."""
        f, leader = ev.msg.dst, ev.msg.src
        open_pairs = [p for p in ([f, leader], [leader, f]) if tuple(p) not in self.sim_cuts]
        if not open_pairs:
            return ["# sim: the link is cut in the simulation too: the real gate stays shut"]
        ev.waited.add(f)
        out = _step("heal", drop=open_pairs, note=f"{f} may fetch from {leader}")
        out += _node_waits(ev.after, f, self.mode, self.last)
        return out + _step("partition", drop=open_pairs, note=f"{f} stops fetching from {leader}")

    def _cut_or_heal(self, ev: _Played) -> list[str]:
        """A link to or from the controller is cut or healed for real; one between brokers is gated anyway."""
        k, pair = ev.action.kind, (ev.action.node, ev.action.peer)
        (self.sim_cuts.add if k == A.CUT else self.sim_cuts.discard)(pair)
        if A.CONTROLLER not in pair:
            return [f"# the real link {pair[0]} -> {pair[1]} is gated: it opens only for the simulated "
                    f"fetch answers" + (", and stays shut while this cut lasts" if k == A.CUT else "")]
        if k == A.CUT and pair in self.c0_cuts:
            return ["# already cut (the fencing above)"]
        (self.c0_cuts.add if k == A.CUT else self.c0_cuts.discard)(pair)
        if k == A.HEAL:
            self.fence_cuts.discard(pair[0])
        return _step("partition" if k == A.CUT else "heal", drop=[list(pair)])

    def _expire(self, ev: _Played) -> list[str]:
        """Each broker the session check fenced: cut from the controller (when up) until it is fenced."""
        out: list[str] = []
        for f in ev.fenced_now:
            if self.lock.main.nodes[f].up and (f, A.CONTROLLER) not in self.c0_cuts:
                out += _step("partition", drop=[[f, A.CONTROLLER]],
                             note=f"{f}'s heartbeats stop reaching the controller, which fences it")
                self.c0_cuts.add((f, A.CONTROLLER))
                self.fence_cuts.add(f)
            out += _step("wait", fenced=f, timeout=WAIT_TIMEOUT)
        if not ev.fenced_now:
            out.append("# sim: the controller's session check fenced nobody")
        return out

    def _fence_lifted(self, ev: _Played) -> list[str]:
        """A fenced broker's heartbeat or registration reaches the controller: its fencing cut is healed."""
        main, f = self.lock.main, ev.msg.src
        self.fence_cuts.discard(f)
        out: list[str] = []
        if (f, A.CONTROLLER) not in self.sim_cuts:
            self.c0_cuts.discard((f, A.CONTROLLER))
            out += _step("heal", drop=[[f, A.CONTROLLER]], note=f"{f}'s {ev.msg.kind} reaches the controller again")
        if not main.controller.brokers[main.nodes[f].broker_id].fenced:
            out += _step("wait", alive=f, timeout=WAIT_TIMEOUT)
        return out

    def _delivered(self, ev: _Played) -> list[str]:
        """Any other delivered message: the real brokers exchange it on their own."""
        what = ev.msg.kind if ev.msg is not None else "message"
        now = ev.after[self.mode]
        if (ev.before["leader"], ev.before["isr"]) != (now["leader"], now["isr"]):
            return [f"# sim: the delivered {what} changed the controller's state; the real controller "
                    f"gets it on its own"]
        return [f"# sim: delivering a {what} message has no real-process step: the real brokers "
                f"exchange it on their own" + ("; it is played with its answer (the gate)"
                                               if what in ("fetch", "epoch") else "")]

    def _follow_waits(self, ev: _Played) -> list[str]:
        """Waits for what the event changed: the controller's leader and ISR, each node's LEO and HW."""
        k, before, after, out = ev.action.kind, ev.before, ev.after, []
        if k not in (A.PRODUCE,) and (before["leader"] != after[self.mode]["leader"]
                                     or before["isr"] != after[self.mode]["isr"] or k == A.ELECT):
            out += _controller_waits(after, self.mode)
        # a request reaching the leader is played when its answer opens the gate: no wait in between
        if not (k == A.DELIVER and ev.msg is not None and ev.msg.kind in ("fetch", "epoch")):
            for node in self.brokers:
                if node not in ev.waited and any(self.last.get((m, node)) != st["nodes"][node]
                                                 for m, st in after.items()):
                    out += _node_waits(after, node, self.mode, self.last)
        return out


def _restarts_before_heal(lock: _Lockstep, mode: str, other: str) -> list[str]:
    """settle() restarts the nodes that are down and their registrations reach the controller before any
    fetch can: a restarted leader is fenced ("re-registered") and the leadership moves before it serves
    anything. The final phase of `highwater scenario` would heal the links first, and a restarted old
    leader would serve its followers from its stored metadata until it registers; so the nodes down at
    the end are restarted here, while the links are still gated, and the controller's new leader is
    waited for."""
    down = [name for name, n in lock.main.nodes.items() if not n.up]
    if not down:
        return []
    out = ["# settle: the nodes down at the end restart while the brokers are still cut from each other "
           "(the simulation registers them before any fetch)"]
    after = {}
    for m, world in ((mode, lock.main), (other, lock.other)):
        if world is None:
            continue
        for name in down:
            if world.nodes[name].up:
                continue
            world.apply(A.Action(A.RESTART, name))
            reg = next((mm.id for mm in world.in_flight.values() if mm.kind == "register" and mm.src == name), None)
            if reg is not None and world.is_enabled(A.Action(A.DELIVER, msg=reg)):
                world.apply(A.Action(A.DELIVER, msg=reg))
        after[m] = _state(world)
    for name in down:
        out += _step("restart", node=name, note="settle: it registers before the links heal")
    for m, value in _split(after, mode, lambda st: st["leader"]):
        out += _step("wait", leader=value, timeout=WAIT_TIMEOUT, mode=m)
    out.append("")
    return out


def _split(after: dict[str, dict], mode: str, pick) -> list[tuple[str | None, Any]]:
    """[(mode or None, value)]: one entry when every replayed mode agrees, else one per mode."""
    values = {m: pick(s) for m, s in after.items()}
    if len(after) == 2 and len({json.dumps(v, sort_keys=True) for v in values.values()}) == 1:
        return [(None, values[mode])]
    if len(after) == 1:
        return [(mode, values[mode])]
    return [(m, values[m]) for m in MODES if m in values]


def _node_waits(after: dict[str, dict], node: str, mode: str, last: dict, hw: bool = True) -> list[str]:
    """Waits until `node`'s LEO and HW are the simulated ones (per mode where they differ; with hw=False
    the LEO only); a down node has nothing to wait for. Notes what was waited for in `last`."""
    out: list[str] = []
    for m in after:
        last[(m, node)] = after[m]["nodes"].get(node)
    for m, value in _split(after, mode, lambda s: s["nodes"].get(node)):
        if value is None:
            continue
        leo, node_hw = value
        out += _step("wait", node=node, leo=leo, node_hw=node_hw if hw else None, timeout=WAIT_TIMEOUT, mode=m)
    return out


def _controller_waits(after: dict[str, dict], mode: str) -> list[str]:
    out: list[str] = []
    for m, value in _split(after, mode, lambda s: (s["leader"], s["isr"])):
        leader, isr = value
        out += _step("wait", leader=leader, isr=isr or None, timeout=WAIT_TIMEOUT, mode=m)
    return out
