"""Loopback address and port allocation for local runs, so two runs on one machine never collide.

A run gets a prefix `127.A.B` (controller c0 = 127.A.B.1, broker nK = 127.A.B.(K+1)) and a block of
ports (c0 = base, nK = base + K). The choice is made under the registry lock, avoiding every prefix and
port block held by any registry entry (live or stale: a stale run's processes may still hold them until
`highwater cleanup`), and each address:port is probed with a real bind before it is handed out.
"""
from __future__ import annotations

import random
import socket
from dataclasses import dataclass

from clusters.base import ClusterError
from clusters.run_registry import Registry, RunEntry, boot_id, now_wall, this_process_identity

A_RANGE = range(64, 250)        # keeps clear of 127.0.0.0/16 (127.0.0.1, 127.0.0.53, 127.0.1.1)
B_RANGE = range(0, 256)
PORT_RANGE = range(20000, 30000)  # below the usual ephemeral range (32768-60999)


@dataclass(frozen=True)
class Allocation:
    prefix: str
    ports: list[int]

    def host(self, index: int) -> str:
        """Address of node index 0 (c0), 1 (n1), ..."""
        return f"{self.prefix}.{index + 1}"

    def port(self, index: int) -> int:
        return self.ports[index]


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def allocate(registry: Registry, run_id: str, count: int, *, rng: random.Random | None = None,
             attempts: int = 200, run_dir: str | None = None) -> Allocation:
    """Reserve a prefix and `count` ports for `run_id` and record the run in the registry."""
    if count < 1 or count > 200:
        raise ClusterError(f"cannot allocate {count} node addresses (1..200)")
    rng = rng or random.SystemRandom()
    owner_pid, owner_start = this_process_identity()
    with registry.locked():
        if registry.get(run_id) is not None:
            raise ClusterError(f"run id {run_id!r} is already registered in {registry.dir}")
        entries = registry.entries()
        used_prefixes = {e.prefix for e in entries}
        used_ports: set[int] = set()
        for e in entries:
            used_ports.update(e.ports)
        for _ in range(attempts):
            prefix = f"127.{rng.choice(A_RANGE)}.{rng.choice(B_RANGE)}"
            if prefix in used_prefixes:
                continue
            base = rng.randrange(PORT_RANGE.start, PORT_RANGE.stop - count)
            ports = list(range(base, base + count))
            if used_ports.intersection(ports):
                continue
            alloc = Allocation(prefix, ports)
            if all(_bindable(alloc.host(i), alloc.port(i)) for i in range(count)):
                registry.put(RunEntry(run_id=run_id, owner_pid=owner_pid, owner_start_time=owner_start,
                                      prefix=prefix, ports=ports, created_wall=now_wall(),
                                      run_dir=run_dir, boot_id=boot_id()))
                return alloc
        raise ClusterError(f"no free loopback prefix/port block found for run {run_id!r} after "
                           f"{attempts} attempts (registry {registry.dir})")
