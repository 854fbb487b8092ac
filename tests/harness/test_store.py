"""Unit tests for rundir/store.py: run directory layout, test.json, latest links."""
from __future__ import annotations

import json
import os

from rundir import formats as runformat, store


def test_run_dir_layout_and_latest_links(tmp_path):
    now = 1763765101.0   # 2025-11-21T22:45:01Z
    a = store.create_run_dir(tmp_path, "chaos", now=now)
    b = store.create_run_dir(tmp_path, "chaos", now=now)
    assert a.timestamp == "20251121T224501Z"
    assert b.timestamp == "20251121T224501Z-2"
    assert a.path == tmp_path / "chaos" / "20251121T224501Z"
    assert a.run_id.startswith("chaos-20251121T224501Z-")
    store.update_latest(a)
    assert os.readlink(tmp_path / "chaos" / "latest") == "20251121T224501Z"
    assert os.readlink(tmp_path / "latest") == "chaos/20251121T224501Z"
    store.update_latest(b)
    assert os.readlink(tmp_path / "chaos" / "latest") == "20251121T224501Z-2"
    assert (tmp_path / "latest").resolve() == b.path.resolve()
    assert sorted(p.name for p in (tmp_path / "chaos").iterdir()) == ["20251121T224501Z", "20251121T224501Z-2", "latest"]


def test_test_json(tmp_path):
    run = store.create_run_dir(tmp_path, "t")
    rec = store.test_record(run, {"seed": 5}, seed=5, start_wall_ns=123, cluster={"backend": "local"})
    store.write_test_json(run, rec)
    data = json.loads((run.path / runformat.TEST_JSON).read_text())
    assert data["name"] == "t"
    assert data["run_id"] == run.run_id
    assert data["seed"] == 5
    assert data["start_wall_ns"] == 123
    assert data["config"] == {"seed": 5}
    assert data["cluster"] == {"backend": "local"}
    assert set(data["versions"]) == {"python", "highwater", "pyspark"}
