"""Fault injection: kill, pause, partition and power-loss faults and the schedule that drives them.

The runner's API (everything else in this package is internal):

    from nemesis import Nemesis, ScheduleError, FAULTS

    nem = Nemesis(cluster, history,
                  faults=["kill", "partition"],   # names from FAULTS, below
                  interval_s=10.0,                # random mode: one decision every interval
                  seed=42,                        # same seed -> same fault sequence
                  schedule=None,                  # or a Path to a TOML schedule file (replaces random mode)
                  admin_factory=lambda: Admin(controller=(host, port), timeout_s=2.0),  # for "-leader" faults
                  topic="hw", partitions=3)
    # Constructing validates: unknown fault names or a bad schedule file raise ScheduleError (one line,
    # naming file, entry number and field). Each fault asks the backend for the capability it needs
    # (clusters/base.py: kill and power-loss Killable, pause Pausable, partition Partitionable); a
    # backend without it, or one that cannot inject it on this machine (a partition without root or
    # iptables/nft), raises clusters.base.ClusterError naming the backend and the fault. Do this
    # BEFORE cluster.start().
    nem.start()          # background thread; faults begin one interval after start (random mode)
    nem.active()         # -> ["kill n2", "partition isolate n1"], for the progress display
    nem.stop()           # stop scheduling, undo every active fault (heal, resume, restart) and record the
                         # stop operations; idempotent; returns when every fault is undone

Fault names (FAULTS):
    kill, kill-leader, kill-controller           SIGKILL, restart at the fault's stop
    pause, pause-leader, pause-controller        SIGSTOP, SIGCONT at the stop
    power-loss, power-loss-leader                SIGKILL of a broker running with power_loss=true (the
                                                 harness sets that broker setting), restart at the stop
    partition                                    a random shape among the ones below
    partition-isolate, partition-halves, partition-ring, partition-leader, partition-bridge,
    partition-one-way, partition-controller      one shape only
    degrade, degrade-leader                      delay / jitter / loss on links, restored at the stop
    corrupt-bitflip, corrupt-truncate,           SIGKILL of a broker, then a storage fault on its data files
    corrupt-checkpoint                           (clusters/storage_faults.py; the checkpoint kind chosen
                                                 with the seed), restart at the stop; never more than a
                                                 minority of the brokers down or damaged at once: a
                                                 corrupted broker counts as damaged until the controller
                                                 reports it back in the ISR of every partition of the
                                                 topic it replicates (not when it restarts); a step that
                                                 would exceed that is skipped (stats.skipped says why)

Random mode: every `interval_s` the active fault (if any) is stopped; then a seeded choice either stays
quiet for the next interval (probability `quiet_probability`, default 0.3, so the cluster can recover) or
starts one enabled fault, which lasts one interval. At most one fault is active at a time.

Schedule file (TOML), times in seconds from nem.start():

    [[step]]
    at = 5.0
    fault = "kill"            # any name from FAULTS
    targets = ["n2"]          # optional: node names; default: chosen by the fault (random / leader / c0)
    duration = 3.0            # seconds until the stop
    [[step]]
    at = 10.0
    fault = "partition"
    shape = "one-way"         # partition only: isolate, halves, ring, leader, bridge, one-way, controller
    duration = 4.0

History: each action is an operation of process "nemesis": an `invoke` then an `info` completion, `f` the
action (kill/restart, pause/resume, partition/heal, power-loss/restart), value
{fault, phase: "start"|"stop", id, targets, ...} and `detail` on the completion (docs/formats.md).
"""
from nemesis.driver import Nemesis  # noqa: E402
from nemesis.schedule import FAULTS, ScheduleError, Step, load_schedule, random_steps  # noqa: E402
from nemesis.shapes import SHAPES  # noqa: E402

__all__ = ["Nemesis", "FAULTS", "SHAPES", "ScheduleError", "Step", "load_schedule", "random_steps"]
