"""The cluster interface: a small core every backend implements, and optional fault capabilities.

Like Jepsen's DB protocol (setup/teardown) with its optional Kill, Pause and LogFiles protocols, a
backend (local processes, Docker, SSH) is a `Cluster`: provision and start (`start`), `teardown`, the
nodes' addresses, `is_running`, a graceful `stop_all`, `collect` (node logs and replica dumps: the
ground truth the checker reads) and `layout` (test.json). The backends that run the servers themselves
(local, Docker, SSH) wait for them as their `NodeTimeouts` say. What it can do to a node is declared by
the capability protocols it implements:

| capability      | methods           | used by                                                  |
|-----------------|-------------------|----------------------------------------------------------|
| `Killable`      | kill, restart     | the kill and power-loss faults, the scenario `kill` step |
| `Stoppable`     | stop, restart     | the scenario `stop` step (SIGTERM, a clean shutdown)     |
| `Pausable`      | pause, resume     | the pause faults                                         |
| `Partitionable` | drop, heal        | the partition faults, scenario `partition`/`heal` steps  |
| `Degradable`    | degrade, restore  | the degrade faults, scenario `degrade`/`restore` steps   |
| `EventLogs`     | events            | scenario `assert` steps on a node's event log            |
| `Corruptible`   | corrupt           | the corrupt-* faults, scenario `corrupt` step            |

Power loss is not a capability of its own: it is a kill of a broker started with the broker setting
`power_loss = true` (its unflushed appends live only in memory), so it needs `Killable`.

Callers ask for a capability explicitly with `require(cluster, Pausable, "pause")`, which returns the
cluster or raises a one-line ClusterError naming the backend and the fault. `capabilities(cluster)`
lists what a backend (instance or class) offers. Nothing outside clusters/ probes a cluster with
hasattr or signals a process itself.

Node names are "c0" for the controller and "n1".."nN" for brokers (broker id = N).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from rundir.exits import HighwaterError

if TYPE_CHECKING:
    from clusters.storage_faults import StorageFault
    from rundir.evidence import Evidence


class ClusterError(HighwaterError, RuntimeError):
    """A backend could not do what was asked. The message names the node and the action."""


@dataclass(frozen=True)
class NodeAddress:
    name: str          # "c0", "n1", ...
    host: str          # address the node's server binds to and clients connect to
    port: int


@dataclass
class ClusterSpec:
    """What to provision. Broker settings are passed through to every broker's config file."""
    run_id: str
    run_dir: Path
    brokers: int = 3
    broker_settings: dict = field(default_factory=dict)     # keys of docs/architecture.md "broker config"
    controller_settings: dict = field(default_factory=dict)


@dataclass(frozen=True)
class NodeTimeouts:
    """How long a backend that runs the nodes' servers waits for them: `ready_s` for a started server to
    be ready (READY printed, connections accepted), `stop_grace_s` from SIGTERM to SIGKILL when it
    stops one. The local, Docker and SSH backends take one."""
    ready_s: float = 30.0
    stop_grace_s: float = 10.0


class Cluster(abc.ABC):
    """A running cluster of one controller and N brokers: the core every backend implements."""

    spec: ClusterSpec
    backend_name: str = ""          # "local", "docker", "ssh": in test.json and in error messages

    # --- lifecycle ---------------------------------------------------------------------------
    def check_faults(self, faults: list[str]) -> None:
        """Raise ClusterError (naming what is missing) if this machine or these nodes cannot inject a
        fault in `faults` although the backend has the capability, e.g. a partition without root or
        iptables/nft. Called before start(). Whether the backend has the capability at all is
        `require`'s question."""

    @abc.abstractmethod
    def start(self) -> None:
        """Provision and start the controller and every broker; return when all accept connections."""

    @abc.abstractmethod
    def stop_all(self) -> None:
        """Stop every broker and the controller gracefully (SIGTERM, then SIGKILL after a grace)."""

    @abc.abstractmethod
    def teardown(self) -> None:
        """Stop every process, remove every firewall rule / container / network this cluster made.
        Idempotent; never raises for things already gone."""

    # --- addresses -----------------------------------------------------------------------------
    @abc.abstractmethod
    def controller(self) -> NodeAddress: ...

    @abc.abstractmethod
    def brokers(self) -> dict[str, NodeAddress]:
        """Broker name -> address, e.g. {"n1": NodeAddress("n1", "127.71.0.2", 9092)}."""

    def nodes(self) -> list[str]:
        return [self.controller().name, *self.brokers()]

    def layout(self) -> dict:
        """For test.json: {"backend": ..., "nodes": {"c0": {"host": ..., "port": ...}, ...}}; backends
        add what identifies their nodes (address prefix, containers, network)."""
        return {"backend": self.backend_name or type(self).__name__,
                "nodes": {n: {"host": a.host, "port": a.port}
                          for n, a in ({self.controller().name: self.controller()} | self.brokers()).items()}}

    def evidence(self) -> "Evidence":
        """What the backend's runs hold (test.json's `evidence`, rundir/evidence.py): by default every sort,
        in this code's formats, with the event types our brokers write; a backend that cannot provide one
        overrides this and says why (clusters/external.py)."""
        from broker.eventlog import EVENT_NAMES
        from rundir.evidence import declare
        return declare(EVENT_NAMES)

    @abc.abstractmethod
    def is_running(self, node: str) -> bool:
        """True when the node's server process is alive (a paused one counts)."""

    # --- ground truth ---------------------------------------------------------------------------
    @abc.abstractmethod
    def collect(self, run_dir: Path) -> None:
        """Copy node logs into run_dir/nodes/<node>/ and replica dumps into run_dir/replicas/<node>/.
        Called after brokers are stopped."""


# --- capabilities ---------------------------------------------------------------------------------
# Each is a runtime-checkable protocol: a backend has it when it has the methods. The backends also
# name the ones they implement as base classes, so a missing method fails when the class is used.

@runtime_checkable
class Killable(Protocol):
    """Crash a node's server (SIGKILL, or a whole-node crash) and start it again."""

    @abc.abstractmethod
    def kill(self, node: str) -> str:
        """SIGKILL the node's server process. Returns a one-line description of what was done."""

    @abc.abstractmethod
    def restart(self, node: str) -> str:
        """Start the node's server again (after kill or stop) with the same data directory; says so and
        does nothing when it is running."""


@runtime_checkable
class Stoppable(Protocol):
    """Stop a node's server cleanly and start it again."""

    @abc.abstractmethod
    def stop(self, node: str) -> str:
        """SIGTERM the node's server (resuming it if paused) and wait for its exit; SIGKILL after the
        backend's stop grace. Says so and does nothing when it is not running."""

    @abc.abstractmethod
    def restart(self, node: str) -> str: ...


@runtime_checkable
class Pausable(Protocol):
    """Freeze a node and thaw it."""

    @abc.abstractmethod
    def pause(self, node: str) -> str:
        """SIGSTOP (or freeze) the node."""

    @abc.abstractmethod
    def resume(self, node: str) -> str:
        """SIGCONT (or unfreeze) the node."""


@runtime_checkable
class Partitionable(Protocol):
    """Drop packets between nodes and heal."""

    @abc.abstractmethod
    def drop(self, pairs: list[tuple[str, str]]) -> str:
        """Drop packets from src to dst for each (src, dst) pair (one-way). Additive."""

    @abc.abstractmethod
    def heal(self, pairs: list[tuple[str, str]] | None = None) -> str:
        """Partial or full heal. pairs None: remove every packet-drop rule this cluster installed. A list
        of (src, dst): remove only those one-way drops (every copy of each; a pair not dropped is no
        error), leaving the others in force."""


@runtime_checkable
class Degradable(Protocol):
    """Degrade one-way links (delay with jitter, packet loss; as netem does) and restore them."""

    @abc.abstractmethod
    def degrade(self, pairs: list[tuple[str, str]], *, delay_ms: float, jitter_ms: float = 0.0,
                loss_pct: float = 0.0) -> str:
        """Delay every packet from src to dst by delay_ms +- jitter_ms and drop loss_pct % of them, for each
        (src, dst) pair (one-way). A link already degraded takes the new setting. Returns one line."""

    @abc.abstractmethod
    def restore(self, pairs: list[tuple[str, str]] | None = None) -> str:
        """Remove the degradation of those links (None: every degradation this cluster installed)."""


@runtime_checkable
class EventLogs(Protocol):
    """Read a node's event log while the run goes on."""

    @abc.abstractmethod
    def events(self, node: str) -> list[dict]:
        """The node's event log so far (docs/formats.md "Node event logs"), one dict per line in file
        order; a torn or unparseable line (a crash mid-write) is skipped. [] when the node has not
        written one yet. Works while the node is down or paused."""


@runtime_checkable
class Corruptible(Protocol):
    """Damage a stopped node's data files (clusters/storage_faults.py holds the byte-level mutations)."""

    @abc.abstractmethod
    def corrupt(self, node: str, how: str, *, partition: int | None = None, seed: int = 0) -> StorageFault:
        """Apply storage fault `how` (clusters/storage_faults.STORAGE_FAULTS) to one replica of broker
        `node` (of topic partition `partition` if given), choosing with `seed`. The node must be down
        (killed or stopped): ClusterError if it runs. Returns the StorageFault: its `detail` one line
        naming the node, the file and the byte or offset; its `partition` and first damaged `offset`."""


@runtime_checkable
class DiskFillable(Protocol):
    """Fill a broker's data filesystem, so that its writes fail with ENOSPC, and free it again."""

    @abc.abstractmethod
    def fill_disk(self, node: str) -> str:
        """Leave broker `node`'s data filesystem (one of its own: never the host's disk) with only a few
        KiB free. Returns a one-line description."""

    @abc.abstractmethod
    def free_disk(self, node: str) -> str:
        """Give the space `fill_disk` took back."""


CAPABILITIES: tuple[type, ...] = (Killable, Stoppable, Pausable, Partitionable, Degradable, EventLogs, Corruptible,
                                  DiskFillable)

C = TypeVar("C")


def backend_name(cluster: Cluster | type) -> str:
    """The backend's name for messages ("local", "docker", "ssh"; else the class name)."""
    cls = cluster if isinstance(cluster, type) else type(cluster)
    return getattr(cls, "backend_name", "") or cls.__name__


def _methods(capability: type) -> list[str]:
    return [n for n, v in vars(capability).items() if getattr(v, "__isabstractmethod__", False)]


def has(cluster: Cluster | type, capability: type) -> bool:
    """Whether a cluster (or a backend class) implements a capability protocol."""
    if isinstance(cluster, type):
        return issubclass(cluster, capability)
    return isinstance(cluster, capability)


def capabilities(cluster: Cluster | type) -> list[str]:
    """Names of the capability protocols a cluster (or a backend class) implements, e.g.
    ["Killable", "Stoppable", "Pausable", "Partitionable"]."""
    return [c.__name__ for c in CAPABILITIES if has(cluster, c)]


def require(cluster: Cluster, capability: type[C], fault: str) -> C:
    """`cluster` as a `capability`, or a one-line ClusterError naming the backend and the fault, e.g.
    "the ssh backend cannot inject fault 'pause': it is not Pausable (it has no pause, resume)"."""
    if not has(cluster, capability):
        missing = [m for m in _methods(capability) if not callable(getattr(cluster, m, None))]
        raise ClusterError(f"the {backend_name(cluster)} backend cannot inject fault {fault!r}: it is not "
                           f"{capability.__name__} (it has no {', '.join(missing or _methods(capability))})")
    return cluster  # type: ignore[return-value]
