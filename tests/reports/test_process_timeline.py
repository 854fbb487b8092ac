"""The per-process timeline's data (reports/process_timeline.py): known answers for a hand-written history
(bars, lanes, outcomes, open operations, fault windows), the byte format, and the merge rule at its limit."""
from __future__ import annotations

import base64
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from report_fixtures import make_run

from reports.history_scan import scan_history
from reports.process_timeline import Bar, ProcessOps, decode, encode, page_data
from reports.render import render_report
from reports.load import load_run

MS = 1_000_000
S = 1_000_000_000


def write_history(path, ops):
    path.write_text("".join(json.dumps({"index": i, **op}) + "\n" for i, op in enumerate(ops)))
    return path


def op(t_ms, process, type_, f, value=None, error=None):
    out = {"time": int(t_ms * MS), "process": process, "type": type_, "f": f, "value": value or {}}
    if error is not None:
        out["error"] = error
    return out


HAND = [
    op(100, 0, "invoke", "send", {"partition": 0, "value": 1}),                                    # 0
    op(105, 1, "invoke", "poll", {"partition": 0, "offset": 0}),                                   # 1
    op(110, 0, "ok", "send", {"partition": 0, "value": 1, "offset": 0, "epoch": 0}),               # 2
    op(200, "nemesis", "invoke", "kill", {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"]}),
    op(210, "nemesis", "info", "kill", {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"],
                                        "detail": "SIGKILL pid 7"}),                               # 4
    op(300, 1, "ok", "poll", {"partition": 0, "offset": 0, "records": [[0, 1, 0]], "hw": 1, "epoch": 0}),
    op(400, 0, "invoke", "send", {"partition": 0, "value": 2}),                                    # 6
    op(900, 0, "info", "send", {"partition": 0, "value": 2}, error="timeout"),                     # 7
    op(1000, 7, "invoke", "send", {"partition": 0, "value": 3}),                                   # 8
    op(1050, 7, "fail", "send", {"partition": 0, "value": 3}, error="NOT_LEADER"),                 # 9
    op(1100, 1, "invoke", "poll", {"partition": 0, "offset": 1}),                                  # 10
    op(1500, "nemesis", "invoke", "restart", {"fault": "kill", "phase": "stop", "id": 1, "targets": ["n1"]}),
    op(1510, "nemesis", "info", "restart", {"fault": "kill", "phase": "stop", "id": 1, "targets": ["n1"]}),
    op(1600, 7, "invoke", "send", {"partition": 0, "value": 4}),                                   # 13
    op(2000, "harness", "info", "final-state", {"partition": 0, "recovered": True}),               # 14
]

EXPECTED = {
    0: [Bar(100 * MS, 110 * MS, "ok", "send", 0, 2, 1, {"partition": 0, "value": 1, "offset": 0, "epoch": 0}),
        Bar(400 * MS, 900 * MS, "info", "send", 6, 7, 1, {"partition": 0, "value": 2, "error": "timeout"})],
    1: [Bar(105 * MS, 300 * MS, "ok", "poll", 1, 5, 1, {"partition": 0, "offset": 0, "records": 1, "hw": 1, "epoch": 0}),
        Bar(1100 * MS, 2000 * MS, "open", "poll", 10, None, 1, {"partition": 0, "offset": 1})],
    7: [Bar(1000 * MS, 1050 * MS, "fail", "send", 8, 9, 1, {"partition": 0, "value": 3, "error": "NOT_LEADER"}),
        Bar(1600 * MS, 2000 * MS, "open", "send", 13, None, 1, {"partition": 0, "value": 4})],
}


def scan(tmp_path, ops, **kw):
    collector = ProcessOps(**kw)
    h = scan_history(write_history(tmp_path / "history.jsonl", ops), ops=collector)
    return h, collector


def test_hand_written_history_gives_exact_bars_lanes_and_faults(tmp_path):
    h, ops = scan(tmp_path, HAND, pinned={9, 14})
    assert ops.processes() == [0, 1, 7]  # client processes only, by id: not the nemesis, not the harness
    assert {p: ops.bars_of(p) for p in ops.processes()} == EXPECTED
    assert ops.ops == 6 and ops.bars == 6 and not ops.merged
    assert ops.end_ns == 2000 * MS  # open operations run to the history's last line
    assert ops.found == {8, 9}      # 14 is pinned too, but it is the harness's, not on the timeline
    data = page_data(ops, h.faults, {0: "fault-1"})
    meta = data.meta
    assert meta["lanes"] == [0, 1, 7]
    assert meta["end"] == 2_000_000 and meta["ops"] == 6 and meta["bars"] == 6 and meta["single"] == 6
    assert meta["runs"] == 0 and meta["slot_us"] == 0 and data.note == ""
    # the same windows the latency timeline shades (history_scan's), in microseconds, with their anchor
    assert meta["faults"] == [{"start": 210_000, "stop": 1_510_000, "fault": "kill", "label": "kill n1",
                               "open": False, "detail": "SIGKILL pid 7", "anchor": "fault-1"}]
    assert meta["fs"] == ["send", "poll"] and meta["errors"] == ["timeout", "NOT_LEADER"]
    # the embedded bytes decode to the same bars
    raw = base64.b64decode(data.ops_b64)
    assert decode(raw, meta["lanes"], meta["fs"], meta["errors"]) == EXPECTED
    assert data.embedded_bytes == len(data.ops_b64) == 4 * -(-len(raw) // 3)


def test_a_fault_never_stopped_is_open_to_the_end(tmp_path):
    ops = HAND[:11] + [op(1600, 7, "invoke", "send", {"partition": 0, "value": 4}),
                       op(2500, 7, "ok", "send", {"partition": 0, "value": 4, "offset": 1, "epoch": 1})]
    h, collected = scan(tmp_path, ops)
    meta = page_data(collected, h.faults, {}).meta
    assert meta["faults"] == [{"start": 210_000, "stop": 2_500_000, "fault": "kill", "label": "kill n1",
                               "open": True, "detail": "SIGKILL pid 7", "anchor": None}]
    assert collected.bars_of(7)[-1] == Bar(1600 * MS, 2500 * MS, "ok", "send", 11, 12, 1,
                                           {"partition": 0, "value": 4, "offset": 1, "epoch": 1})
    assert collected.bars_of(1)[-1].type == "open" and collected.bars_of(1)[-1].end_ns == 2500 * MS


def test_byte_format_known_answer():
    ops = ProcessOps()
    ops.add(0, {"index": 0, "time": 2 * MS, "f": "send"},
            {"index": 1, "time": 2_500_000, "type": "ok", "f": "send", "value": {"partition": 0, "value": 5}})
    data, fs, errors = encode(ops)
    # 1 bar; code 0 (ok, single, kind 0); start 2000 µs (zigzag 4000); 500 µs long; invoke 0; completion +1;
    # value mask partition|value; partition 0; value 5 (zigzag 10)
    assert data == bytes([0x01, 0x00, 0xA0, 0x1F, 0xF4, 0x03, 0x00, 0x01, 0x03, 0x00, 0x0A])
    assert (fs, errors) == (["send"], [])


def five_oks(process=0):
    """Five ok sends of one process: four inside the first millisecond, the fifth at 1.5 ms."""
    out = []
    for k, (a, b) in enumerate([(0.1, 0.2), (0.3, 0.4), (0.5, 0.6), (0.7, 0.8), (1.5, 1.6)]):
        out.append(op(a, process, "invoke", "send", {"partition": 0, "value": k}))
        out.append(op(b, process, "ok", "send", {"partition": 0, "value": k, "offset": k}))
    return out


def test_at_the_limit_every_operation_has_its_own_bar(tmp_path):
    h, ops = scan(tmp_path, five_oks()[:8], max_bars=4)
    assert ops.bars == 4 and not ops.merged
    assert [b.count for b in ops.bars_of(0)] == [1, 1, 1, 1]
    assert page_data(ops, h.faults, {}).note == ""


def test_one_past_the_limit_merges_in_the_smallest_slot_and_says_so(tmp_path):
    h, ops = scan(tmp_path, five_oks(), max_bars=4)
    assert ops.slot_ns == 1 * MS  # 1 ms already leaves 2 bars, within 3/4 of the budget
    assert ops.bars_of(0) == [Bar(100_000, 800_000, "ok", "send", 0, 7, 4, {}),
                              Bar(1_500_000, 1_600_000, "ok", "send", 8, 9, 1,
                                  {"partition": 0, "value": 4, "offset": 4})]
    data = page_data(ops, h.faults, {})
    assert data.meta["single"] == 1 and data.meta["runs"] == 1 and data.meta["slot_us"] == 1000
    assert data.note.startswith("Showing 1 of 5 operations as their own bars; the other 4 are drawn as 1 run:")
    assert "1 ms slot" in data.note
    raw = base64.b64decode(data.ops_b64)
    assert decode(raw, data.meta["lanes"], data.meta["fs"], data.meta["errors"]) == {0: ops.bars_of(0)}


def test_pinned_operations_keep_their_own_bar(tmp_path):
    # the second operation (invoke 2, completion 3) is named by an example: it is never merged, so the
    # first stays alone, and the other three need a 2 ms slot to fit in 3 bars
    h, ops = scan(tmp_path, five_oks(), max_bars=4, pinned={3})
    assert ops.slot_ns == 2 * MS
    assert [(b.invoke, b.complete, b.count) for b in ops.bars_of(0)] == [(0, 1, 1), (2, 3, 1), (4, 9, 3)]
    assert ops.found == {2, 3}
    assert page_data(ops, h.faults, {}).links == {2, 3}


def test_outcomes_and_processes_are_never_merged_together(tmp_path):
    ops = five_oks(0) + five_oks(1)
    ops[5]["type"] = "fail"          # process 0's third operation failed
    ops[5]["error"] = "NOT_LEADER"
    _h, collected = scan(tmp_path, ops, max_bars=5)
    assert collected.slot_ns == 2 * MS
    assert [(b.type, b.count) for b in collected.bars_of(0)] == [("ok", 2), ("fail", 1), ("ok", 2)]
    assert [(b.type, b.count) for b in collected.bars_of(1)] == [("ok", 5)]


# --- any history: invariants of the merge rule, and the bytes round trip -----------------------------------

@st.composite
def histories(draw):
    """Client operations of a few processes, each process's one after the other, times in microseconds."""
    events = []
    for process in range(draw(st.integers(1, 4))):
        t = draw(st.integers(0, 3000))
        for _ in range(draw(st.integers(0, 25))):
            start = t + draw(st.integers(0, 900))
            end = start + draw(st.integers(0, 2500))
            typ = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
            f = draw(st.sampled_from(["send", "poll"]))
            events.append((start * 1000, process, "invoke", f))
            events.append((end * 1000, process, typ, f))
            t = end
            if typ == "info":
                break
        if draw(st.booleans()):
            events.append((t * 1000 + 10_000, process, "invoke", "send"))  # left open
    events.sort(key=lambda e: e[0])  # stable: each process keeps its own order at equal times
    return [{"index": i, "time": t, "process": p, "type": typ, "f": f, "value": {"partition": 0, "value": i}}
            for i, (t, p, typ, f) in enumerate(events)]


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(2, 30), st.data())
def test_merging_keeps_every_operation_and_the_rules(history, max_bars, data):
    completions = [o for o in history if o["type"] != "invoke"]
    pinned = set(data.draw(st.sets(st.sampled_from([o["index"] for o in completions]), max_size=3))) \
        if completions else set()
    collector = ProcessOps(pinned=pinned, max_bars=max_bars)
    pending = {}
    for o in history:
        if o["type"] == "invoke":
            pending[o["process"]] = o
        else:
            collector.add(o["process"], pending.pop(o["process"]), o)
    end_ns = max([o["time"] for o in history] + [0])
    collector.finish(pending, end_ns)
    invokes = sum(1 for o in history if o["type"] == "invoke")
    assert collector.ops == invokes
    w = collector.slot_ns
    total = 0
    for p in collector.processes():
        bars = collector.bars_of(p)
        total += sum(b.count for b in bars)
        for a, b in zip(bars, bars[1:]):
            assert a.end_ns <= b.start_ns  # a process's bars never overlap
            # greedy: no two neighbours left that the rule would still merge
            assert not (w and a.type == b.type and a.type != "open" and a.start_ns // w == b.end_ns // w
                        and a.invoke not in pinned and a.complete not in pinned
                        and b.invoke not in pinned and b.complete not in pinned)
        for b in bars:
            if b.count > 1:
                assert w and b.start_ns // w == b.end_ns // w and b.value == {}  # a run lies in one slot
                assert not any(i in pinned for i in range(b.invoke, b.complete + 1)
                               if history[i]["process"] == p)
    assert total == invokes
    assert collector.bars == sum(len(v) for v in collector.lanes.values())
    single, runs, inside = collector.counts()
    assert single + inside == invokes and single + runs == collector.bars
    raw, fs, errors = encode(collector)
    want = {p: [Bar(b.start_ns // 1000 * 1000, b.end_ns // 1000 * 1000, b.type, b.f, b.invoke, b.complete, b.count,
                    b.value) for b in collector.bars_of(p)] for p in collector.processes()}
    assert decode(raw, collector.processes(), fs, errors) == want


# --- the report ----------------------------------------------------------------------------------------------

def test_report_embeds_the_timeline_and_links_examples_to_it(tmp_path):
    run = make_run(tmp_path / "results", "invalid")
    html = render_report(load_run(run))
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    processes = sorted({o["process"] for o in history if isinstance(o["process"], int)})
    loaded = load_run(run)
    data = page_data(loaded.processes, loaded.history.faults, {})
    assert data.meta["lanes"] == processes == [0, 1, 2, 3, 4]
    assert data.meta["ops"] == sum(1 for o in history if o["type"] == "invoke" and isinstance(o["process"], int))
    assert f'data-ops="{data.ops_b64}"' in html
    section = html[html.index('<section id="process-timeline">'):html.index('<section id="perf">')]
    assert '<canvas class="ptl-canvas"' in section and 'id="ptl-note"' not in section
    results = json.loads((run / "results.json").read_text())
    for ex in results["anomalies"]["lost-write"]["examples"]:
        i = ex["index"]
        assert f'<a class="hlink" href="#h-{i}">#{i}</a><a class="oplink" href="#op-{i}"' in html
        assert f'<span id="op-{i}"></span>' in section
    # the CSP still forbids fetching anything, and the timeline's script uses nothing it would block
    assert "default-src 'none'" in html and "connect-src" not in html
    script = html[html.rindex("<script>"):]
    for word in ("fetch(", "XMLHttpRequest", "WebSocket", "import(", "new Worker", "eval("):
        assert word not in script
