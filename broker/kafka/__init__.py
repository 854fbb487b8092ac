"""The Kafka wire protocol subset the broker's client listener speaks (issue 20).

Codec only, no I/O: `versions` (api keys and the version ranges advertised), `primitives` (the wire
types), `schema` (our declarative table of request/response schemas), `messages` (frames <-> dicts)
and `records` (RecordBatch v2 with CRC-32C). The listener and its handlers live beside them
(docs/kafka-protocol.md).
"""
