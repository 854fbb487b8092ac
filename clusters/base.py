"""The cluster interface every backend (local processes, Docker, SSH) implements.

The harness, the nemesis and the scenario runner only ever talk to a cluster through this class, so a
test runs unchanged on any backend. Node names are "c0" for the controller and "n1".."nN" for brokers
(broker id = N).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path


class ClusterError(RuntimeError):
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


class Cluster(abc.ABC):
    """A running cluster of one controller and N brokers."""

    spec: ClusterSpec

    # --- lifecycle ---------------------------------------------------------------------------
    @abc.abstractmethod
    def start(self) -> None:
        """Provision and start the controller and every broker; return when all accept connections."""

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

    def check_faults(self, faults: list[str]) -> None:
        """Raise ClusterError (naming what is missing) if a nemesis fault in `faults` cannot be injected
        on this backend, e.g. a partition without root or iptables/nft. Called before start()."""

    # --- process faults ------------------------------------------------------------------------
    @abc.abstractmethod
    def kill(self, node: str) -> str:
        """SIGKILL the node's server process. Returns a one-line description of what was done."""

    @abc.abstractmethod
    def restart(self, node: str) -> str:
        """Start the node's server again (after kill or stop) with the same data directory."""

    @abc.abstractmethod
    def pause(self, node: str) -> str:
        """SIGSTOP (or freeze) the node."""

    @abc.abstractmethod
    def resume(self, node: str) -> str:
        """SIGCONT (or unfreeze) the node."""

    @abc.abstractmethod
    def is_running(self, node: str) -> bool: ...

    # --- network faults ------------------------------------------------------------------------
    @abc.abstractmethod
    def drop(self, pairs: list[tuple[str, str]]) -> str:
        """Drop packets from src to dst for each (src, dst) pair (one-way). Additive."""

    @abc.abstractmethod
    def heal(self) -> str:
        """Remove every packet-drop rule this cluster installed."""

    # --- ground truth ---------------------------------------------------------------------------
    @abc.abstractmethod
    def collect(self, run_dir: Path) -> None:
        """Copy node logs into run_dir/nodes/<node>/ and replica dumps into run_dir/replicas/<node>/.
        Called after brokers are stopped."""

    @abc.abstractmethod
    def stop_all(self) -> None:
        """Stop every broker and the controller gracefully (SIGTERM, then SIGKILL after a grace)."""
