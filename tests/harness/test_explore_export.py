"""harness/explore_export.py: a simulated schedule as a scenario file (fast: simulation and parsing only;
the real-process replay is tests/harness/test_e2e_explore_replay.py)."""
from __future__ import annotations

import dataclasses

from simulator.actions import Action
from simulator.explore import Finding, replay
from simulator.world import SimSettings, World
from harness import scenario as scenario_mod
from harness.explore_export import renumbered_for, replay_gaps, to_scenario

HW = SimSettings(truncation="hw", acks=1)


def build(settings, steps) -> list:
    """Apply steps (Actions, or (kind, src, dst) triples naming an in-flight message to deliver)."""
    world = World(settings)
    for s in steps:
        if isinstance(s, tuple):
            s = Action("deliver", msg=next(m.id for m in world.in_flight.values() if (m.kind, m.src, m.dst) == s))
        world.apply(s)
    return world.history


def kip101_case_1() -> list:
    return build(HW, [Action("produce", "n1"), Action("send", "n3"), ("fetch", "n3", "n1"),
                      ("fetch-answer", "n1", "n3"), Action("elect", "n2", arg=0), ("metadata", "c0", "n3"),
                      Action("elect", "n3", arg=0)])


def steps_of(path, mode):
    return [(s.do, {k: v for k, v in s.args.items() if k not in ("timeout", "partition")}, s.modes)
            for s in scenario_mod.load(path, truncation=mode).steps]


def test_kip101_case_1_as_a_scenario(tmp_path):
    found = replay(HW, kip101_case_1(), seed=7, index=3)
    assert found.invariant == "no-acked-loss"
    text = to_scenario(HW, found)
    path = tmp_path / "case.toml"
    path.write_text(text)
    sc = scenario_mod.load(path, truncation="hw")
    assert sc.name == "explore-no-acked-loss-7-3"
    assert sc.expect == {"hw": ["lost-write"], "leader-epoch": []}
    cfg = sc.config
    assert (cfg.cluster.nodes, cfg.topic.partitions, cfg.topic.replication_factor) == (3, 1, 3)
    assert (cfg.broker.min_insync_replicas, cfg.broker.unclean_leader_election, cfg.client.acks) == (1, False, 1)
    assert cfg.broker.replica_lag_time_max_ms == 60000 and cfg.checker.engine == "reference"
    gates = [("n1", "n2"), ("n1", "n3"), ("n2", "n1"), ("n2", "n3"), ("n3", "n1"), ("n3", "n2")]
    assert steps_of(path, "hw") == [
        ("wait", {"leader": "n1", "isr": ["n1", "n2", "n3"]}, None),
        ("partition", {"drop": gates}, None),
        ("produce", {"count": 1, "expect": "ok", "acks": 1, "client": "native"}, None),
        ("wait", {"node": "n1", "leo": 1}, None),
        ("heal", {"drop": [("n3", "n1"), ("n1", "n3")]}, None),
        ("wait", {"node": "n3", "leo": 1, "node_hw": 0}, None),
        ("partition", {"drop": [("n3", "n1"), ("n1", "n3")]}, None),
        ("elect", {"node": "n2", "unclean": False}, None),
        ("wait", {"leader": "n2", "isr": ["n1", "n2", "n3"]}, None),
        # n3 follows n2: hw truncation cuts v1 at once; leader-epoch keeps it (its question is not answered)
        ("wait", {"node": "n3", "leo": 0, "node_hw": 0}, ("hw",)),
        ("wait", {"node": "n3", "leo": 1, "node_hw": 0}, ("leader-epoch",)),
        ("elect", {"node": "n3", "unclean": False}, None),
        ("wait", {"leader": "n3", "isr": ["n1", "n2", "n3"]}, None),
    ]
    assert scenario_mod.load(path, truncation="leader-epoch").expect == sc.expect
    lines = text.splitlines()
    assert "# sim 1: n1 appends v1 (acks=1): acknowledged at offset 0" in lines
    assert ("# sim: send has no real-process step: the real follower sends its fetches on its own, gated by "
            "the partitions") in lines
    assert ("# sim: delivering a metadata message has no real-process step: the real brokers exchange it on "
            "their own") in lines
    assert "# in leader-epoch mode the simulated replay of the same schedule holds no-acked-loss" in lines
    assert not any("NOT FAITHFUL" in line for line in lines)


def test_node_and_link_events_map_to_their_steps(tmp_path):
    settings = SimSettings(truncation="hw", acks=1, flush="never")
    history = build(settings, [
        Action("produce", "n1"), Action("cut", "n2", "c0"), Action("advance", arg=100), Action("heal", "n2", "c0"),
        Action("flush", "n1"), Action("crash", "n3"), Action("restart", "n3"), Action("produce", "n1"),
        Action("power-loss", "n1"), Action("cut", "n2", "n3"), Action("heartbeat", "n2"),
    ])
    finding = Finding("hw-within-leo", "made up for the mapping", "s", 0, history)
    text = to_scenario(settings, finding, name="mapping")
    path = tmp_path / "m.toml"
    path.write_text(text)
    sc = scenario_mod.load(path, truncation="hw")
    assert sc.expect == {"hw": [], "leader-epoch": []}      # no checker kind for hw-within-leo
    assert sc.config.broker.flush == "never" and sc.config.broker.power_loss is True
    real = [(s.do, s.args.get("node"), s.args.get("drop")) for s in sc.steps if s.do not in ("wait",)]
    assert real == [
        ("partition", None, [("n1", "n2"), ("n1", "n3"), ("n2", "n1"), ("n2", "n3"), ("n3", "n1"), ("n3", "n2")]),
        ("produce", None, None),
        ("partition", None, [("n2", "c0")]),
        ("heal", None, [("n2", "c0")]),
        ("flush", "n1", None),
        ("kill", "n3", None),
        ("restart", "n3", None),
        ("produce", None, None),
        ("power-loss", "n1", None),
        ("restart", "n1", None),          # settle: restarted while the links are still gated
    ]
    lines = text.splitlines()
    assert "# the invariant hw-within-leo has no checker anomaly kind: nothing is expected" in lines
    assert "# sim: advance has no real-process step: real time passes; the waits cover the timers" in lines
    assert ("# the real link n2 -> n3 is gated: it opens only for the simulated fetch answers, and stays shut "
            "while this cut lasts") in lines
    assert "# sim: heartbeat has no real-process step: the real brokers heartbeat on their own" in lines


def test_a_write_at_a_stale_leader_is_marked_not_faithful():
    # n2 is elected but n1 never hears of it: n1 still takes v1 as leader of epoch 0
    history = build(HW, [Action("elect", "n2", arg=0), Action("produce", "n1")])
    assert replay_gaps(HW, history) == [
        "event 2: n1 takes a write as leader of epoch 0 while the controller's leader is n2 (epoch 1)"]
    assert replay_gaps(HW, kip101_case_1()) == []
    text = to_scenario(HW, Finding("no-acked-loss", "x", 1, 2, history))
    assert ("# NOT FAITHFUL: event 2: n1 takes a write as leader of epoch 0 while the controller's leader is n2 "
            "(epoch 1)") in text.splitlines()
    assert "# sim: n1 believes it leads; the real client sends to the controller's leader n2" in text


def test_renumbered_for_the_other_mode():
    le = dataclasses.replace(HW, truncation="leader-epoch")
    case = kip101_case_1()
    same = renumbered_for(HW, case, le)
    assert same == [dataclasses.replace(a, text="") for a in case]     # the same ids in both modes here
    assert replay(le, same) is None
    # a deliver of a message the other mode never sends: n2 answers the epoch question only in leader-epoch
    le_only = build(le, [Action("produce", "n1"), Action("send", "n3"), ("fetch", "n3", "n1"),
                         ("fetch-answer", "n1", "n3"), Action("elect", "n2", arg=0), ("metadata", "c0", "n3"),
                         Action("send", "n3"), ("epoch", "n3", "n2")])
    assert str(le_only[-1]).startswith("deliver #6: n3's OffsetsForLeaderEpoch (where does epoch 0 end?) reaches n2")
    assert renumbered_for(le, le_only, HW) is None


def test_an_expired_session_becomes_a_cut_to_the_controller(tmp_path):
    """The simulation fences n2 and n3 because it delivered none of their heartbeats; the real brokers
    heartbeat on their own, so the file cuts them from c0 until the simulation delivers n2's next one."""
    history = build(HW, [Action("advance", arg=3001), Action("heartbeat", "n1"), ("heartbeat", "n1", "c0"),
                         Action("expire"), Action("heartbeat", "n2"), ("heartbeat", "n2", "c0")])
    assert str(history[3]) == "the controller fences n2, n3 (no heartbeat for over 3000 ms)"
    path = tmp_path / "f.toml"
    path.write_text(to_scenario(HW, Finding("hw-within-leo", "made up", 1, 0, history), name="fencing"))
    assert steps_of(path, "hw")[2:] == [
        ("partition", {"drop": [("n2", "c0")]}, None),
        ("wait", {"fenced": "n2"}, None),
        ("partition", {"drop": [("n3", "c0")]}, None),
        ("wait", {"fenced": "n3"}, None),
        ("wait", {"leader": "n1", "isr": ["n1"]}, None),
        ("heal", {"drop": [("n2", "c0")]}, None),
        ("wait", {"alive": "n2"}, None),
    ]


ALL = SimSettings(truncation="hw", acks=-1, min_insync_replicas=1)


def acks_all_loss() -> list:
    """v1 (acks=all) waits for the HW while n3 and then n2 fetch it; n2's next fetch lets n1 acknowledge
    it (sim 11); then n1 and n2 are killed. Settling, n3 first hears that n2 leads epoch 1 and cuts v1
    to its HW (hw truncation), then leads epoch 2 without it."""
    return build(ALL, [Action("produce", "n1"), Action("send", "n3"), ("fetch", "n3", "n1"),
                       ("fetch-answer", "n1", "n3"), Action("send", "n2"), Action("send", "n3"),
                       ("fetch", "n3", "n1"), ("fetch", "n2", "n1"), ("fetch-answer", "n1", "n2"),
                       Action("send", "n2"), ("fetch", "n2", "n1"), Action("crash", "n1"), Action("crash", "n2")])


def test_an_acks_all_write_answered_later_is_a_produce_that_does_not_wait(tmp_path):
    history = acks_all_loss()
    found = replay(ALL, history, seed=2, index=683)
    assert found.invariant == "no-acked-loss"
    assert replay_gaps(ALL, history) == []                   # answered within the schedule: faithful
    text = to_scenario(ALL, found)
    path = tmp_path / "all.toml"
    path.write_text(text)
    sc = scenario_mod.load(path, truncation="hw")
    assert sc.expect == {"hw": ["lost-write"], "leader-epoch": []} and sc.config.client.acks == "all"
    gates = [("n1", "n2"), ("n1", "n3"), ("n2", "n1"), ("n2", "n3"), ("n3", "n1"), ("n3", "n2")]
    assert steps_of(path, "hw") == [
        ("wait", {"leader": "n1", "isr": ["n1", "n2", "n3"]}, None),
        ("partition", {"drop": gates}, None),
        ("produce", {"count": 1, "expect": "ok", "wait": False, "acks": "all", "client": "native"}, None),
        ("wait", {"node": "n1", "leo": 1}, None),
        ("heal", {"drop": [("n3", "n1"), ("n1", "n3")]}, None),
        ("wait", {"node": "n3", "leo": 1, "node_hw": 0}, None),
        ("partition", {"drop": [("n3", "n1"), ("n1", "n3")]}, None),
        ("heal", {"drop": [("n2", "n1"), ("n1", "n2")]}, None),
        ("wait", {"node": "n2", "leo": 1, "node_hw": 0}, None),
        ("partition", {"drop": [("n2", "n1"), ("n1", "n2")]}, None),
        ("kill", {"node": "n1"}, None),
        ("kill", {"node": "n2"}, None),
        ("await", {}, None),
        ("restart", {"node": "n1"}, None),
        ("restart", {"node": "n2"}, None),
        ("wait", {"leader": "n3"}, None),
    ]
    produce = next(s for s in sc.steps if s.do == "produce")
    assert produce.args["timeout"] == 25 and next(s for s in sc.steps if s.do == "await").args["timeout"] == 30
    lines = text.splitlines()
    assert "# sim: v1 waits for the HW; sim 11 answers it: acked" in lines
    assert not any("NOT FAITHFUL" in line for line in lines)


def test_an_acks_all_write_still_waiting_at_the_end_is_marked_not_faithful(tmp_path):
    history = acks_all_loss()[:3]
    assert replay_gaps(ALL, history) == [
        "event 1: the acks=all write v1 still waits for the HW when the schedule ends (the simulation's settle() "
        "may answer it; the real one is awaited before the final phase heals and times out)"]
    text = to_scenario(ALL, Finding("hw-within-leo", "made up", 1, 0, history), name="waiting")
    lines = text.splitlines()
    assert "# sim: v1 waits for the HW; no event of the schedule answers it" in lines
    path = tmp_path / "w.toml"
    path.write_text(text)
    assert [(s.do, s.args.get("expect"), s.args.get("wait")) for s in scenario_mod.load(path).steps
            if s.do in ("produce", "await")] == [("produce", "any", False), ("await", None, None)]
    assert any(line.startswith("# NOT FAITHFUL: event 1: the acks=all write v1 still waits") for line in lines)
