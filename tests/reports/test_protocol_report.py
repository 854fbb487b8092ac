"""Protocol findings (the broker/rules kinds) in the report: a story for every example (who, when, the
leader and the faults then, what, the evidence rows), a mark on its partition's chart, and what the
configuration does not promise said as such."""
from __future__ import annotations

import json
import re
from pathlib import Path

from checkers.check import CheckOptions, check_run
from reports import write_report
from reports.story import NOT_PROMISED, load_timeline, tell
from simulated_runs import RunBuilder
from test_story import START, make_story_run

S = 1_000_000_000
MS = 1_000_000


def make_protocol_run(run_dir: Path) -> Path:
    """An unclean failover of partition 0 and a zombie leader on partition 1, checked (reference engine).

    Partition 0: n1 leads epoch 0. A partition cuts n2 and n3 off (fault 0, 1.0-2.6 s); the controller
    shrinks the ISR to n1, which acknowledges two acks=all produces alone (ack-below-min-isr, promised).
    At 2.0 s the controller elects n3, outside the ISR (election-outside-isr: unclean elections are on, so
    not promised); after the heal n1 follows and cuts its log below its HW (truncate-below-hw, not
    promised with unclean elections either). Partition 1: n2 is elected for epoch 4, and n3 leads epoch 4
    too (epoch-two-leaders, and leader-not-elected at the end)."""
    b = RunBuilder(config={"broker": {"unclean_leader_election": True}}, backend="local", start_wall_ns=START)

    def at(t_s: float) -> None:      # the builder's clock, for the lines and operations that follow
        b.time = max(b.time, int(t_s * S))

    at(0.05)
    c0 = dict(topic="hw", partition=0)
    b.event("c0", "leader-change", **c0, leader=1, epoch=0, isr=[1, 2, 3], version=0)
    b.event("c0", "leader-change", topic="hw", partition=1, leader=2, epoch=4, isr=[2, 3], version=7)
    b.event("n1", "role", partition=0, role="leader", epoch=0)
    for n in ("n2", "n3"):
        b.event(n, "role", partition=0, role="follower", epoch=0)
    b.event("n2", "role", partition=1, role="leader", epoch=4)
    at(0.3)
    for k in range(3):
        b.send(1, 0, 10 + k, offset=k, epoch=0)
        b.event("n1", "hw-change", partition=0, old=k, new=k + 1, leo=k + 1)
        b.event("n1", "ack", partition=0, base=k, last=k, epoch=0, acks=-1, hw=k + 1, isr=[1, 2, 3], min_isr=2)
        b.event("n2", "hw-change", partition=0, old=k, new=k + 1, leo=k + 1)
        b.event("n2", "ack", partition=1, base=k, last=k, epoch=4, acks=-1, hw=k + 1, isr=[2, 3], min_isr=2)
        b.send(2, 1, 20 + k, offset=k, epoch=4)
    at(1.0)
    b.fault("start", fault="partition", targets=("n2", "n3"))
    at(1.3)
    b.event("c0", "isr-change", **c0, isr=[1], version=1)
    for k, t in ((3, 1.5), (4, 1.7)):
        at(t)
        b.send(1, 0, 10 + k, offset=k, epoch=0)
        b.event("n1", "hw-change", partition=0, old=k, new=k + 1, leo=k + 1)
        b.event("n1", "ack", partition=0, base=k, last=k, epoch=0, acks=-1, hw=k + 1, isr=[1], min_isr=2)
    at(2.0)
    b.event("c0", "isr-change", **c0, isr=[3], version=2)
    b.event("c0", "leader-change", **c0, leader=3, epoch=1, isr=[3], version=2)
    b.event("n3", "role", partition=0, role="leader", epoch=1)
    at(2.2)
    b.event("n3", "role", partition=1, role="leader", epoch=4)
    at(2.6)
    b.fault("stop", 0, fault="partition", targets=("n2", "n3"))
    b.event("n1", "role", partition=0, role="follower", epoch=1)
    b.event("n1", "truncate", **c0, **{"from": 5, "to": 3, "why": "leader-epoch"})
    at(3.0)
    b.event("n3", "ack", partition=0, base=3, last=3, epoch=1, acks=1, hw=3, isr=[3], min_isr=2)
    b.send(3, 0, 15, offset=3, epoch=1)
    b.final(0, [10, 11, 12, 15], epoch=1, process=9)
    b.final(1, [20, 21, 22], epoch=4, process=9)
    b.write(run_dir)
    check_run(run_dir, CheckOptions(engine="reference"))
    return run_dir


def _stories(html: str) -> dict[str, str]:
    """example row id -> the text of its story."""
    out = {}
    for m in re.finditer(r'<tr id="(ex-[a-z-]+-\d+)">.*?</tr>\s*<tr class="story"[^>]*>.*?<p class="story">(.*?)</p>',
                         html, re.S):
        out[m.group(1)] = re.sub(r"<[^>]+>", "", m.group(2)).replace("&#39;", "'")
    return out


def test_every_protocol_example_has_a_story_and_a_mark(tmp_path):
    run = make_protocol_run(tmp_path / "run")
    res = json.loads((run / "results.json").read_text())
    found = {k: (a["count"], a["fails_run"]) for k, a in res["anomalies"].items() if a["count"]}
    # the unclean election lost n1's two lone acknowledgements: the black-box kinds see that too
    assert found == {"lost-write": (2, True), "inconsistent-offset": (1, True), "realtime-order": (1, True),
                     "ack-below-min-isr": (2, True), "epoch-two-leaders": (1, True), "leader-not-elected": (1, True),
                     "election-outside-isr": (1, False), "truncate-below-hw": (1, False)}
    html = write_report(run).read_text()
    stories = _stories(html)
    protocol = ["ack-below-min-isr", "election-outside-isr", "truncate-below-hw", "epoch-two-leaders",
                "leader-not-elected"]
    for kind in protocol:
        for n, ex in enumerate(res["anomalies"][kind]["examples"]):
            story = stories[f"ex-{kind}-{n}"]
            assert story.startswith(f"At {ex['time'] / S:.3f} s on partition {ex['partition']}, "), story
            assert ex["detail"] in story and "Evidence: " in story, story
            assert (NOT_PROMISED in story) == (ex["promised"] is False), story
            # its mark on the partition's chart links to the example
            chart = html[html.index(f'id="plot-state-{ex["partition"]}"'):]
            chart = chart[:chart.index("</figure>")]
            assert f'href="#ex-{kind}-{n}"' in chart, kind
    first = stories["ex-ack-below-min-isr-0"]
    assert first == ("At 1.502 s on partition 0, n1 acknowledged offset 3 (acks=all) with ISR [1], below "
                     "min.insync.replicas 2. At that time n1 led partition 0 in epoch 0, during a partition of "
                     "n2, n3 (1.00–2.60 s). Evidence: n1 ack at 1.502 s (epoch=0, base=3, last=3, acks=-1, hw=4, "
                     "isr=[1], min_isr=2).")
    unclean = stories["ex-election-outside-isr-0"]
    assert unclean.startswith("At 2.000 s on partition 0, the controller elected n3 for epoch 1 from ISR [1] "
                              "(c0's log). At that time n3 led partition 0 in epoch 1, during a partition of n2, "
                              "n3 (1.00–2.60 s). Evidence: c0 leader-change at 2.000 s (leader=3, epoch=1, isr=[3], "
                              "version=2). ")
    assert unclean.endswith(NOT_PROMISED)
    # the kind's heading says so too; a promised kind that fails the run does not
    head = html[html.index('id="kind-election-outside-isr"'):]
    assert "not promised by this configuration: reported, not failing" in head[:head.index("</h3>")]
    head = html[html.index('id="kind-ack-below-min-isr"'):]
    assert "not promised" not in head[:head.index("</h3>")]
    assert 'class="pmark soft"' in html and 'class="pmark"' in html and ">rules</text>" in html


# the hand-written run of test_story.py: a partition cuts n1 off (2.0-5.0 s), n2 leads partition 0 in
# epoch 1 from 3.0 s
TWO_LEADERS = {"partition": 0, "node": "n1", "time": 3_200_000_000, "ts": START + 3_200_000_000, "epoch": 1,
               "detail": "n1 and n2 both led epoch 1", "promised": True,
               "evidence": [{"ts": START + 3_050_000_000, "node": "n2", "event": "role", "partition": 0,
                             "role": "leader", "epoch": 1, "time": 3_050_000_000},
                            {"ts": START + 3_200_000_000, "node": "n1", "event": "role", "partition": 0,
                             "role": "leader", "epoch": 1, "time": 3_200_000_000}]}


def test_protocol_story_from_the_timeline(tmp_path):
    tl = load_timeline(make_story_run(tmp_path))
    story = tell("epoch-two-leaders", TWO_LEADERS, tl)
    assert story.text == ("At 3.200 s on partition 0, n1 and n2 both led epoch 1. At that time n2 led partition 0 "
                          "in epoch 1, during a partition n1 | c0, n2, n3 (2.00–5.00 s). Evidence: n2 role "
                          "at 3.050 s (role=leader, epoch=1); n1 role at 3.200 s (role=leader, epoch=1).")
    assert story.links == ["#leader-p0-e1", "#fault-1"]
    # the controller's finding names its log; an evidence leader-change links to its election; the epoch
    # broken is named when another leader held the partition then; not promised, it says so
    ctl = {"partition": 0, "node": "c0", "time": 6_000_000_000, "ts": START + 6_000_000_000, "epoch": 0,
           "detail": "the controller elected n1 in epoch 0, not above the previous epoch 1", "promised": False,
           "evidence": [{"node": "c0", "event": "leader-change", "partition": 0, "leader": 1, "epoch": 0,
                         "isr": [1], "version": 3, "time": 6_000_000_000}]}
    story = tell("epoch-not-increasing", ctl, tl)
    assert story.text == ("At 6.000 s on partition 0, the controller elected n1 in epoch 0, not above the previous "
                          "epoch 1 (c0's log). At that time n2 led partition 0 in epoch 1, during the kill of n3 (6.00–7.00 "
                          "s). The rule was broken in "
                          "epoch 0 (leader n1). Evidence: c0 leader-change at 6.000 s (leader=1, epoch=0, isr=[1], "
                          f"version=3). {NOT_PROMISED}")
    assert story.links == ["#leader-p0-e1", "#fault-2", "#leader-p0-e0", "#leader-p0-e0"]
    # a consumer's read: no node log; without a time or evidence the story is shorter, never wrong
    read = {"partition": 0, "node": "client", "time": None, "ts": 0, "epoch": None,
            "detail": "a poll returned offset 5 with the HW it reported at 3", "promised": True, "evidence": []}
    assert tell("read-uncommitted", read, tl).text == ("On partition 0, a poll returned offset 5 with the HW it "
                                                       "reported at 3.")
    many = dict(TWO_LEADERS, evidence=TWO_LEADERS["evidence"] * 3)
    assert tell("epoch-two-leaders", many, tl).text.endswith("; and 2 more.")


ODD = [None, True, -1, 2.5, "x<y", [], [1, [2]], {}, {"event": [1]}, [{"event": "leader-change", "epoch": "e"}]]


def test_protocol_examples_of_any_shape_tell_a_story_never_fail(tmp_path):
    from rundir.kinds import PROTOCOL_NAMES

    tl = load_timeline(make_story_run(tmp_path))
    for kind in PROTOCOL_NAMES:
        for field in ("partition", "node", "time", "ts", "epoch", "detail", "promised", "evidence"):
            for odd in ODD:
                story = tell(kind, {**TWO_LEADERS, field: odd}, tl)
                assert story is not None and story.text.endswith("."), (kind, field, odd)
        assert tell(kind, {"partition": 0}, tl).text == f"On partition 0, a node broke the rule {kind}."
