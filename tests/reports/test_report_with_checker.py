"""The report on the real checker's output: a simulated run, damaged with anomalies, checked by the
reference checker (checkers.check_run), then rendered. Whatever the checker writes, the report must show
the same verdict and counts (per partition too: the checker's totals, never counts of its examples), and
every history link it makes must land on an entry in the page."""
from __future__ import annotations

import re

import pytest

from reports import write_report

checkers_simulate = pytest.importorskip("simulated_runs")
checkers_check = pytest.importorskip("checkers.check")


@pytest.mark.parametrize("seed, damage", [(3, 0), (11, 8), (29, 8)])
def test_report_matches_reference_checker_results(tmp_path, seed, damage):
    builder = checkers_simulate.simulate(seed)
    if damage:
        checkers_simulate.inject(builder, seed, n=damage)
    run = builder.write(tmp_path / "run", name=f"sim-{seed}")
    results = checkers_check.check_run(run, checkers_check.CheckOptions(engine="reference"))
    html = write_report(run).read_text()

    verdict = {True: "valid", False: "invalid"}.get(results["valid"], "unknown")
    assert f'data-verdict="{verdict}"' in html and f">{verdict.upper()}<" in html
    for kind, body in results["anomalies"].items():
        if body["count"] == 0:
            assert f'id="kind-{kind}"' not in html
            continue
        art = html[html.index(f'id="kind-{kind}"'):]
        art = art[:art.index("</article>")]
        assert re.search(rf'<span class="badge">{body["count"]:,}</span>'.replace(",", "\u202f"), art), kind
        assert art.count('<tr id="ex-') == min(len(body["examples"]), 50)
    # each partition's totals are the checker's, and no agreement badge hides a partition's losses
    for item in results.get("partitions") or []:
        p = item["partition"]
        if f'id="p-{p}"' not in html or not isinstance(item.get("lost"), int):
            continue
        head = html[html.index(f'id="p-{p}"'):]
        head = head[:head.index("</h3>")]
        assert f'data-partition="{p}">{item["lost"]:,} lost of {item["acked"]:,} acknowledged</span>' in head, p
        for kind, body in results["anomalies"].items():
            n = (body.get("by_partition") or {}).get(str(p)) if kind != "lost-write" else None
            if n:
                assert f'>{n:,} {kind}</a>'.replace(",", "\u202f") in head, (p, kind)
        for badge in re.findall(r'<span class="badge[^"]*">([^<]*agree[^<]*)</span>', head):
            assert item["lost"] == 0 or f"{item['lost']:,}".replace(",", "\u202f") in badge, (p, badge)
    if isinstance(results.get("time_axis"), dict):  # a band under the timeline for every kind found
        bands = re.findall(r'<g class="krow \w+" data-kind="([^"]+)">', html)
        assert bands == [k for k, body in results["anomalies"].items()
                         if body["count"] and isinstance(body.get("histogram"), dict)]
    ids = set(re.findall(r' id="([^"]+)"', html))
    links = set(re.findall(r'href="#([^"]+)"', html))
    assert sorted(links - ids) == []
    if damage:
        assert results["valid"] is not True  # the injected damage was found, and shown above
