"""The simulator's storage fault (`damage`, simulator/world.py): when it is enabled, what it does to a
down broker's disk, what the protocol rules hear of it, and its scenario step (explore_export)."""
from __future__ import annotations

from simulator import explore as ex
from simulator.actions import Action
from simulator.world import SimSettings, World
from harness.explore_export import to_scenario

SAFE = SimSettings(acks=-1, min_insync_replicas=2)


def _msg(w: World, kind: str, src: str, dst: str) -> int:
    return next(m.id for m in w.in_flight.values() if (m.kind, m.src, m.dst) == (kind, src, dst))


def _fetch(w: World, follower: str, leader: str = "n1") -> None:
    """One fetch of `follower` from `leader`, request and answer delivered."""
    w.apply(Action("send", follower))
    w.apply(Action("deliver", msg=_msg(w, "fetch", follower, leader)))
    w.apply(Action("deliver", msg=_msg(w, "fetch-answer", leader, follower)))


def _v1_committed_on_all_three() -> World:
    """n1 takes v1 (acks=all); both followers fetch it and fetch again, so n1 acknowledges it (HW 1)."""
    w = World(SAFE)
    w.apply(Action("produce", "n1"))
    for f in ("n2", "n3", "n2", "n3"):
        _fetch(w, f)
    return w


def _committed_then_n3_down_and_fenced() -> World:
    """v1 committed on all three (HW 1 everywhere, n3's HW checkpoint 1), then n3 crashes and the
    controller fences it and shrinks the ISR to n1 (n2's heartbeat is not delivered either)."""
    w = _v1_committed_on_all_three()
    w.apply(Action("checkpoint", "n3"))
    w.apply(Action("crash", "n3"))
    w.apply(Action("advance", arg=3001))
    w.apply(Action("heartbeat", "n1"))
    w.apply(Action("deliver", msg=_msg(w, "heartbeat", "n1", "c0")))
    return w


def _damage_enabled(w: World, node: str) -> bool:
    return Action("damage", node) in w.enabled() and w.is_enabled(Action("damage", node))


def test_damage_waits_until_the_controller_has_fenced_the_broker_and_shrunk_the_isr():
    w = _committed_then_n3_down_and_fenced()
    assert not _damage_enabled(w, "n3")                      # down, but still in the ISR and not fenced
    w.apply(Action("expire"))
    assert w.partition_state().isr == (1,)
    assert _damage_enabled(w, "n3")
    assert not _damage_enabled(w, "n1") and not _damage_enabled(w, "n2")   # up: never


def test_a_pending_isr_expansion_naming_the_broker_keeps_its_disk_safe():
    """KIP-903's case: an expansion the leader proposed before the crash could still be accepted after
    the restart, with the damaged log in the ISR; while one names the broker, no damage."""
    w = _v1_committed_on_all_three()
    w.apply(Action("produce", "n1"))
    _fetch(w, "n2")
    w.apply(Action("advance", arg=2001))                     # both followers lag: the ISR shrinks to n1
    w.apply(Action("alter-isr", "n1"))
    w.apply(Action("deliver", msg=_msg(w, "alter-isr", "n1", "c0")))
    w.apply(Action("deliver", msg=_msg(w, "alter-isr-answer", "c0", "n1")))
    assert w.partition_state().isr == (1,)
    _fetch(w, "n3")
    w.apply(Action("send", "n3"))
    w.apply(Action("deliver", msg=_msg(w, "fetch", "n3", "n1")))   # caught up: n1 proposes {n1, n3}
    assert w.nodes["n1"].replica.pending_isr_proposal.isr == (1, 3)
    w.apply(Action("crash", "n3"))
    w.apply(Action("advance", arg=3001))
    for n in ("n1", "n2"):
        w.apply(Action("heartbeat", n))
        w.apply(Action("deliver", msg=_msg(w, "heartbeat", n, "c0")))
    w.apply(Action("expire"))
    assert not w.controller.is_live(3) and 3 not in w.partition_state().isr
    assert not _damage_enabled(w, "n3")                      # the proposal is on its way
    w.apply(Action("deliver", msg=_msg(w, "alter-isr", "n1", "c0")))     # refused: n3 is fenced
    assert not _damage_enabled(w, "n3")                      # n1 still waits for the answer
    w.apply(Action("deliver", msg=_msg(w, "alter-isr-answer", "c0", "n1")))
    assert _damage_enabled(w, "n3")


def test_damage_cuts_the_last_record_and_the_restart_clamps_the_hw_checkpoint():
    w = _committed_then_n3_down_and_fenced()
    w.apply(Action("expire"))
    told = w.apply(Action("damage", "n3"))
    assert told.text == ("n3's disk loses the last record of its log (offset 0) while it is down: its recovery "
                         "will cut the log there (HW checkpoint 1)")
    assert w.nodes["n3"].log.leo() == 0 and w.nodes["n3"].flushed == 0
    assert not _damage_enabled(w, "n3")                      # nothing left to lose
    w.apply(Action("restart", "n3"))
    r = w.nodes["n3"].replica
    assert (r.leo, r.hw) == (0, 0)                            # checkpoint 1 clamped to the cut log
    assert w.observer.pending == []                            # its recovered row: LEO 0, HW 0


def test_a_damaged_former_leader_may_come_back_without_what_it_acknowledged():
    """n1 acknowledged v1, crashes and is replaced; its disk loses v1. Its recovery cuts an acknowledged
    record, which is the disk's loss (the `damaged` row), not acked-not-durable; n2 and n3 keep v1."""
    w = _v1_committed_on_all_three()
    assert [o for _v, o in w.outcomes] == ["acked"]
    w.apply(Action("crash", "n1"))
    w.apply(Action("advance", arg=3001))
    for n in ("n2", "n3"):
        w.apply(Action("heartbeat", n))
        w.apply(Action("deliver", msg=_msg(w, "heartbeat", n, "c0")))
    w.apply(Action("expire"))
    assert w.leader() in ("n2", "n3") and 1 not in w.partition_state().isr
    w.apply(Action("damage", "n1"))
    w.apply(Action("restart", "n1"))
    assert w.nodes["n1"].replica.leo == 0
    assert w.observer.pending == []
    w.settle()
    from simulator.invariants import check_settled
    assert check_settled(w) is None


def test_the_safe_settings_find_nothing_with_damage_in_the_schedules():
    """Damage does come up in the search (about 3 schedules in 100), and the safe settings keep every
    promise through it."""
    s = SimSettings(replicas=3, truncation="leader-epoch", acks=-1, min_insync_replicas=2, replica_fetch_max_records=2)
    damaged = 0
    for i in range(400):
        _n, finding, acts = ex.run_schedule(s, 7, i)
        assert finding is None, finding
        damaged += any(a.kind == "damage" for a in acts)
    assert damaged >= 3


def test_damage_is_exported_as_a_torn_last_corrupt_step():
    w = _committed_then_n3_down_and_fenced()
    w.apply(Action("expire"))
    w.apply(Action("damage", "n3"))
    w.apply(Action("restart", "n3"))
    finding = ex.Finding("hw-above-leo", "n3 reopened its log with HW 1, past its LEO 0", seed=None, index=-1,
                         actions=list(w.history))
    text = to_scenario(SAFE, finding)
    step = text.split("n3's disk loses the last record")[1]
    assert '[[step]]\ndo = "corrupt"\nnode = "n3"\nhow = "torn-last"\npartition = 0\n' in step



def test_damaged_record_kept_when_the_recovery_keeps_the_damaged_record(monkeypatch):
    """The shared rule in the simulator: a recovery that keeps the damaged record (the damage reported, the
    log left whole, as a scan that skips the CRC would) is caught at the restart's `recovered` row."""
    def damage_kept(self, a):
        n = self.nodes[a.node]
        self.observer.damaged(n.name, n.log.leo() - 1)      # the bug: the record stays
        return f"{n.name} damaged, nothing cut"
    w = _committed_then_n3_down_and_fenced()
    w.apply(Action("expire"))
    monkeypatch.setattr(World, "_do_damage", damage_kept)
    w.apply(Action("damage", "n3"))
    w.apply(Action("restart", "n3"))
    assert [(v.kind, v.node) for v in w.observer.pending] == [("damaged-record-kept", "n3")]
    assert "keeping offset 0" in w.observer.pending[0].detail
