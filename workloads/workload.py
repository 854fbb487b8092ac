"""The workloads by name ("producer", "producer-consumer"): build the worker threads of a run.

`Workload` starts and stops a set of worker threads sharing one history, one rate limiter and one
value source, and reports their counts. Clients are made by factories so that unit tests can drive the
workers against a fake client; the end-to-end tests drive them against real brokers.

Each worker's client is gated: the nemesis's client faults (nemesis/faults.py ClientPausable) hold a
client by its worker's name (`producer-0`, `consumer-1`), and its next call waits until it is resumed, as
a client process stopped past its timeouts would. Stopping the workload releases every gate.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from workloads.consumer import ConsumerWorker
from workloads.pacing import RateLimiter, ValueSource
from workloads.producer import ProducerWorker
from broker.errors import ConfigError

NAMES = ("producer", "producer-consumer")


class Workload:
    def __init__(self, name: str, *, history, topic: str, partitions: int, rate: float, concurrency: int,
                 consumers: int, seed: int, make_producer: Callable[..., Any],
                 make_consumer: Callable[..., Any] | None = None, per_worker: bool = False):
        """`make_producer` / `make_consumer` make a worker's client; with `per_worker` they take the
        worker's index (so a run can give different workers different client libraries)."""
        if name not in NAMES:
            raise ConfigError(f"unknown workload {name!r} (known: {', '.join(NAMES)})")
        if name == "producer-consumer" and make_consumer is None:
            raise ConfigError("workload 'producer-consumer' needs a consumer factory")
        self.name = name
        self.stop_event = threading.Event()
        self.values = ValueSource()
        self.limiter = RateLimiter(rate)
        self.workers: list[threading.Thread] = []
        self.gates: dict[str, threading.Event] = {}     # worker name -> set while its client may run

        def factory(make: Callable[..., Any], i: int, role: str) -> Callable[[], Any]:
            gate = self.gates.setdefault(f"{role}-{i}", threading.Event())
            gate.set()
            return lambda: _Gated(make(i) if per_worker else make(), gate)

        for i in range(concurrency):
            self.workers.append(ProducerWorker(history=history, make_client=factory(make_producer, i, ProducerWorker.role), topic=topic,
                                               partitions=partitions, values=self.values,
                                               limiter=self.limiter, stop=self.stop_event, seed=seed, index=i))
        if name == "producer-consumer":
            n = max(1, min(consumers, partitions))
            for i in range(n):
                assigned = [p for p in range(partitions) if p % n == i]
                self.workers.append(ConsumerWorker(history=history, make_client=factory(make_consumer, i, ConsumerWorker.role), topic=topic,
                                                   partitions=assigned, stop=self.stop_event, index=i))

    def start(self) -> None:
        for w in self.workers:
            w.start()

    def stop(self, timeout: float = 15.0) -> list[str]:
        """Stop and join every worker; returns the names of workers that did not finish in time."""
        self.stop_event.set()
        for gate in self.gates.values():
            gate.set()
        stuck = []
        for w in self.workers:
            w.join(timeout)
            if w.is_alive():
                stuck.append(w.name)
        return stuck

    def errors(self) -> list[str]:
        return [f"{w.name}: {type(w.error).__name__}: {w.error}" for w in self.workers
                if getattr(w, "error", None) is not None]

    # --- the client faults' side (nemesis/faults.py ClientPausable) -----------------------------------
    def client_names(self) -> list[str]:
        return [w.name for w in self.workers]

    def pause_client(self, name: str) -> str:
        self._gate(name).clear()
        return f"{name} held: its next client call waits"

    def resume_client(self, name: str) -> str:
        self._gate(name).set()
        return f"{name} released"

    def _gate(self, name: str) -> threading.Event:
        return self.gates[name]       # KeyError: no such client (the nemesis asks client_names first)


class _Gated:
    """A worker's client whose every call first waits for its gate (module docstring)."""

    def __init__(self, client: Any, gate: threading.Event):
        self._client, self._gate = client, gate

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name == "close":
            return attr

        def gated(*args: Any, **kwargs: Any) -> Any:
            self._gate.wait()
            return attr(*args, **kwargs)
        return gated
