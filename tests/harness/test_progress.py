"""Unit tests for harness/progress.py: counts from history operations and the plain progress line."""
from __future__ import annotations

import io

from harness.history import History
from harness.progress import Display, Stats, summary_line


def test_stats_count_completions_by_f_and_type(tmp_path):
    h = History(tmp_path / "h.jsonl")
    stats = Stats()
    h.listeners.append(stats)
    h.invoke(0, "send", {"partition": 0, "value": 1})
    h.complete(0, "ok", "send", {"partition": 0, "value": 1, "offset": 0, "epoch": 0})
    h.invoke(0, "send", {"partition": 0, "value": 2})
    h.complete(0, "info", "send", {"partition": 0, "value": 2}, error="TIMEOUT")
    h.invoke(1, "poll", {"partition": 0, "offset": 0})
    h.complete(1, "fail", "poll", {"partition": 0, "offset": 0}, error="NOT_LEADER")
    h.invoke("nemesis", "kill", {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"]})
    h.complete("nemesis", "info", "kill", {"fault": "kill", "phase": "start", "id": 1, "targets": ["n1"]})
    h.complete("harness", "info", "final-state", {"partition": 0})
    h.close()
    assert stats.snapshot() == {"send": {"ok": 1, "fail": 0, "info": 1}, "poll": {"ok": 0, "fail": 1, "info": 0}}
    assert stats.nemesis_ops == 1


def test_plain_display_lines():
    p = {"phase": "running", "elapsed": 3.0, "remaining": 27.0, "faults": ["kill n2"],
         "counts": {"send": {"ok": 5, "fail": 1, "info": 0}}}
    assert summary_line(p) == ("[ running] elapsed   3.0s remaining  27.0s | send ok=5 fail=1 info=0 | "
                               "faults: kill n2")
    out = io.StringIO()
    d = Display(lambda: p, stream=out, interval_s=3600)
    d.update()
    d.update()                      # within the interval: no second line
    d.close()                       # the closing line is always printed
    assert out.getvalue().count("\n") == 2
    assert out.getvalue().splitlines()[0] == summary_line(p)
