"""Fault injection: kill, pause, partition and power-loss faults, packages aimed at the cluster's live
state, and the schedule that drives them.

The runner's API (everything else in this package is internal):

    from nemesis import Aim, FaultPlan, Nemesis, ConfigError, FAULTS

    nem = Nemesis(cluster, history,
                  FaultPlan(faults=["mix"],       # names from FAULTS, below
                            interval_s=10.0,      # random mode: one decision every interval
                            seed=42,              # same seed -> same fault sequence
                            schedule=None),       # or a Path to a TOML schedule file (replaces random mode)
                  aim=Aim(topic="hw", partitions=3,
                          clients=None,           # () -> the workload, for the client faults
                          group=None),            # the workload's consumer group id, for the coordinator faults
                  admin_factory=lambda: Admin(controller=(host, port), timeout_s=2.0))  # the live metadata
    # Constructing validates: unknown fault names or a bad schedule file raise ConfigError (one line,
    # naming file, entry number and field). Each fault asks the backend for the capability it needs
    # (nemesis/faults.py KINDS, the vocabulary a scenario's steps use too: kill and power-loss Killable,
    # pause Pausable, partition Partitionable; a package
    # what its steps need; faults aimed at the live state need admin_factory: describe(topic), close()); a
    # backend without it, or one that cannot inject it on this machine (a partition without root or
    # iptables/nft), raises clusters.base.ClusterError naming the backend and the fault. Do this
    # BEFORE cluster.start().
    nem.start()          # background thread; faults begin one interval after start (random mode)
    nem.active()         # -> ["kill n2", "partition isolate n1"], for the progress display
    expand_faults(["mix"])      # -> the single-window faults a list may inject (a backend's preflight)
    needs_power_loss(["mix"])   # -> True: its brokers must run with power_loss = true
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
    kill-follower, pause-follower                a follower of a partition (in its ISR if one is free)
    kill-sole-isr                                the leader of a partition whose ISR has shrunk to it alone;
                                                 skipped when none has
    kill-minority, kill-majority, power-loss-all (n-1)//2, n//2+1 or every broker at once, restarted
                                                 together; a majority or all is skipped while a corrupted
                                                 broker has not rejoined the ISR
    pause-client, pause-consumer                 a workload client (any, or a consumer's) held: its next
                                                 call waits until the stop (needs Aim(clients=): the
                                                 workload, nemesis/faults.py ClientPausable)
    kill-coordinator, pause-coordinator          the coordinator of the workload's consumer group (needs
                                                 Aim(group=)): the leader of the group's partition of
                                                 __consumer_offsets, from that topic's live metadata;
                                                 SIGKILL / SIGSTOP, restart / SIGCONT at the stop
    partition-coordinator                        the coordinator cut off from every other node (shape
                                                 "coordinator"), healed at the stop. Skipped with the reason
                                                 while the offsets topic does not exist (no client has looked
                                                 a coordinator up) or the group's partition has no leader;
                                                 refused (ConfigError) without a group

Packages (nemesis/packages.py): several steps, each its own fault window (value `package`, its number in
the run, and `step`), moved on by what the controller's metadata says, every wait bounded; a state not
reached ends the package (its faults undone, the reason in the stop's detail and stats.skipped):
    isolate-then-kill-leader                     cut a partition's leader off from its followers until its
    isolate-then-power-loss-leader               ISR is the leader alone, then kill / power-cut the leader
                                                 for the step's duration; heal, restart
    pause-leader-until-fenced                    SIGSTOP a partition's leader until the controller fenced it
                                                 (leadership moved, out of the ISR), then SIGCONT
    isolate-leader-until-replaced                cut a partition's leader off from every node (clients still
                                                 reach it) until another broker leads, then heal
    bounce-leader                                SIGKILL a partition's leader and restart it 0.2 s later,
                                                 before the controller misses a heartbeat: it registers
                                                 again while the metadata still names it leader
    move-leader                                  ask the controller (ELECT_LEADER) to make another ISR
                                                 member lead a partition, under load, as a controlled
                                                 shutdown or preferred-leader election does
    isolate-then-kill-coordinator                isolate-then-kill-leader aimed at the group's coordinator:
                                                 cut off from the other replicas of its offsets partition
                                                 until that ISR is the coordinator alone, then killed
    isolate-coordinator-until-replaced           the coordinator cut off from every node until another
                                                 broker leads its offsets partition (two brokers answer the
                                                 group meanwhile), then healed
A package runs alone: steps due meanwhile start when it has finished, and it ends by waiting (bounded,
unrecorded) until every partition is led and its targets are back in the ISR.

Draws: `aimed` is one package per step (chosen with the step's seed) among those aimed at a partition
leader; `mix`, the default of `highwater run`, rotates through MIX_FAMILIES (process faults, partitions,
aimed packages, leadership moves, power loss, storage; the ones the backend can inject; with Aim(group=)
one more, COORDINATOR_FAMILY: every coordinator fault and package, so a workload without a group draws
exactly as before):
each fault comes from the next family of a rotation whose order the seed shuffles every round, so a few
steps meet every family. `mix` stands alone; schedule files take `aimed` but not `mix`.

Random mode: every `interval_s` the active fault (if any) is stopped; then a seeded choice either stays
quiet for the next interval (probability `quiet_probability`, default 0.3, so the cluster can recover) or
starts one enabled fault, which lasts one interval (a package: until it ends; the schedule then moves
later by its overrun). At most one fault (or package) is active at a time. The same seed makes the same decisions;
targets read from the live metadata are what the cluster is at that moment, recorded as targeted.

Schedule file (TOML), times in seconds from nem.start():

    [[step]]
    at = 5.0
    fault = "kill"            # any name from FAULTS
    targets = ["n2"]          # optional: node names; default: chosen by the fault (random / leader / c0);
                              # faults aimed at the live state or a share of the brokers choose their own
    duration = 3.0            # seconds until the stop (isolate-then-*: how long the leader stays down;
                              # *-until-*: unused, they end when the state is reached)
    [[step]]
    at = 10.0
    fault = "partition"
    shape = "one-way"         # partition only: isolate, halves, ring, leader, bridge, one-way, controller
    duration = 4.0

History: each action is an operation of process "nemesis": an `invoke` then an `info` completion, `f` the
action (kill/restart, pause/resume, partition/heal, power-loss/restart), value
{fault, phase: "start"|"stop", id, targets, name, ...} and `detail` on the completion (docs/formats.md);
faults aimed at the live state add `partition` and `state` (the metadata that chose them: leader, epoch,
ISR), the coordinator's `group`, `offsets_partition` and `state` (of that __consumer_offsets partition)
instead of `partition`, a package's steps `package` and `step`.
"""
from nemesis.driver import Aim, Nemesis  # noqa: E402
from nemesis.schedule import (FAULTS, ConfigError, FaultPlan, expand_faults, load_schedule,  # noqa: E402
                              needs_power_loss, random_steps)
from nemesis.step import Step  # noqa: E402
from nemesis.shapes import SHAPES  # noqa: E402

__all__ = ["Aim", "FaultPlan", "Nemesis", "FAULTS", "SHAPES", "ConfigError", "Step", "expand_faults", "load_schedule",
           "needs_power_loss", "random_steps"]
