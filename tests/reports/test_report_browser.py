"""Real-browser test: headless Chromium opens a valid run's report, an invalid run's report and the index.

Checks the verdict, anomaly tables and plots in the live DOM, that no request left the page (every
request the page made, recorded over the DevTools protocol, is the file itself or a data: URL), and
saves screenshots to artifacts/screenshots/ for people to look at.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("websocket", reason="websocket-client (a test dependency in pyproject.toml) is not installed")

from report_cdp import Browser  # noqa: E402
from report_fixtures import XSS, make_run  # noqa: E402

from reports import write_index, write_report  # noqa: E402

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser") / "results"
    invalid = make_run(root, "invalid", timestamp="20261121T224501Z", test_name=f"hw-truncation {XSS}")
    valid = make_run(root, "valid", timestamp="20261121T230000Z", start_offset_s=900)
    unknown = make_run(root, "unknown", name="chaos", timestamp="20261121T231000Z", start_offset_s=1800)
    for run in (invalid, valid, unknown):
        write_report(run)
    write_index(root)
    return {"root": root, "invalid": invalid, "valid": valid}


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def open_page(browser, path: Path):
    page = browser.new_page(width=1360, height=900)
    url = path.resolve().as_uri()
    page.navigate(url)
    return page, url


def assert_no_request_left(page, url):
    urls = page.requested_urls()
    assert url in urls  # the recorder saw the page itself, so it would see anything else
    outside = [u for u in urls if not (u == url or u.startswith("data:"))]
    assert outside == []


def test_invalid_report_in_the_browser(browser, results):
    page, url = open_page(browser, results["invalid"] / "report.html")
    assert_no_request_left(page, url)
    assert page.evaluate("document.querySelector('#verdict').dataset.verdict") == "invalid"
    assert page.evaluate("document.querySelector('.verdict-word').textContent.trim()") == "INVALID"
    assert page.evaluate("document.title") == f"INVALID · hw-truncation {XSS} · hw-truncation-20261121T224501Z-ab12"
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # the payload stayed text
    tables = page.evaluate("Array.from(document.querySelectorAll('table.examples')).map("
                           "t => [t.dataset.kind, t.tBodies[0].querySelectorAll('tr[id^=ex-]').length])")
    assert tables == [["lost-write", 2], ["divergence", 2]]
    # under each example its story, whose links all land on an element of the page
    stories = page.evaluate("Array.from(document.querySelectorAll('table.examples tr.story')).map("
                            "r => [r.previousElementSibling.id, Array.from(r.querySelectorAll('a')).map("
                            "a => !!document.getElementById(a.getAttribute('href').slice(1)))])")
    assert [s[0] for s in stories] == ["ex-lost-write-0", "ex-lost-write-1", "ex-divergence-0", "ex-divergence-1"]
    assert all(s[1] and all(s[1]) for s in stories), stories
    plots = page.evaluate("Array.from(document.querySelectorAll('figure.plot svg')).map("
                          "s => [s.closest('figure').id, Math.round(s.getBoundingClientRect().height)])")
    ids = [p[0] for p in plots]
    assert ids == ["plot-timeline", "plot-throughput", "plot-latency-send", "plot-state-0", "plot-state-1"]
    assert all(h > 150 for _id, h in plots)
    assert page.evaluate("document.querySelectorAll('#plot-timeline rect.band').length") == 2
    assert page.evaluate("document.querySelectorAll('table.logs tr.div').length") == 2
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(SHOTS / "report-invalid-top.png", full_page=False)
    page.screenshot(SHOTS / "report-invalid-full.png")
    # follow an example's link to the history entry it names
    page.evaluate("document.querySelector('#kind-lost-write a.hlink').click()")
    target = page.evaluate("location.hash")
    assert target.startswith("#h-")
    # (smooth scrolling: wait until the row is inside the viewport, at most 3 s)
    visible = page.evaluate(
        "new Promise(done => { const t0 = Date.now(); (function poll() {"
        f" const r = document.getElementById('{target[1:]}').getBoundingClientRect();"
        " if (r.top >= 0 && r.bottom <= innerHeight) return done(true);"
        " if (Date.now() - t0 > 3000) return done(false); setTimeout(poll, 50); })(); })", await_promise=True)
    assert visible is True
    page.screenshot(SHOTS / "report-invalid-history-link.png", full_page=False)
    assert_no_request_left(page, url)


def test_valid_report_in_the_browser(browser, results):
    page, url = open_page(browser, results["valid"] / "report.html")
    assert_no_request_left(page, url)
    assert page.evaluate("document.querySelector('#verdict').dataset.verdict") == "valid"
    assert page.evaluate("document.querySelector('.verdict-word').textContent.trim()") == "VALID"
    assert page.evaluate("document.querySelectorAll('table.examples').length") == 0
    assert page.evaluate("document.querySelectorAll('.zero-kinds .zk').length") >= 11
    assert page.evaluate("document.querySelectorAll('figure.plot svg').length") == 5
    assert page.evaluate("document.querySelectorAll('table.logs tr.div').length") == 0
    page.screenshot(SHOTS / "report-valid-top.png", full_page=False)
    page.screenshot(SHOTS / "report-valid-full.png")


def test_index_in_the_browser_filters_by_verdict_and_test(browser, results):
    page, url = open_page(browser, results["root"] / "index.html")
    assert_no_request_left(page, url)
    visible = "Array.from(document.querySelectorAll('tr.run')).filter(r => !r.hidden).map(r => r.dataset.verdict)"
    assert page.evaluate(visible) == ["unknown", "valid", "invalid"]
    colours = page.evaluate("Array.from(document.querySelectorAll('tr.run .pill')).map("
                            "p => getComputedStyle(p).color)")
    assert len(set(colours)) == 3  # each verdict in its own colour
    page.screenshot(SHOTS / "index.png", full_page=False)
    page.evaluate("(() => { const s = document.getElementById('filter-verdict'); s.value = 'invalid';"
                  " s.dispatchEvent(new Event('change')); })()")
    assert page.evaluate(visible) == ["invalid"]
    assert page.evaluate("document.getElementById('shown-count').textContent") == "1"
    page.evaluate("(() => { const v = document.getElementById('filter-verdict'); v.value = '';"
                  " v.dispatchEvent(new Event('change')); const t = document.getElementById('filter-test');"
                  " t.value = 'leader-epoch'; t.dispatchEvent(new Event('change')); })()")
    assert page.evaluate(visible) == ["valid"]
    page.screenshot(SHOTS / "index-filtered.png", full_page=False)
    href = page.evaluate("document.querySelector('tr.run:not([hidden]) a').getAttribute('href')")
    assert href == "leader-epoch/20261121T230000Z/report.html"
    assert_no_request_left(page, url)


@pytest.fixture(scope="module")
def lossy2(tmp_path_factory):
    """Losses in two partitions (one with agreeing replicas), a wide lost-write table, a fault at the end."""
    run = make_run(tmp_path_factory.mktemp("browser-totals") / "results", "lossy2")
    write_report(run)
    return run


# For every table: its last header cell, and whether it is visible (inside the viewport and inside the
# nearest horizontally scrolling ancestor, if any) or at least reachable (that ancestor scrolls to it).
LAST_COLUMNS = """(() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const out = [];
  for (const t of document.querySelectorAll('table')) {
    const rows = Array.from(t.rows).filter(r => r.cells.length > 1);
    for (const row of rows) {
      // the last column of data: an examples table's own last column is each example's raw JSON
      const cells = Array.from(row.cells).filter(c => !c.classList.contains('raw') && c.textContent.trim() !== 'raw');
      const cell = cells[cells.length - 1] || row.cells[row.cells.length - 1];
      const r = cell.getBoundingClientRect();
      if (!r.width) continue;
      let box = null;
      for (let p = t.parentElement; p && p !== document.body; p = p.parentElement) {
        const ox = getComputedStyle(p).overflowX;
        if (ox === 'auto' || ox === 'scroll' || ox === 'hidden' || ox === 'clip') { box = p; break; }
      }
      let visible = r.left >= -0.5 && r.right <= innerWidth + 0.5;
      let reachable = visible;
      if (box) {
        const b = box.getBoundingClientRect();
        visible = visible && r.left >= b.left - 0.5 && r.right <= b.right + 0.5;
        const ox = getComputedStyle(box).overflowX;
        reachable = visible || ((ox === 'auto' || ox === 'scroll') && r.right - b.left + box.scrollLeft <= box.scrollWidth + 0.5);
      }
      out.push({table: t.className, kind: t.dataset.kind || '', head: row.parentElement.tagName === 'THEAD',
                text: cell.textContent.trim().slice(0, 60), visible, reachable});
    }
  }
  return out;
})()"""


@pytest.mark.parametrize("width", [1360, 900])
def test_every_column_readable_and_last_fault_label_inside(browser, lossy2, width):
    page, url = open_page_at(browser, lossy2 / "report.html", width)
    assert_no_request_left(page, url)
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth") is True  # nothing runs off the page
    cells = page.evaluate(LAST_COLUMNS)
    lost = [c for c in cells if c["kind"] == "lost-write"]
    # the lost-write examples' last column (replicas, with value_at) is on screen, not behind the edge
    assert [c["text"][:20] for c in lost if c["head"]] == ["replicas"]
    assert all(c["visible"] for c in lost), lost
    assert sum(1 for c in lost if c["text"].startswith("n1: holds the value")) == 2  # both examples' replicas
    replicas = [c["text"] for c in lost if c["text"].startswith("n1: holds the value")]
    assert all("holds the value at offset none" in t for t in replicas), replicas  # "not here" shown, not hidden
    unreachable = [c for c in cells if not c["reachable"]]
    assert unreachable == []
    # the last fault label (a pause starting 0.2 s before the end) lies inside the timeline's SVG
    box = page.evaluate("""(() => { const svg = document.querySelector('#plot-timeline svg');
      const labels = svg.querySelectorAll('text.band-label'); const l = labels[labels.length - 1];
      const s = svg.getBoundingClientRect(), r = l.getBoundingClientRect();
      return {text: l.firstChild.textContent, inside: r.left >= s.left && r.right <= s.right && r.top >= s.top
              && r.bottom <= s.bottom, width: r.width}; })()""")
    assert box["text"] == "pause n1,n2,n3" and box["width"] > 40 and box["inside"] is True, box
    # every agreement badge carries its partition's loss count
    badges = page.evaluate("""Array.from(document.querySelectorAll('article.partition')).map(a => [
      a.id, Array.from(a.querySelectorAll('h3 .badge')).map(b => b.textContent.trim()),
      a.querySelector('.ptotal').textContent.trim()])""")
    assert badges == [["p-0", ["2 divergent", "2 divergence"], "2 lost of 12 acknowledged"],
                      ["p-1", ["replicas agree · 3 acknowledged writes lost"], "3 lost of 6 acknowledged"]]
    # the anomaly bands under the timeline: one row per kind with findings
    rows = page.evaluate("Array.from(document.querySelectorAll('#plot-timeline g.krow')).map("
                         "g => [g.dataset.kind, g.querySelectorAll('rect.kcell').length])")
    assert rows == [["lost-write", 5], ["divergence", 0]]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot_element("#timeline", SHOTS / f"report-lossy2-timeline-{width}.png")
    page.screenshot_element("#kind-lost-write", SHOTS / f"report-lossy2-lost-write-{width}.png")
    page.screenshot_element("#partitions", SHOTS / f"report-lossy2-partitions-{width}.png")


def test_fault_and_leader_anchors_open_their_rows(browser, lossy2):
    page, _url = open_page_at(browser, lossy2 / "report.html", 1360)
    for ident in ("fault-3", "leader-p0-e1"):
        page.evaluate(f"location.hash = '#{ident}'")
        shown = page.evaluate(
            "new Promise(done => { const t0 = Date.now(); (function poll() {"
            f" const el = document.getElementById('{ident}'); const r = el.getBoundingClientRect();"
            " if (r.height > 0 && r.top >= 0 && r.bottom <= innerHeight) return done(el.tagName);"
            " if (Date.now() - t0 > 3000) return done(null); setTimeout(poll, 50); })(); })", await_promise=True)
        assert shown == "TR", ident


def open_page_at(browser, path: Path, width: int):
    page = browser.new_page(width=width, height=900)
    url = path.resolve().as_uri()
    page.navigate(url)
    return page, url


def test_the_request_recorder_does_see_outgoing_requests(browser, tmp_path):
    """The negative control: a page that does fetch (from a closed loopback port) is caught."""
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/pixel.png"></body></html>')
    page, url = open_page(browser, leaky)
    assert "http://127.0.0.1:9/pixel.png" in page.requested_urls()
    with pytest.raises(AssertionError):
        assert_no_request_left(page, url)
