"""The broker node: an asyncio server that is a thin I/O shell around the replication state machine.

Modules: app.py (process life cycle, `main(config_path)`), rpc.py (TCP front end, frame errors),
handlers.py (data-plane request fields), partitions.py (replica manager: store + state machine per
partition, and carrying out what the state machine asks for), fetcher.py (follower fetch loop),
produce.py (parked acks=all produces and long-poll fetches), commit.py (group commit for flush="always"),
controller_link.py (register, heartbeat, metadata long-poll), timers.py (ISR shrink checks, checkpoints,
interval flushes), peer.py (async broker-to-broker connections), aio.py (bounded task shutdown). The
real-process clusters of the broker's tests and benchmarks are clusters/bare.py's, outside the broker.

Data plane (msgpack bodies; error codes are strings):
    PRODUCE {topic, partition, acks (0|1|-1), timeout_ms, values} -> {error, base_offset, leader_epoch}
    FETCH {topic, partition, offset, max_records, max_wait_ms, replica_id, current_leader_epoch}
        -> {error, records: [[offset, epoch, value]] (+ timestamp for followers), hw, leader_epoch, log_start}
    OFFSETS_FOR_LEADER_EPOCH {topic, partition, leader_epoch, current_leader_epoch, replica_id?} -> {error, leader_epoch, end_offset}
    DESCRIBE_REPLICAS {} -> {broker_id, partitions: [{topic, partition, role, leader_epoch, leo, hw, isr, ...}]}
An acks=all produce whose leader loses leadership after appending is answered REQUEST_TIMED_OUT (outcome
unknown), never NOT_LEADER (which means "not written").
"""
