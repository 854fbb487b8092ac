"""The broker node process: wires config, event log, storage, replica manager, RPC server, control plane
and timers together, and owns the life cycle. The client listener serves the native protocol and the
Kafka protocol (broker/server/kafka_handlers.py) on the same port.

Start-up: load broker.json (bad -> one line on stderr, exit 2), open every partition found in data_dir
(start-up recovery; a recovery cut is logged as a `truncate` event with why=recovery), listen, print
`READY host:port`, register with the controller, then follow its metadata. SIGTERM/SIGINT: stop serving,
stop fetchers, flush every log, write the HW and epoch checkpoints, exit 0.

Clean-shutdown marker (KIP-966): a stop that flushed every log without a storage error writes
`<data_dir>/clean-shutdown` last; start-up reads and removes it (before registering), and the registration
tells the controller `clean_shutdown`: true when the marker was there and start-up recovery cut no log,
false otherwise (killed, power cut, crashed: the unflushed tail may be gone; a log damaged while the
broker was down; an empty data dir, which may be a replaced disk).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

from broker.atomic_file import replace_atomically
from broker.config import BrokerConfig, ConfigError, load_broker_config
from broker.controller.client import ControllerClient
from broker.controller.messages import RegisterBroker
from broker.eventlog import EventLog
from broker.groups.membership import GroupLimits
from broker.protocol import apis
from broker.server.aio import bounded, cancel_and_wait, run
from broker.server.controller_link import ControllerLink
from broker.server.coordinator import GroupCoordinator, GroupRules
from broker.server.group_handlers import GroupHandlers
from broker.server.handlers import Handlers
from broker.server.kafka_handlers import AutoCreate, KafkaHandlers
from broker.server.producer_ids import ProducerIds
from broker.server.partitions import ReplicaManager
from broker.server.rpc import RpcServer
from broker.server.timers import Timers

EXIT_BAD_CONFIG = 2
SHUTDOWN_STEP_S = 2.0     # deadline of each shutdown step
CLEAN_SHUTDOWN_FILE = "clean-shutdown"    # in data_dir: the last stop flushed everything (KIP-966)


class StartupError(Exception):
    """The node cannot start; `exit_status` 2 when a config key's value is the cause (file, port)."""

    def __init__(self, message: str, exit_status: int):
        super().__init__(message)
        self.exit_status = exit_status


class BrokerNode:
    def __init__(self, config: BrokerConfig, config_path: str = "broker.json"):
        self.config = config
        self.config_path = config_path
        try:
            self.events = EventLog(config.log_file, config.node_name)
        except OSError as exc:
            raise StartupError(f"{config_path}: key 'log_file': cannot open {config.log_file} "
                               f"({_why(exc)})", EXIT_BAD_CONFIG) from None
        self.controller = None          # ControllerClient, made inside the event loop
        self.link: ControllerLink | None = None
        self.replicas: ReplicaManager | None = None
        self.rpc: RpcServer | None = None
        self.address: tuple[str, int] | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._failed = False

    async def run(self) -> int:
        cfg = self.config
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        self.controller = ControllerClient(cfg.controller_host, cfg.controller_port, timeout_s=2.0,
                                           source_host=cfg.host)   # leave from our own address
        self.replicas = ReplicaManager(cfg, self.events, self.controller)
        try:
            self.replicas.open_existing()
        except OSError as exc:
            raise StartupError(f"{self.config_path}: key 'data_dir': cannot use {cfg.data_dir} "
                               f"({_why(exc)})", EXIT_BAD_CONFIG) from None
        except (RuntimeError, ValueError) as exc:       # locked by another process, corrupt checkpoint
            raise StartupError(f"{cfg.data_dir}: {exc}", 1) from None
        try:
            clean_shutdown = self._take_clean_shutdown_marker()
        except OSError as exc:
            raise StartupError(f"{self.config_path}: key 'data_dir': cannot remove {CLEAN_SHUTDOWN_FILE} in "
                               f"{cfg.data_dir} ({_why(exc)})", EXIT_BAD_CONFIG) from None
        handlers = Handlers(self.replicas, cfg.node_id)
        try:
            producer_ids = ProducerIds(cfg.data_dir, cfg.node_id)
        except ConfigError as exc:
            raise StartupError(f"{self.config_path}: key 'data_dir': {exc}", EXIT_BAD_CONFIG) from None
        coordinator = GroupCoordinator(self.replicas, self.events, self.controller, group_rules(cfg))
        kafka = KafkaHandlers(self.replicas, cfg.node_id, self.controller,
                              auto_create=AutoCreate(cfg.auto_create_topics_enable, cfg.num_partitions,
                                                     cfg.default_replication_factor),
                              log_append_time=cfg.log_message_timestamp_type == "LogAppendTime",
                              producer_ids=producer_ids, groups=GroupHandlers(coordinator))
        self.rpc = RpcServer({
            apis.PRODUCE: handlers.produce,
            apis.FETCH: handlers.fetch,
            apis.OFFSETS_FOR_LEADER_EPOCH: handlers.offsets_for_leader_epoch,
            apis.DESCRIBE_REPLICAS: handlers.describe_replicas,
            apis.PING: handlers.ping,
            apis.FLUSH: handlers.flush,
        }, kafka=kafka)
        try:
            host, port = await self.rpc.start(cfg.host, cfg.port)
        except OSError as exc:
            raise StartupError(f"{self.config_path}: key 'port': cannot listen on {cfg.host}:{cfg.port} "
                               f"({_why(exc)})", EXIT_BAD_CONFIG) from None
        self.address = (host, port)
        self.events.emit("start", host=host, port=port, truncation=cfg.truncation, flush=cfg.flush,
                         power_loss=cfg.power_loss, min_insync_replicas=cfg.min_insync_replicas,
                         clean_shutdown=clean_shutdown)
        print(f"READY {host}:{port}", flush=True)
        self.link = ControllerLink(RegisterBroker(cfg.node_id, host, port, clean_shutdown), self.controller,
                                   cfg.heartbeat_interval_ms, self._metadata_applier(coordinator), self.events)
        self.replicas.rejoin = self.link.rejoin
        timers = Timers(cfg, self.replicas)
        for coro in (self.link.heartbeat_loop(), self.link.metadata_loop(), *timers.loops(),
                     coordinator.tick_loop()):
            self._tasks.append(asyncio.create_task(coro))
        for t in self._tasks:
            t.add_done_callback(self._task_died)
        await self._stop.wait()
        await self.shutdown()
        return 1 if self._failed else 0

    def _metadata_applier(self, coordinator: GroupCoordinator):
        """What a metadata update does: the replicas take their roles, then the group coordinator loads
        the offsets partitions this broker now leads and gives up the others."""
        def apply(md) -> None:
            self.replicas.apply_metadata(md)
            coordinator.on_metadata()
        return apply

    def _task_died(self, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.events.emit("internal-error", task=task.get_coro().__qualname__, error=repr(exc))
            print(f"broker n{self.config.node_id}: internal error in {task.get_coro().__qualname__}: {exc!r}",
                  file=sys.stderr, flush=True)
            self._failed = True
            self._stop.set()

    async def shutdown(self) -> None:
        """Bounded: every step has a deadline (aio.bounded / cancel_and_wait), so a task stuck on a peer or
        the controller that is shutting down too, or one that swallowed its cancellation, cannot hold the
        process; the flush and the checkpoints always run."""
        stuck = await cancel_and_wait(self._tasks, SHUTDOWN_STEP_S)
        try:
            await bounded(self.rpc.close(), SHUTDOWN_STEP_S, "closing the RPC server")
            await bounded(self.replicas.quiesce(), SHUTDOWN_STEP_S, "stopping fetchers and ISR proposals")
        finally:
            self.replicas.close_storage()          # flush every log, write HW and epoch checkpoints
        marker = self._write_clean_shutdown_marker()
        await bounded(self.controller.close(), 1.0, "closing the controller connection")
        fields = {"stuck_tasks": sorted(t.get_coro().__qualname__ for t in stuck)} if stuck else {}
        fields["clean_shutdown_marker"] = marker
        self.events.emit("stop", reason="internal-error" if self._failed else "signal", **fields)
        self.events.sync()
        self.events.close()

    def _take_clean_shutdown_marker(self) -> bool:
        """Whether the last stop was clean (see the module docstring); removes the marker, durably. Clean
        means the marker was there AND start-up recovery cut no log: a log damaged while the broker was
        down (a flipped bit, a cut segment) lost records whatever the last stop was. No marker is unclean,
        as in Kafka, also for an empty data dir: it may be a replaced disk of a broker the controller still
        counts as an eligible leader (the controller's unclean-shutdown handling is a no-op for a broker in
        no ELR)."""
        path = Path(self.config.data_dir) / CLEAN_SHUTDOWN_FILE
        if not path.exists():
            return False
        cut = any(part.store.recovery.cut for part in self.replicas.partitions.values())
        path.unlink()
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        return not cut

    def _write_clean_shutdown_marker(self) -> bool:
        """Write the marker if every log was flushed (no storage error left); False if not written."""
        if self.replicas.storage_errors:
            return False
        epoch = self.link.broker_epoch if self.link is not None else None
        try:
            replace_atomically(Path(self.config.data_dir) / CLEAN_SHUTDOWN_FILE,
                               (json.dumps({"broker_epoch": epoch}) + "\n").encode())
        except OSError as exc:
            self.events.emit("storage-error", topic=None, partition=None,
                             error=f"clean-shutdown marker: {exc}"[:300])
            return False
        return True


def group_rules(cfg: BrokerConfig) -> GroupRules:
    """The group coordinator's settings from broker.json."""
    return GroupRules(partitions=cfg.offsets_topic_num_partitions,
                      replication_factor=cfg.offsets_topic_replication_factor,
                      commit_timeout_ms=cfg.offsets_commit_timeout_ms, load_min_ms=cfg.group_load_min_ms,
                      limits=GroupLimits(cfg.group_min_session_timeout_ms, cfg.group_max_session_timeout_ms,
                                         cfg.group_initial_rebalance_delay_ms),
                      commit_checks_generation=cfg.group_commit_checks_generation,
                      offset_fetch_waits_for_load=cfg.group_offset_fetch_waits_for_load,
                      resigns_when_following=cfg.group_coordinator_resigns_when_following)


def _why(exc: OSError) -> str:
    return os.strerror(exc.errno) if exc.errno else str(exc)


def main(config_path: str) -> int:
    try:
        config = load_broker_config(config_path)
    except ConfigError as exc:
        print(f"broker: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s n{config.node_id} %(name)s %(levelname)s %(message)s")
    try:
        return run(BrokerNode(config, config_path).run())
    except StartupError as exc:
        print(f"broker: {exc}", file=sys.stderr)
        return exc.exit_status
