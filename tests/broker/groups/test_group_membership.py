"""The group membership state machine (broker/groups/membership.py), driven by hand: known answers for
each transition Kafka's classic protocol defines. The real counterpart, real clients against real
brokers, is tests/broker/groups/test_groups_real_clients.py."""
from __future__ import annotations

from broker.groups import membership as gm
from broker.groups.membership import Group, GroupLimits, JoinRequest
from broker.groups.offsets import Committed, group_record, offset_record, partition_for, replay

LIMITS = GroupLimits(min_session_timeout_ms=1000, max_session_timeout_ms=60_000)


def _req(member_id: str = "", *, session: int = 5000, rebalance: int = 10_000, protocols=(("range", b"m"),),
         v4: bool = True) -> JoinRequest:
    return JoinRequest(member_id, "client", "", session, rebalance, "consumer", tuple(protocols),
                       require_known_member_id=v4)


def _join_new(g: Group, ticket: int, now: int = 0) -> tuple[str, list[gm.Reply]]:
    """A member joins with no id (MEMBER_ID_REQUIRED), then again with the id it was given."""
    [first] = g.join(ticket, _req(), now)
    assert first.error == gm.MEMBER_ID_REQUIRED and first.fields["member_id"]
    mid = first.fields["member_id"]
    return mid, g.join(ticket + 100, _req(mid), now)


def _leader_sync(g: Group, ticket: int, leader: str, generation: int, assignments: dict, now: int = 0,
                 error: str = gm.NONE) -> list[gm.Reply]:
    """The leader's SyncGroup, then the shell's write of the generation: the replies come only then."""
    assert g.sync(ticket, leader, generation, assignments, now) == []
    assert g.state == gm.COMPLETING and g.writing == generation
    return g.written(generation, error, now)


def test_one_member_forms_a_generation_and_is_its_leader():
    g = Group("g", LIMITS)
    mid, replies = _join_new(g, 1)
    [r] = replies
    assert (r.ticket, r.error, r.fields["generation"], r.fields["leader"], r.fields["protocol"]) == (101, gm.NONE, 1, mid, "range")
    assert r.fields["members"] == [(mid, None, b"m")]          # the leader sees everyone's metadata
    assert g.state == gm.COMPLETING
    [s] = _leader_sync(g, 2, mid, 1, {mid: b"assign-1"}, 10)
    assert (s.ticket, s.error, s.fields["assignment"]) == (2, gm.NONE, b"assign-1")
    assert g.state == gm.STABLE
    names = [name for name, _ in g.drain_events()]
    assert names == ["group-member-joined", "group-rebalance", "group-generation", "group-stable"]


def test_a_second_member_makes_everyone_rejoin_and_the_follower_waits_for_the_leaders_sync():
    g = Group("g", LIMITS)
    a, _ = _join_new(g, 1)
    _leader_sync(g, 2, a, 1, {a: b"all"}, 0)
    b, replies = _join_new(g, 3, now=5)
    assert replies == []                       # the rebalance waits for a to join again
    assert g.heartbeat(a, 1, 6) == gm.REBALANCE_IN_PROGRESS
    assert g.commit_error(a, 1) == gm.NONE      # a may still commit what it read in generation 1
    replies = g.join(4, _req(a), 7)
    by_ticket = {r.ticket: r for r in replies}
    assert set(by_ticket) == {4, 103} and all(r.fields["generation"] == 2 for r in replies)
    assert by_ticket[4].fields["leader"] == a and len(by_ticket[4].fields["members"]) == 2
    assert by_ticket[103].fields["members"] == []                 # a follower sees no one's metadata
    assert g.sync(5, b, 2, {}, 8) == []                           # the follower waits ...
    assert g.commit_error(b, 2) == gm.REBALANCE_IN_PROGRESS       # ... and may not commit yet
    replies = _leader_sync(g, 6, a, 2, {a: b"p0", b: b"p1"}, 9)   # ... until the leader's assignment is written
    assert sorted((r.ticket, r.fields["assignment"]) for r in replies) == [(5, b"p1"), (6, b"p0")]
    assert g.commit_error(a, 1) == gm.ILLEGAL_GENERATION          # a zombie of generation 1 is refused
    assert g.commit_error(a, 1, check_generation=False) == gm.NONE   # ... unless the bug is planted


def test_session_expiry_removes_a_member_and_rebalances_the_rest():
    g = Group("g", LIMITS)
    a, _ = _join_new(g, 1)
    _leader_sync(g, 2, a, 1, {a: b"x"}, 0)
    b, _ = _join_new(g, 3, now=0)
    g.join(4, _req(a), 0)
    _leader_sync(g, 5, a, 2, {a: b"p0", b: b"p1"}, 0)
    g.drain_events()
    assert g.heartbeat(a, 2, 4000) == gm.NONE                     # a keeps its session; b does not
    replies = g.tick(5001)
    assert replies == [] and g.state == gm.PREPARING and set(g.members) == {a}
    assert g.heartbeat(b, 2, 5002) == gm.UNKNOWN_MEMBER_ID
    [r] = g.join(6, _req(a), 5003)
    assert r.fields["generation"] == 3 and r.fields["members"] == [(a, None, b"m")]
    events = g.drain_events()
    assert ("group-member-removed", {"group": "g", "generation": 2, "state": "Stable", "member": b,
                                     "why": "session-timeout"}) in events


def test_a_member_that_does_not_rejoin_in_time_is_dropped_at_the_rebalance_deadline():
    g = Group("g", LIMITS)
    a, _ = _join_new(g, 1)
    _leader_sync(g, 2, a, 1, {a: b"x"}, 0)
    b, replies = _join_new(g, 3, now=100)      # a never joins again (a paused consumer)
    assert replies == [] and g.next_deadline_ms() is not None
    replies = g.tick(100 + 10_000)             # a's rebalance timeout
    [r] = replies
    assert (r.ticket, r.fields["generation"], r.fields["leader"]) == (103, 2, b) and set(g.members) == {b}


def test_leave_unknown_member_and_bad_input_get_kafkas_codes():
    g = Group("g", LIMITS)
    assert g.join(1, _req("nobody"), 0)[0].error == gm.UNKNOWN_MEMBER_ID
    assert g.join(1, _req(session=10), 0)[0].error == gm.INVALID_SESSION_TIMEOUT
    assert g.join(1, _req(protocols=()), 0)[0].error == gm.INCONSISTENT_GROUP_PROTOCOL
    assert g.join(1, _req(protocols=(("range", b"x" * 200_000),)), 0)[0].error == gm.INVALID_REQUEST
    a, _ = _join_new(g, 2)
    assert g.join(3, _req(protocols=(("other", b""),)), 0)[0].error == gm.INCONSISTENT_GROUP_PROTOCOL
    assert g.sync(4, a, 7, {}, 0)[0].error == gm.ILLEGAL_GENERATION
    assert g.sync(4, "nobody", 1, {}, 0)[0].error == gm.UNKNOWN_MEMBER_ID
    assert g.leave("nobody", 0) == (gm.UNKNOWN_MEMBER_ID, [])
    code, replies = g.leave(a, 0)
    assert code == gm.NONE and g.state == gm.EMPTY and g.generation == 2 and replies == []
    assert g.commit_error("", -1) == gm.NONE        # an empty group takes commits from no member


def test_v3_join_takes_a_new_member_at_once():
    g = Group("g", LIMITS)
    [r] = g.join(1, _req(v4=False), 0)
    assert r.error == gm.NONE and r.fields["generation"] == 1 and r.fields["member_id"]


def test_unload_answers_waiting_requests_not_coordinator():
    g = Group("g", LIMITS)
    a, _ = _join_new(g, 1)
    _leader_sync(g, 2, a, 1, {a: b"x"}, 0)
    _join_new(g, 3)                             # b waits in its JoinGroup
    [r] = g.unload()
    assert (r.ticket, r.error) == (103, "NOT_COORDINATOR") and g.state == gm.DEAD
    assert g.heartbeat(a, 1, 0) == gm.COORDINATOR_NOT_AVAILABLE


def test_a_generation_record_lets_a_new_coordinator_go_on():
    g = Group("g", LIMITS)
    a, _ = _join_new(g, 1)
    _leader_sync(g, 2, a, 1, {a: b"x"}, 0)
    key, value = group_record("g", g.to_record())
    ok = offset_record("g", "t", 0, Committed(10, 3, "meta", 1, a, 5))
    older = offset_record("g", "t", 0, Committed(4))
    loaded = replay([older, (key, value), ok, (b"not json", b"{}")])
    assert loaded.records == 4 and loaded.undecodable == 1
    assert loaded.offsets.get("g", "t", 0) == Committed(10, 3, "meta", 1, a, 5)
    g2 = Group.from_record("g", loaded.generations["g"], LIMITS, now_ms=100)
    assert (g2.state, g2.generation, g2.leader, set(g2.members)) == (gm.STABLE, 1, a, {a})
    assert g2.heartbeat(a, 1, 200) == gm.NONE
    [s] = g2.sync(3, a, 1, {}, 200)
    assert s.fields["assignment"] == b"x"


def test_partition_for_is_kafkas_java_hash():
    # Java's well-known values: "hello".hashCode() == 99162322; "Aa" and "BB" collide at 2112;
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0
    from broker.groups.offsets import java_string_hash
    assert java_string_hash("hello") == 99162322 and partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2 ** 31) and partition_for("polygenelubricants", 7) == 0
    assert partition_for("", 3) == 0
    assert all(0 <= partition_for(f"group-{i}", 7) < 7 for i in range(100))


def test_no_assignment_is_handed_out_before_the_generation_is_written():
    """A follower whose SyncGroup comes while the generation is being written waits too; a failed
    write answers everyone its error and starts a rebalance (the generation is never handed out)."""
    g = Group("g", LIMITS)
    a, _ = _join_new(g, 1)
    _leader_sync(g, 2, a, 1, {a: b"x"})
    b, _ = _join_new(g, 3)
    g.join(4, _req(a), 0)
    assert g.sync(5, a, 2, {a: b"p0", b: b"p1"}, 0) == []          # the leader: the write begins
    assert g.sync(6, b, 2, {}, 0) == []                             # the follower waits for the write
    assert g.heartbeat(b, 2, 0) == gm.NONE and g.commit_error(b, 2) == gm.REBALANCE_IN_PROGRESS
    replies = g.written(2, gm.COORDINATOR_NOT_AVAILABLE, 1)
    assert sorted((r.ticket, r.error) for r in replies) == [(5, gm.COORDINATOR_NOT_AVAILABLE),
                                                            (6, gm.COORDINATOR_NOT_AVAILABLE)]
    assert g.state == gm.PREPARING and g.writing is None
    assert g.written(2, gm.NONE, 2) == []                           # a late write of it changes nothing
