"""The client worker thread that producers and consumers share: one client, one loop, one recorded error.

A worker makes its client inside its own thread, runs its loop with it, and keeps the exception that ended
the loop in `error` (the workload reports it; it is never swallowed). The client is closed however the
loop ends.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable


class ClientWorker(threading.Thread):
    """A daemon thread named `<role>-<index>` that runs `work(client)` with a client from `make_client`."""

    role = "worker"

    def __init__(self, *, make_client: Callable[[], Any], index: int):
        super().__init__(name=f"{self.role}-{index}", daemon=True)
        self.make_client = make_client
        self.error: BaseException | None = None

    def work(self, client) -> None:
        raise NotImplementedError

    def run(self) -> None:
        client = None
        try:
            client = self.make_client()
            self.work(client)
        except BaseException as exc:  # noqa: BLE001 - reported by the workload, not swallowed
            self.error = exc
            logging.getLogger(type(self).__module__).exception("%s worker %s died", self.role, self.name)
        finally:
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001
                    pass
