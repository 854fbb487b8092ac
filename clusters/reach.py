"""Whether a backend's target answers, asked before a run creates anything (harness/backends.reach).

A run against something it cannot reach should fail at once with one line, and leave no run directory,
`latest` link or index row behind. These probes are short and bounded (`timeout_s`, a few seconds):

- `kafka(bootstrap)`: a Kafka Metadata request (confluent-kafka's admin client) that lists at least one
  broker: the external backend;
- `docker_engine()`: the Docker engine answers a ping: the docker backend, and the external backend with
  Docker containers;
- `tcp(targets)`: every (name, host, port) accepts a TCP connection, probed in parallel (`unanswered`):
  the SSH hosts of the ssh backend's nodes file and of the external backend's.

Each raises ClusterError naming what did not answer and where, or returns a one-line description.
"""
from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

from clusters.base import ClusterError

DEFAULT_TIMEOUT_S = 5.0


def unanswered(targets: list[tuple[str, str, int]], *, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """Those of the (name, host, port) that accept no TCP connection within `timeout_s`, probed in
    parallel, each as "name at host:port (reason)" (just "host:port (reason)" when the name is empty)."""
    def probe(target: tuple[str, str, int]) -> str | None:
        name, host, port = target
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            return None
        except OSError as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
            return f"{name + ' at ' if name else ''}{host}:{port} ({reason})"
    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        return [f for f in pool.map(probe, targets) if f]


def tcp(targets: list[tuple[str, str, int]], *, timeout_s: float = DEFAULT_TIMEOUT_S, what: str = "SSH") -> str:
    """Every (name, host, port) accepts a connection within `timeout_s`; ClusterError naming all of
    those that do not."""
    failed = unanswered(targets, timeout_s=timeout_s)
    if failed:
        raise ClusterError(f"{what} does not answer on {len(failed)} of {len(targets)} hosts within "
                           f"{timeout_s:g}s: {', '.join(failed)}")
    return f"{what} answers on all {len(targets)} hosts"


def kafka(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """A Metadata request to `bootstrap` ("host:port,...") lists at least one broker. When no bootstrap
    server accepts a connection at all, that is said at once (a refused port is not worth the wait)."""
    from clusters.external import parse_bootstrap
    from clusters.kafka_metadata import KafkaMetadata
    servers = parse_bootstrap(bootstrap)
    failed = unanswered([("", h, p) for h, p in servers], timeout_s=timeout_s)
    if len(failed) == len(servers):
        raise ClusterError(f"no bootstrap server accepts a connection: {', '.join(failed)}")
    md = KafkaMetadata(bootstrap, timeout_s=timeout_s)
    try:
        brokers = md.brokers()
    except ClusterError as exc:
        raise ClusterError(f"no answer within {timeout_s:g}s ({exc})") from None
    finally:
        md.close()
    if not brokers:
        raise ClusterError(f"Kafka cluster at {bootstrap}: Metadata lists no brokers")
    return f"Kafka cluster at {bootstrap}: {len(brokers)} brokers"


def docker_engine(*, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """The Docker engine answers (clusters/docker_hosts.engine's one-line error otherwise)."""
    from clusters.docker_hosts import engine
    client = engine(timeout_s=timeout_s)
    try:
        return f"Docker engine {client.version().get('Version', '?')}"
    finally:
        client.close()
