"""The fault operations every front end of the nemesis plays, and what each asks of the backend.

A fault window is opened by a start operation and closed by its stop operation (`START_F`, `STOP_F`: the
history's `f` for each fault kind, docs/formats.md). `NEEDS` names the cluster capability
(clusters/base.py) each operation needs, by its name: the random and scheduled faults of
nemesis/driver.py and a scenario's node and network steps (harness/scenario_runner.py) look it up in
this one table, so a backend that cannot do an operation is refused the same way whoever asks.
"""
from __future__ import annotations

from clusters.base import Corruptible, Degradable, DiskFillable, Killable, Partitionable, Pausable, Stoppable

START_F = {"kill": "kill", "pause": "pause", "power-loss": "power-loss", "partition": "partition",
           "degrade": "degrade", "corrupt": "corrupt", "elect": "elect", "disk-full": "disk-full"}
# an `elect` window (the move-leader package) is a controlled leadership move: its stop undoes nothing, it
# marks when the package saw the new leader settled
STOP_F = {"kill": "restart", "pause": "resume", "power-loss": "restart", "partition": "heal",
          "degrade": "restore", "corrupt": "restart", "elect": "elected", "disk-full": "disk-free"}

# operation -> the capability it needs. power-loss is a kill of a broker started with power_loss = true
# (checked before a run); a corrupt window also kills its node first (Killable, asked where it is played);
# stop is a clean shutdown (SIGTERM, then SIGKILL after the backend's grace); start restarts a stopped node.
NEEDS: dict[str, type] = {
    "kill": Killable, "power-loss": Killable, "restart": Killable, "start": Killable, "stop": Stoppable,
    "pause": Pausable, "resume": Pausable,
    "partition": Partitionable, "heal": Partitionable,
    "degrade": Degradable, "restore": Degradable,
    "corrupt": Corruptible,
    "disk-full": DiskFillable, "disk-free": DiskFillable,
}
