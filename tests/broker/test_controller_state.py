"""Unit tests of the controller's pure state machine (broker/controller/state.py): fencing, clean and
unclean elections, leader-epoch and ISR-version bumps, conditional ALTER_ISR, the last-ISR-member rule,
re-registration, idempotent topic creation, and the durable form."""
from __future__ import annotations

from broker.controller import messages as m
from broker.controller.state import ControllerState

T = 3000  # session timeout used throughout


def make(brokers=(1, 2, 3), *, unclean=False, topic=None):
    s = ControllerState(session_timeout_ms=T, unclean_leader_election=unclean)
    epochs = {b: s.register_broker(b, "127.0.0.1", 9000 + b, now_ms=0)[0] for b in brokers}
    if topic is not None:
        results, _ = s.create_topics([m.TopicSpec(*topic)])
        assert results == [(topic[0], m.NONE, "")]
    return s, epochs


def keep_alive(s, epochs, brokers, now_ms):
    for b in brokers:
        assert s.heartbeat(b, epochs[b], now_ms) == (m.NONE, [])


def part(s, topic="t", p=0):
    r = s.partition(topic, p)
    return (r.leader, r.leader_epoch, r.isr, r.isr_version)


def test_registration_gives_increasing_broker_epochs_and_bumps_the_version():
    s = ControllerState()
    assert s.version == 0
    assert s.register_broker(1, "h", 1, 0)[0] == 1
    assert s.register_broker(2, "h", 2, 0)[0] == 2
    assert s.version == 2
    epoch, events = s.register_broker(1, "h2", 11, 5)
    assert epoch == 3
    assert s.version == 3
    assert [e["event"] for e in events] == ["fenced", "registered", "unfenced"]
    assert s.metadata().brokers == {1: m.BrokerInfo("h2", 11, True), 2: m.BrokerInfo("h", 2, True)}


def test_create_topics_assigns_replicas_round_robin_and_is_idempotent():
    s, _ = make()
    results, events = s.create_topics([m.TopicSpec("t", 4, 2)])
    assert results == [("t", m.NONE, "")]
    assert [p.replicas for p in s.topics["t"]] == [[1, 2], [2, 3], [3, 1], [1, 2]]
    assert [part(s, "t", i) for i in range(4)] == [(1, 0, [1, 2], 0), (2, 0, [2, 3], 0), (3, 0, [3, 1], 0),
                                                    (1, 0, [1, 2], 0)]
    assert events[0] == {"event": "topic-created", "topic": "t", "partitions": 4, "replication_factor": 2}
    assert events[1] == {"event": "leader-change", "topic": "t", "partition": 0, "leader": 1, "epoch": 0,
                         "isr": [1, 2], "version": 0}
    version = s.version
    assert s.create_topics([m.TopicSpec("t", 4, 2)]) == ([("t", m.NONE, "")], [])
    assert s.version == version
    (name, error, _), = s.create_topics([m.TopicSpec("t", 5, 2)])[0]
    assert (name, error) == ("t", m.TOPIC_ALREADY_EXISTS)
    (name, error, _), = s.create_topics([m.TopicSpec("u", 1, 4)])[0]
    assert (name, error) == ("u", m.INVALID_REPLICATION_FACTOR)
    assert "u" not in s.topics and s.version == version


def test_create_partitions_grows_a_topic_with_its_replication_factor_and_survives_a_reload():
    s, _ = make(topic=("t", 2, 2))                   # replicas [1, 2], [2, 3]
    version = s.version
    results, events = s.create_partitions([m.PartitionCount("t", 4)])
    assert results == [("t", m.NONE, "")] and s.version == version + 1
    assert [p.replicas for p in s.topics["t"]] == [[1, 2], [2, 3], [3, 1], [1, 2]]
    assert [part(s, "t", i) for i in (2, 3)] == [(3, 0, [3, 1], 0), (1, 0, [1, 2], 0)]
    assert events == [{"event": "partitions-added", "topic": "t", "partitions": 4, "before": 2},
                      {"event": "leader-change", "topic": "t", "partition": 2, "leader": 3, "epoch": 0,
                       "isr": [3, 1], "version": 0},
                      {"event": "leader-change", "topic": "t", "partition": 3, "leader": 1, "epoch": 0,
                       "isr": [1, 2], "version": 0}]
    assert s.create_partitions([m.PartitionCount("t", 4)]) == ([("t", m.NONE, "")], [])     # idempotent
    (name, error, message), = s.create_partitions([m.PartitionCount("t", 3)])[0]
    assert (name, error) == ("t", m.INVALID_PARTITIONS) and "has 4 partitions" in message
    assert s.create_partitions([m.PartitionCount("nope", 2)])[0][0][:2] == ("nope", m.UNKNOWN_PARTITION)
    again = ControllerState.from_dict(s.to_dict(), now_ms=50_000, session_timeout_ms=T)
    assert [(p.partition, p.replicas, p.leader) for p in again.topics["t"]] == [
        (p.partition, p.replicas, p.leader) for p in s.topics["t"]]


def test_silent_broker_is_fenced_after_the_session_timeout_and_its_partitions_get_new_leaders():
    s, ep = make(topic=("t", 3, 3))    # replicas [1,2,3], [2,3,1], [3,1,2]
    keep_alive(s, ep, (2, 3), 2000)
    assert s.expire_sessions(T) == []                       # exactly the timeout: still alive
    version = s.version
    events = s.expire_sessions(T + 1)
    assert s.version == version + 1
    assert s.metadata().brokers[1].alive is False
    assert part(s, "t", 0) == (2, 1, [2, 3], 1)             # led by 1: first live ISR member in replica order
    assert part(s, "t", 1) == (2, 0, [2, 3], 1)             # 1 only left the ISR
    assert part(s, "t", 2) == (3, 0, [3, 2], 1)
    assert events == [
        {"event": "fenced", "broker": 1, "broker_epoch": 1, "why": "no heartbeat for 3001 ms"},
        {"event": "isr-change", "topic": "t", "partition": 0, "isr": [2, 3], "version": 1},
        {"event": "leader-change", "topic": "t", "partition": 0, "leader": 2, "epoch": 1, "isr": [2, 3],
         "version": 1},
        {"event": "isr-change", "topic": "t", "partition": 1, "isr": [2, 3], "version": 1},
        {"event": "isr-change", "topic": "t", "partition": 2, "isr": [3, 2], "version": 1},
    ]
    assert s.expire_sessions(T + 2) == []                   # fencing happens once


def test_election_follows_replica_order_not_broker_ids():
    s, ep = make(topic=("t", 3, 3))
    keep_alive(s, ep, (1, 3), 2000)
    s.expire_sessions(T + 1)                                # fence 2: partition 1 has replicas [2, 3, 1]
    assert part(s, "t", 1) == (3, 1, [3, 1], 1)


def test_last_isr_member_stays_in_the_isr_and_the_partition_goes_leaderless_without_unclean_election():
    s, ep = make(topic=("t", 1, 3))
    keep_alive(s, ep, (1,), 2000)
    s.expire_sessions(T + 1)                                # 2 and 3 fenced together
    assert part(s) == (1, 0, [1], 1)
    events = s.expire_sessions(2000 + T + 1)                # 1 fenced: it is the last ISR member
    assert part(s) == (None, 1, [1], 2)
    assert events == [
        {"event": "fenced", "broker": 1, "broker_epoch": 1, "why": f"no heartbeat for {T + 1} ms"},
        {"event": "leader-change", "topic": "t", "partition": 0, "leader": None, "epoch": 1, "isr": [1],
         "version": 2},
    ]
    # a replica outside the ISR coming back does not become leader (clean election only) ...
    ep[3], events = s.register_broker(3, "127.0.0.1", 9003, 6000)
    assert part(s) == (None, 1, [1], 2)
    assert [e["event"] for e in events] == ["registered", "unfenced"]
    # ... the last ISR member coming back does, with a new epoch
    ep[1], events = s.register_broker(1, "127.0.0.1", 9001, 6000)
    assert part(s) == (1, 2, [1], 3)
    assert events[-1] == {"event": "leader-change", "topic": "t", "partition": 0, "leader": 1, "epoch": 2,
                          "isr": [1], "version": 3}


def test_unclean_election_picks_the_first_live_replica_and_resets_the_isr_to_it():
    s, ep = make(unclean=True, topic=("t", 1, 3))
    keep_alive(s, ep, (1,), 2000)
    s.expire_sessions(T + 1)                                # ISR [1]
    ep[3], _ = s.register_broker(3, "127.0.0.1", 9003, 4000)   # back, live, not in the ISR
    events = s.expire_sessions(2000 + T + 1)                # leader 1 fenced, no live ISR member
    assert part(s) == (3, 1, [3], 2)
    assert events[1:] == [
        {"event": "isr-change", "topic": "t", "partition": 0, "isr": [3], "version": 2},
        {"event": "leader-change", "topic": "t", "partition": 0, "leader": 3, "epoch": 1, "isr": [3],
         "version": 2},
    ]


def test_unclean_election_when_an_out_of_sync_replica_registers_into_a_leaderless_partition():
    s, ep = make(unclean=True, topic=("t", 1, 2))           # replicas [1, 2]
    keep_alive(s, ep, (1,), 2000)
    s.expire_sessions(T + 1)                                # 2 fenced, ISR [1]
    s.expire_sessions(2000 + T + 1)                         # 1 fenced, nobody live: no leader
    assert part(s) == (None, 1, [1], 2)
    s.register_broker(2, "127.0.0.1", 9002, 9000)
    assert part(s) == (2, 2, [2], 3)


def test_heartbeat_with_a_stale_epoch_or_from_an_unknown_broker_asks_to_register_again():
    s, ep = make(topic=("t", 1, 3))
    assert s.heartbeat(1, ep[1] + 100, 10) == (m.STALE_BROKER_EPOCH, [])
    assert s.heartbeat(9, 1, 10) == (m.STALE_BROKER_EPOCH, [])
    new_epoch, _ = s.register_broker(1, "127.0.0.1", 9001, 10)
    assert s.heartbeat(1, ep[1], 10) == (m.STALE_BROKER_EPOCH, [])
    assert s.heartbeat(1, new_epoch, 10) == (m.NONE, [])


def test_heartbeat_from_a_fenced_broker_with_its_current_epoch_unfences_it_and_elects():
    s, ep = make(topic=("t", 1, 2))
    keep_alive(s, ep, (1,), 2000)
    s.expire_sessions(T + 1)
    s.expire_sessions(2000 + T + 1)                         # both fenced, leader None, ISR [1]
    assert part(s) == (None, 1, [1], 2)
    error, events = s.heartbeat(1, ep[1], 6000)
    assert error == m.NONE
    assert [e["event"] for e in events] == ["unfenced", "leader-change"]
    assert part(s) == (1, 2, [1], 3)
    assert s.metadata().brokers[1].alive is True


def test_re_registration_of_a_live_leader_is_a_bounce_that_moves_leadership():
    s, ep = make(topic=("t", 1, 3))
    new_epoch, events = s.register_broker(1, "127.0.0.1", 9001, 100)
    assert new_epoch == 4
    assert [e["event"] for e in events] == ["fenced", "isr-change", "leader-change", "registered", "unfenced"]
    assert part(s) == (2, 1, [2, 3], 1)


def alter(s, leader, epoch, version, isr, topic="t", p=0):
    return s.alter_isr(m.AlterIsr(topic, p, leader, epoch, version, tuple(isr)))


def test_alter_isr_is_conditional_on_isr_version_and_leader_epoch():
    s, ep = make(topic=("t", 1, 3))
    result, events = alter(s, 1, 0, 0, [1, 2])
    assert result == m.AlterIsrResult(m.NONE, (1, 2), 1, 1, 0)
    assert events == [{"event": "isr-change", "topic": "t", "partition": 0, "isr": [1, 2], "version": 1}]
    version = s.version
    result, events = alter(s, 1, 0, 0, [1])                 # stale isr_version
    assert (result.error, result.isr, result.isr_version, events) == (m.INVALID_UPDATE_VERSION, (1, 2), 1, [])
    assert part(s) == (1, 0, [1, 2], 1) and s.version == version
    result, _ = alter(s, 1, 0, 1, [2, 1, 3])                # expand again; stored in replica order
    assert result == m.AlterIsrResult(m.NONE, (1, 2, 3), 2, 1, 0)
    keep_alive(s, ep, (2, 3), 2000)
    s.expire_sessions(T + 1)                                # leader 1 fenced: leader 2, epoch 1, version 3
    assert part(s) == (2, 1, [2, 3], 3)
    result, _ = alter(s, 1, 0, 3, [1, 2])                   # the deposed leader's stale epoch
    assert (result.error, result.leader, result.leader_epoch) == (m.FENCED_LEADER_EPOCH, 2, 1)
    result, _ = alter(s, 3, 1, 3, [3])                      # right epoch, not the leader
    assert result.error == m.NOT_LEADER
    result, _ = alter(s, 2, 1, 3, [2, 3, 1])                # adding a fenced broker
    assert result.error == m.INELIGIBLE_REPLICA
    result, _ = alter(s, 2, 1, 3, [3])                      # the leader must stay in its ISR
    assert result.error == m.INVALID_REQUEST
    result, _ = alter(s, 2, 1, 3, [2, 3], topic="nope")
    assert result.error == m.UNKNOWN_PARTITION
    assert part(s) == (2, 1, [2, 3], 3)
    result, _ = alter(s, 2, 1, 3, [2])
    assert result == m.AlterIsrResult(m.NONE, (2,), 4, 2, 1)


def test_alter_isr_checks_the_broker_epoch_when_given():
    s, ep = make(topic=("t", 1, 3))
    stale = m.AlterIsr("t", 0, 1, 0, 0, (1, 2), broker_epoch=ep[1] + 7)
    assert s.alter_isr(stale)[0].error == m.STALE_BROKER_EPOCH
    ok = m.AlterIsr("t", 0, 1, 0, 0, (1, 2), broker_epoch=ep[1])
    assert s.alter_isr(ok)[0].error == m.NONE


def test_durable_form_round_trips_and_gives_every_live_broker_a_session_of_grace():
    s, ep = make(topic=("t", 2, 3))
    keep_alive(s, ep, (2, 3), 2000)
    s.expire_sessions(T + 1)
    alter(s, 2, 1, 1, [2])
    saved = s.to_dict()
    r = ControllerState.from_dict(saved, now_ms=50_000, session_timeout_ms=T)
    assert r.to_dict() == saved
    assert r.metadata() == s.metadata()
    assert r.next_broker_epoch == 4
    assert r.heartbeat(2, ep[2], 50_500) == (m.NONE, [])     # broker epochs survive
    assert r.expire_sessions(50_000 + T) == []                # grace: one full session from the restart
    events = r.expire_sessions(50_000 + T + 1)
    assert [e["broker"] for e in events if e["event"] == "fenced"] == [3]   # 2 heartbeated at 50 500
    assert r.metadata().brokers[1].alive is False


def test_from_dict_names_the_bad_field():
    s, _ = make(topic=("t", 1, 1))
    bad = s.to_dict()
    bad["topics"][0]["partitions"][0]["leader_epoch"] = "x"
    try:
        ControllerState.from_dict(bad, now_ms=0)
    except ValueError as exc:
        assert str(exc) == "topics[t].partitions[0]: 'leader_epoch' must be an integer, got 'x'"
    else:
        raise AssertionError("accepted a bad leader_epoch")


def test_topic_configs_are_kept_sent_and_persisted_and_checked():
    s, _ = make()
    lat = (("message.timestamp.type", "LogAppendTime"),)
    results, events = s.create_topics([m.TopicSpec("stamped", 1, 3, lat), m.TopicSpec("plain", 1, 3)])
    assert results == [("stamped", m.NONE, ""), ("plain", m.NONE, "")]
    assert [e.get("configs") for e in events if e["event"] == "topic-created"] == [
        {"message.timestamp.type": "LogAppendTime"}, None]
    md = m.Metadata.from_wire(s.metadata().to_wire())             # what the brokers receive
    assert md.topic_configs("stamped") == {"message.timestamp.type": "LogAppendTime"}
    assert md.topic_configs("plain") == {} and "plain" not in s.metadata().to_wire()["topic_configs"]
    again, _ = s.create_topics([m.TopicSpec("stamped", 1, 3, lat), m.TopicSpec("stamped", 1, 3)])
    assert again[0] == ("stamped", m.NONE, "")                   # the same topic again: idempotent
    assert again[1][1] == m.TOPIC_ALREADY_EXISTS and "configs {'message.timestamp.type'" in again[1][2]
    restored = ControllerState.from_dict(s.to_dict(), now_ms=0)
    assert restored.topic_configs == {"stamped": {"message.timestamp.type": "LogAppendTime"}}
    assert m.TopicSpec.parse(m.TopicSpec("stamped", 1, 3, lat).to_wire()) == m.TopicSpec("stamped", 1, 3, lat)
    for configs, message in (({"retention.ms": "1"}, "'configs': unsupported topic config 'retention.ms' "
                                                     "(supported: message.timestamp.type)"),
                             ({"message.timestamp.type": "Now"}, "'configs': message.timestamp.type must be "
                                                                 "one of CreateTime, LogAppendTime, got 'Now'"),
                             ([1], "'configs': must be a map of topic configs, got [1]")):
        try:
            m.TopicSpec.parse({"name": "x", "partitions": 1, "replication_factor": 1, "configs": configs})
        except m.BadRequest as exc:
            assert str(exc) == message
        else:
            raise AssertionError(f"{configs} was accepted")
