"""The workloads: the Workload protocol, the registry of workloads and the [workload] settings.

A workload is a `Kind`: its name, a one-line doc, the [workload] settings it reads, the history
operations its workers record (docs/formats.md) and any field they carry that not every workload's do
(`fields`: the keyed workload's `key`), `workers(w, run, settings)`, which makes its worker
threads, and `final` (None for most): what the run's final phase records for it beyond the final reads
(the group workload's `committed` read, workloads/final_read.py `final_committed`; harness/final_phase.py
calls it). `KINDS` is the registry; `NAMES` its names, the choices of `workload.name`. `SETTINGS` declares
the [workload] section once (key, type, default, doc, rules; broker/settings.py `Setting`), and `FLAGS`
names each one's `highwater run` flag: harness/config.py builds the section and the flags from them.

Adding a workload: its worker classes (a `ClientWorker`, workloads/worker.py), a `Kind` here, and the
settings it needs in `SETTINGS`; its anomalies are a checker family (docs/architecture.md).

`Workload(name, run, settings)` starts and stops a set of worker threads sharing one history, one rate
limiter and one value source, and reports their counts. Clients are made by factories (`Run`), given
the worker's index, so that unit tests can drive the workers against a fake client, and a run can give
different workers different client libraries; the end-to-end tests drive them against real brokers.

Each worker's client is gated: the nemesis's client faults (nemesis/faults.py ClientPausable) hold a
client by its worker's name (`producer-0`, `consumer-1`), and its next call waits until it is resumed, as
a client process stopped past its timeouts would. Stopping the workload releases every gate.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from workloads.consumer import ConsumerWorker
from workloads.final_read import final_committed
from workloads.group import COMMIT_MODES, GroupWorker
from workloads.pacing import RateLimiter, ValueSource
from workloads.producer import ProducerWorker, Sending
from broker.errors import ConfigError
from broker.settings import Setting, declare


@dataclass(frozen=True)
class Run:
    """What a workload is built for: the run's history and topic, its seed, and the client factories
    (each takes the worker's index)."""
    history: Any
    topic: str
    partitions: int
    seed: int
    make_producer: Callable[[int], Any]
    make_consumer: Callable[[int], Any] | None = None
    # the group workload's members: (index, group id, commit mode) -> a subscribed group consumer
    # (workloads/kafka_client.py make_group_consumer)
    make_group_consumer: Callable[[int, str, str], Any] | None = None


@dataclass(frozen=True)
class Kind:
    """One workload (module docstring)."""
    name: str
    doc: str
    settings: tuple[str, ...]       # the [workload] keys it reads (besides name)
    records: tuple[str, ...]        # the history's f of the operations its workers record
    workers: Callable[["Workload", Run, Any], list[threading.Thread]]
    needs_consumer: bool = False    # it reads: the run must give a consumer factory
    fields: tuple[str, ...] = ()    # the fields its operations carry beyond every workload's (the ops
                                    # columns a kind may need: rundir/kinds.py Kind.needs)
    # the final phase's own reads: final(history, settings, make_reader, topic, partitions, deadline),
    # `make_reader()` a workloads/kafka_client.py OffsetsReader; None: only the final reads
    final: Callable[..., Any] | None = None
    final_records: tuple[str, ...] = ()    # the history's f of what `final` records


def _producers(w: "Workload", run: Run, settings: Any, keys: int | None = None) -> list[threading.Thread]:
    """`concurrency` producers, each sending the value source's next value to a seeded partition (with
    `keys`: a seeded key's partition, workloads/producer.py)."""
    sending = Sending(run.topic, run.partitions, w.values, w.limiter, w.stop_event, keys)
    return [ProducerWorker(history=run.history, make_client=w.gated(run.make_producer, i, ProducerWorker.role),
                           sending=sending, seed=run.seed, index=i)
            for i in range(settings.concurrency)]


def _keyed_producers(w: "Workload", run: Run, settings: Any) -> list[threading.Thread]:
    """`concurrency` producers sending keyed records: key k of `keys` always to partition k mod partitions."""
    return _producers(w, run, settings, keys=settings.keys)


def _producers_and_consumers(w: "Workload", run: Run, settings: Any) -> list[threading.Thread]:
    """The producers, and `consumers` consumers (at most one per partition) sharing the partitions out."""
    producers = _producers(w, run, settings)      # first: their history processes come first
    n = max(1, min(settings.consumers, run.partitions))
    consumers = [ConsumerWorker(history=run.history, make_client=w.gated(run.make_consumer, i, ConsumerWorker.role),
                                topic=run.topic, partitions=[p for p in range(run.partitions) if p % n == i],
                                stop=w.stop_event, index=i) for i in range(n)]
    return producers + consumers


def _groups(w: "Workload", run: Run, settings: Any) -> list[threading.Thread]:
    """The producers, and `group_consumers` members of group `group_id` subscribed to the topic
    (workloads/group.py), committing as `commit` says and churning every `group_churn` seconds."""
    if run.make_group_consumer is None:
        raise ConfigError("the group workload needs a group consumer factory (a Kafka client library)")
    producers = _producers(w, run, settings)      # first: their history processes come first
    members = [GroupWorker(history=run.history, make_client=w.gated(
                   lambda j, mode: run.make_group_consumer(j, settings.group_id, mode), i, GroupWorker.role),
               topic=run.topic, group=settings.group_id, commit=settings.commit, churn_s=settings.group_churn,
               stop=w.stop_event, seed=run.seed, index=i) for i in range(settings.group_consumers)]
    return producers + members


def _group_final(history, settings: Any, make_reader: Callable[[], Any], topic: str, partitions: list[int],
                 deadline: float | None = None) -> Any:
    """The group's final committed offsets of every partition, from a client outside the group."""
    return final_committed(history, make_reader, settings.group_id, topic, partitions, deadline=deadline)


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("producer", "producers only: sends of distinct values, checked against the replicas' logs",
         ("rate", "concurrency"), ("send",), _producers),
    Kind("producer-consumer", "producers, and consumers polling every partition from its start (assign, "
         "not a group)", ("rate", "concurrency", "consumers"), ("send", "assign", "poll"),
         _producers_and_consumers, needs_consumer=True),
    Kind("keyed", "producers of keyed records: each key always to one partition, checked for per-key order "
         "in the final logs", ("rate", "concurrency", "keys"), ("send",), _keyed_producers, fields=("key",)),
    Kind("group", "producers, and consumer-group members that subscribe, poll, commit (sync, async or auto), "
         "leave and rejoin; the group's committed offsets are read in the final phase",
         ("rate", "concurrency", "group_consumers", "group_id", "commit", "group_churn"),
         ("send", "group-assign", "group-revoke", "assign", "poll", "commit"), _groups,
         fields=("group", "generation"), final=_group_final, final_records=("committed",)),
)}
NAMES = tuple(KINDS)

def _group_id(raw: Any) -> str:
    """A Kafka group id: a non-empty string of at most 255 printable characters."""
    if not isinstance(raw, str):
        raise ValueError(f"must be a string, got {raw!r}")
    if not raw or len(raw) > 255 or not raw.isprintable():
        raise ValueError(f"must be 1 to 255 printable characters, got {raw!r:.80}")
    return raw


# the [workload] section of a test file, declared once; harness/config.py builds it and its flags
SETTINGS = declare(
    Setting("name", str, "producer-consumer", "the workload", choices=NAMES),
    Setting("rate", float, 100.0, "send operations per second, all producers together", above=0, floor=0),
    Setting("concurrency", int, 4, "producer workers", min=1, floor=0),
    Setting("consumers", int, 2, "consumer workers (producer-consumer only)", floor=0),
    Setting("keys", int, 32, "keys of the keyed workload (key k goes to partition k mod partitions)", min=1,
            floor=0),
    Setting("group_consumers", int, 3, "group members (group only)", min=1, floor=0),
    Setting("group_id", str, "highwater-group", "the consumer group's id (group only)", parse=_group_id),
    Setting("commit", str, "mixed", "how group members commit: sync, async, auto, or mixed (each member "
            "draws one of the three, seeded) (group only)", choices=("mixed",) + COMMIT_MODES),
    Setting("group_churn", float, 10.0, "mean seconds a group member stays before it leaves and a new one "
            "joins in its place; 0: members never leave (group only)", min=0, floor=0, finite=True),
    Setting("final_read_chunk", int, 1000, "records per final-read request", min=1, floor=0),
)
# `highwater run` flag (without dashes) -> [workload] key
FLAGS = {"workload": "name", "rate": "rate", "concurrency": "concurrency", "consumers": "consumers", "keys": "keys",
         # one word each: harness/config.py FLAG_KEYS keys a flag by its name as given here, while the
         # option's value arrives under the name with '-' as '_', so a hyphenated flag is never found
         "members": "group_consumers", "group": "group_id", "commit": "commit", "churn": "group_churn"}


class Workload:
    def __init__(self, name: str, run: Run, settings: Any):
        """The workers of workload `name` for `run`, sized by `settings` (the [workload] section: an
        object with its keys as attributes)."""
        if name not in KINDS:
            raise ConfigError(f"unknown workload {name!r} (known: {', '.join(NAMES)})")
        self.kind = KINDS[name]
        if self.kind.needs_consumer and run.make_consumer is None:
            raise ConfigError(f"workload {name!r} needs a consumer factory")
        self.name = name
        self.stop_event = threading.Event()
        self.values = ValueSource()
        self.limiter = RateLimiter(settings.rate)
        self.gates: dict[str, threading.Event] = {}     # worker name -> set while its client may run
        self.workers: list[threading.Thread] = self.kind.workers(self, run, settings)

    def gated(self, make: Callable[..., Any], i: int, role: str) -> Callable[..., Any]:
        """Worker `role-i`'s client factory: its client behind a gate of its own (module docstring). The
        factory's own arguments (a group member's commit mode) go to `make` after the index."""
        gate = self.gates.setdefault(f"{role}-{i}", threading.Event())
        gate.set()
        return lambda *args: _Gated(make(i, *args), gate)

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
