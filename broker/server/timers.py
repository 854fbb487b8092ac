"""The broker's periodic work: ISR-shrink checks, HW/epoch checkpoints and (flush="interval") log flushes.

Each loop calls one ReplicaManager method; the rules (who lags, what to write) live there and in the
replication state machine.
"""
from __future__ import annotations

import asyncio

from broker.config import BrokerConfig


class Timers:
    def __init__(self, config: BrokerConfig, replicas):
        self.config = config
        self.replicas = replicas

    def loops(self) -> list:
        cfg = self.config
        out = [
            self._every(max(cfg.replica_lag_time_max_ms / 4000.0, 0.05), self.replicas.check_isr),
            self._every(cfg.hw_checkpoint_interval_ms / 1000.0, self.replicas.checkpoint_all),
        ]
        if cfg.flush == "interval":
            out.append(self._every(cfg.flush_interval_ms / 1000.0, self.replicas.flush_all))
        return out

    @staticmethod
    async def _every(period_s: float, action) -> None:
        while True:
            await asyncio.sleep(period_s)
            result = action()
            if asyncio.iscoroutine(result):
                await result
