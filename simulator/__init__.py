"""Deterministic simulation of one replicated partition for schedule exploration (issue 19).

`world.World` runs the real replication core (broker/replication/replica.py) and the real controller
state machine (broker/controller/state.py) over a simulated network, disks and clock; `actions.Action`
is one step of a schedule. No wall clock, no global random, no I/O anywhere in this package.
"""
