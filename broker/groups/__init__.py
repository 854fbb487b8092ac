"""Consumer groups: Kafka's classic group protocol, as sans-I/O state machines.

- `membership.py`: one group's members, generations and rebalances (JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup, session expiry), answering with `Reply`s the shell delivers to the waiting requests;
- `offsets.py`: the committed offsets and the records of the internal `__consumer_offsets` topic that
  carry them (and each completed generation), encoded and replayed.

The shell (broker/server/coordinator.py) owns the requests, the clock and the offsets topic's
partitions, which are replicated like every other partition (broker/replication). Protocol details and
error codes: docs/kafka-protocol.md, "Consumer groups".
"""
