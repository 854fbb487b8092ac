"""Replica logs side by side: divergence, lost writes, HW/LEO marks and windows over large logs."""
from __future__ import annotations

import json

import pytest
from report_fixtures import make_run

from rundir.formats import FormatError
from reports.partitions import MAX_ROWS, Gap, Row, build_view, build_views, read_replica, read_replicas


def dump(path, node, partition, values, *, hw, epochs_at=None, log_start=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"kind": "meta", "node": node, "topic": "hw", "partition": partition, "log_start": log_start,
                         "leo": log_start + len(values), "hw": hw, "epochs": [[0, log_start]], "torn_bytes": 0})]
    for i, v in enumerate(values):
        e = epochs_at[i] if epochs_at else 0
        lines.append(json.dumps({"kind": "record", "offset": log_start + i, "epoch": e, "value": v, "key": None,
                                 "timestamp": 0, "crc_ok": True}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fixture_partition_0_diverges_at_7_and_8_and_shows_lost_writes(tmp_path):
    run = make_run(tmp_path, "invalid")
    results = json.loads((run / "results.json").read_text())
    views = build_views(run, results)
    assert [v.partition for v in views] == [0, 1]
    p0, p1 = views
    assert p0.nodes == ["n1", "n2", "n3"]
    assert p0.divergent_count == 2 and p0.divergent_runs == [(7, 8)]
    assert p1.divergent_count == 0
    assert p0.whole  # 10 offsets: shown whole
    rows = {r.offset: r for r in p0.rows if isinstance(r, Row)}
    assert sorted(rows) == list(range(0, 11))  # offsets 0-9 and the LEO row 10
    assert rows[7].divergent and rows[8].divergent and not rows[6].divergent and not rows[9].divergent
    assert [c.value for c in rows[7].cells] == [10, 10, 7]
    n3_cell = rows[7].cells[2]
    assert "lost" in n3_cell.classes.split() and "uncommitted" in n3_cell.classes.split()
    assert "e0" in n3_cell.classes.split() and "e1" in rows[7].cells[0].classes.split()
    assert rows[7].cells[2].marks == ["HW"]  # n3's HW is 7
    assert rows[9].cells[2].marks == ["LEO"]  # n3's LEO is 9
    assert rows[10].cells[0].marks == ["HW", "LEO"]
    assert "lost write 7 was acked here" in rows[7].notes and "divergence" in rows[7].notes
    assert [(l["value"], l["offset"], l["found_on"]) for l in p0.lost] == [(7, 7, {"n3": 7}), (8, 8, {"n3": 8})]


def test_large_log_shows_windows_and_counts_what_it_hides(tmp_path):
    n = 5000
    a = list(range(n))
    b = list(range(n))
    for o in (2000, 2001, 2002):
        b[o] = 10**6 + o
    ra = read_replica(dump(tmp_path / "replicas/n1/p0.jsonl", "n1", 0, a, hw=4990))
    rb = read_replica(dump(tmp_path / "replicas/n2/p0.jsonl", "n2", 0, b, hw=4990))
    view = build_view(0, [ra, rb], anomaly_offsets=[(3500, "duplicate")], lost_writes=[])
    assert not view.whole
    shown = [r.offset for r in view.rows if isinstance(r, Row)]
    gaps = [g for g in view.rows if isinstance(g, Gap)]
    assert view.divergent_count == 3
    for o in (2000, 2001, 2002, 3500, 4990, 5000, 0):
        assert o in shown
    assert 1000 not in shown and 4000 not in shown
    assert len(shown) <= MAX_ROWS
    # every offset is either shown or counted in a gap, exactly once
    assert len(shown) + sum(g.hidden for g in gaps) == n + 1
    assert sum(g.divergent for g in gaps) == 0  # all three divergent offsets are shown
    row_3500 = next(r for r in view.rows if isinstance(r, Row) and r.offset == 3500)
    assert row_3500.notes == ["duplicate"]


def test_windows_beyond_the_row_budget_are_dropped_and_counted(tmp_path):
    n = 4000
    a = list(range(n))
    b = [v if v % 50 else -v for v in a]  # a divergent offset every 50: 80 runs
    ra = read_replica(dump(tmp_path / "replicas/n1/p0.jsonl", "n1", 0, a, hw=n))
    rb = read_replica(dump(tmp_path / "replicas/n2/p0.jsonl", "n2", 0, b, hw=n))
    view = build_view(0, [ra, rb], [], [])
    shown = [r.offset for r in view.rows if isinstance(r, Row)]
    assert view.divergent_count == 79  # offset 0 is 0 == -0
    assert len(shown) <= MAX_ROWS
    assert view.dropped_windows > 0
    hidden_divergent = sum(g.divergent for g in view.rows if isinstance(g, Gap))
    assert hidden_divergent + sum(1 for r in view.rows if isinstance(r, Row) and r.divergent) == 79


def test_shorter_replica_is_not_divergent_and_log_start_is_respected(tmp_path):
    ra = read_replica(dump(tmp_path / "replicas/n1/p3.jsonl", "n1", 3, [5, 6, 7, 8], hw=14, log_start=10))
    rb = read_replica(dump(tmp_path / "replicas/n2/p3.jsonl", "n2", 3, [5, 6], hw=12, log_start=10))
    view = build_view(3, [ra, rb], [], [])
    assert view.divergent_count == 0
    rows = {r.offset: r for r in view.rows if isinstance(r, Row)}
    assert sorted(rows) == [10, 11, 12, 13, 14]
    assert rows[10].cells[0].marks == ["start"]
    assert "empty" in rows[13].cells[1].classes


def test_read_replicas_groups_by_partition_in_node_order(tmp_path):
    for node in ("n10", "n2", "n1"):
        dump(tmp_path / f"replicas/{node}/p0.jsonl", node, 0, [1], hw=1)
    grouped = read_replicas(tmp_path)
    assert [r.node for r in grouped[0]] == ["n1", "n2", "n10"]


def test_bad_dumps_name_file_and_line(tmp_path):
    p = tmp_path / "replicas/n1/p0.jsonl"
    p.parent.mkdir(parents=True)
    p.write_text('{"kind":"record","offset":0,"value":1}\n')
    with pytest.raises(FormatError, match=r"p0.jsonl:1: first line must be the replica's metadata"):
        read_replica(p)
    p.write_text('{"kind":"meta","node":"n1","partition":0,"log_start":0,"leo":2,"hw":2}\n'
                 '{"kind":"record","offset":1,"value":1}\n{"kind":"record","offset":0,"value":2}\n')
    with pytest.raises(FormatError, match=r"p0.jsonl:3: offset 0 is not after the previous record's"):
        read_replica(p)
    p.write_text('{"kind":"meta","node":"n1","partition":0,"log_start":0,"leo":2,"hw":2}\n{"kind":"record"}\n')
    with pytest.raises(FormatError, match=r"p0.jsonl:2: record without an integer 'offset'"):
        read_replica(p)


def test_fast_and_line_by_line_readers_agree(tmp_path):
    from reports.partitions import _read_replica_arrow, _read_replica_lines

    p = dump(tmp_path / "replicas/n2/p4.jsonl", "n2", 4, [7, 8, 9, 10], hw=12, epochs_at=[0, 0, 2, 2], log_start=10)
    text = p.read_text().replace('"offset": 12, "epoch": 2, "value": 9, "key": null, "timestamp": 0, "crc_ok": true',
                                 '"offset": 12, "epoch": 2, "value": 9, "key": null, "timestamp": 0, "crc_ok": false')
    p.write_text(text)
    fast, slow = _read_replica_arrow(p), _read_replica_lines(p)
    assert fast is not None
    for r in (fast, slow):
        assert (r.node, r.partition, r.log_start, r.leo, r.hw) == ("n2", 4, 10, 14, 12)
        assert r.values == [7, 8, 9, 10] and r.epochs_at == [0, 0, 2, 2] and r.bad_crc == [12]
    # a string value or a gap sends the fast reader back to the line-by-line one
    p.write_text(text.replace('"value": 10', '"value": "ten"'))
    assert _read_replica_arrow(p) is None and read_replica(p).values == [7, 8, 9, "ten"]
    p.write_text(text.replace('"offset": 13', '"offset": 15'))
    assert _read_replica_arrow(p) is None and read_replica(p).values == [7, 8, 9, None, None, 10]
    p.write_text(text + '{"kind":"record","offset":14,"ep')  # torn tail
    assert _read_replica_arrow(p) is None and read_replica(p).values == [7, 8, 9, 10]


def test_many_partitions_share_a_row_budget(tmp_path):
    from reports.partitions import MAX_TOTAL_ROWS, MIN_ROWS

    n_partitions, n = 60, 500
    for p in range(n_partitions):
        a = list(range(n))
        b = [v if v % 7 else -1 - v for v in a]  # divergent every 7 offsets
        dump(tmp_path / f"replicas/n1/p{p}.jsonl", "n1", p, a, hw=n)
        dump(tmp_path / f"replicas/n2/p{p}.jsonl", "n2", p, b, hw=n)
    views = build_views(tmp_path, None)
    assert len(views) == n_partitions
    per = max(MIN_ROWS, MAX_TOTAL_ROWS // n_partitions)
    rows = [sum(1 for r in v.rows if isinstance(r, Row)) for v in views]
    assert max(rows) <= per and sum(rows) <= max(MAX_TOTAL_ROWS, MIN_ROWS * n_partitions)
    assert all(v.divergent_count == 72 for v in views)


def test_thin_keeps_the_last_point():
    from reports.charts import thin

    series = [(t, t) for t in range(1000)]
    out = thin(series, 100)
    assert len(out) <= 101 and out[0] == (0, 0) and out[-1] == (999, 999)
    assert thin(series[:50], 100) == series[:50]
