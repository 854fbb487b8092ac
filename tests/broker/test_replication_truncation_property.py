"""KIP-279 truncation against the longest common prefix, over generated pairs of diverged logs.

A valid pair of logs (what leader elections can produce): a shared prefix, then each side continues
with epochs the other never saw (only one side may continue the prefix's last epoch, since an epoch
has one leader writing contiguous offsets). After the OffsetsForLeaderEpoch rounds and the fetches,
the follower must hold exactly the leader's log, and must never have cut below the shared prefix.
"""
from hypothesis import given, settings, strategies as st

from broker.records import MemoryLog, Record
from broker.replication import Checkpoints, FetchRequest, PartitionReplica, ReplicationConfig


@st.composite
def diverged_logs(draw):
    n_epochs = draw(st.integers(1, 7))
    shared = draw(st.integers(0, n_epochs - 1))          # epochs 0..shared-1 are in the common prefix
    prefix = [e for e in range(shared) for _ in range(draw(st.integers(0, 3)))]
    leader, follower = list(prefix), list(prefix)
    if shared and prefix and prefix[-1] == shared - 1:
        side = draw(st.sampled_from(["none", "leader", "follower"]))
        if side != "none":
            (leader if side == "leader" else follower).extend([shared - 1] * draw(st.integers(1, 3)))
    for e in range(shared, n_epochs):
        side = draw(st.sampled_from(["leader", "follower"]))
        (leader if side == "leader" else follower).extend([e] * draw(st.integers(0, 3)))
    return prefix, leader, follower, n_epochs            # n_epochs: the current leader's epoch


def replica(broker_id: int, epochs: list[int], shared: int, hw: int) -> PartitionReplica:
    def value(i: int) -> bytes:
        return b"p%d" % i if i < shared else b"n%d-%d" % (broker_id, i)
    log = MemoryLog([Record(i, e, value(i)) for i, e in enumerate(epochs)])
    return PartitionReplica("t", 0, broker_id, log, ReplicationConfig(truncation="leader-epoch"),
                            checkpoints=Checkpoints(hw=hw))


@settings(max_examples=400, deadline=None)
@given(diverged_logs())
def test_leader_epoch_truncation_finds_the_common_prefix(logs):
    prefix, leader_epochs, follower_epochs, current = logs
    lead = replica(1, leader_epochs, len(prefix), hw=0)
    foll = replica(2, follower_epochs, len(prefix), hw=len(prefix))
    lead.become_leader(current, [1], [1, 2], 1, now_ms=0)
    foll.become_follower(current, 1, now_ms=0)
    for _ in range(40):
        req = foll.next_follower_request()
        if isinstance(req, FetchRequest):
            resp = lead.handle_fetch(2, req.fetch_offset, req.current_leader_epoch, 0, 100)
            foll.on_fetch_response(req, resp)
            if not resp.records:
                break
        else:
            foll.on_epoch_response(req, lead.handle_offsets_for_leader_epoch(req.requested_epoch,
                                                                             req.current_leader_epoch))
    assert [r.value for r in foll.log.read(0, 100)] == [r.value for r in lead.log.read(0, 100)]
    cuts = [e.to for e in foll.drain_events() if e.name == "truncate"]
    if len(follower_epochs) > len(prefix) and len(leader_epochs) >= len(prefix):
        assert min(cuts) == len(prefix)                   # exactly the divergence point
    assert all(c >= len(prefix) for c in cuts)
    assert foll.epoch_cache.entries() == lead.epoch_cache.entries()[:len(foll.epoch_cache.entries())]
