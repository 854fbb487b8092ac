"""Stories of the checker's examples (reports/story.py) from a small hand-written run, and in report.html.

The run: n1 leads partition 0 (epoch 0) and n3 partition 1 (epoch 0). At 2.0 s a partition cuts n1 off
from c0, n2 and n3 (fault 1, healed at 5.0 s); n1 still acknowledges value 7 at offset 3 at 2.5 s; the
controller makes n2 leader of partition 0 in epoch 1 at 3.0 s, and n2 writes 20 at offset 3. When the
partition heals, n1 truncates from 5 to 3 (HW truncation), so 7 is lost. At 6.0 s n3 is killed (fault 2,
restarted at 7.0 s); n2 becomes leader of partition 1 in epoch 1 at 6.1 s; n3 truncates partition 1 from 3
to 2 at 7.2 s; n1 still holds 30 (epoch 0) at offset 2 where n2 and n3 hold 31 (epoch 1): divergence.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reports import write_report
from reports.anomalies import story_html
from reports.story import Segment, Story, load_timeline, tell

START = 1_763_765_101_000_000_000
S = 1_000_000_000

LOST = {"partition": 0, "value": 7, "offset": 3, "epoch": 0, "index": 3, "time": 2_500_000_000, "process": "0",
        "invoke_index": 2, "final_values_at_offset": [20],
        "replicas": {n: {"value_at": None, "at_offset": {"value": 20, "epoch": 1, "crc_ok": True}}
                     for n in ("n1", "n2", "n3")}}
DIVERGENCE = {"partition": 1, "offset": 2, "committed": False,
              "replicas": {"n1": {"record": {"value": 30, "epoch": 0, "crc_ok": True}, "hw": 2, "leo": 3},
                           "n2": {"record": {"value": 31, "epoch": 1, "crc_ok": True}, "hw": 3, "leo": 3},
                           "n3": {"record": {"value": 31, "epoch": 1, "crc_ok": True}, "hw": 3, "leo": 3}}}

LOST_STORY = ("Value 7 was acknowledged at offset 3 in epoch 0 (leader n1) at 2.500 s, during a partition "
              "cutting n1 off from c0, n2, n3 (2.00–5.00 s); the ISR was n1, n2, n3. Then n2 became leader in "
              "epoch 1 at 3.00 s and wrote 20 at offset 3. n1 truncated its log from 5 to 3 at 5.20 s (hw), "
              "after the partition healed at 5.00 s. No replica holds 7.")
LOST_LINKS = ["#leader-p0-e0", "#fault-1", "#leader-p0-e1", "#fault-1"]
DIVERGENCE_STORY = ("At offset 2 of partition 1, n1 holds 30 (epoch 0) while n2, n3 hold 31 (epoch 1), above "
                    "some replica's HW. n3 became leader in epoch 0 at 0.05 s; n2 became leader in epoch 1 at "
                    "6.10 s, during the kill of n3 (6.00–7.00 s). n3 truncated its log from 3 to 2 at 7.20 s "
                    "(leader-epoch), after its restart at 7.00 s.")
DIVERGENCE_LINKS = ["#leader-p1-e0", "#leader-p1-e1", "#fault-2", "#fault-2"]


def _jsonl(path: Path, objs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))


def _events(run: Path, node: str, events: list[tuple[float, str, dict]]) -> None:
    _jsonl(run / "nodes" / node / "broker.log",
           [{"ts": START + int(round(t * S)), "node": node, "event": e, **f} for t, e, f in events])


def _nemesis(index: int, t: float, type_: str, f: str, fault: str, phase: str, fid: int, targets: list,
             **extra) -> dict:
    return {"index": index, "time": int(round(t * S)), "process": "nemesis", "type": type_, "f": f,
            "value": {"fault": fault, "phase": phase, "id": fid, "targets": targets, **extra}}


CUT = {"groups": [["n1"], ["c0", "n2", "n3"]],
       "drops": [["n1", "c0"], ["n1", "n2"], ["n1", "n3"], ["c0", "n1"], ["n2", "n1"], ["n3", "n1"]]}


def make_story_run(root: Path, examples: dict[str, list[dict]] | None = None) -> Path:
    run = root / "story" / "20261121T224501Z"
    run.mkdir(parents=True)
    (run / "test.json").write_text(json.dumps({"name": "story", "run_id": "story-1", "start_wall_ns": START,
                                               "seed": 1, "config": {}}))
    nem = [
        _nemesis(4, 2.0, "invoke", "partition", "partition", "start", 1, ["n1"], **CUT),
        _nemesis(5, 2.0, "info", "partition", "partition", "start", 1, ["n1"], **CUT),
        _nemesis(8, 5.0, "invoke", "heal", "partition", "stop", 1, ["n1"], **CUT),
        _nemesis(9, 5.0, "info", "heal", "partition", "stop", 1, ["n1"], **CUT),
        _nemesis(10, 6.0, "invoke", "kill", "kill", "start", 2, ["n3"]),
        _nemesis(11, 6.0, "info", "kill", "kill", "start", 2, ["n3"]),
        _nemesis(14, 7.0, "invoke", "restart", "kill", "stop", 2, ["n3"]),
        _nemesis(15, 7.0, "info", "restart", "kill", "stop", 2, ["n3"]),
    ]

    def op(i, t, p, type_, f, value):
        return {"index": i, "time": int(round(t * S)), "process": p, "type": type_, "f": f, "value": value}

    ops = [
        op(0, 0.1, 0, "invoke", "send", {"partition": 1, "value": 30}),
        op(1, 0.2, 0, "ok", "send", {"partition": 1, "value": 30, "offset": 2, "epoch": 0}),
        op(2, 2.4, 0, "invoke", "send", {"partition": 0, "value": 7}),
        op(3, 2.5, 0, "ok", "send", {"partition": 0, "value": 7, "offset": 3, "epoch": 0}),
        nem[0], nem[1],
        op(6, 3.4, 1, "invoke", "send", {"partition": 0, "value": 20}),
        op(7, 3.5, 1, "ok", "send", {"partition": 0, "value": 20, "offset": 3, "epoch": 1}),
        nem[2], nem[3], nem[4], nem[5],
        op(12, 6.5, 1, "invoke", "send", {"partition": 1, "value": 31}),
        op(13, 6.6, 1, "ok", "send", {"partition": 1, "value": 31, "offset": 2, "epoch": 1}),
        nem[6], nem[7],
    ]
    ops.sort(key=lambda o: o["index"])
    _jsonl(run / "history.jsonl", ops)
    _jsonl(run / "nemesis.jsonl", nem)
    _events(run, "c0", [
        (0.0, "start", {"version": 0}),
        (0.04, "topic-created", {"topic": "hw", "partitions": 2, "replication_factor": 3}),
        (0.05, "leader-change", {"topic": "hw", "partition": 0, "leader": 1, "epoch": 0, "isr": [1, 2, 3]}),
        (0.05, "leader-change", {"topic": "hw", "partition": 1, "leader": 3, "epoch": 0, "isr": [3, 1, 2]}),
        (3.0, "fenced", {"broker": 1, "why": "no heartbeat"}),
        (3.0, "isr-change", {"topic": "hw", "partition": 0, "isr": [2, 3], "version": 1}),
        (3.0, "leader-change", {"topic": "hw", "partition": 0, "leader": 2, "epoch": 1, "isr": [2, 3]}),
        (6.1, "isr-change", {"topic": "hw", "partition": 1, "isr": [2, 1], "version": 1}),
        (6.1, "leader-change", {"topic": "hw", "partition": 1, "leader": 2, "epoch": 1, "isr": [2, 1]}),
        # partition 2 lives on n3 alone: killed, it leaves the partition without a leader
        (0.05, "leader-change", {"topic": "hw", "partition": 2, "leader": 3, "epoch": 0, "isr": [3]}),
        (6.05, "leader-change", {"topic": "hw", "partition": 2, "leader": None, "epoch": 1, "isr": [3]}),
    ])
    _events(run, "n1", [
        (0.01, "start", {"truncation": "hw"}),
        (0.06, "leader-change", {"partition": 0, "leader": 1, "epoch": 0, "isr": [1, 2, 3]}),
        (5.2, "truncate", {"partition": 0, "from": 5, "to": 3, "why": "hw"}),
    ])
    _events(run, "n2", [(0.01, "start", {"truncation": "hw"})])
    _events(run, "n3", [
        (0.01, "start", {"truncation": "hw"}),
        (7.1, "start", {"truncation": "hw"}),
        (7.2, "truncate", {"partition": 1, "from": 3, "to": 2, "why": "leader-epoch"}),
    ])
    if examples is None:
        examples = {"lost-write": [LOST], "divergence": [DIVERGENCE]}
    anomalies = {k: {"count": len(v), "fails_run": True, "examples": v} for k, v in examples.items()}
    (run / "results.json").write_text(json.dumps({"valid": False, "anomalies": anomalies}))
    return run


@pytest.fixture
def run(tmp_path):
    return make_story_run(tmp_path)


def test_lost_write_and_divergence_stories(run):
    tl = load_timeline(run)
    lost = tell("lost-write", LOST, tl)
    assert lost.text == LOST_STORY
    assert lost.links == LOST_LINKS
    div = tell("divergence", DIVERGENCE, tl)
    assert div.text == DIVERGENCE_STORY
    assert div.links == DIVERGENCE_LINKS
    # the linked text is the phrase it names
    assert [s.text for s in lost.segments if s.href] == [
        "leader n1", "a partition cutting n1 off from c0, n2, n3 (2.00–5.00 s)",
        "n2 became leader in epoch 1 at 3.00 s", "the partition healed at 5.00 s"]


def test_timeline_reads_faults_leaders_and_truncations(run):
    tl = load_timeline(run)
    assert [(f.id, f.fault, f.targets, f.start_s, f.stop_s) for f in tl.faults] == [
        (1, "partition", ["n1"], 2.0, 5.0), (2, "kill", ["n3"], 6.0, 7.0)]
    assert [(lc.t, lc.leader, lc.epoch) for lc in tl.partitions[0].leaders] == [(0.05, "n1", 0), (3.0, "n2", 1)]
    assert tl.isr_at(0, 2.5) == ["n1", "n2", "n3"] and tl.isr_at(0, 3.5) == ["n2", "n3"]
    assert [(t.node, t.from_offset, t.to_offset) for t in tl.truncations_of(1, 2, 0.0)] == [("n3", 3, 2)]
    assert tl.truncations_of(1, 3, 0.0) == []  # offset 3 was not cut by truncating from 3


def test_other_kinds(run):
    tl = load_timeline(run)
    inconsistent = {"partition": 0, "offset": 3, "values": [7, 20], "index": 3,
                    "observations": [{"source": "send", "value": 7, "index": 3, "time": 2_500_000_000, "process": "0"},
                                     {"source": "send", "value": 20, "index": 7, "time": 3_500_000_000, "process": "1"},
                                     {"source": "final-read", "value": 20, "index": 30, "time": 9_000_000_000}],
                    "replicas": {n: {"value": 20, "epoch": 1, "crc_ok": True} for n in ("n1", "n2", "n3")}}
    assert tell("inconsistent-offset", inconsistent, tl).text == (
        "Offset 3 of partition 0 showed 2 values: 7 acknowledged at 2.500 s; 20 acknowledged at 3.500 s. "
        "In between ran a partition n1 | c0, n2, n3 (2.00–5.00 s), and n2 became leader in epoch 1 at 3.00 s. "
        "Every replica now holds 20 there (epoch 1).")
    dirty = {"partition": 0, "value": 7, "offset": 3, "index": 20, "time": 2_700_000_000, "process": "5",
             "reads": 1, "send": {"type": "ok", "index": 3, "offset": 3},
             "replicas": {n: {"value_at": None} for n in ("n1", "n2", "n3")}}
    story = tell("dirty-read", dirty, tl)
    assert story.text == (
        "A poll read 7 at offset 3 at 2.700 s, when n1 led partition 0 in epoch 0, during a partition cutting "
        "n1 off from c0, n2, n3 (2.00–5.00 s). Its send was acknowledged at offset 3. Later n2 became leader "
        "in epoch 1 at 3.00 s. n1 truncated its log from 5 to 3 at 5.20 s (hw), after the partition healed at "
        "5.00 s. No replica holds 7 now.")
    assert story.links == ["#leader-p0-e0", "#fault-1", "#leader-p0-e1", "#fault-1"]
    send = {"partition": 0, "process": "0", "index": 7,
            "earlier": {"index": 3, "time": 2_500_000_000, "value": 7, "offset": 3, "epoch": 0},
            "later": {"index": 7, "time": 3_500_000_000, "value": 20, "offset": 3, "epoch": 1}}
    assert tell("nonmonotonic-send", send, tl).text == (
        "On partition 0, process 0 had 7 acknowledged at offset 3 in epoch 0 (leader n1) at 2.500 s, then 20 "
        "at the lower offset 3 in epoch 1 (leader n2) at 3.500 s. In between ran a partition n1 | c0, n2, n3 "
        "(2.00–5.00 s), and n2 became leader in epoch 1 at 3.00 s.")
    skip = {"partition": 1, "process": "4", "index": 40, "time": 6_800_000_000, "offset": 5, "value": 50,
            "previous": {"kind": "read", "index": 20, "time": 5_500_000_000, "offset": 2, "value": 30},
            "skipped": [{"offset": 3, "value": 40}, {"offset": 4, "value": None}]}
    assert tell("poll-skip", skip, tl).text == (
        "Process 4 read offset 5 (value 50) at 6.800 s right after offset 2 (value 30), read at 5.500 s; "
        "skipped offsets 3 (40), 4. In between ran the kill of n3 (6.00–7.00 s), and n2 became leader in "
        "epoch 1 at 6.10 s.")
    back = {"partition": 1, "process": "4", "index": 41, "time": 7_500_000_000, "offset": 2, "value": 31,
            "previous": {"kind": "read", "index": 40, "time": 6_800_000_000, "offset": 5, "value": 50}}
    assert tell("nonmonotonic-poll", back, tl).text == (
        "Process 4 read offset 2 (value 31) at 7.500 s right after offset 5 (value 50), read at 6.800 s. "
        "In between ran the kill of n3 (6.00–7.00 s). n3 truncated its log from 3 to 2 at 7.20 s "
        "(leader-epoch), after its restart at 7.00 s.")
    hw = {"partition": 0, "epoch": 1, "hw": 3, "index": 50, "time": 3_600_000_000, "process": "6",
          "invoke_index": 49, "f": "poll",
          "previous": {"epoch": 0, "hw": 5, "index": 12, "process": "6", "time": 2_600_000_000}}
    assert tell("hw-regression", hw, tl).text == (
        "A poll by process 6 at 3.600 s saw HW 3 in epoch 1 (leader n2), below HW 5 seen by process 6 at "
        "2.600 s in epoch 0 (leader n1). In between ran a partition n1 | c0, n2, n3 (2.00–5.00 s), and n2 "
        "became leader in epoch 1 at 3.00 s.")
    dup = {"partition": 1, "value": 31, "offsets": [2, 4], "count": 2, "send": None}
    assert tell("duplicate", dup, tl).text == "The duplicate concerns value 31 of partition 1."
    failed = {"partition": 0, "value": 9, "index": 60, "time": 6_500_000_000, "error": "timeout"}
    assert tell("failed-write-present", failed, tl).text == (
        "The failed-write-present concerns value 9 of partition 0; its operation completed at 6.500 s, when n2 "
        "led partition 0 in epoch 1, during the kill of n3 (6.00–7.00 s).")
    assert tell("lost-write", ["not", "an", "object"], tl) is None
    leaderless = {"partition": 2, "value": 5, "index": 70, "time": 6_500_000_000}
    story = tell("aborted-read-like-new-kind", leaderless, tl)
    assert story.text == (
        "The aborted-read-like-new-kind concerns value 5 of partition 2; its operation completed at 6.500 s, when "
        "partition 2 had no leader (epoch 1), during the kill of n3 (6.00–7.00 s).")
    assert story.links == ["#leader-p2-e1", "#fault-2"]
    hw2 = {"partition": 2, "epoch": 1, "hw": 0, "index": 71, "time": 6_600_000_000, "f": "final-read",
           "previous": {"epoch": 0, "hw": 4, "time": 5_500_000_000}}
    assert tell("hw-regression-cross-epoch", hw2, tl).text == (
        "A final read at 6.600 s saw HW 0 in epoch 1, below HW 4 seen at 5.500 s in epoch 0 (leader n3). In "
        "between ran the kill of n3 (6.00–7.00 s), and partition 2 was left without a leader (epoch 1) at 6.05 s.")
    # a replica without a record there, one with a bad CRC; replicas not in the documented form are left out
    div = {"partition": 1, "offset": 2, "committed": True,
           "replicas": {"n1": {"record": None, "hw": 3, "leo": 2},
                        "n2": {"record": {"value": 31, "epoch": 1, "crc_ok": False}, "hw": 3, "leo": 3},
                        "n3": 31}}
    assert tell("divergence", div, tl).text == (
        "At offset 2 of partition 1, n1 holds no record while n2 holds 31 (epoch 1, bad CRC), below the HW of "
        "replicas that disagree. n2 became leader in epoch 1 at 6.10 s, during the kill of n3 (6.00–7.00 s). "
        "n3 truncated its log from 3 to 2 at 7.20 s (leader-epoch), after its restart at 7.00 s.")
    assert tell("divergence", {"partition": 0, "offset": 7, "committed": False, "replicas": {"n1": 10, "n3": 7}},
                tl).text == "At offset 7 of partition 0 the replicas disagree, above some replica's HW."


# 20 (process 1, invoked at 3.4 s) was acknowledged at offset 3, the offset 7 had been acknowledged at before
REALTIME = {"partition": 0, "offset": 3, "value": 20, "epoch": 1, "index": 7, "time": 3_500_000_000, "process": "1",
            "invoke_index": 6, "invoke_time": 3_400_000_000,
            "previous": {"index": 3, "time": 2_500_000_000, "process": "0", "value": 7, "offset": 3, "epoch": 0}}
REALTIME_STORY = ("On partition 0, process 0 had 7 acknowledged at offset 3 in epoch 0 (leader n1) at 2.500 s; "
                  "process 1 then sent 20 (invoked at 3.400 s) and had it acknowledged at the same offset 3 in "
                  "epoch 1 (leader n2) at 3.500 s. In between ran a partition n1 | c0, n2, n3 (2.00–5.00 s), and "
                  "n2 became leader in epoch 1 at 3.00 s.")


def test_realtime_order_story(run):
    tl = load_timeline(run)
    story = tell("realtime-order", REALTIME, tl)
    assert story.text == REALTIME_STORY
    assert story.links == ["#leader-p0-e0", "#leader-p0-e1", "#fault-1", "#leader-p0-e1"]
    lower = {**REALTIME, "offset": 2, "previous": {**REALTIME["previous"], "process": None}}
    del lower["invoke_time"]
    assert tell("realtime-order", lower, tl).text.startswith(
        "On partition 0, a producer had 7 acknowledged at offset 3 in epoch 0 (leader n1) at 2.500 s; process 1 "
        "then sent 20 and had it acknowledged at the lower offset 2 in epoch 1 (leader n2) at 3.500 s. ")
    # without the earlier send only B is told
    assert tell("realtime-order", {**REALTIME, "previous": None}, tl).text == (
        "On partition 0, process 1 sent 20 (invoked at 3.400 s) and had it acknowledged at offset 3 in "
        "epoch 1 (leader n2) at 3.500 s.")


def test_report_shows_the_realtime_order_story(tmp_path):
    html = write_report(make_story_run(tmp_path, {"realtime-order": [REALTIME]})).read_text()
    assert 'id="kind-realtime-order"' in html and 'id="ex-realtime-order-0"' in html
    stories = re.findall(r'<tr class="story" data-example="\d+"><td class="n"></td><td colspan="\d+">'
                         r'<p class="story">(.*?)</p></td></tr>', html)
    assert [re.sub(r"<[^>]+>", "", x) for x in stories] == [REALTIME_STORY]
    row = html[html.index('id="ex-realtime-order-0"'):]
    row = re.sub(r"<[^>]+>", "|", row[:row.index("</tr>")])
    assert "|3.500 s|" in row and "|3.400 s|" in row and "|time |2.500 s" in row   # time, invoke_time, previous


def test_missing_broker_logs_give_shorter_stories(run):
    import shutil

    shutil.rmtree(run / "nodes")
    tl = load_timeline(run)
    lost = tell("lost-write", LOST, tl)
    assert lost.text == ("Value 7 was acknowledged at offset 3 in epoch 0 at 2.500 s, during a partition "
                         "n1 | c0, n2, n3 (2.00–5.00 s). Offset 3 now holds 20 (epoch 1); no replica holds 7.")
    assert lost.links == ["#fault-1"]
    assert tell("divergence", DIVERGENCE, tl).text == (
        "At offset 2 of partition 1, n1 holds 30 (epoch 0) while n2, n3 hold 31 (epoch 1), above some replica's HW.")
    (run / "nemesis.jsonl").unlink()
    assert load_timeline(run).faults == []
    assert tell("lost-write", LOST, load_timeline(run)).text == (
        "Value 7 was acknowledged at offset 3 in epoch 0 at 2.500 s. Offset 3 now holds 20 (epoch 1); "
        "no replica holds 7.")


def test_torn_controller_log_and_no_start_time(run):
    c0 = run / "nodes" / "c0" / "broker.log"
    lines = c0.read_bytes().split(b"\n")
    # the controller died writing partition 0's new leader: the lines from there on are gone, the last torn
    cut = next(i for i, line in enumerate(lines) if b'"epoch": 1' in line and b'"partition": 0' in line)
    c0.write_bytes(b"\n".join(lines[:cut]) + b"\n" + lines[cut][:40])
    tl = load_timeline(run)
    lost = tell("lost-write", LOST, tl)
    assert lost.text == ("Value 7 was acknowledged at offset 3 in epoch 0 (leader n1) at 2.500 s, during a "
                         "partition cutting n1 off from c0, n2, n3 (2.00–5.00 s); the ISR was n1, n2, n3. "
                         "n1 truncated its log from 5 to 3 at 5.20 s (hw), after the partition healed at 5.00 s. "
                         "Offset 3 now holds 20 (epoch 1); no replica holds 7.")
    # without test.json's start time broker events have no common clock with the history: only who led
    test = json.loads((run / "test.json").read_text())
    del test["start_wall_ns"]
    (run / "test.json").write_text(json.dumps(test))
    assert tell("lost-write", LOST, load_timeline(run)).text == (
        "Value 7 was acknowledged at offset 3 in epoch 0 (leader n1) at 2.500 s, during a partition cutting n1 "
        "off from c0, n2, n3 (2.00–5.00 s). Offset 3 now holds 20 (epoch 1); no replica holds 7.")


def test_story_html_escapes_text_and_links():
    story = Story([Segment("a <b> & "), Segment("x<y", "#fault-1\"><script>"), Segment(".")])
    assert str(story_html(story)) == (
        'a &lt;b&gt; &amp; <a class="story-link" href="#fault-1&#34;&gt;&lt;script&gt;">x&lt;y</a>.')
    assert str(story_html(None)) == ""


def test_report_shows_stories_with_working_anchors(run):
    html = write_report(run).read_text()
    stories = re.findall(r'<tr class="story" data-example="(\d+)"><td class="n"></td><td colspan="\d+">'
                         r'<p class="story">(.*?)</p></td></tr>', html)
    assert len(stories) == 2
    by_text = {re.sub(r"<[^>]+>", "", s).replace("&#39;", "'"): s for _n, s in stories}
    assert set(by_text) == {LOST_STORY, DIVERGENCE_STORY}
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    for text, links in ((LOST_STORY, LOST_LINKS), (DIVERGENCE_STORY, DIVERGENCE_LINKS)):
        hrefs = re.findall(r'<a class="story-link" href="([^"]+)">', by_text[text])
        assert hrefs == links
        assert all(h[1:] in ids for h in hrefs), [h for h in hrefs if h[1:] not in ids]
    # each story sits right under its example's row
    lost_row = html.index('id="ex-lost-write-0"')
    assert html.index('<tr class="story"', lost_row) < html.index("</tbody>", lost_row)


ODD = [None, True, -1, 2.5, "x<y", [], [1, [2]], {}, {"value": [1]}, {"record": {"value": {"a": 1}}}]
KINDS = ("lost-write", "divergence", "inconsistent-offset", "dirty-read", "aborted-read", "nonmonotonic-send",
         "poll-skip", "nonmonotonic-poll", "hw-regression", "hw-regression-cross-epoch", "duplicate", "realtime-order",
         "new-kind")
FIELDS = ("value", "offset", "epoch", "time", "index", "process", "replicas", "final_values_at_offset",
          "observations", "values", "send", "earlier", "later", "previous", "skipped", "committed", "hw", "f",
          "invoke_time")


def test_examples_of_any_shape_tell_a_story_or_none_never_fail(run):
    import random

    tl = load_timeline(run)
    rng = random.Random(15)
    for _ in range(3000):
        kind = rng.choice(KINDS)
        ex = {"partition": rng.choice([0, 1, 7, "0", None])}
        for name in rng.sample(FIELDS, rng.randint(0, len(FIELDS))):
            ex[name] = rng.choice(ODD + [[rng.choice(ODD)], {"n1": rng.choice(ODD)}, 3_000_000_000])
        story = tell(kind, ex, tl)
        assert isinstance(story, Story) and story.text and all(h.startswith("#") for h in story.links), ex
        story_html(story)


def test_fault_lookups_match_a_plain_scan():
    import random

    from reports.story import Fault, Timeline

    rng = random.Random(7)
    faults = []
    for i in range(300):
        start = rng.uniform(0, 1000)
        stop = None if rng.random() < 0.02 else start + rng.choice([0.0, rng.uniform(0, 5), rng.uniform(0, 200)])
        faults.append(Fault(i, "kill", ["n1"], start, stop))
    tl = Timeline(faults=faults)
    for _ in range(2000):
        a = rng.uniform(-10, 1100)
        b = a + rng.choice([0.0, rng.uniform(0, 30)])
        want = sorted(f.id for f in faults if f.start_s <= b and (f.stop_s is None or f.stop_s >= a))
        assert sorted(f.id for f in tl.faults_between(a, b)) == want
        assert sorted(f.id for f in tl.faults_at(a)) == sorted(f.id for f in faults if f.active_at(a))


KEY_REORDER = {"partition": 0, "key": 7, "value": 21, "offset": 2, "type": "info", "index": 40,
               "time": 3_500_000_000, "invoke_index": 38,
               "previous": {"value": 7, "offset": 3, "index": 30, "time": 2_500_000_000}}


def test_key_reorder_story(run):
    story = tell("key-reorder", KEY_REORDER, load_timeline(run))
    assert story.text == (
        "On partition 0, key 7's value 7 was acknowledged at 2.500 s; then its value 21 was sent (outcome info), "
        "yet the final log holds it at offset 2, below the first one's offset 3. In between ran a partition "
        "n1 | c0, n2, n3 (2.00–5.00 s), and n2 became leader in epoch 1 at 3.00 s.")
