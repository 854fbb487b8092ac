"""The fault vocabulary: every kind of fault window and every fault name, in one place.

A fault window is opened by a start operation and closed by a stop operation (docs/formats.md, "Nemesis
operations"). `KINDS` holds one `Kind` per kind of window, the history's `value.fault`:

- `start_f` / `stop_f`: the history's `f` of its start and of its stop;
- `needs`: the backend capabilities it asks for (clusters/base.py), checked before a run and again when a
  window opens, so a backend that cannot inject it is refused with one line naming both;
- `on`: what its actions take: "nodes" (one action per target node; one node failing does not stop the
  others), "links" (one action over one-way (src, dst) node pairs) or "leader" (a leadership move through
  the admin client);
- `start(act, target)` / `stop(act, target)`: the actions. `act` is the `Act` of the window (the cluster,
  the window, the nemesis's leader mover); `target` is a node, or for links a list of pairs (None: all);
- `params`: the fields of `value` it records besides fault, phase, id and targets, given by whoever
  opens it (a schedule step, a scenario step, the random draw);
- `process`: a process fault, one per node at a time.

`NAMES` maps each fault name a user writes (`kill-leader`, `partition-ring`, `aimed`, ...) to its kind and
to whom it is aimed at. `VERBS` maps each scenario step that plays a fault (harness/scenario.py) to the
kind it opens or closes.

Adding a fault: a `Kind` here (or only a `NAMES` entry if an existing kind does it), the capability in
clusters/base.py with its implementation in the backends, and docs (docs/architecture.md, "Adding a
fault").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

from clusters.base import ClusterError, Corruptible, Degradable, DiskFillable, Killable, Partitionable, Pausable, Stoppable
from nemesis.shapes import SHAPES


@runtime_checkable
class ClientPausable(Protocol):
    """The workload's side of the client faults (workloads/workload.py implements it): its clients by name
    (`producer-0`, `consumer-1`, ...), and holding a client's calls until it is resumed."""

    def client_names(self) -> list[str]: ...

    def pause_client(self, name: str) -> str: ...

    def resume_client(self, name: str) -> str: ...


@dataclass
class Act:
    """What a kind's actions may use: the cluster, the window they act for, the leader mover and the
    workload's clients."""
    cluster: Any
    window: Any                                         # nemesis/windows.py Window
    elect: Callable[[int, str], str] | None = None      # (partition, node) -> detail; ClusterError if refused
    clients: Any = None                                 # a ClientPausable (client faults)

    def party(self, kind: "Kind") -> Any:
        """What the kind's actions act on: the cluster, or the workload's clients."""
        return self.clients if kind.party == "clients" else self.cluster


@dataclass(frozen=True)
class Kind:
    """One kind of fault window (module docstring)."""
    name: str
    start_f: str
    stop_f: str
    needs: tuple[type, ...]
    on: str
    start: Callable[[Act, Any], str]
    stop: Callable[[Act, Any], str]
    params: tuple[str, ...] = ()
    process: bool = False
    pairs_field: str = ""       # links: the value field a scenario's window records its pairs in
    stop_whole: bool = False    # links: its stop removes every window of the kind; the others are put back
    party: str = "cluster"      # what `needs` is asked of and the actions act on: "cluster" or "clients"
    fields: tuple[str, ...] = ()    # the schedule-file fields it takes besides at, fault, duration, targets
    brokers_only: bool = False  # its targets are brokers, never the controller
    damages: bool = False       # it damages a broker's data: a minority at a time (nemesis/driver.py)
    cuts_power: bool = False    # its brokers must run with power_loss = true (their unsynced writes lost)
    ends_when_killed: bool = False  # a kill of its node ends it (a paused process killed runs when restarted)
    doc: str = ""


def _corrupt(act: Act, node: str) -> str:
    """Kill the broker (not for an instant window: a scenario's node is down already), damage its data
    files (the window's how, partition and seed), and keep what was damaged for the start's completion."""
    c, w = act.cluster, act.window
    killed = "" if w.instant else c.kill(node)
    fault = c.corrupt(node, w.value["how"], partition=w.value["partition"], seed=w.seed)
    w.damage.append(fault.history_entry(node))
    return f"{killed}; {fault.detail}" if killed else fault.detail


def _client(act: Act, name: str, pause: bool) -> str:
    """Hold (or release) one of the workload's clients by name."""
    clients = act.clients
    if clients is None or name not in clients.client_names():
        raise ClusterError(f"no workload client {name!r} to {'pause' if pause else 'resume'}")
    return clients.pause_client(name) if pause else clients.resume_client(name)


def _degrade(act: Act, pairs) -> str:
    v = act.window.value
    return act.cluster.degrade(pairs, delay_ms=v["delay_ms"], jitter_ms=v["jitter_ms"], loss_pct=v["loss_pct"])


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("kill", "kill", "restart", (Killable,), "nodes", lambda a, n: a.cluster.kill(n),
         lambda a, n: a.cluster.restart(n), process=True, doc="SIGKILL; restarted at the stop"),
    Kind("power-loss", "power-loss", "restart", (Killable,), "nodes", lambda a, n: a.cluster.kill(n),
         lambda a, n: a.cluster.restart(n), process=True, brokers_only=True, cuts_power=True,
         doc="SIGKILL of a broker running with power_loss = true (its unsynced writes are lost); restarted "
             "at the stop"),
    Kind("pause", "pause", "resume", (Pausable,), "nodes", lambda a, n: a.cluster.pause(n),
         lambda a, n: a.cluster.resume(n), process=True, ends_when_killed=True, doc="SIGSTOP; SIGCONT at the stop"),
    Kind("corrupt", "corrupt", "restart", (Corruptible, Killable), "nodes", _corrupt,
         lambda a, n: a.cluster.restart(n), params=("how", "partition"), process=True, brokers_only=True,
         damages=True,
         doc="a storage fault on a broker's data files while it is down: killed first, restarted at the "
             "stop. A scenario's corrupt step damages a node it took down itself: its window is instant"),
    Kind("disk-full", "disk-full", "disk-free", (DiskFillable,), "nodes", lambda a, n: a.cluster.fill_disk(n),
         lambda a, n: a.cluster.free_disk(n), process=True,
         doc="a broker's data filesystem filled to a few KiB free while it runs; freed at the stop"),
    Kind("partition", "partition", "heal", (Partitionable,), "links", lambda a, pairs: a.cluster.drop(pairs),
         lambda a, pairs: a.cluster.heal(pairs), pairs_field="drop", stop_whole=True, fields=("shape",),
         doc="one-way packet drops between nodes; healed at the stop"),
    Kind("degrade", "degrade", "restore", (Degradable,), "links", _degrade,
         lambda a, pairs: a.cluster.restore(pairs), params=("delay_ms", "jitter_ms", "loss_pct"),
         pairs_field="links", fields=("delay_ms", "jitter_ms", "loss_pct"),
         doc="delay, jitter and loss on one-way links; restored at the stop"),
    Kind("client-pause", "pause-client", "resume-client", (ClientPausable,), "nodes",
         lambda a, name: _client(a, name, True), lambda a, name: _client(a, name, False),
         party="clients",
         doc="a workload client held: its next call waits until the stop, as a client process stopped past "
             "its timeouts (a consumer misses its polls, a producer its deliveries); a Kafka library's "
             "background threads still run"),
    Kind("elect", "elect", "elected", (), "leader",
         lambda a, n: a.elect(a.window.value["partition"], n), lambda a, n: "", params=("partition",),
         doc="a controlled leadership move (ELECT_LEADER through the admin client); its stop undoes "
             "nothing, it marks when the new leader was seen settled"),
)}
PROCESS_KINDS = tuple(k.name for k in KINDS.values() if k.process)


# fault name -> (its window kind, who it targets: "broker" | "leader" | "controller" | ... | None). Two
# pseudo-kinds: "package" (several windows moved on by the live state, nemesis/packages.py) and "mix" (a
# draw among other faults).
NAMES: dict[str, tuple[str, str | None]] = {
    "kill": ("kill", "broker"),
    "kill-leader": ("kill", "leader"),
    "kill-controller": ("kill", "controller"),
    "pause": ("pause", "broker"),
    "pause-leader": ("pause", "leader"),
    "pause-controller": ("pause", "controller"),
    "power-loss": ("power-loss", "broker"),
    "power-loss-leader": ("power-loss", "leader"),
    "partition": ("partition", None),
    **{f"partition-{s}": ("partition", None) for s in SHAPES},
    "degrade": ("degrade", None),              # every link of the cluster (or those of `targets`)
    "degrade-leader": ("degrade", "leader"),   # the links to and from a partition's leader
    # storage faults: kill a broker, damage its data files while it is down, restart it at the stop
    "corrupt-bitflip": ("corrupt", "broker"),
    "corrupt-truncate": ("corrupt", "broker"),
    "corrupt-checkpoint": ("corrupt", "broker"),
    # a broker's data filesystem filled to a few KiB free while it runs, freed at the stop (the backend's
    # DiskFillable: a tmpfs of its own per broker, local or Docker, clusters/local_disks.py)
    "disk-full": ("disk-full", "broker"),
    "disk-full-leader": ("disk-full", "leader"),
    # aimed at the live state (nemesis/targets.py): a follower of a partition, the sole member of a shrunk
    # ISR; or at a share of the brokers, all at once
    "kill-follower": ("kill", "follower"),
    "pause-follower": ("pause", "follower"),
    "kill-sole-isr": ("kill", "sole-isr"),
    "kill-minority": ("kill", "minority"),
    "kill-majority": ("kill", "majority"),
    "power-loss-all": ("power-loss", "all"),
    # a client of the workload (any, or a consumer) held past its timeouts (the workload's ClientPausable)
    "pause-client": ("client-pause", "client"),
    "pause-consumer": ("client-pause", "consumer"),
    # aimed at a consumer group's coordinator: the leader of the group's partition of __consumer_offsets
    # (nemesis/targets.py coordinator_partition; the group is the workload's, Aim(group=))
    "kill-coordinator": ("kill", "coordinator"),
    "pause-coordinator": ("pause", "coordinator"),
    "partition-coordinator": ("partition", "coordinator"),     # cut off from every other node
    # packages: several steps, each its own fault window, moved on by what the metadata says (packages.py)
    "isolate-then-kill-leader": ("package", "leader"),
    "isolate-then-power-loss-leader": ("package", "leader"),
    "pause-leader-until-fenced": ("package", "leader"),
    "isolate-leader-until-replaced": ("package", "leader"),
    "bounce-leader": ("package", "leader"),
    "move-leader": ("package", "leader"),
    "isolate-then-kill-coordinator": ("package", "coordinator"),
    "isolate-coordinator-until-replaced": ("package", "coordinator"),
    # draws among other faults: `aimed` one package per step, `mix` the rotation of MIX_FAMILIES
    "aimed": ("mix", None),
    "mix": ("mix", None),
}


def kind_of(name: str) -> Kind | None:
    """The window kind of fault name `name`; None for a package or a draw."""
    return KINDS.get(NAMES[name][0])


def takes(name: str, field_name: str) -> bool:
    """Whether a schedule step of fault `name` takes `field_name` (a degrade's delay_ms, a partition's
    shape)."""
    kind = kind_of(name)
    return kind is not None and field_name in kind.fields


def on_the_cluster(names: list[str]) -> list[str]:
    """The fault names among `names` that a backend injects (not the workload's client faults), for its
    preflight."""
    return [n for n in names if NAMES[n][0] not in KINDS or KINDS[NAMES[n][0]].party == "cluster"]


@dataclass(frozen=True)
class Verb:
    """A scenario step that plays a fault window: `opens` a window of `kind` on a node or on links, or
    `closes` the node's (or the links') windows whose stop records `f`, or plays an `instant` window."""
    name: str
    kind: str
    plays: str                  # "opens" | "closes" | "instant"
    f: str                      # the history's f it records
    needs: type
    action: Callable[[Any, Any], str] | None = None     # (cluster, node): instead of the kind's own action


VERBS: dict[str, Verb] = {v.name: v for v in (
    Verb("kill", "kill", "opens", "kill", Killable),
    Verb("power-loss", "power-loss", "opens", "power-loss", Killable),
    # a clean shutdown (SIGTERM, SIGKILL after the backend's grace), recorded as a kill window
    Verb("stop", "kill", "opens", "stop", Stoppable, action=lambda c, n: c.stop(n)),
    Verb("restart", "kill", "closes", "restart", Killable, action=lambda c, n: c.restart(n)),
    Verb("start", "kill", "closes", "restart", Killable, action=lambda c, n: c.restart(n)),
    Verb("pause", "pause", "opens", "pause", Pausable),
    Verb("resume", "pause", "closes", "resume", Pausable, action=lambda c, n: c.resume(n)),
    Verb("partition", "partition", "opens", "partition", Partitionable),
    Verb("heal", "partition", "closes", "heal", Partitionable),
    Verb("degrade", "degrade", "opens", "degrade", Degradable),
    Verb("restore", "degrade", "closes", "restore", Degradable),
    Verb("corrupt", "corrupt", "instant", "corrupt", Corruptible),
)}


def verb_kind(do: str) -> Kind | None:
    """The window kind a scenario step plays; None for a step that is no fault (produce, wait, ...)."""
    return KINDS[VERBS[do].kind] if do in VERBS else None


def takes_node_down(do: str) -> bool:
    """Whether scenario step `do` leaves its node down (a kill, stop or power-loss) until a restart."""
    return do in VERBS and VERBS[do].plays == "opens" and KINDS[VERBS[do].kind].stop_f == VERBS["restart"].f


def brings_node_up(do: str) -> bool:
    """Whether scenario step `do` brings its node back (restart, start)."""
    return do in VERBS and VERBS[do].plays == "closes" and VERBS[do].f == VERBS["restart"].f


# scenario step -> the capability it needs (harness/scenario_runner.py asks before the step plays)
NEEDS: dict[str, type] = {v.name: v.needs for v in VERBS.values()}
