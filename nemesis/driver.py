"""The Nemesis: runs a schedule of faults against a cluster in a background thread and records each action.

Every fault has a start and a stop, each recorded as a `nemesis` operation (invoke, then an info
completion carrying `detail`, and `error` when the action failed; docs/formats.md). `stop()` ends the
schedule and undoes whatever is still active, so every start has its stop before the final phase.
The API is described in nemesis/__init__.py.
"""
from __future__ import annotations

import contextlib
import logging
import math
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from broker.client import Admin, ClientError
from broker.groups.offsets import OFFSETS_TOPIC
from broker.config import DEFAULTS as BROKER_DEFAULTS
from broker.controller.config import DEFAULTS as CONTROLLER_DEFAULTS
from clusters.base import Cluster, ClusterError, require
from nemesis import packages, shapes, targets as live
from nemesis.faults import KINDS
from nemesis.windows import FaultWindows, Window
from nemesis.schedule import (COORDINATOR, COORDINATOR_FAMILY, FAULTS, MIX_FAMILIES, PACKAGE_OWN_KINDS,
                              PARTITION_TARGETS, PROCESS_KINDS, ConfigError, FaultPlan, Step,
                              aims_at_coordinator, check_fault_names, corrupt_how, degradation, expand_faults, load_schedule,
                              random_steps, recorded_kinds)

log = logging.getLogger("highwater.nemesis")

# window kinds that are no backend fault (a package's own, e.g. elect): the backend is not asked about them
OWN_KINDS = {k for kinds in PACKAGE_OWN_KINDS.values() for k in kinds}
POLL_S = 0.25       # how often a package asks the controller's metadata while it waits for a state


@dataclass
class NemesisStats:
    started: int = 0
    stopped: int = 0
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _node_names(cluster: Cluster) -> tuple[str, list[str]]:
    """(controller name, broker names) even before the cluster is started."""
    try:
        return cluster.controller().name, sorted(cluster.brokers(), key=lambda n: int(n[1:]))
    except ClusterError:
        n = cluster.spec.brokers
        return "c0", [f"n{i}" for i in range(1, n + 1)]


@dataclass(frozen=True)
class Aim:
    """What the faults are aimed at besides the cluster's nodes: the topic and its number of partitions
    (leader faults and packages pick a partition of it), the workload's clients (client faults):
    () -> the workload (nemesis/faults.py ClientPausable), or None, and the workload's consumer group
    (coordinator faults aim at its coordinator; None: the workload has no group, and the mix has no
    coordinator family)."""
    topic: str = "hw"
    partitions: int = 1
    clients: Callable[[], Any] | None = None
    group: str | None = None


class Nemesis:
    def __init__(self, cluster: Cluster, history, plan: FaultPlan, *, aim: Aim = Aim(),
                 admin_factory: Callable[[], Any] | None = None, clock: Callable[[], float] = time.monotonic):
        self.cluster, self.history = cluster, history
        clients, partitions, seed = aim.clients, aim.partitions, plan.seed
        self.clients = clients              # () -> the workload (nemesis/faults.py ClientPausable), or None
        self.group = aim.group              # the consumer group whose coordinator the coordinator faults hit
        self.interval_s, self.seed, self.topic, self.partitions = plan.interval_s, seed, aim.topic, partitions
        self.quiet_probability = plan.quiet_probability
        self.admin_factory = admin_factory
        self._clock = clock
        self.controller_name, self.broker_names = _node_names(cluster)
        self.file_steps: list[Step] | None = None
        if plan.schedule is not None:
            self.file_steps = load_schedule(Path(plan.schedule), [self.controller_name, *self.broker_names],
                                            partitions=partitions, seed=seed)
            self.faults = sorted({s.fault for s in self.file_steps})
        else:
            check_fault_names(list(plan.faults))
            if plan.interval_s <= 0:
                raise ConfigError(f"nemesis interval must be positive, got {plan.interval_s}")
            self.faults = list(plan.faults)
        self._preflight()
        self._lock = threading.RLock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.windows = FaultWindows(cluster, history, elect=self._elect, clients=clients)  # the executor
        self._admin = None
        self._damaged: set[str] = set()   # corrupted brokers not yet back in the ISR of all their partitions
        self._stopped = False
        self._t0 = 0.0
        self._shift = 0.0                 # how much later the schedule runs: packages that outlast their step
        self._packages = 0
        lag_ms = (cluster.spec.broker_settings or {}).get("replica_lag_time_max_ms",
                                                          BROKER_DEFAULTS["replica_lag_time_max_ms"])
        session_ms = (cluster.spec.controller_settings or {}).get("broker_session_timeout_ms",
                                                                  CONTROLLER_DEFAULTS["broker_session_timeout_ms"])
        # bounds on a package's waits: an ISR shrinks about replica_lag_time_max after its followers stop
        # fetching, a silent broker is fenced after the session timeout; twice that and a margin for a load
        self.isr_wait_s = 2 * lag_ms / 1000 + 6
        self.fence_wait_s = 2 * session_ms / 1000 + 6
        self.stats = NemesisStats()
        self.error: BaseException | None = None

    # --- validation ---------------------------------------------------------------------------------
    def _check_backend(self, name: str) -> None:
        """ClusterError or ConfigError (one line naming both) unless the backend has what fault `name`
        (a package: every fault it uses) needs: kill, pause, partition, ..., and for a corrupt fault a
        storage fault it can apply mid-run."""
        for f in expand_faults([name]):
            kind = KINDS[FAULTS[f][0]]
            if kind.party == "clients":     # the workload exists only once the run plays: asked then
                if self.clients is None:
                    raise ConfigError(f"nemesis: fault {name!r} holds a workload client and needs the "
                                      f"workload's clients (Aim(clients=))")
                continue
            for need in kind.needs:
                require(self.cluster, need, name)
            if kind.damages:                # the broker is killed, damaged, then restarted
                corrupt_how(f, 0, self._midrun_storage_faults())    # ConfigError if it can apply none

    def _check_power_loss(self, kinds: set[str]) -> None:
        """ConfigError when `kinds` cut power but the brokers run without the power-loss emulation."""
        cuts = any(k in KINDS and KINDS[k].cuts_power for k in kinds)
        if cuts and (self.cluster.spec.broker_settings or {}).get("power_loss") is not True:
            raise ConfigError("nemesis: the power-loss fault needs brokers started with broker setting "
                                "power_loss = true")

    def _mix_families(self) -> dict[str, tuple[str, ...]]:
        """The families of `mix` this backend can inject (every fault of the family has what it needs, e.g.
        no `storage` family on a backend that cannot corrupt a data directory); the others are left out of
        the rotation, logged and listed in `mix_dropped`. ConfigError when none is left."""
        usable, dropped = {}, []
        families = {**MIX_FAMILIES, **(COORDINATOR_FAMILY if self.group else {})}
        for family, names in families.items():
            try:
                for name in names:
                    self._check_backend(name)
                self._check_power_loss(recorded_kinds(list(names)))
            except (ClusterError, ConfigError) as exc:
                dropped.append(f"mix: family {family} left out ({exc})")
                continue
            usable[family] = names
        if not usable:
            raise ConfigError("nemesis: the mix has no family this backend can inject: " + "; ".join(dropped))
        for note in dropped:
            log.info("%s", note)
        self.mix_dropped = dropped
        return usable

    def _preflight(self) -> None:
        self.mix_dropped: list[str] = []
        self.families = self._mix_families() if self.faults == ["mix"] else MIX_FAMILIES
        if self.faults == ["mix"]:
            self.faults_checked = [f for names in self.families.values() for f in names]
        else:
            self.faults_checked = list(self.faults)
        kinds = recorded_kinds(self.faults_checked)
        coordinator = aims_at_coordinator(self.faults_checked)
        if coordinator and not self.group:
            raise ConfigError(f"nemesis: fault {coordinator[0]!r} aims at a consumer group's coordinator, and "
                              f"the workload has no consumer group (Aim(group=))")
        aimed = [f for f in self.faults if FAULTS[f][1] in (*PARTITION_TARGETS, COORDINATOR)
                 or f == "partition-leader" or FAULTS[f][0] in ("package", "mix")]
        if aimed and self.admin_factory is None:
            what = "targets a partition leader" if FAULTS[aimed[0]][1] == "leader" else "reads the live metadata"
            raise ConfigError(f"nemesis: fault {aimed[0]!r} {what} and needs admin_factory")
        # does the backend have what each fault needs (kill, pause, partition)? one line naming both
        for name in self.faults_checked:
            self._check_backend(name)
        self._check_power_loss(kinds)
        # and can it inject them here (e.g. partitions without root or iptables)? before the cluster starts
        self.cluster.check_faults(sorted(k for k in kinds - OWN_KINDS if KINDS[k].party == "cluster"))

    # --- runner API ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("nemesis already started")
        self.controller_name, self.broker_names = _node_names(self.cluster)
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()

    def stop(self, join_timeout_s: float = 120.0) -> None:
        """Stop scheduling; undo every active fault (recording the stops). Idempotent."""
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(join_timeout_s)
            if self._thread.is_alive():
                log.error("nemesis thread did not finish within %.0fs; undoing faults anyway", join_timeout_s)
        with self._lock:
            for fault in sorted(self.windows.active, key=lambda a: -a.id):
                self._stop_fault(fault)
            self._stopped = True
            self._drop_admin()

    def active(self) -> list[str]:
        with self._lock:
            return [a.label for a in self.windows.active]

    def steps(self) -> Iterator[Step]:
        if self.file_steps is not None:
            return iter(self.file_steps)
        plan = FaultPlan(self.faults, self.interval_s, self.seed, quiet_probability=self.quiet_probability)
        return random_steps(plan, self.broker_names, partitions=self.partitions, families=self.families)

    # --- loop ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        self._t0 = self._clock()
        steps = self.steps()
        pending = next(steps, None)
        try:
            while not self._stop_event.is_set():
                now = self._now()
                play = None
                with self._lock:
                    if self._stop_due(now):
                        continue
                    if pending is not None and pending.at + self._shift <= now:
                        if pending.kind == "package":
                            play = pending
                        else:
                            self._start_fault(pending, now)
                        pending = next(steps, None)
                        if play is None:
                            continue
                    wake = min([a.ends_at for a in self.windows.active]
                               + ([pending.at + self._shift] if pending else []), default=None)
                if play is not None:
                    self._play(play)        # outside the lock: it waits on the cluster, stopping due faults
                elif wake is None or wake == math.inf:
                    self._stop_event.wait()
                else:
                    self._stop_event.wait(max(0.0, wake - now))
        except BaseException as exc:  # recorded; stop() still undoes the active faults
            self.error = exc
            log.exception("nemesis loop failed")

    def _now(self) -> float:
        return self._clock() - self._t0

    def _stop_due(self, now: float) -> bool:
        """Stop the faults whose time is up (not a package's: it stops its own); whether there were any."""
        due = sorted((a for a in self.windows.active if a.ends_at <= now), key=lambda a: a.ends_at)
        for fault in due:
            if self._stop_event.is_set():
                return True
            self._stop_fault(fault)
        return bool(due)

    def _play(self, step: Step) -> None:
        """Run a package to its end (or until stop()). Steps that fell due meanwhile start after it, and the
        rest of the schedule moves later by as much as the package outlasted its step's duration."""
        self._packages += 1
        try:
            packages.PLAYS[step.fault](_Play(self, step, self._packages), step)
        except packages.Stopped:
            return
        overrun = self._now() - (step.at + self._shift + step.duration)
        if overrun > 0:
            self._shift += overrun

    # --- faults -------------------------------------------------------------------------------------
    def _busy(self) -> set[str]:
        return {t for a in self.windows.active if a.kind in PROCESS_KINDS for t in a.targets}

    def _admin_client(self) -> Any:
        """The admin client, made on first use (and again after `_drop_admin`)."""
        if self._admin is None:
            self._admin = self.admin_factory()
        return self._admin

    def _drop_admin(self) -> None:
        """Close the admin client (quietly) and forget it; the next leader lookup makes a new one."""
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None

    def _view(self, topic: str | None = None) -> tuple[live.ClusterView | None, str]:
        """The controller's metadata for the test topic (or `topic`: the offsets topic) now, or (None, why
        not)."""
        if self.admin_factory is None:
            return None, "no admin client to read the metadata"
        topic = topic or self.topic
        try:
            if isinstance(self._admin_client(), Admin):
                # only the controller's part of the answer is read: a paused broker must not stretch a poll
                infos = self._admin.describe(topic, broker_timeout_s=POLL_S)
            else:
                infos = self._admin.describe(topic)
            return live.view_of(infos), ""
        except Exception as exc:
            self._drop_admin()
            return None, f"metadata lookup failed ({exc})"

    def _elect(self, partition: int, node: str) -> str:
        """Ask the controller to make `node` the leader of `partition` (ELECT_LEADER, clean: it must be in
        the ISR): its one-line answer; a refusal or an admin client that cannot elect raises ClusterError."""
        try:
            admin = self._admin_client()
            if not isinstance(admin, Admin):
                raise ClusterError(f"the admin client of this cluster ({type(admin).__name__}) cannot "
                                   f"move a leader")
            return admin.elect_leader(self.topic, partition, broker=int(node.lstrip("n")))
        except ClientError as exc:
            self._drop_admin()
            raise ClusterError(f"ELECT_LEADER {self.topic}/{partition} {node}: {exc}") from None

    def _leader(self, partition: int, fallback: str) -> tuple[str, str]:
        """(node name of the leader of `partition`, note). Falls back to `fallback` if unknown."""
        try:
            for info in self._admin_client().describe(self.topic):
                if info.partition == partition:
                    if info.leader is None:
                        return fallback, f"partition {partition} has no leader; chose {fallback}"
                    return f"n{info.leader}", f"leader of {self.topic}/{partition} (epoch {info.epoch})"
            return fallback, f"partition {partition} not found; chose {fallback}"
        except Exception as exc:
            self._drop_admin()
            return fallback, f"leader lookup failed ({exc}); chose {fallback}"

    def _resolve(self, step: Step) -> tuple[list[str], dict[str, Any], str]:
        """Targets, extra history value fields and a note for a step that is starting."""
        rng = random.Random(step.seed)
        kind, who = FAULTS[step.fault]
        if KINDS[kind].party == "clients":
            return self._resolve_client(step, who, rng)
        fallback = rng.choice(self.broker_names)
        if KINDS[kind].process:
            return self._resolve_process(step, who, rng, fallback)
        nodes = [self.controller_name, *self.broker_names]
        links = {"degrade": self._resolve_degrade, "partition": self._resolve_partition}[kind]
        return links(step, nodes, rng, fallback)

    def _resolve_process(self, step: Step, who: str, rng: random.Random,
                         fallback: str) -> tuple[list[str], dict[str, Any], str]:
        """A process fault's nodes: named, the controller, a partition's leader, a follower or sole ISR
        member, a share of the brokers, or the seed's broker; never one already faulted. A fault that
        damages data keeps the brokers down or damaged a minority."""
        busy = self._busy()
        if step.targets is not None:
            targets, note = list(step.targets), ""
        elif who == "controller":
            targets, note = [self.controller_name], ""
        elif who == "leader":
            leader, note = self._leader(step.partition or 0, fallback)
            targets = [leader]
        elif who in ("follower", "sole-isr"):
            return self._resolve_live(step, who, rng, busy)
        elif who == COORDINATOR:
            return self._resolve_coordinator(busy)
        elif who in ("minority", "majority", "all"):
            return self._resolve_share(who, rng, busy)
        else:
            free = [b for b in self.broker_names if b not in busy]
            targets, note = ([fallback] if fallback in free else free[:1]), ""
        skipped = [t for t in targets if t in busy]
        targets = [t for t in targets if t not in busy]
        if skipped:
            note += f"; skipped {', '.join(skipped)} (already faulted)"
        extra: dict[str, Any] = {"partition": step.partition} if who == "leader" else {}
        if KINDS[FAULTS[step.fault][0]].damages:
            targets, more = self._minority(targets, busy)
            note += more
            if step.number is None and targets:       # drawn at random, not staged by a schedule file
                targets, more = self._not_last_copy(targets, busy)
                note += more
            # partition None: the fault picks the replica with the step's seed among every partition
            extra = {"how": corrupt_how(step.fault, step.seed, self._midrun_storage_faults()), "partition": None}
        return targets, extra, note.strip("; ")

    def _resolve_partition(self, step: Step, nodes: list[str], rng: random.Random,
                           fallback: str) -> tuple[list[str], dict[str, Any], str]:
        """A partition's cut: the step's shape (or the seed's) over the nodes, aimed at its targets."""
        aimed = FAULTS[step.fault][1] == COORDINATOR
        shape, note = (COORDINATOR if aimed else step.shape or rng.choice(shapes.SHAPES)), ""
        if shape == COORDINATOR:        # partition-coordinator: cut off from every other node
            coordinator, extra, note = self._resolve_coordinator(())
            if not coordinator:
                return [], {}, note
            cut = shapes.isolate(nodes, coordinator, COORDINATOR)
            return cut.targets, {"shape": cut.shape, "groups": cut.groups, "drops": [list(d) for d in cut.drops],
                                 **extra}, note
        if shape == "leader":
            leader, note = self._leader(step.partition or 0, fallback)
            cut = shapes.isolate(nodes, [leader], "leader")
        else:
            cut = shapes.cut(shape, nodes, rng, step.targets, fallback, self.controller_name)
        extra = {"shape": cut.shape, "groups": cut.groups, "drops": [list(d) for d in cut.drops]}
        if shape == "leader":
            extra["partition"] = step.partition
        return cut.targets, extra, note

    def _resolve_client(self, step: Step, who: str, rng: random.Random) -> tuple[list[str], dict[str, Any], str]:
        """A workload client (any, or a consumer), one not held already, chosen with the step's seed (a
        schedule file's step names no targets for it: the fault chooses its own)."""
        held = {t for a in self.windows.active if a.kind == FAULTS[step.fault][0] for t in a.targets}
        clients = self.clients() if self.clients is not None else None
        names = list(clients.client_names()) if clients is not None else []
        free = [n for n in names if n not in held and (who == "client" or n.startswith(f"{who}-"))]
        if not free:
            return [], {}, f"no free {who} among the workload's clients ({', '.join(names) or 'none yet'})"
        return [rng.choice(free)], {}, ""

    def _resolve_live(self, step: Step, who: str, rng: random.Random,
                      busy: set[str]) -> tuple[list[str], dict[str, Any], str]:
        """A follower of the step's partition, or the sole member of a shrunk ISR, from the metadata now."""
        view, why = self._view()
        if view is None:
            return [], {}, why
        if who == "follower":
            p = step.partition or 0
            node = live.follower(view, p, rng, busy)
            part = view.get(p)
            if node is None or part is None:
                return [], {}, f"{self.topic}/{p} has no leader or no free follower"
            return [node], {"partition": p, "state": part.state()}, f"follower of {part.describe(self.topic)}"
        part = live.sole_isr(view, rng, busy, prefer=step.partition)
        if part is None:
            isrs = "; ".join(f"{p}: [{', '.join(v.isr)}]" for p, v in sorted(view.partitions.items()))
            return [], {}, f"no partition's ISR has shrunk to its leader alone (ISRs {isrs})"
        note = f"sole ISR member of {part.describe(self.topic)}"
        return [part.leader], {"partition": part.partition, "state": part.state()}, note

    def _resolve_coordinator(self, busy: Iterable[str]) -> tuple[list[str], dict[str, Any], str]:
        """The coordinator of the workload's group: the leader of its partition of `__consumer_offsets`, from
        the metadata now (described as the test topic is); none while that topic does not exist, its
        partition has no leader or the coordinator is already faulted. Recorded: `group`,
        `offsets_partition` and `state` (the offsets partition's leader, epoch and ISR)."""
        view, why = self._view(OFFSETS_TOPIC)
        if view is None:
            return [], {}, why
        part = live.coordinator_partition(view, self.group)
        if part is None or part.leader is None:
            return [], {}, live.no_coordinator(view, self.group)
        if part.leader in set(busy):
            return [], {}, f"the coordinator of group {self.group!r}, {part.leader}, is already faulted"
        extra = {"group": self.group, "offsets_partition": part.partition, "state": part.state()}
        return [part.leader], extra, f"coordinator of group {self.group!r}: {part.describe(OFFSETS_TOPIC)}"

    def _resolve_share(self, who: str, rng: random.Random, busy: set[str]) -> tuple[list[str], dict[str, Any], str]:
        """A minority, a majority or all of the brokers (those not already faulted), chosen with the seed. A
        majority or all is not taken down while a corrupted broker has not rejoined the ISR (_minority)."""
        n = len(self.broker_names)
        if who != "minority":
            self._damaged -= {b for b in self._damaged - busy if self._caught_up(b)}
            if self._damaged:
                return [], {}, (f"{', '.join(sorted(self._damaged))} corrupted and not yet back in the ISR: "
                                f"no majority of brokers goes down")
        size = {"minority": live.minority_size(n), "majority": live.majority_size(n), "all": n}[who]
        free = [b for b in self.broker_names if b not in busy]
        chosen = live.some(self.broker_names, min(size, len(free)) if who == "all" else size, rng, busy)
        if not chosen:
            return [], {}, f"no {who} of the {n} brokers is free ({len(free)} free, {size} needed)"
        return chosen, {}, ""

    def _midrun_storage_faults(self) -> tuple[str, ...] | None:
        """The storage faults the backend can apply mid-run (clusters/docker.py: no deletes with kill mode
        "node"); None when it does not say (all of them)."""
        midrun = getattr(self.cluster, "midrun_storage_faults", None)
        return tuple(midrun()) if callable(midrun) else None

    def _caught_up(self, node: str) -> bool:
        """Is broker `node` in the ISR of every partition of the topic it replicates (the controller's
        answer)? False when that cannot be told (no admin client, or the lookup fails)."""
        if self.admin_factory is None:
            return False
        try:
            infos = list(self._admin_client().describe(self.topic))
        except Exception:
            self._drop_admin()
            return False
        broker = int(node[1:])
        return bool(infos) and all(broker in info.isr for info in infos if broker in info.replicas)

    def _minority(self, targets: list[str], busy: set[str]) -> tuple[list[str], str]:
        """Corrupt faults: keep only brokers, and only as many as leave the brokers down or damaged a
        minority. Damaged: process-faulted now, or corrupted and not yet back in the ISR of every partition
        it replicates (a restarted broker holds damaged data until it has caught up and rejoined)."""
        busy_brokers = busy & set(self.broker_names)
        self._damaged -= {b for b in self._damaged - busy_brokers if self._caught_up(b)}
        down = busy_brokers | self._damaged
        brokers = [t for t in targets if t in self.broker_names and t not in down]
        room = max(0, (len(self.broker_names) - 1) // 2 - len(down))
        kept, dropped = brokers[:room], [t for t in targets if t not in brokers[:room]]
        rejoining = sorted(self._damaged - busy_brokers)
        why = "a majority of brokers must stay up and intact" + (
            f"; {', '.join(rejoining)} corrupted, not yet back in the ISR" if rejoining else "")
        return kept, (f"; skipped {', '.join(dropped)} ({why})" if dropped else "")

    def _not_last_copy(self, targets: list[str], busy: set[str]) -> tuple[list[str], str]:
        """Corrupt faults drawn at random: drop the brokers that hold a partition's only in-sync copy
        (targets.last_copies; the others are down, damaged or out of the ISR). Without KIP-966 such a
        broker is elected again with the log its recovery cut, a loss the configuration allows and a
        random run must not stage by chance; a schedule file's step stages what it names on purpose.
        Unknown metadata spares every target."""
        view, why = self._view()
        if view is None:
            return [], f"; skipped {', '.join(targets)} ({why}: a broker holding the last in-sync copy is spared)"
        unavailable = (busy & set(self.broker_names)) | self._damaged
        kept, notes = [], []
        for t in targets:
            last = live.last_copies(view, t, unavailable)
            if last:
                held = ", ".join(p.describe(self.topic) for p in last)
                notes.append(f"skipped {t} (the only in-sync copy of {held})")
            else:
                kept.append(t)
        return kept, "".join(f"; {n}" for n in notes)

    def _resolve_degrade(self, step: Step, nodes: list[str], _rng: random.Random,
                         fallback: str) -> tuple[list[str], dict[str, Any], str]:
        """A degrade step's links: both directions between its targets (the leader for degrade-leader) and
        every other node, or every ordered pair of nodes when it names none; and its delay/jitter/loss."""
        note, extra = "", {}
        if FAULTS[step.fault][1] == "leader":
            leader, note = self._leader(step.partition or 0, fallback)
            about, extra = [leader], {"partition": step.partition}
        else:
            about = list(step.targets) if step.targets else []
        if about:
            rest = [n for n in nodes if n not in about]
            links = ([(a, b) for a in about for b in about if a != b]
                     + [(a, r) for a in about for r in rest] + [(r, a) for a in about for r in rest])
        else:
            links = [(a, b) for a in nodes for b in nodes if a != b]
        extra.update(links=[list(x) for x in links], **(step.degradation or degradation(step.seed)))
        return (sorted(about) or list(nodes)), extra, note

    def _start_fault(self, step: Step, now: float) -> None:
        kind = FAULTS[step.fault][0]
        targets, extra, note = self._resolve(step)
        if not targets:
            msg = f"{step.fault} at {step.at:g}s: no eligible target ({note or 'all busy'})"
            self.stats.skipped.append(msg)
            log.info("nemesis skipped %s", msg)
            return
        label = f"{step.fault} {extra['shape'] + ' ' if 'shape' in extra else ''}{' '.join(targets)}"
        self._inject(_window(step, kind, targets, extra, step.at + self._shift + step.duration, label), note)

    def _inject(self, window: Window, note: str) -> Window:
        """Start one fault window on resolved targets (the executor records and acts)."""
        if KINDS[window.kind].damages:
            self._damaged.update(window.targets)     # until back in the ISR (_minority)
        errors = self.windows.open_window(window, note)
        self.stats.started += 1
        self.stats.errors += errors
        return window

    def _stop_fault(self, fault: Window, note: str = "") -> None:
        if fault not in self.windows.active:
            return
        errors = self.windows.close_window(fault, note)
        self.stats.stopped += 1
        self.stats.errors += errors


class _Play:
    """What a package (nemesis/packages.py) may do: read the metadata, start and stop fault windows, wait
    for a state. Waits run outside the nemesis lock and stop the other faults whose time is up."""

    def __init__(self, nem: Nemesis, step: Step, number: int):
        self.nem, self.step, self.number = nem, step, number
        self.topic, self.isr_wait_s, self.fence_wait_s = nem.topic, nem.isr_wait_s, nem.fence_wait_s
        self.group = nem.group
        self.nodes = [nem.controller_name, *nem.broker_names]

    def view(self, topic: str | None = None) -> tuple[live.ClusterView | None, str]:
        return self.nem._view(topic)

    def busy(self) -> set[str]:
        with self.nem._lock:
            return self.nem._busy()

    def can_elect(self) -> bool:
        """Can the admin client move a leader (the native one can; an external Kafka cluster's cannot)?"""
        try:
            return isinstance(self.nem._admin_client(), Admin)
        except Exception:
            return False

    def skip(self, reason: str) -> None:
        msg = f"{self.step.fault} #{self.number}: {reason}"
        self.nem.stats.skipped.append(msg)
        log.info("nemesis package %s", msg)

    def start(self, name: str, kind: str, targets: list[str], extra: dict[str, Any], note: str) -> Window:
        with self.nem._lock:
            if self.nem._stop_event.is_set():
                raise packages.Stopped()
            label = f"{self.step.fault} {name} {' '.join(targets)}"
            window = _window(self.step, kind, targets, {"package": self.number, "step": name, **extra},
                             math.inf, label)
            fault = self.nem._inject(window, f"{self.step.fault} #{self.number}, {name}: {note}")
            return fault

    def stop(self, fault: Window, note: str) -> None:
        with self.nem._lock:
            self.nem._stop_fault(fault, note)

    def _tick(self, seconds: float) -> None:
        """Stop the other faults that are due, then sleep; Stopped when the nemesis stops."""
        with self.nem._lock:
            self.nem._stop_due(self.nem._now())
        if self.nem._stop_event.wait(seconds):
            raise packages.Stopped()

    def hold(self, seconds: float) -> None:
        end = self.nem._clock() + seconds
        while (left := end - self.nem._clock()) > 0:
            self._tick(min(POLL_S, left))

    def wait(self, test, bound_s: float, topic: str | None = None) -> tuple[bool, live.ClusterView | None, float]:
        """Poll the metadata (of the test topic, or `topic`) until `test(view)` holds or `bound_s` passes:
        (held, last view, seconds waited)."""
        t0 = self.nem._clock()
        last = None
        while True:
            view, _why = self.view(topic)
            last = view or last
            waited = self.nem._clock() - t0
            if view is not None and test(view):
                return True, view, waited
            if waited >= bound_s:
                return False, last, waited
            self._tick(POLL_S)

    def recover(self, nodes: list[str]) -> None:
        """Wait (bounded, unrecorded: no fault) until every partition is led and `nodes` are back in the ISR,
        so the next fault starts from a whole cluster."""
        ok, view, waited = self.wait(lambda v: live.whole(v, nodes), self.isr_wait_s)
        log.info("nemesis package %s #%d: cluster %s after %.1f s", self.step.fault, self.number,
                 "whole again" if ok else "not whole yet", waited)


def _window(step: Step, kind: str, targets: list[str], extra: dict[str, Any], ends_at: float,
            label: str) -> Window:
    """The window a step opens on resolved targets; a links kind's pairs are its drops, or its links."""
    pairs = extra.get("drops", extra.get("links")) if KINDS[kind].on == "links" else None
    return Window(kind, targets, extra, step, ends_at, label.replace("  ", " "),
                  pairs=[tuple(p) for p in pairs] if pairs is not None else None, seed=step.seed)
