"""Producer ids for InitProducerId (KIP-98): unique across the cluster and across restarts, without asking
the controller.

An id is `broker_id << 40 | n`: the broker that handed it out, then a counter. The counter is reserved
in blocks: DATA_DIR/producer-ids holds the end of the current block (written atomically and fsynced
before any id of the block is handed out), so a restarted broker starts after every id it may have given
before, at the cost of skipping the rest of a block. Kafka hands out blocks from the controller
(KIP-730); per-broker ranges need no round trip and cannot collide.
"""
from __future__ import annotations

from pathlib import Path

from broker.atomic_file import replace_atomically
from broker.errors import ConfigError

FILE_NAME = "producer-ids"
BLOCK = 1000
ID_BITS = 40


class ProducerIds:
    def __init__(self, data_dir: str | Path, broker_id: int):
        self.path = Path(data_dir) / FILE_NAME
        self.broker_id = broker_id
        self._next = self._end = self._load()

    def _load(self) -> int:
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise ConfigError(f"{self.path}: {exc.strerror or exc}") from None
        if not text.isdigit():
            raise ConfigError(f"{self.path}: expected the end of the reserved block, got {text[:40]!r}")
        return int(text)

    def next(self) -> int:
        """A producer id never handed out before by this broker; OSError when the block cannot be saved."""
        if self._next >= self._end:
            end = self._next + BLOCK
            if end >= 1 << ID_BITS:
                raise ConfigError(f"{self.path}: producer ids of broker {self.broker_id} used up")
            replace_atomically(self.path, f"{end}\n".encode())
            self._end = end
        n = self._next
        self._next += 1
        return (self.broker_id << ID_BITS) | n
