"""The controller (the ZooKeeper/KRaft role): broker registrations and sessions, topics, replica
assignment, partition leaders, leader epochs and ISRs, served over the control-plane APIs.

Modules: messages.py (request/response fields, error codes, typed Metadata), state.py (the pure state
machine), store.py (the durable JSON state file), config.py (controller.json), server.py (asyncio TCP
server), process.py (process entry: run(config_path) -> int), client.py (async and sync clients).

Entry points for other pieces:

    python -m broker controller --config F   ->  broker.controller.main(["--config", F]) -> exit status
                                                  (same as broker.controller.process.run(F) -> int)
    python -m broker.controller --config F       works on its own too

    from broker.controller.client import ControllerClient, ControllerSyncClient, ControllerError, ControllerUnavailable
    from broker.controller.messages import Metadata, PartitionState, BrokerInfo, AlterIsr, AlterIsrResult, TopicSpec

Broker process (asyncio), one `ControllerClient(host, port, timeout_s=2.0)` per process:
    epoch = await c.register(broker_id, host, port)        # at start-up, and again whenever a heartbeat
    await c.heartbeat(broker_id, epoch)                    #   raises ControllerError(code="STALE_BROKER_EPOCH")
    md = await c.metadata(known_version=md.version, max_wait_ms=1000)   # long-poll loop (-1 the first time)
    r = await c.alter_isr(AlterIsr(topic, p, leader_id, leader_epoch, isr_version, isr))   # -> AlterIsrResult
        # r.error in NONE, INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, NOT_LEADER, INELIGIBLE_REPLICA,
        # UNKNOWN_PARTITION, INVALID_REQUEST; r.isr / r.isr_version / r.leader_epoch are the controller's
        # current values either way.
Client library (sync): `ControllerSyncClient((host, port), timeout_s=2.0)`: .metadata() -> Metadata
(.partition(topic, p), .topic(topic), .leader_address(topic, p), .brokers {id: BrokerInfo(host, port, alive)}),
.create_topics([TopicSpec(name, partitions, replication_factor)]) -> {name: error code}.
Unreachable / silent controller: ControllerUnavailable (a ControllerError, code CONTROLLER_NOT_AVAILABLE).

Rules (docs: /tmp/client-api.md "Control plane"): a broker silent for broker_session_timeout_ms is fenced
(removed from every ISR, but an ISR never becomes empty: it keeps the partition's leader as last member;
partitions it led get the first live ISR member in replica order, or with unclean_leader_election the first
live replica with ISR = [it], else no leader); every leadership change (including to "no leader") bumps
leader_epoch; every partition change (leader or ISR) bumps isr_version; ALTER_ISR stores the ISR in replica
order. New topics: replicas round-robin over the live broker ids (ascending), ISR = replicas, leader = first
replica, epoch 0; controller.json topics are created once expected_brokers brokers are live.
A broker registering again while still registered is treated as bounced: fenced, then unfenced. A heartbeat
from a fenced broker with its current broker_epoch unfences it. Leaderless partitions elect again whenever
a broker is unfenced.
KIP-966 (controller.json eligible_leader_replicas, min_insync_replicas): eligible leader replicas per
partition, elected when no ISR member is live; REGISTER_BROKER's clean_shutdown=false takes a broker out of
them (state.py). ELECT_LEADER (admin): make a named eligible replica leader, or elect again (state.py).
"""
from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """`--config FILE` -> the controller process's exit status (0 after SIGTERM, 2 on bad config)."""
    from broker.controller.process import main as _main

    return _main(argv)
