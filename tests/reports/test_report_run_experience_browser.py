"""Real-browser tests (headless Chromium) of what a reader sees first: a scenario's expectation banner,
seeds and ids that never wrap in the index, and anomaly examples drawn from every partition the
checker found them in, on a page that scrolls rather than boxes inside it. Screenshots go to
artifacts/screenshots/ for people to look at."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("websocket", reason="websocket-client (a test dependency in pyproject.toml) is not installed")

from report_cdp import Browser  # noqa: E402
from report_fixtures import make_run  # noqa: E402
from simulated_runs import RunBuilder  # noqa: E402

from checkers.check import CheckOptions, check_run  # noqa: E402
from reports import write_index, write_report  # noqa: E402

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
LONG_SEED = 9_223_372_036_854_775_807            # the longest seed a run records


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def _open(browser, path: Path, width: int = 1360):
    page = browser.new_page(width=width, height=900)
    page.navigate(path.resolve().as_uri())
    return page


def test_the_scenario_expectation_banner_opens_the_report(browser, tmp_path):
    run = make_run(tmp_path / "results", "invalid")
    test = json.loads((run / "test.json").read_text())
    test.update(kind="scenario", expect={"by": "scenario", "kinds": ["lost-write"], "mode": "hw"})
    (run / "test.json").write_text(json.dumps(test))
    page = _open(browser, write_report(run))
    banner = page.evaluate("(() => { const e = document.getElementById('expectation');"
                           " const v = document.getElementById('verdict').getBoundingClientRect();"
                           " const r = e.getBoundingClientRect();"
                           " return {text: e.textContent.trim(), state: e.dataset.state, color: getComputedStyle(e).color,"
                           " inVerdict: r.top >= v.top && r.bottom <= v.bottom, top: r.top,"
                           " invalid: getComputedStyle(document.querySelector('.verdict-word')).color}; })()")
    assert banner["text"].startswith("INVALID — as expected in hw mode")
    assert banner["state"] == "as-expected" and banner["inVerdict"] and banner["top"] < 400   # above the fold
    assert banner["color"] != banner["invalid"]            # told apart from a real failure's red
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(SHOTS / "report-expectation-banner.png", full_page=False)


def test_seeds_and_ids_never_wrap_in_the_index(browser, tmp_path):
    root = tmp_path / "results"
    run = make_run(root, "invalid", name="a-test-with-a-rather-long-name-for-the-column")
    test = json.loads((run / "test.json").read_text())
    test["seed"] = LONG_SEED
    (run / "test.json").write_text(json.dumps(test))
    write_report(run)
    page = _open(browser, write_index(root), width=900)      # a narrow window squeezes the columns
    lines = page.evaluate("""(() => {
        const count = el => { const r = document.createRange(); r.selectNodeContents(el);
                              return new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top))).size; };
        const row = document.querySelector('table.runs tbody tr.run');
        return {seed: count(row.querySelector('td.seed')), text: row.querySelector('td.seed').textContent.trim(),
                stamp: count(row.querySelector('td:nth-child(2) .mono'))}; })()""")
    assert lines == {"seed": 1, "text": str(LONG_SEED), "stamp": 1}
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(SHOTS / "index-narrow-seeds.png", full_page=False)


def test_examples_come_from_every_partition_and_the_page_scrolls(browser, tmp_path):
    """The reference checker on a run that lost writes in three partitions, 8 in partition 0 and 2 in
    each of the others: its 10 examples name all three, and every row is on the page itself (no box
    with a scroll bar of its own around them)."""
    b = RunBuilder()
    lost = {0: 8, 1: 2, 2: 2}
    for p, n in lost.items():
        for o in range(n + 2):
            b.send(1 + p, p, 100 * p + o, offset=o)
        b.final(p, [100 * p + o for o in range(2)] + [-1 - o for o in range(n)])   # overwritten: lost
    run = b.write(tmp_path / "results" / "loss" / "20261128T000000Z")
    results = check_run(run, CheckOptions(engine="reference"))
    assert results["anomalies"]["lost-write"]["count"] == 12
    page = _open(browser, write_report(run))
    seen = page.evaluate("""(() => {
        const t = document.querySelector('table.examples[data-kind="lost-write"]');
        const rows = Array.from(t.querySelectorAll('tbody tr[id^="ex-"]'));
        const wrap = t.closest('.examples-wrap');
        return {partitions: rows.map(r => r.children[1].textContent.trim()),
                boxed: wrap.scrollHeight > wrap.clientHeight + 1,
                overflowY: getComputedStyle(wrap).overflowY}; })()""")
    assert seen["partitions"] == ["0", "1", "2", "0", "1", "2", "0", "0", "0", "0"]
    assert not seen["boxed"] and seen["overflowY"] in ("visible", "auto")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot_element("#kind-lost-write", SHOTS / "report-examples-every-partition.png")
