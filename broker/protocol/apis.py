"""API keys of the wire protocol. Message bodies are msgpack maps; their fields are documented where
each API is served (broker/server for the data plane, broker/controller for the control plane).

Ranges: 1-49 data plane (brokers), 50-99 control plane (controller), 100+ admin/diagnostics.
"""
from __future__ import annotations

# data plane (served by brokers)
PRODUCE = 1
FETCH = 2                        # consumer and follower fetch
OFFSETS_FOR_LEADER_EPOCH = 3
DESCRIBE_REPLICAS = 4            # this broker's LEO/HW/role/epoch per partition
LEADER_AND_ISR = 5               # controller -> broker push of partition state (or brokers poll)

# control plane (served by the controller)
REGISTER_BROKER = 50
HEARTBEAT = 51
ALTER_ISR = 52
METADATA = 53
CREATE_TOPICS = 54
ELECT_LEADER = 55                # admin: make a given replica leader, or elect again (unclean once)
CREATE_PARTITIONS = 56           # more partitions for an existing topic (Kafka's CreatePartitions)
DELETE_TOPICS = 57               # remove topics and their partitions (Kafka's DeleteTopics)

# admin
PING = 100
FLUSH = 101                      # fsync this broker's logs now (all, or one partition)

ERROR = 0  # response api key for a request that could not be decoded at all

NAMES = {v: k for k, v in dict(globals()).items() if k.isupper() and isinstance(v, int)}
