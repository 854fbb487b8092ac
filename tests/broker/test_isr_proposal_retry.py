"""An ISR proposal the controller did not answer stays pending and is sent again (broker/server/partitions.py
`_alter_isr`): the controller may have applied it, so the leader must keep counting the union of both ISRs
for the HW until an answer comes. Dropping it let a leader commit an expansion's records with the smaller
ISR while the controller elected the new member without them (found on a real run by the protocol rule
truncate-below-hw, with lost acknowledged writes)."""
from __future__ import annotations

import asyncio
import json

from broker.config import BrokerConfig
from broker.controller import messages as m
from broker.controller.client import ControllerError
from broker.eventlog import EventLog
from broker.server import partitions as parts
from broker.server.partitions import FetchedBy, ReplicaManager

TOPIC = "t"


class SilentThenAnswering:
    """A controller link whose first `silent` ALTER_ISR calls get no answer, then answers NONE."""

    def __init__(self, silent: int):
        self.silent = silent
        self.calls: list[tuple] = []

    async def alter_isr(self, req: m.AlterIsr):
        self.calls.append((req.isr, req.isr_version))
        if len(self.calls) <= self.silent:
            raise ControllerError(m.CONTROLLER_NOT_AVAILABLE, "no answer")
        return m.AlterIsrResult(m.NONE, req.isr, req.isr_version + 1, req.leader_id, req.leader_epoch)


def test_an_unanswered_proposal_stays_pending_and_is_sent_again(tmp_path, monkeypatch):
    monkeypatch.setattr(parts, "ISR_RETRY_S", 0.01)
    cfg = BrokerConfig(node_id=1, host="127.0.0.1", port=1, controller_host="127.0.0.1", controller_port=1,
                       data_dir=str(tmp_path / "data"), log_file=str(tmp_path / "broker.log"), min_insync_replicas=1)
    events = EventLog(cfg.log_file, cfg.node_name)
    controller = SilentThenAnswering(silent=2)

    def md(version, isr):
        brokers = {b: m.BrokerInfo("127.0.0.1", b, True) for b in (1, 2)}
        return m.Metadata(version, brokers, {(TOPIC, 0): m.PartitionState(TOPIC, 0, 1, 0, isr, (1, 2), version)})

    async def scenario():
        rm = ReplicaManager(cfg, events, controller=controller)
        rm.open_existing()
        rm.apply_metadata(md(1, (1,)))                  # n1 leads alone; n2 is a replica out of the ISR
        part = rm.get(TOPIC, 0)
        r = part.replica
        await rm.produce(TOPIC, 0, 1, 1000, [b"a", b"b"])
        await rm.fetch(TOPIC, 0, 2, 10, 0, FetchedBy(2, 0))    # n2 has fetched everything: n1 proposes [1, 2]
        seen = []
        for _ in range(200):
            await asyncio.sleep(0.005)
            seen.append(r.pending_isr_proposal is not None)
            if sorted(r.isr) == [1, 2]:
                break
        rm.close_storage()
        return seen, sorted(r.isr), r.isr_version

    seen, isr, version = asyncio.run(scenario())
    events.close()
    assert [c[0] for c in controller.calls] == [(1, 2)] * 3          # two unanswered attempts, then an answer
    assert seen[0] is True and isr == [1, 2] and version == 2        # pending all along, then committed
    logged = [json.loads(line) for line in open(cfg.log_file)]
    failed = [e for e in logged if e["event"] == "isr-proposal-failed"]
    assert len(failed) == 1 and failed[0]["error"] == m.CONTROLLER_NOT_AVAILABLE   # logged once per proposal
