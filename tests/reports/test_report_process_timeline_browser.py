"""Real-browser test of the per-process timeline (reports/process_timeline.py, templates/process_timeline.js).

Headless Chromium opens the invalid run's report: the canvas has drawn every process's lane with the
colours of that process's outcomes, hovering and clicking a bar (real mouse events) shows its operation,
the zoom buttons and dragging move the view, an anomaly example's timeline link selects its operation,
and no request leaves the page. A second run with more operations than the bar budget shows the
"Showing N of M" note and its runs. Screenshots go to artifacts/screenshots/.
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("websocket", reason="websocket-client (a test dependency in pyproject.toml) is not installed")

from report_cdp import Browser  # noqa: E402
from report_fixtures import XSS, make_run  # noqa: E402

from reports import load as report_load  # noqa: E402
from reports import write_report  # noqa: E402
from reports.process_timeline import ProcessOps  # noqa: E402

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
S = 1_000_000_000

# the outcome colours as the section's legend shows them (the stylesheet's, not the script's)
LEGEND_RGB = """(() => ['ok', 'fail', 'info'].map(k => getComputedStyle(
  document.querySelector('#process-timeline .legend .sw.' + k)).backgroundColor.match(/\\d+/g).slice(0, 3).map(Number)))"""

# per lane (canvas row through its middle): which outcome colours have at least one exact pixel
LANE_COLOURS = """(() => {
  const fig = document.getElementById('ptl'), c = fig.querySelector('canvas'), g = c.getContext('2d');
  const names = ['ok', 'fail', 'info'];
  const rgb = LEGEND_RGB();
  const data = g.getImageData(0, 0, c.width, c.height).data;
  const lanes = [], totals = {ok: 0, fail: 0, info: 0};
  let painted = 0;
  for (let i = 0; i < data.length; i += 4) if (data[i + 3] > 0) painted++;
  for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) {
    const i = (y * c.width + x) * 4;
    rgb.forEach((col, k) => { if (data[i] === col[0] && data[i + 1] === col[1] && data[i + 2] === col[2] && data[i + 3] === 255) totals[names[k]]++; });
  }
  fig.ptl.lanes.forEach((_p, l) => {
    const y = Math.floor(fig.ptl.laneY(l)), seen = new Set();
    for (let x = 0; x < c.width; x++) {
      const i = (y * c.width + x) * 4;
      rgb.forEach((col, k) => { if (data[i] === col[0] && data[i + 1] === col[1] && data[i + 2] === col[2]) seen.add(names[k]); });
    }
    lanes.push(Array.from(seen).sort());
  });
  return {lanes, totals, painted, width: c.width, height: c.height};
})()""".replace("LEGEND_RGB()", LEGEND_RGB + "()")

PIXEL = """((x, y) => { const c = document.querySelector('#ptl canvas'), b = c.getBoundingClientRect();
  const d = c.getContext('2d').getImageData(Math.floor(x - b.left), Math.floor(y - b.top), 1, 1).data;
  const rgb = LEGEND_RGB();
  const k = rgb.findIndex(c => c[0] === d[0] && c[1] === d[1] && c[2] === d[2]);
  return k < 0 ? Array.from(d).join(',') : ['ok', 'fail', 'info'][k]; })""".replace("LEGEND_RGB()", LEGEND_RGB + "()")


def history_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def invalid(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("ptl") / "results", "invalid")
    write_report(run)
    return run


def open_timeline(browser, report: Path, width: int = 1360):
    page = browser.new_page(width=width, height=900)
    url = report.resolve().as_uri()
    page.navigate(url)
    page.evaluate("document.getElementById('ptl').scrollIntoView({block: 'center', behavior: 'instant'})")
    return page, url


def assert_no_request_left(page, url):
    urls = page.requested_urls()
    assert url in urls
    assert [u for u in urls if not (u == url or u.startswith("data:"))] == []


def info_text(page) -> str:
    return page.evaluate("document.getElementById('ptl-info').textContent")


def box(page, index: int, lane: int | None = None) -> dict:
    arg = "" if lane is None else f", {lane}"
    return page.evaluate(f"document.getElementById('ptl').ptl.box({index}{arg})")


def test_canvas_draws_one_lane_per_process_in_its_outcomes_colours(browser, invalid):
    page, url = open_timeline(browser, invalid / "report.html")
    assert_no_request_left(page, url)
    history = history_of(invalid)
    processes = sorted({o["process"] for o in history if isinstance(o["process"], int)})
    assert processes == [0, 1, 2, 3, 4]
    fig = page.evaluate("(() => { const f = document.getElementById('ptl'); return {drawn: f.dataset.drawn, "
                        "lanes: Number(f.dataset.lanes), ids: f.ptl.lanes, ms: Number(f.dataset.drawMs)}; })()")
    assert fig["drawn"] == "1" and fig["lanes"] == len(processes) and fig["ids"] == processes
    assert fig["ms"] > 0
    pixels = page.evaluate(LANE_COLOURS)
    assert pixels["painted"] > 0.2 * pixels["width"] * pixels["height"]  # stripes, grid, faults, bars
    # each lane shows exactly the outcomes of its process's operations
    outcomes = [sorted({o["type"] for o in history if o["process"] == p and o["type"] != "invoke"})
                for p in processes]
    assert outcomes == [["info", "ok"], ["ok"], ["fail", "ok"], ["ok"], ["ok"]]
    assert pixels["lanes"] == outcomes
    assert all(pixels["totals"][k] > 0 for k in ("ok", "fail", "info")), pixels["totals"]
    # the info bar (3.1 s to 4.1 s: the timeout during the kill) is long: hundreds of its pixels
    assert pixels["totals"]["info"] > 100 * 10
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot_element("#process-timeline", SHOTS / "report-process-timeline.png")


def test_hover_and_click_show_the_operation(browser, invalid):
    page, url = open_timeline(browser, invalid / "report.html")
    history = history_of(invalid)
    fail = next(o for o in history if o["type"] == "fail")
    fail_inv = next(o for o in reversed(history[:fail["index"]]) if o["process"] == fail["process"])
    b = box(page, fail["index"])
    assert b["lane"] == 2 and b["width"] >= 5
    assert page.evaluate(f"{PIXEL}({b['x']}, {b['y']})") == "fail"
    page.mouse("mouseMoved", b["x"], b["y"])
    text = info_text(page)
    assert text.startswith("process 2 · send · fail · invoke ")
    assert f"invoke #{fail_inv['index']} → complete #{fail['index']}" in text
    assert "4.200000 s → 4.300000 s (100 ms)" in text
    assert f"value: partition 1, value 100, error NOT_LEADER {XSS}" in text
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # the error stayed text
    # the invoke links to the history excerpt when the excerpt has it
    links = page.evaluate("Array.from(document.querySelectorAll('#ptl-info a')).map(a => a.getAttribute('href'))")
    excerpt = page.evaluate("Array.from(document.querySelectorAll('table.hist tr[id]')).map(r => r.id)")
    assert links == [f"#h-{i}" for i in (fail_inv["index"], fail["index"]) if f"h-{i}" in excerpt]
    # click the timeout of process 0 (info): it stays selected when the pointer leaves
    info = next(o for o in history if o["type"] == "info" and o["process"] == 0)
    b = box(page, info["index"])
    page.click_at(b["x"], b["y"])
    assert page.evaluate("document.getElementById('ptl').dataset.selected") == str(info["index"])
    page.mouse("mouseMoved", 5, 5)
    text = info_text(page)
    assert text.startswith("process 0 · send · info · ") and "error timeout" in text
    assert "3.100000 s → 4.100000 s (1.000 s)" in text
    assert_no_request_left(page, url)


def test_zoom_buttons_and_drag(browser, invalid):
    page, _url = open_timeline(browser, invalid / "report.html")
    v0, v1, end = page.evaluate("document.getElementById('ptl').ptl.view()")
    assert (v0, v1, end) == (0, 8_100_000, 8_100_000)
    page.evaluate("document.querySelector('.ptl-tools button[data-zoom=in]').click()")
    v0, v1, _ = page.evaluate("document.getElementById('ptl').ptl.view()")
    assert (v0, v1) == (2_025_000, 6_075_000)
    assert page.evaluate("document.querySelector('.ptl-range').textContent") == "showing 2.025–6.075 s of 8.10 s"
    rect = page.evaluate("(() => { const r = document.querySelector('#ptl canvas').getBoundingClientRect();"
                         " return [r.left, r.top, r.width, r.height]; })()")
    x, y = rect[0] + rect[2] / 2, rect[1] + rect[3] - 10
    page.mouse("mouseMoved", x, y)
    page.mouse("mousePressed", x, y)
    page.mouse("mouseMoved", x - 200, y, pressed=True)
    page.mouse("mouseReleased", x - 200, y)
    w0, w1, _ = page.evaluate("document.getElementById('ptl').ptl.view()")
    assert w0 > v0 and w1 - w0 == pytest.approx(v1 - v0)  # dragged left: later times, same span
    page.evaluate("document.querySelector('.ptl-tools button[data-zoom=all]').click()")
    assert page.evaluate("document.getElementById('ptl').ptl.view()")[:2] == [0, 8_100_000]


# Resolves true once operation `want` is selected and the page has come to rest with the timeline on screen
# (false after 10 s). The report scrolls smoothly (report.css: scroll-behavior: smooth), so after an #op-
# link the figure enters the viewport several hundred ms before the scroll ends; a bar's box measured then
# is not where the bar is a CDP round trip later, when its pixel is sampled (under load the page moves tens
# of pixels in between). So: no page scroll under way (no scroll event since the last scrollend), and the
# selection, the scroll offset and the figure's position the same in three animation frames in a row,
# which also lets the page's requestAnimationFrame draw of the selection run first.
WAIT_SELECTED = """((want) => new Promise(done => {
  const f = document.getElementById('ptl');
  let moving = false, last = null, still = 0, over = false;
  const scrolled = () => { moving = true; }, ended = () => { moving = false; };
  const finish = ok => { if (over) return; over = true; clearTimeout(late);
    removeEventListener('scroll', scrolled); removeEventListener('scrollend', ended); done(ok); };
  const late = setTimeout(() => finish(false), 10000);
  addEventListener('scroll', scrolled); addEventListener('scrollend', ended);
  (function frame() {
    if (over) return;
    const r = f.getBoundingClientRect(), at = [f.dataset.selected, scrollX, scrollY, r.left, r.top].join();
    still = at === last ? still + 1 : 0; last = at;
    if (f.dataset.selected === want && r.top >= 0 && r.bottom <= innerHeight && !moving && still >= 2) return finish(true);
    requestAnimationFrame(frame); })(); }))"""


def test_an_example_link_jumps_to_its_operation(browser, invalid):
    page, url = open_timeline(browser, invalid / "report.html")
    page.evaluate("scrollTo({top: 0, behavior: 'instant'})")
    link = page.evaluate("(() => { const a = document.querySelector('#kind-lost-write a.oplink');"
                         " return [a.getAttribute('href'), a.previousElementSibling.getAttribute('href')]; })()")
    index = int(link[0].removeprefix("#op-"))
    assert link[1] == f"#h-{index}" and page.evaluate(f"!!document.getElementById('h-{index}')")  # still there
    results = json.loads((invalid / "results.json").read_text())
    assert index == results["anomalies"]["lost-write"]["examples"][0]["index"]
    page.evaluate("document.querySelector('#kind-lost-write a.oplink').click()")
    assert page.evaluate("location.hash") == f"#op-{index}"
    assert page.evaluate(f"{WAIT_SELECTED}('{index}')", await_promise=True) is True
    b = box(page, index)
    canvas = page.evaluate("(() => { const r = document.querySelector('#ptl canvas').getBoundingClientRect();"
                           " return [r.left, r.right]; })()")
    assert canvas[0] < b["x"] < canvas[1] and b["width"] > 20  # zoomed in around it
    assert page.evaluate(f"{PIXEL}({b['x']}, {b['y']})") == "ok"
    op = history_of(invalid)[index]
    assert info_text(page).startswith(f"process {op['process']} · send · ok · ")
    assert f"#{index}" in info_text(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(SHOTS / "report-process-timeline-op-link.png", full_page=False)
    assert_no_request_left(page, url)


# --- more operations than the bar budget ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def busy(tmp_path_factory, request):
    """Two workers with 300 short sends each, a kill; the second's 201st send times out (info), so it goes
    on as process 2; results.json names one acknowledgement."""
    run = tmp_path_factory.mktemp("ptl-busy") / "results" / "busy" / "20261121T000000Z"
    run.mkdir(parents=True)
    ops, t = [], 0.0
    for k in range(300):
        for p in (0, 1):
            typ = "info" if (p, k) == (1, 200) else "ok"
            process = 2 if (p, k) > (1, 200) else p
            ops.append({"time": int((t + 0.0003 * p) * S), "process": process, "type": "invoke", "f": "send",
                        "value": {"partition": 0, "value": 2 * k + p}})
            ops.append({"time": int((t + 0.0003 * p + 0.001) * S), "process": process, "type": typ, "f": "send",
                        "value": {"partition": 0, "value": 2 * k + p, **({"offset": 2 * k + p} if typ == "ok" else {})},
                        **({"error": "timeout"} if typ == "info" else {})})
        t += 0.01
    ops.sort(key=lambda o: o["time"])
    ops.insert(200, {"time": ops[199]["time"], "process": "nemesis", "type": "info", "f": "kill",
                     "value": {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"]}})
    ops.insert(800, {"time": ops[799]["time"], "process": "nemesis", "type": "info", "f": "restart",
                     "value": {"fault": "kill", "phase": "stop", "id": 1, "targets": ["n1"]}})
    for i, o in enumerate(ops):
        o["index"] = i
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    named = next(o for o in ops if o["process"] == 1 and o["type"] == "ok" and o["value"]["value"] == 301)
    (run / "results.json").write_text(json.dumps({"valid": False, "anomalies": {"lost-write": {
        "count": 1, "fails_run": True, "examples": [{"partition": 0, "value": 301, "index": named["index"],
                                                     "time": named["time"]}]}}}))
    mp = pytest.MonkeyPatch()
    mp.setattr(report_load, "ProcessOps", functools.partial(ProcessOps, max_bars=100))
    try:
        write_report(run)
    finally:
        mp.undo()
    return run, named["index"], ops


def test_a_capped_timeline_says_so_and_keeps_named_operations(browser, busy):
    run, named, ops = busy
    page, url = open_timeline(browser, run / "report.html")
    assert_no_request_left(page, url)
    note = page.evaluate("(() => { const n = document.getElementById('ptl-note');"
                         " return n && n.getBoundingClientRect().height > 0 ? n.textContent : null; })()")
    m = re.match(r"Showing (\d+) of (\d+) operations as their own bars; the other (\d+) are drawn as (\d+) runs?", note)
    assert m, note
    single, total, inside, runs = map(int, m.groups())
    assert total == 600 and single + inside == total and single + runs <= 100
    assert page.evaluate("document.getElementById('ptl').ptl.lanes") == [0, 1, 2]


def test_capped_timeline_runs_and_named_operation(browser, busy):
    run, named, ops = busy
    page, _url = open_timeline(browser, run / "report.html")
    first_ok = next(o for o in ops if o["process"] == 0 and o["type"] == "ok")
    b = box(page, first_ok["index"], 0)
    page.mouse("mouseMoved", b["x"], b["y"])
    text = info_text(page)
    assert re.match(r"process 0 · \d+ ok operations \(send\) · history #0 … #\d+", text), text
    assert "drawn as one bar" in text
    page.evaluate(f"location.hash = '#op-{named}'")
    assert page.evaluate(f"{WAIT_SELECTED}('{named}')", await_promise=True) is True
    text = info_text(page)
    assert text.startswith("process 1 · send · ok · ") and "value 301" in text
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot_element("#process-timeline", SHOTS / "report-process-timeline-capped.png")
