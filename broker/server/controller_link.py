"""The broker's side of the control plane: registration, heartbeats and the metadata long-poll loop.

- `heartbeat_loop`: register (retrying until the controller answers), then heartbeat every
  heartbeat_interval_ms; STALE_BROKER_EPOCH (the controller fenced or forgot us) -> register again.
  `rejoin(reason)` asks for a registration at once (a replica was recovered from corruption): the
  controller then fences our old incarnation and moves leadership away, as after a restart.
- KIP-966: the first registration carries `clean_shutdown` as app.py found it (the clean-shutdown marker
  in the data dir); a `rejoin` follows a recovery that cut a log, so it registers with clean_shutdown=false;
  a re-registration after STALE_BROKER_EPOCH lost nothing (same process, same memory): true.
- `metadata_loop`: starts only after the first registration succeeded (so a restarted broker never acts
  on the leadership it had before the crash: the controller bumps the epochs of a bounced broker at
  registration), then long-polls METADATA and hands every new version to the replica manager. An error
  while applying a version is logged (`metadata-error`) and the loop goes on: it never ends the broker.
"""
from __future__ import annotations

import asyncio
import logging

from broker.controller.client import ControllerClient, ControllerError, ControllerUnavailable
from broker.controller.messages import STALE_BROKER_EPOCH, Metadata, RegisterBroker

log = logging.getLogger(__name__)

METADATA_POLL_MS = 1000
RETRY_S = 0.1


class ControllerLink:
    def __init__(self, registration: RegisterBroker, controller: ControllerClient, heartbeat_interval_ms: int,
                 on_metadata, events):
        """`registration`: the first REGISTER_BROKER this broker sends: its id, its advertised address and
        clean_shutdown as app.py found it."""
        self.node_id = registration.broker_id
        self.advertised = (registration.host, registration.port)
        self.controller = controller
        self.heartbeat_s = heartbeat_interval_ms / 1000.0
        self.on_metadata = on_metadata          # callable(Metadata) -> None (may be async)
        self.events = events
        self.broker_epoch: int | None = None
        self.registered = asyncio.Event()
        self.metadata: Metadata | None = None
        self._rejoin = asyncio.Event()
        self._rejoin_reason = ""
        self.clean_shutdown = registration.clean_shutdown    # told at the next registration (module docstring)

    async def _register(self) -> None:
        while True:
            try:
                self.broker_epoch = await self.controller.register(self.node_id, *self.advertised,
                                                                   clean_shutdown=self.clean_shutdown)
                self.events.emit("registered", broker_epoch=self.broker_epoch, clean_shutdown=self.clean_shutdown)
                self.clean_shutdown = True      # this process lost nothing since: later registrations are clean
                self.registered.set()
                return
            except ControllerError as exc:
                log.debug("register failed: %s", exc)
                await asyncio.sleep(RETRY_S)

    async def heartbeat_loop(self) -> None:
        await self._register()
        while True:
            try:
                await asyncio.wait_for(self._rejoin.wait(), self.heartbeat_s)
            except asyncio.TimeoutError:
                pass
            if self._rejoin.is_set():
                self._rejoin.clear()
                self.events.emit("re-register", reason=self._rejoin_reason)
                self.clean_shutdown = False     # a log was cut by a recovery: committed records may be gone
                await self._register()
                continue
            try:
                await self.controller.heartbeat(self.node_id, self.broker_epoch)
            except ControllerUnavailable:
                continue
            except ControllerError as exc:
                if exc.code == STALE_BROKER_EPOCH:
                    self.events.emit("re-register", reason=exc.code)
                    await self._register()

    def rejoin(self, reason: str) -> None:
        """Register again as soon as the heartbeat loop can (see the module docstring)."""
        self._rejoin_reason = reason
        self._rejoin.set()

    async def metadata_loop(self) -> None:
        await self.registered.wait()
        known = -1
        while True:
            try:
                md = await self.controller.metadata(known_version=known, max_wait_ms=METADATA_POLL_MS)
            except ControllerError:
                await asyncio.sleep(RETRY_S)
                continue
            if md.version == known:
                continue
            known = md.version
            self.metadata = md
            try:
                result = self.on_metadata(md)
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception as exc:    # noqa: BLE001 - bad metadata must not end the loop (and the broker)
                self.events.emit("metadata-error", version=md.version, error=f"{type(exc).__name__}: {exc}"[:300])
                log.error("metadata version %s: %r", md.version, exc)
