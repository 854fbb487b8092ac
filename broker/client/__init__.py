"""The synchronous client library: Producer, Consumer, Admin (contract: the "Client library" section of
the agreed interfaces, mirrored in this package's modules' docstrings).

    from broker.client import Producer, Consumer, Admin, ClientError
    p = Producer(controller=("127.0.0.1", 9000), acks="all", timeout_s=2.0, retries=0)
    r = p.send("hw", 0, [b"17", b"18"])        # SendResult(offsets=[5, 6], epoch=3)
    f = Consumer(controller=...).fetch("hw", 0, 0, max_records=1000)   # FetchResult(records, hw, epoch)
    Admin(controller=...).describe("hw")        # [PartitionInfo(...)]
"""
from broker.client.admin import Admin
from broker.client.consumer import Consumer
from broker.client.errors import ClientError
from broker.client.producer import Producer
from broker.client.results import FetchResult, PartitionInfo, SendResult

__all__ = ["Admin", "ClientError", "Consumer", "FetchResult", "PartitionInfo", "Producer", "SendResult"]
